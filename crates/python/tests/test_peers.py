"""Masks equal to llguidance's and outlines-core's, token for token, on regexes and JSON schemas whose languages the engines define the same way.

Left out because the languages differ (checked when this list was made):
strings (tokensieve allows DEL and the `\\/` escape, as JSON does; llguidance
allows neither, outlines-core no DEL); integer bounds in outlines-core (it
drops them); outlines-core puts no whitespace before `,`; llguidance takes
`-0` for an integer with a negative minimum, and with fixed separators splits
`{"` and key tokens differently; an enum number `3` also takes `3.0` in tokensieve (JSON Schema compares numbers by value).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tokensieve as ts
from conftest import real_info, tokenizer_path

REGEXES = {
    "date": (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", ["2024-01-31"]),
    "email": (r"[a-z]+@[a-z]+\.(com|org)", ["bob@example.com"]),
    "alternation": (r"(cat|dog|bird)s?", ["cats", "bird"]),
    "phone": (r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}", ["(555) 123-4567"]),
    "sentence": (r"[A-Z][a-z]+( [a-z]+)*\.", ["Hello big world."]),
}
# (schema, texts, compare with outlines-core too)
SCHEMAS = {
    "integer": ({"type": "integer"}, ["42", "-7"], True),
    "enum": ({"enum": ["red", "green", None]}, ['"green"', "null"], True),
    "booleans": ({"type": "array", "items": {"type": "boolean"}}, ["[true, false]", "[]"], False),
    "nested": (
        {"type": "object", "properties": {"p": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
         "required": ["p"], "additionalProperties": False},
        ['{"p": [1, 2]}'],
        False,
    ),
}
ANY_WS = r"[ \t\n\r]*"


@pytest.fixture(scope="module")
def gpt2_setup():
    path = tokenizer_path("gpt2")
    info = real_info("gpt2")
    return path, info, ts.Compiler(info)


def walk_compare(info, ours: ts.CompiledGrammar, peer_fill, peer_advance, text: str, who: str):
    W = (info.vocab_size + 31) // 32
    m = ours.matcher()
    a = np.zeros((1, W), np.int32)
    b = np.zeros((1, W), np.int32)
    toks = info.encode(text)
    for k in range(len(toks) + 1):
        m.fill_next_token_bitmask(a)
        peer_fill(b)
        if not np.array_equal(a, b):
            diff = np.flatnonzero(np.unpackbits((a ^ b).view(np.uint8), bitorder="little"))
            shown = [(int(t), info.token_bytes(int(t))) for t in diff[:5]]
            raise AssertionError(f"{who}: {text!r} after {k} tokens: {len(diff)} tokens differ, e.g. {shown}")
        if k == len(toks):
            break
        assert m.accept_token(toks[k])
        peer_advance(toks[k])
    assert m.is_accepting()


def test_llguidance(gpt2_setup):
    llg = pytest.importorskip("llguidance", reason="llguidance is not installed (pip install llguidance==1.9.1)")
    path, info, c = gpt2_setup
    lt = llg.LLTokenizer(path.read_text(), eos_token=info.stop_token_ids)

    def run(ours, grammar, text, who):
        lm = llg.LLMatcher(lt, grammar, log_level=0)
        assert not lm.is_error(), lm.get_error()
        walk_compare(
            info, ours,
            lambda b: lm.unsafe_compute_mask_ptr(b.ctypes.data, b.nbytes),
            lambda t: lm.consume_token(t) or pytest.fail("llguidance refused a token"),
            text, who,
        )

    compared = 0
    for name, (rx, texts) in REGEXES.items():
        for text in texts:
            run(c.compile_regex(rx), llg.LLMatcher.grammar_from_regex(rx), text, f"regex {name}")
            compared += 1
    fixed = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
    for name, (schema, texts, _) in SCHEMAS.items():
        for text in texts:
            run(c.compile_json_schema(schema, strict=False),
                llg.LLMatcher.grammar_from_json_schema(schema), text, f"schema {name}")
            if name != "nested":
                run(c.compile_json_schema(schema, any_whitespace=False, strict=False),
                    llg.LLMatcher.grammar_from_json_schema(schema, defaults=fixed), text,
                    f"schema {name}, fixed separators")
            compared += 1
    assert compared == 13


def test_outlines_core(gpt2_setup):
    oc = pytest.importorskip("outlines_core", reason="outlines-core is not installed (pip install outlines-core==0.2.14)")
    from outlines_core.json_schema import build_regex_from_schema

    path, info, c = gpt2_setup
    # outlines-core's vocabulary: every grammar token's bytes, the eos apart.
    hidden = set(info.special_token_ids) | set(info.stop_token_ids)
    by_bytes: dict = {}
    for i in range(info.tokenizer_size):
        b = info.token_bytes(i)
        if i not in hidden and b:
            by_bytes.setdefault(b, []).append(i)
    vocab = oc.Vocabulary(info.stop_token_ids[0], by_bytes)
    W = (info.vocab_size + 31) // 32

    def run(ours, regex, text, who):
        guide = oc.Guide(oc.Index(regex, vocab))
        walk_compare(
            info, ours,
            lambda b: guide.write_mask_into(b.ctypes.data, W, 4),
            lambda t: guide.advance(t, False),
            text, who,
        )

    compared = 0
    for name, (rx, texts) in REGEXES.items():
        for text in texts:
            run(c.compile_regex(rx), rx, text, f"regex {name}")
            compared += 1
    for name, (schema, texts, with_outlines) in SCHEMAS.items():
        if not with_outlines:
            continue
        rx = build_regex_from_schema(json.dumps(schema), ANY_WS)
        for text in texts:
            run(c.compile_json_schema(schema, strict=False), rx, text, f"schema {name}")
            compared += 1
    assert compared == 10
