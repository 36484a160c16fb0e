"""Batch fills and compiles release the GIL: another Python thread runs while one is in progress."""

from __future__ import annotations

import sys
import threading
import time

import tokensieve as ts


def other_thread_runs_during(call, attempts: int = 200) -> tuple[bool, bool]:
    """(whether a spinning Python thread advanced during some `call()`,
    whether it stayed still during a pure-Python control).

    Deterministic on any core count: with a switch interval of an hour the
    interpreter never takes the GIL from the main thread by itself, so the
    spinning thread can only advance while the main thread has released the
    GIL, i.e. inside `call` (nothing else between the two reads releases it)."""
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
        for _ in range(attempts):
            before = counter[0]
            call()
            if counter[0] != before:
                advanced = True
                break
        before = counter[0]
        sum(range(2_000_000))
        held = counter[0] == before
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    return advanced, held


def test_batch_fill_lets_another_thread_run(llama3):
    g = ts.Compiler(llama3).compile_builtin_json()
    matchers = [g.matcher() for _ in range(64)]
    bm = ts.allocate_token_bitmask(64, llama3.vocab_size, kind="numpy")
    ts.fill_next_token_bitmask_batch(matchers, bm)  # warm
    advanced, held = other_thread_runs_during(lambda: ts.fill_next_token_bitmask_batch(matchers, bm))
    assert held, "the control (pure Python, GIL held) let the other thread run: the test is not sound"
    assert advanced, "the other thread never ran during 200 batch fills: the GIL is held"


def test_compile_lets_another_thread_run(llama3):
    c = ts.Compiler(llama3, cache_size=0)
    schema = {"type": "object", "properties": {f"k{i}": {"type": "array", "items": {"enum": ["a", "b", i]}} for i in range(30)}}
    advanced, held = other_thread_runs_during(lambda: c.compile_json_schema(schema), attempts=50)
    assert held, "the control let the other thread run: the test is not sound"
    assert advanced, "the other thread never ran during 50 compiles: the GIL is held"
