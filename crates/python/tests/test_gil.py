"""Batch fills release the GIL: another Python thread runs while one is in progress."""

from __future__ import annotations

import sys
import threading
import time

import tokensieve as ts


def test_batch_fill_lets_another_thread_run(llama3):
    """Deterministic on any core count: with a switch interval of an hour,
    the interpreter never takes the GIL from the main thread by itself, so
    the counter thread can only advance while the main thread has released
    the GIL, i.e. inside the fill (or a sleep, which this test never does
    between its two reads)."""
    c = ts.Compiler(llama3)
    g = c.compile_builtin_json()
    matchers = [g.matcher() for _ in range(64)]
    bm = ts.allocate_token_bitmask(64, llama3.vocab_size, kind="numpy")
    ts.fill_next_token_bitmask_batch(matchers, bm)  # warm

    counter = [0]
    stop = threading.Event()

    def spin():
        n = 0
        while not stop.is_set():
            n += 1
            counter[0] = n
            if n % 1000 == 0:
                time.sleep(0)  # hand the GIL back so the main thread can go on

    old = sys.getswitchinterval()
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        while counter[0] == 0:
            time.sleep(0.001)
        sys.setswitchinterval(3600)
        advanced = False
        for _ in range(200):
            before = counter[0]
            ts.fill_next_token_bitmask_batch(matchers, bm)
            if counter[0] != before:
                advanced = True
                break
        # A control with a call that holds the GIL: the counter must not move.
        before = counter[0]
        sum(range(2_000_000))
        held = counter[0] == before
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    assert held, "the control (pure Python, GIL held) let the other thread run: the test is not sound"
    assert advanced, "the other thread never ran during 200 batch fills: the GIL is held"
