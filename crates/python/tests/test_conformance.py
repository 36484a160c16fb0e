"""The bindings' masks are bit-identical to the Rust API's on the conformance corpus (testdata/conformance.json), per backend and tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tokensieve as ts
from conftest import REPO, tokenizer_path

CORPUS = REPO / "testdata" / "conformance.json"


def helper() -> str:
    """The `conformance_masks` example (built by scripts/python-test.sh)."""
    env = os.environ.get("TOKENSIEVE_CONFORMANCE_HELPER")
    candidates = [env] if env else []
    candidates += [str(REPO / "target" / p / "examples" / "conformance_masks") for p in ("debug", "release")]
    for c in candidates:
        if c and os.path.exists(c):
            return c
    print("tokensieve tests: conformance_masks helper not built, skipping", file=sys.stderr)
    pytest.skip(
        "the Rust helper is not built: cargo build -p tokensieve-python --example conformance_masks"
    )


def compile_case(c: ts.Compiler, spec: dict) -> ts.CompiledGrammar:
    """The corpus spec through the Python API, with the options the Rust helper uses
    (SpecOptions::default(): any whitespace, strict off)."""
    (kind, arg), = spec.items()
    if kind == "regex":
        return c.compile_regex(arg)
    if kind == "choice":
        return c.compile_choice(arg)
    if kind == "json_schema":
        return c.compile_json_schema(arg, strict=False)
    if kind == "json_object":
        return c.compile_builtin_json()
    if kind == "ebnf":
        return c.compile_grammar(arg["grammar"], root=arg["root"])
    if kind == "structural_tag":
        tags = [{"begin": t["begin"], "content": t["content"], "end": t["end"]} for t in arg["tags"]]
        return c.compile_structural_tag(tags, arg["triggers"], strict=False)
    raise AssertionError(f"unknown spec kind {kind}")


@pytest.mark.parametrize("backend", ["auto", "earley", "regex-fsm"])
@pytest.mark.parametrize("tok", ["gpt2", "mistral"])
def test_masks_equal_the_rust_api(tmp_path, backend, tok):
    path = tokenizer_path(tok)
    out = tmp_path / "masks.bin"
    run = subprocess.run(
        [helper(), str(CORPUS), str(path), backend, str(out)],
        capture_output=True, text=True, check=True,
    )
    records = [json.loads(line) for line in run.stdout.splitlines()]
    info = ts.TokenizerInfo.from_tokenizer_json(path)
    words = (info.vocab_size + 31) // 32
    rust_rows = np.fromfile(out, dtype="<u4").reshape(-1, words)
    cases = {c["name"]: c for c in json.loads(CORPUS.read_text())}
    compiler = ts.Compiler(info, backend)
    bm = np.zeros((1, words), np.uint32)
    compared = skipped = 0
    for rec in records:
        case = cases[rec["case"]]
        if "compile_error" in rec:
            with pytest.raises(ts.GrammarError):
                compile_case(compiler, case["spec"])
            skipped += 1
            continue
        if "encode_error" in rec:
            skipped += 1
            continue
        m = compile_case(compiler, case["spec"]).matcher()
        assert rec["tokens"] == info.encode(rec["text"])
        row = rec["first_row"]
        for t, ok in zip(rec["tokens"], rec["accepted"]):
            m.fill_next_token_bitmask(bm)
            assert np.array_equal(bm[0], rust_rows[row]), (rec["case"], rec["text"], row)
            row += 1
            assert m.accept_token(t) == ok
            if not ok:
                break
        m.fill_next_token_bitmask(bm)
        assert np.array_equal(bm[0], rust_rows[row]), (rec["case"], rec["text"], "final")
        assert row + 1 == rec["first_row"] + rec["rows"]
        assert m.is_accepting() == rec["end"]
        compared += 1
    print(f"conformance {backend}/{tok}: {compared} walks compared, {skipped} cases or strings "
          "the backend/tokenizer does not take", file=sys.stderr)
    assert compared >= 20
