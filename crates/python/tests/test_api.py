"""The Python API on real tokenizers: vocabularies, every compile kind, matcher semantics, batch and draft fills, mask application."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

import tokensieve as ts
from conftest import (
    TINY_SPECIAL,
    TINY_STOP,
    TINY_TOKENS,
    allowed,
    real_info,
    tiny_encode,
    tokenizer_path,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PERSON_TEXT = '{"name": "Ann", "age": 41, "tags": ["a", "b"]}'


def mask_of(m: ts.Matcher, vocab_size: int) -> np.ndarray:
    bm = ts.allocate_token_bitmask(1, vocab_size, kind="numpy")
    m.fill_next_token_bitmask(bm)
    return bm[0].copy()


# ---------------------------------------------------------------- vocabularies


def test_real_tokenizers_load_with_their_model_sizes(any_real):
    name, info = any_real
    expected = {
        "llama3": (128256, 128256, "byte_level"),
        "qwen2.5": (152064, 151665, "byte_level"),
        "mistral": (32000, 32000, "byte_fallback"),
        "phi3.5": (32064, 32011, "byte_fallback"),
        "gpt2": (50257, 50257, "byte_level"),
    }[name]
    assert (info.vocab_size, info.tokenizer_size, info.vocab_type) == expected
    assert info.stop_token_ids, "a stop token is detected"
    assert all(0 <= s < info.tokenizer_size for s in info.stop_token_ids)
    assert info.token_bytes(info.encode("hello")[0]) in (b"hello", b"hell", b"h")


def test_padding_special_and_stop_tokens_in_masks(any_real):
    """Padded ids never allowed; special tokens never; stop tokens exactly where the grammar may end."""
    name, info = any_real
    compiler = ts.Compiler(info)
    m = compiler.compile_regex("[a-z]+").matcher()
    first = allowed(mask_of(m, info.vocab_size))
    specials = set(info.special_token_ids)
    stops = set(info.stop_token_ids)
    assert first, "something is allowed"
    assert not first & specials, "special tokens are never allowed"
    assert not first & stops, "no stop before the output may end"
    assert max(first) < info.tokenizer_size, "padded ids are never allowed"
    assert m.accept_tokens(info.encode("abc"))
    after = allowed(mask_of(m, info.vocab_size))
    assert stops <= after, "every stop token is allowed where the grammar may end"
    assert not (after - stops) & specials
    assert max(after) < info.tokenizer_size
    stop = info.stop_token_ids[0]
    assert m.accept_token(stop) and m.is_terminated()
    assert not m.accept_token(info.encode("a")[0]), "nothing after a stop token"


def test_from_tokenizer_json_text_equals_path():
    path = tokenizer_path("gpt2")
    a = ts.TokenizerInfo.from_tokenizer_json(path)
    b = ts.TokenizerInfo.from_tokenizer_json(path.read_text())
    c = ts.TokenizerInfo.from_tokenizer_json(str(path), vocab_size=50304, stop_token_ids=[50256, 13])
    assert a.vocab_size == b.vocab_size == 50257 and c.vocab_size == 50304
    assert a.stop_token_ids == b.stop_token_ids == [50256]
    assert c.stop_token_ids == [13, 50256]
    assert a.decode(a.encode("Hello, world")) == b"Hello, world"
    assert b.encode("x = 1") == a.encode("x = 1")


def test_from_huggingface_with_a_tokenizers_object():
    tokenizers = pytest.importorskip("tokenizers", reason="the `tokenizers` package is not installed")
    path = tokenizer_path("llama3")
    hf = tokenizers.Tokenizer.from_file(str(path))
    info = ts.TokenizerInfo.from_huggingface(hf, vocab_size=128256)
    ref = real_info("llama3")
    assert info.tokenizer_size == ref.tokenizer_size
    assert info.stop_token_ids == [128001, 128008, 128009]
    assert info.special_token_ids == ref.special_token_ids
    text = '{"name": "Zoë"}'
    assert info.encode(text) == ref.encode(text)
    assert hf.encode(text, add_special_tokens=False).ids == info.encode(text)
    # A transformers fast tokenizer exposes the same object as `backend_tokenizer`
    # and its eos id: both are read.
    wrapper = types.SimpleNamespace(backend_tokenizer=hf, eos_token_id=128009)
    info2 = ts.TokenizerInfo.from_huggingface(wrapper)
    assert info2.stop_token_ids == [128001, 128008, 128009]


def test_from_token_bytes_fixture(tiny):
    assert tiny.vocab_size == 128 and tiny.tokenizer_size == len(TINY_TOKENS)
    assert tiny.stop_token_ids == [TINY_STOP], "`</s>` is detected by name"
    assert tiny.special_token_ids == TINY_SPECIAL
    assert tiny.vocab_type == "raw"
    # A grammar naming a special token's text still never allows that token.
    m = ts.Compiler(tiny).compile_regex("<tool>x").matcher()
    mask = allowed(mask_of(m, 128))
    assert tiny_encode("<")[0] in mask and TINY_SPECIAL[1] not in mask
    none = ts.TokenizerInfo.from_token_bytes(TINY_TOKENS, stop_token_ids=[])
    assert none.stop_token_ids == [] and none.vocab_size == len(TINY_TOKENS)


def test_gguf_tokenizer(tmp_path):
    """A GGUF file written here (the format's header and key-value metadata, no tensors)."""
    import struct

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁a", "b", "▁ab"]
    types_ = [2, 3, 3] + [6] * 256 + [1, 1, 1]
    kv = [
        (s("general.architecture"), 8, s("llama")),
        (s("tokenizer.ggml.model"), 8, s("llama")),
        (s("tokenizer.ggml.tokens"), 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(s(t) for t in tokens)),
        (s("tokenizer.ggml.token_type"), 9, struct.pack("<IQ", 5, len(types_)) + b"".join(struct.pack("<i", t) for t in types_)),
        (s("tokenizer.ggml.eos_token_id"), 4, struct.pack("<I", 2)),
    ]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for k, t, v in kv:
        body += k + struct.pack("<I", t) + v
    path = tmp_path / "tiny.gguf"
    path.write_bytes(body)
    info = ts.TokenizerInfo.from_gguf(path, vocab_size=320)
    assert info.vocab_type == "byte_fallback"
    assert info.tokenizer_size == len(tokens) and info.vocab_size == 320
    assert info.stop_token_ids == [2]
    assert info.token_bytes(len(tokens) - 1) == b" ab"
    assert info.token_bytes(3 + ord("a")) == b"a"
    m = ts.Compiler(info).compile_regex(" ab").matcher()
    mask = allowed(mask_of(m, 320))
    assert {len(tokens) - 3, len(tokens) - 1, 3 + ord(" ")} == mask


# ------------------------------------------------------------- compile kinds


def walk_text(info: ts.TokenizerInfo, g: ts.CompiledGrammar, text: str) -> ts.Matcher:
    m = g.matcher()
    for t in info.encode(text):
        assert t in allowed(mask_of(m, info.vocab_size)), (text, t)
        assert m.accept_token(t)
    return m


def test_every_compile_kind_on_llama3(llama3):
    c = ts.Compiler(llama3)
    cases = [
        (c.compile_json_schema(PERSON), PERSON_TEXT, '{"name": "Ann"}'),
        (c.compile_json_schema(json.dumps(PERSON)), PERSON_TEXT, '{"age": 1, "name": "x"}'),
        (c.compile_builtin_json(), '{"a": [1, 2.5, null, {"b": "c"}]}', "[1, 2]"),
        (c.compile_regex(r"\d{3}-[a-z]+"), "123-abc", "12-abc"),
        (c.compile_grammar('root ::= "(" root ")" | "x"'), "((x))", "((x)"),
        (c.compile_grammar('start ::= [a-c]+ "!"', root="start"), "abca!", "abcd!"),
        (c.compile_choice(["red", "green", "blue"]), "green", "gree"),
    ]
    for g, good, bad in cases:
        m = walk_text(llama3, g, good)
        assert m.is_accepting(), (g.kind, good)
        assert m.accept_token(llama3.stop_token_ids[-1]) and m.is_terminated()
        m2 = g.matcher()
        walked = m2.accept_tokens(llama3.encode(bad))
        assert not (walked and m2.is_accepting()), (g.kind, bad)
    assert [g.kind for g, _, _ in cases] == [
        "json_schema", "json_schema", "json_object", "regex", "ebnf", "ebnf", "choice",
    ]


def test_json_whitespace_options(llama3):
    c = ts.Compiler(llama3)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}}, "required": ["a", "b"]}
    value = {"a": 1, "b": [2, 3]}
    layouts = {
        "default": (dict(any_whitespace=False), json.dumps(value)),
        "compact": (dict(any_whitespace=False, separators=(",", ":")), json.dumps(value, separators=(",", ":"))),
        "indent": (dict(any_whitespace=False, indent=2), json.dumps(value, indent=2, separators=(",", ": "))),
    }
    for name, (kw, text) in layouts.items():
        g = c.compile_json_schema(schema, **kw)
        assert walk_text(llama3, g, text).is_accepting(), name
        others = [t for n, (_, t) in layouts.items() if n != name]
        for other in others:
            m = g.matcher()
            assert not (m.accept_tokens(llama3.encode(other)) and m.is_accepting()), (name, other)
    anyws = c.compile_json_schema(schema)
    for _, text in layouts.values():
        assert walk_text(llama3, anyws, text).is_accepting()


def test_strict_mode(llama3):
    c = ts.Compiler(llama3)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    text = '{"a": 1, "b": 2}'
    strict = c.compile_json_schema(schema).matcher()
    assert not (strict.accept_tokens(llama3.encode(text)) and strict.is_accepting())
    assert walk_text(llama3, c.compile_json_schema(schema, strict=False), text).is_accepting()


def test_structural_tag(llama3):
    c = ts.Compiler(llama3)
    tags = [
        {"begin": "<function=add>", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, "end": "</function>"},
        types.SimpleNamespace(begin="<function=ok>", schema='{"enum": ["yes", "no"]}', end="</function>"),
        {"begin": "<calc>", "grammar": 'root ::= [0-9]+ ("+" root)?', "end": "</calc>"},
    ]
    g = c.compile_structural_tag(tags, ["<function=", "<calc>"])
    assert g.kind == "structural_tag"
    good = 'Sure. <function=add>{"a": 5}</function> and <function=ok>"no"</function><calc>1+2</calc> done'
    assert walk_text(llama3, g, good).is_accepting()
    for bad in ['<function=sub>{"a": 5}</function>', '<function=add>{"a": "x"}</function>', "<calc>1+</calc>"]:
        m = g.matcher()
        assert not (m.accept_tokens(llama3.encode(bad)) and m.is_accepting()), bad
    with pytest.raises(ValueError, match="needs one of"):
        c.compile_structural_tag([{"begin": "<x>", "end": "</x>"}], ["<x>"])


def test_compile_cache_is_shared_by_threads(llama3):
    from concurrent.futures import ThreadPoolExecutor

    c = ts.Compiler(llama3, cache_size=4)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    with ThreadPoolExecutor(8) as pool:
        grammars = list(pool.map(lambda _: c.compile_json_schema(schema), range(16)))
    info = c.cache_info()
    assert info["misses"] == 1 and info["hits"] == 15 and info["entries"] == 1
    assert len({g.compile_time_s for g in grammars}) == 1, "one compilation served everyone"
    # Same schema, other formatting: the canonical key hits.
    c.compile_json_schema(json.dumps(schema, indent=4))
    assert c.cache_info()["hits"] == 16
    for i in range(6):
        c.compile_regex(f"a{{{i}}}")
    assert c.cache_info()["entries"] == 4
    c.clear_cache()
    assert c.cache_info()["entries"] == 0


# -------------------------------------------------------------- matcher steps


def test_refused_token_leaves_state_unchanged(llama3):
    m = ts.Compiler(llama3).compile_json_schema(PERSON).matcher()
    ids = llama3.encode(PERSON_TEXT)
    assert m.accept_tokens(ids[:3])
    before = mask_of(m, llama3.vocab_size)
    refused = next(t for t in range(1000) if t not in allowed(before))
    assert m.accept_token(refused) is False
    assert m.accept_token(-1) is False and m.accept_token(2**40) is False
    assert m.accept_token(llama3.vocab_size + 5) is False
    assert np.array_equal(before, mask_of(m, llama3.vocab_size))


def test_accept_tokens_is_all_or_nothing(llama3):
    for max_rollback in (32, 2):  # rollback path and fork path
        c = ts.Compiler(llama3, max_rollback=max_rollback)
        m = c.compile_json_schema(PERSON).matcher()
        ids = llama3.encode(PERSON_TEXT)
        bad = llama3.encode('{"name": "Ann", "age": "x"}')
        start = mask_of(m, llama3.vocab_size)
        assert m.accept_tokens(bad) is False
        assert np.array_equal(start, mask_of(m, llama3.vocab_size))
        assert m.accept_tokens(ids) is True and m.is_accepting()


def test_validate_tokens(llama3):
    for max_rollback in (32, 3):
        m = ts.Compiler(llama3, max_rollback=max_rollback).compile_json_schema(PERSON).matcher()
        good = llama3.encode(PERSON_TEXT)
        bad = llama3.encode('{"name": "Ann", "age": "x"}')
        n_ok = next(i for i, (a, b) in enumerate(zip(good, bad)) if a != b)
        start = mask_of(m, llama3.vocab_size)
        assert m.validate_tokens(good) == len(good)
        assert m.validate_tokens(bad) == n_ok
        stop = llama3.stop_token_ids[0]
        assert m.validate_tokens(good + [stop, good[0]]) == len(good) + 1, "a stop counts, nothing after it"
        assert np.array_equal(start, mask_of(m, llama3.vocab_size))
        assert not m.is_terminated()


def test_rollback_fork_reset(llama3):
    c = ts.Compiler(llama3, max_rollback=4)
    m = c.compile_json_schema(PERSON).matcher()
    ids = llama3.encode(PERSON_TEXT)
    masks = [mask_of(m, llama3.vocab_size)]
    for t in ids[:6]:
        assert m.accept_token(t)
        masks.append(mask_of(m, llama3.vocab_size))
    assert m.rollback_available == 4
    with pytest.raises(ValueError, match="only 4"):
        m.rollback(5)
    m.rollback(3)
    assert np.array_equal(mask_of(m, llama3.vocab_size), masks[3])
    f = m.fork()
    assert f.accept_tokens(ids[3:])
    assert f.is_accepting() and not m.is_accepting()
    assert np.array_equal(mask_of(m, llama3.vocab_size), masks[3])
    m.reset()
    assert np.array_equal(mask_of(m, llama3.vocab_size), masks[0])
    small = ts.Matcher(m.compiled_grammar, max_rollback=1)
    assert small.accept_tokens(ids[:3]) and small.rollback_available == 1
    with pytest.raises(ValueError):
        small.rollback(2)
    with pytest.raises(ValueError, match="exceeds the compiler"):
        ts.Matcher(m.compiled_grammar, max_rollback=5)


def test_jump_forward_and_accept_string(llama3):
    c = ts.Compiler(llama3)
    m = c.compile_regex(r"The answer is (yes|no)\.").matcher()
    assert m.jump_forward_string() == "The answer is "
    assert m.accept_string("The answer is ")
    assert m.accept_string("maybe") is False
    assert m.accept_token(llama3.encode("yes")[0])
    assert m.jump_forward_string() == "."
    m.rollback(1)
    assert m.jump_forward_string() == ""
    m2 = c.compile_json_schema(PERSON).matcher()
    assert m2.jump_forward_string() == "{"


# --------------------------------------------------------- buffers and fills


def test_batch_fill_equals_single_fills(llama3):
    for threads in (None, 2):
        c = ts.Compiler(llama3, threads=threads)
        g = c.compile_json_schema(PERSON)
        ids = llama3.encode(PERSON_TEXT)
        matchers = []
        for i in range(20):
            m = g.matcher()
            assert m.accept_tokens(ids[: i % len(ids)])
            matchers.append(m)
        done = g.matcher()
        assert done.accept_tokens(ids + [llama3.stop_token_ids[0]])
        matchers += [None, done]
        expected = np.stack([mask_of(m, llama3.vocab_size) if m is not None else np.full(llama3.vocab_size // 32, -1, np.int32) for m in matchers])
        expected[-1] = -1  # terminated: every token allowed
        bm = ts.allocate_token_bitmask(len(matchers), llama3.vocab_size, kind="numpy")
        bm[:] = 0
        ts.fill_next_token_bitmask_batch(matchers, bm)
        assert np.array_equal(bm, expected)
        # Explicit rows, in another order, into a larger buffer.
        rows = list(reversed(range(len(matchers))))
        big = np.zeros((len(matchers) + 3, llama3.vocab_size // 32), np.int32)
        ts.fill_next_token_bitmask_batch(matchers, big, rows)
        assert np.array_equal(big[: len(matchers)][::-1], expected)
        assert not big[len(matchers):].any()


def fill_threads() -> set:
    """Thread ids of this process's batch-fill helper threads (Linux)."""
    import glob

    ids = set()
    for comm in glob.glob("/proc/self/task/*/comm"):
        try:
            if open(comm).read().strip().startswith("tokensieve-fill"):
                ids.add(comm.split("/")[-2])
        except OSError:  # the thread ended while listed
            pass
    return ids


@pytest.mark.parametrize(
    "pool",
    [{}, {"threads": 2, "spin_us": 20_000}, {"threads": 3, "spin_us": 0}],
    ids=["process-wide", "spinning", "asleep-between-batches"],
)
def test_batch_fills_from_many_threads_at_once(llama3, pool):
    """Python threads fill batches on one compiler's pool at the same time,
    with pauses that let helpers go to sleep: every row is the single fill's."""
    import random
    import threading
    import time

    c = ts.Compiler(llama3, **pool)
    g = c.compile_json_schema(PERSON)
    ids = llama3.encode(PERSON_TEXT)
    V = llama3.vocab_size
    expected = []
    for k in range(len(ids)):
        m = g.matcher()
        assert m.accept_tokens(ids[:k])
        expected.append(mask_of(m, V))
    failures = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(12):
            at = [rng.randrange(len(ids)) for _ in range(rng.randrange(4, 40))]
            ms = []
            for k in at:
                m = g.matcher()
                m.accept_tokens(ids[:k])
                ms.append(m)
            bm = ts.allocate_token_bitmask(len(ms), V, kind="numpy")
            ts.fill_next_token_bitmask_batch(ms, bm)
            for row, k in enumerate(at):
                if not np.array_equal(bm[row], expected[k]):
                    failures.append((seed, row, k))
            if rng.random() < 0.3:
                time.sleep(0.002)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are read from /proc (Linux)")
def test_a_compilers_own_pool_ends_its_threads_with_it(llama3):
    import gc
    import time

    def settle(done) -> bool:
        # A helper names itself once it runs, and ends after its pool is
        # dropped: on a busy machine either may take a moment.
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)
        return done()

    for spin in (0, 50_000):
        # By thread id: helpers of pools dropped by earlier tests may still
        # be ending meanwhile.
        before = fill_threads()
        c = ts.Compiler(llama3, threads=3, spin_us=spin)
        g = c.compile_json_schema(PERSON)
        ms = [g.matcher() for _ in range(8)]
        ts.fill_next_token_bitmask_batch(ms, ts.allocate_token_bitmask(8, llama3.vocab_size, kind="numpy"))
        assert settle(lambda: len(fill_threads() - before) == 2), f"spin_us={spin}: two helper threads"
        own = fill_threads() - before
        del c, g, ms
        gc.collect()
        assert settle(lambda: not fill_threads() & own), f"spin_us={spin}: helper threads outlived their compiler"


def test_draft_bitmasks_equal_the_accept_fill_rollback_loop(llama3):
    ids = llama3.encode(PERSON_TEXT)
    stop = llama3.stop_token_ids[0]
    drafts = [
        ids[:5],
        ids[4:9],
        ids[:3] + [llama3.encode("Z")[0]] + ids[3:6],  # refused in the middle
        ids[-2:] + [stop, ids[0]],  # a stop token, then anything
        [],
        ids[:12],  # longer than max_rollback=8: the fork path
    ]
    c = ts.Compiler(llama3, max_rollback=8)
    g = c.compile_json_schema(PERSON)
    V = llama3.vocab_size
    for start in (0, 4, len(ids) - 2):
        for draft in drafts:
            m = g.matcher()
            assert m.accept_tokens(ids[:start])
            before = mask_of(m, V)
            # The loop the call replaces.
            ref = m.fork()
            rows = [mask_of(ref, V)]
            n = 0
            for t in draft:
                if ref.is_terminated() or not ref.accept_token(t):
                    break
                n += 1
                rows.append(mask_of(ref, V) if not ref.is_terminated() else np.full(V // 32, -1, np.int32))
            while len(rows) < len(draft) + 1:
                rows.append(np.full(V // 32, -1, np.int32))
            buf = np.zeros((len(draft) + 3, V // 32), np.int32)
            got = ts.fill_draft_bitmasks(m, draft, buf, first_row=1)
            assert got == n, (start, draft)
            assert np.array_equal(buf[1 : len(draft) + 2], np.stack(rows)), (start, draft)
            assert not buf[0].any() and not buf[len(draft) + 2 :].any()
            assert np.array_equal(before, mask_of(m, V)), "the matcher is where it was"
            assert m.validate_tokens(draft) == n


def test_buffer_kinds(llama3):
    m = ts.Compiler(llama3).compile_regex("[0-9]+").matcher()
    V = llama3.vocab_size
    ref = mask_of(m, V)
    one = np.zeros(V // 32, np.int32)
    m.fill_next_token_bitmask(one)
    assert np.array_equal(one, ref)
    u = np.zeros((2, V // 32), np.uint32)
    m.fill_next_token_bitmask(u, 1)
    assert np.array_equal(u[1].view(np.int32), ref) and not u[0].any()
    wide = np.full((1, V // 32 + 2), -1, np.int32)
    m.fill_next_token_bitmask(wide)
    assert np.array_equal(wide[0, : V // 32], ref) and not wide[0, V // 32 :].any()
    import array

    mv = memoryview(array.array("i", [0]) * (V // 32)).cast("B").cast("i", [1, V // 32])
    m.fill_next_token_bitmask(mv)
    assert np.array_equal(np.frombuffer(mv.tobytes(), np.int32), ref)


def test_allocate_token_bitmask():
    bm = ts.allocate_token_bitmask(3, 100, kind="numpy")
    assert bm.shape == (3, 4) and bm.dtype == np.int32 and (bm == -1).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_apply_numpy(llama3, dtype):
    m = ts.Compiler(llama3).compile_regex("[0-9]+").matcher()
    V = llama3.vocab_size
    bm = ts.allocate_token_bitmask(3, V, kind="numpy")
    m.fill_next_token_bitmask(bm, 0)
    m.fill_next_token_bitmask(bm, 2)
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, V)).astype(dtype)
    keep = logits.copy()
    ts.apply_token_bitmask_inplace(logits, bm)
    ok = np.zeros(V, bool)
    ok[list(allowed(bm[0]))] = True
    for r in (0, 2):
        assert np.array_equal(logits[r][ok], keep[r][ok])
        assert np.isneginf(logits[r][~ok]).all()
    assert np.array_equal(logits[1], keep[1]), "a full row changes nothing"
    logits = keep.copy()
    ts.apply_token_bitmask_inplace(logits, bm, indices=[2])
    assert np.array_equal(logits[0], keep[0]) and np.isneginf(logits[2][~ok]).all()
    row = keep[0].copy()
    ts.apply_token_bitmask_inplace(row, bm[0])
    assert np.isneginf(row[~ok]).all() and np.array_equal(row[ok], keep[0][ok])


def test_torch_cpu_tensors(llama3):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    m = ts.Compiler(llama3).compile_regex("[0-9]+").matcher()
    V = llama3.vocab_size
    bm = ts.allocate_token_bitmask(2, V)
    assert isinstance(bm, torch.Tensor) and bm.dtype == torch.int32
    ts.fill_next_token_bitmask_batch([m, None], bm)
    ref = mask_of(m, V)
    assert np.array_equal(bm[0].numpy(), ref)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        logits = torch.randn(2, V).to(dt)
        keep = logits.clone()
        ts.apply_token_bitmask_inplace(logits, bm)
        ok = torch.zeros(V, dtype=torch.bool)
        ok[list(allowed(ref))] = True
        assert torch.equal(logits[0][ok], keep[0][ok])
        assert torch.isneginf(logits[0][~ok]).all()
        assert torch.equal(logits[1], keep[1])
    with pytest.raises(ValueError, match="requires grad"):
        ts.apply_token_bitmask_inplace(torch.zeros(1, V, requires_grad=True), bm[:1])
    with pytest.raises(ValueError, match="contiguous"):
        ts.apply_token_bitmask_inplace(torch.zeros(V, 2).t(), bm)


def test_reasoning_wrapper():
    """think_end_token: unconstrained while thinking, constrained after the think-end token."""
    tokens = TINY_TOKENS + [b"</think>"]
    info = ts.TokenizerInfo.from_token_bytes(tokens, special_token_ids=TINY_SPECIAL + [len(tokens) - 1])
    end = len(tokens) - 1
    c = ts.Compiler(info, think_end_token="</think>")
    assert c.backend == "auto+reasoner"
    g = c.compile_regex("[0-9]+")
    m = g.matcher()
    m.maybe_init_reasoning(True)
    free = allowed(mask_of(m, info.vocab_size))
    assert tiny_encode("x")[0] in free and end in free
    assert m.accept_tokens(tiny_encode("hmm, 12?"))
    assert m.accept_token(end)
    after = allowed(mask_of(m, info.vocab_size))
    digits = {i for i, t in enumerate(tokens) if t.isdigit()}  # "0".."9" and "12"
    assert after == digits
    assert m.accept_tokens(tiny_encode("42")) and m.is_accepting()
    m2 = g.matcher()
    m2.maybe_init_reasoning(False)
    assert allowed(mask_of(m2, info.vocab_size)) == after
    with pytest.raises(ts.GrammarError, match="not a single token"):
        ts.Compiler(info, think_end_token="</nope>")
