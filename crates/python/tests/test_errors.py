"""Bad inputs: each gives one clear exception (never a crash), and nothing is written when a check fails."""

from __future__ import annotations

import numpy as np
import pytest

import tokensieve as ts


@pytest.fixture(scope="module")
def setup(tiny):
    c = ts.Compiler(tiny)
    m = c.compile_regex("[a-z]+").matcher()
    return tiny, c, m


def test_bitmask_checks(setup):
    info, _, m = setup
    words = (info.vocab_size + 31) // 32
    with pytest.raises(ValueError, match="dtype must be int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), np.float32))
    with pytest.raises(ValueError, match="dtype must be int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), np.int64))
    with pytest.raises(ValueError, match="needs ceil"):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), np.int32))
    ro = np.zeros((1, words), np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(ro)
    assert not ro.any()
    with pytest.raises(ValueError, match="C-contiguous"):
        m.fill_next_token_bitmask(np.zeros((words, 2), np.int32).T)
    with pytest.raises(ValueError, match="shape"):
        m.fill_next_token_bitmask(np.zeros((1, 1, words), np.int32))
    with pytest.raises(ValueError, match="row 2 is outside"):
        m.fill_next_token_bitmask(np.zeros((2, words), np.int32), 2)
    with pytest.raises(TypeError, match="numpy array"):
        m.fill_next_token_bitmask([0] * words)
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(memoryview(bytes(4 * words)).cast("i"))


def test_batch_and_draft_checks(setup):
    info, _, m = setup
    words = (info.vocab_size + 31) // 32
    bm = np.zeros((2, words), np.int32)
    with pytest.raises(ValueError, match="3 matchers but the bitmask has 2 rows"):
        ts.fill_next_token_bitmask_batch([m, m, m], bm)
    with pytest.raises(ValueError, match="listed twice"):
        ts.fill_next_token_bitmask_batch([m, m], bm, [1, 1])
    with pytest.raises(ValueError, match="outside"):
        ts.fill_next_token_bitmask_batch([m], bm, [5])
    with pytest.raises(ValueError, match="rows has 1 entries for 2"):
        ts.fill_next_token_bitmask_batch([m, None], bm, [0])
    with pytest.raises(TypeError, match=r"matchers\[1\]"):
        ts.fill_next_token_bitmask_batch([m, "x"], bm)
    with pytest.raises(ValueError, match="needs rows 1..3"):
        ts.fill_draft_bitmasks(m, [1, 2], bm, first_row=1)
    assert not bm.any(), "nothing written by a refused call"


def test_apply_checks(setup):
    info, _, m = setup
    V = info.vocab_size
    words = (V + 31) // 32
    bm = np.zeros((2, words), np.int32)
    with pytest.raises(ValueError, match="logits: dtype must be float32"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.int32), bm)
    with pytest.raises(ValueError, match="logits: dtype must be float32"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.float64), bm)
    with pytest.raises(ValueError, match="1 rows for 2 rows"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.float32), bm[:1])
    with pytest.raises(ValueError, match="words"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V + 64), np.float32), bm)
    with pytest.raises(ValueError, match="out of range"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.float32), bm, indices=[2])
    with pytest.raises(ValueError, match="not a row"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.float32), bm, indices=[-1])
    ro = np.zeros((2, V), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ts.apply_token_bitmask_inplace(ro, bm)
    with pytest.raises(ValueError, match="bitmask: dtype"):
        ts.apply_token_bitmask_inplace(np.zeros((2, V), np.float32), bm.astype(np.float32))


def test_unknown_backend_and_bad_config(tiny):
    with pytest.raises(ts.GrammarError, match="unknown backend `nope`; available: .*earley") as e:
        ts.Compiler(tiny, "nope")
    assert e.value.kind == "unknown_backend" and isinstance(e.value, ValueError)
    with pytest.raises(ts.GrammarError) as e:
        ts.Compiler(tiny, "regex-fsm", options={"no_such_knob": 1})
    assert e.value.kind == "invalid_config" and "no_such_knob" in str(e.value)
    with pytest.raises(ValueError, match="threads"):
        ts.Compiler(tiny, threads=0)
    with pytest.raises(OverflowError):
        ts.Compiler(tiny, spin_us=-1)


def test_malformed_schema_has_its_pointer(setup):
    _, c, _ = setup
    with pytest.raises(ts.GrammarError) as e:
        c.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}})
    assert e.value.pointer == "/properties/a/minimum", e.value
    assert e.value.kind == "invalid_schema" and e.value.line is None
    with pytest.raises(ts.GrammarError) as e:
        c.compile_json_schema('{"type": ')
    assert e.value.kind == "invalid_schema"
    with pytest.raises(TypeError, match="JSON-serialisable"):
        c.compile_json_schema({"type": object()})


def test_malformed_grammar_has_line_and_column(setup):
    _, c, _ = setup
    with pytest.raises(ts.GrammarError) as e:
        c.compile_grammar('root ::= "a" item\nitem ::= [a-')
    assert (e.value.line, e.value.column) == (2, 10), e.value  # the `[`
    assert e.value.kind == "invalid_grammar" and e.value.pointer is None
    with pytest.raises(ts.GrammarError) as e:
        c.compile_grammar('root ::= missing')
    assert "missing" in e.value.message
    with pytest.raises(ts.GrammarError) as e:
        c.compile_grammar('other ::= "a"', root="root")


def test_malformed_regex_has_its_offset(setup):
    _, c, _ = setup
    with pytest.raises(ts.GrammarError) as e:
        c.compile_regex("ab(c")
    assert e.value.kind == "invalid_regex" and e.value.offset is not None


def test_vocabulary_errors(tiny):
    from conftest import TINY_TOKENS, tokenizer_path

    with pytest.raises(ts.GrammarError, match="smaller than the tokenizer") as e:
        ts.TokenizerInfo.from_token_bytes(TINY_TOKENS, vocab_size=10)
    assert e.value.kind == "vocabulary"
    with pytest.raises(ts.GrammarError, match="stop token id 500"):
        ts.TokenizerInfo.from_token_bytes(TINY_TOKENS, stop_token_ids=[500])
    with pytest.raises(ValueError, match="special_token_ids"):
        ts.TokenizerInfo.from_token_bytes(TINY_TOKENS, special_token_ids=[500])
    with pytest.raises(TypeError, match=r"tokens\[1\]"):
        ts.TokenizerInfo.from_token_bytes([b"a", 3])
    with pytest.raises(ts.GrammarError, match="cannot read"):
        ts.TokenizerInfo.from_tokenizer_json("/nonexistent/tokenizer.json")
    with pytest.raises(ts.GrammarError, match="not JSON"):
        ts.TokenizerInfo.from_tokenizer_json("{not json")
    with pytest.raises(TypeError):
        ts.TokenizerInfo.from_huggingface(object())
    with pytest.raises(ValueError, match="encode needs"):
        tiny.encode("x")
    with pytest.raises(IndexError):
        tiny.token_bytes(tiny.vocab_size)
    with pytest.raises(ts.GrammarError, match="smaller"):
        ts.TokenizerInfo.from_tokenizer_json(tokenizer_path("gpt2"), vocab_size=100)


def test_choice_and_tag_argument_errors(setup):
    _, c, _ = setup
    with pytest.raises(TypeError, match="one string"):
        c.compile_choice("abc")
    with pytest.raises(ts.GrammarError):
        c.compile_choice([])
    with pytest.raises(ValueError, match="no `end`"):
        c.compile_structural_tag([{"begin": "<a>", "regex": "x"}], ["<a>"])


def test_cuda_without_the_feature_is_a_clear_error(setup):
    from tokensieve import _tokensieve

    if _tokensieve.CUDA_FEATURE:
        import pytest as _pytest

        _pytest.skip("this wheel was built with the cuda feature")
    info, _, _ = setup
    logits = np.zeros((1, info.vocab_size), np.float32)
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    with pytest.raises(RuntimeError, match="without the `cuda` feature"):
        _tokensieve.apply_token_bitmask_inplace_cuda(logits, bm)
