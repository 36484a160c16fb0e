"""tokensieve.vllm driven the way vLLM 0.33.0's StructuredOutputManager drives a backend (compile, batch and draft-chain bitmask rows, validate, accept, rollback, terminate, reset), on numpy buffers and a real tokenizer."""

from __future__ import annotations

import json
import sys
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import serving_peers as peers
from serving_peers import VLLM_VERSION

tokenizers = pytest.importorskip(
    "tokenizers", reason="the Hugging Face tokenizers package is not installed"
)

import tokensieve  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
DOCUMENT = '{"name": "Ada", "age": 36}'
QWEN_IM_END = 151645
QWEN_ENDOFTEXT = 151643


@pytest.fixture(scope="module")
def plugin():
    root = peers.extracted("vllm", VLLM_VERSION, "vllm/v1/structured_output/")
    peers.load_single_file(
        "vllm.v1.structured_output.backend_types",
        root / "vllm/v1/structured_output/backend_types.py",
    )
    import tokensieve.vllm as module

    yield module
    sys.modules.pop("tokensieve.vllm", None)
    peers.unload("vllm")


@pytest.fixture(scope="module")
def qwen():
    path = peers.tokenizer_json("qwen2.5")
    if path is None:
        pytest.skip("../shared/data/tokenizers is absent")
    return tokenizers.Tokenizer.from_file(str(path))


NUM_SPEC = 4


@pytest.fixture(scope="module")
def backend(plugin, qwen):
    """One backend for the module, as vLLM keeps one per engine (reading a
    151k-token vocabulary takes seconds)."""
    backend = plugin.TokensieveBackend(vllm_config(NUM_SPEC), tokenizer=qwen, vocab_size=152064)
    yield backend
    backend.destroy()


def vllm_config(num_speculative_tokens: int = 0):
    # The two fields a backend reads from vLLM's VllmConfig.
    return types.SimpleNamespace(
        structured_outputs_config=types.SimpleNamespace(disable_any_whitespace=False),
        speculative_config=types.SimpleNamespace(num_speculative_tokens=num_speculative_tokens)
        if num_speculative_tokens
        else None,
    )


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def fresh_mask(grammar, prefix: list[int], words: int) -> np.ndarray:
    """The mask after ``prefix``, from a new matcher of the same compiled grammar."""
    matcher = grammar.matcher.compiled_grammar.matcher()
    assert matcher.accept_tokens(prefix)
    row = np.zeros((1, words), dtype=np.int32)
    matcher.fill_next_token_bitmask(row, 0)
    return row[0]


def fill_like_vllm(requests, bitmask, num_spec):
    """StructuredOutputManager.grammar_bitmask's serial path (no reasoning):
    each request owns ``num_spec + 1`` rows; row i is filled after accepting
    draft tokens 0..i-1, a refused draft makes later rows copies of the last
    good one, and the draft is rolled back at the end."""
    stride = num_spec + 1
    for index, (grammar, draft) in enumerate(requests):
        row = index * stride
        advanced = 0
        failed = None
        for token in draft:
            if failed is not None:
                bitmask[row] = bitmask[failed]
                row += 1
                continue
            if grammar.is_terminated():
                bitmask[row] = -1
            else:
                grammar.fill_bitmask(bitmask, row)
            if not grammar.is_terminated() and grammar.accept_tokens("req", [token]):
                advanced += 1
            else:
                failed = row
            row += 1
        if failed is not None:
            bitmask[row] = bitmask[failed]
        elif grammar.is_terminated():
            bitmask[row] = -1
        else:
            grammar.fill_bitmask(bitmask, row)
        if advanced:
            grammar.rollback(advanced)


def test_the_backend_compiles_with_auto_unless_told(plugin, qwen, backend, monkeypatch):
    assert backend.backend_name == "auto" == tokensieve.DEFAULT_BACKEND
    grammar = backend.compile_grammar(plugin.StructuredOutputOptions.JSON, json.dumps(SCHEMA))
    assert grammar.matcher.compiled_grammar.backend == "auto"
    # The front end's validation compiles: auto too (its tables off).
    assert plugin._validation_compiler().backend == "auto"
    # The environment variable still picks any registered backend.
    monkeypatch.setenv(plugin.BACKEND_ENV, "earley")
    other = plugin.TokensieveBackend(vllm_config(), tokenizer=qwen, vocab_size=152064)
    assert other.backend_name == "earley"
    other.destroy()


def test_a_draft_chain_batch_as_vllm_fills_it(plugin, qwen, backend):
    num_spec = NUM_SPEC
    options = plugin.StructuredOutputOptions
    doc = encode(qwen, DOCUMENT)
    words = (backend.vocab_size + 31) // 32

    valid = backend.compile_grammar(options.JSON, json.dumps(SCHEMA), {QWEN_IM_END})
    refused = backend.compile_grammar(options.JSON, json.dumps(SCHEMA), {QWEN_IM_END})
    ending = backend.compile_grammar(options.JSON, json.dumps(SCHEMA), {QWEN_IM_END})
    assert ending.accept_tokens("req", doc[:-2])
    bad_token = encode(qwen, "]")[0]
    requests = [
        (valid, doc[:num_spec]),
        (refused, doc[:2] + [bad_token] + doc[3:num_spec]),
        (ending, doc[-2:] + [QWEN_IM_END, doc[0]]),
    ]
    bitmask = backend.allocate_token_bitmask(8 * (1 + num_spec))
    assert isinstance(bitmask, np.ndarray) and bitmask.dtype == np.int32
    assert bitmask.shape == (8 * (1 + num_spec), words)
    before = [g.num_processed_tokens for g, _ in requests]

    fill_like_vllm(requests, bitmask, num_spec)

    stride = num_spec + 1
    # The chain that stays valid: each row is the mask after its prefix.
    for i in range(num_spec + 1):
        np.testing.assert_array_equal(bitmask[i], fresh_mask(valid, doc[:i], words))
    # The same rows from tokensieve's one-call draft fill.
    draft_rows = np.zeros((num_spec + 1, words), dtype=np.int32)
    assert tokensieve.fill_draft_bitmasks(valid.matcher, doc[:num_spec], draft_rows) == num_spec
    np.testing.assert_array_equal(bitmask[:stride], draft_rows)
    # A refused third draft: rows 0-2 are real, the rest copy row 2.
    base = stride
    assert not allowed(bitmask[base + 2], bad_token)
    for i in range(3):
        np.testing.assert_array_equal(bitmask[base + i], fresh_mask(refused, doc[:i], words))
    for i in range(3, stride):
        np.testing.assert_array_equal(bitmask[base + i], bitmask[base + 2])
    # A draft that ends the document: the stop token is allowed only once the
    # object is closed, and rows after it are full.
    base = 2 * stride
    assert not allowed(bitmask[base], QWEN_IM_END)
    assert allowed(bitmask[base + 2], QWEN_IM_END)
    assert not allowed(bitmask[base + 2], QWEN_ENDOFTEXT)  # not this request's stop token
    assert (bitmask[base + 3] == -1).all()
    # Every grammar is back where it was.
    assert [g.num_processed_tokens for g, _ in requests] == before
    assert not ending.is_terminated()
    assert ending.validate_tokens(doc[-2:] + [QWEN_IM_END]) == doc[-2:] + [QWEN_IM_END]
    assert valid.validate_tokens(doc) == doc


def test_validate_then_accept_then_terminate(plugin, qwen, backend):
    grammar = backend.compile_grammar(
        plugin.StructuredOutputOptions.JSON, json.dumps(SCHEMA), {QWEN_IM_END}
    )
    doc = encode(qwen, DOCUMENT)
    bad = encode(qwen, "}")[0]
    # The scheduler keeps the valid prefix of the draft, then accepts it.
    assert grammar.validate_tokens(doc[:3] + [bad]) == doc[:3]
    assert grammar.num_processed_tokens == 0
    assert grammar.accept_tokens("req", doc[:3])
    assert grammar.num_processed_tokens == 3
    # A refused token (a brace right after a comma): False, the tokens
    # before it stay accepted.
    assert not grammar.accept_tokens("req", doc[3:6] + [bad])
    assert grammar.num_processed_tokens == 6
    assert grammar.accept_tokens("req", doc[6:])
    assert not grammar.is_terminated()
    # The stop token ends it; tokens after it are ignored, as vLLM expects.
    assert grammar.validate_tokens([QWEN_IM_END, doc[0]]) == [QWEN_IM_END]
    assert grammar.accept_tokens("req", [QWEN_IM_END, doc[0]])
    assert grammar.is_terminated()
    assert grammar.num_processed_tokens == len(doc) + 1
    assert grammar.accept_tokens("req", [doc[0]])
    assert grammar.validate_tokens([doc[0]]) == []
    # Rolling back the stop token reopens the grammar.
    grammar.rollback(1)
    assert not grammar.is_terminated()
    assert grammar.num_processed_tokens == len(doc)
    grammar.reset()
    assert grammar.num_processed_tokens == 0
    assert grammar.validate_tokens(doc) == doc


def test_large_batches_fill_in_vllms_thread_pool(plugin, qwen, backend):
    """Above 128 requests vLLM fills rows in batches of 16 on a thread pool;
    fills release the GIL, so the rows must match a serial fill."""
    doc = encode(qwen, DOCUMENT)
    grammars = []
    for i in range(130):
        grammar = backend.compile_grammar(
            plugin.StructuredOutputOptions.JSON, json.dumps(SCHEMA), {QWEN_IM_END}
        )
        assert grammar.accept_tokens(f"req{i}", doc[: i % len(doc)])
        grammars.append(grammar)
    parallel = backend.allocate_token_bitmask(256)
    serial = backend.allocate_token_bitmask(256)

    def fill(batch):
        for index, grammar in batch:
            grammar.fill_bitmask(parallel, index)

    batches = [list(enumerate(grammars))[i : i + 16] for i in range(0, 130, 16)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(fill, batch) for batch in batches]:
            future.result()
    for index, grammar in enumerate(grammars):
        grammar.fill_bitmask(serial, index)
    np.testing.assert_array_equal(parallel, serial)
    assert (parallel[130:] == -1).all()


def test_every_request_type_compiles_and_constrains(plugin, qwen, backend):
    options = plugin.StructuredOutputOptions
    cases = {
        options.JSON: (json.dumps(SCHEMA), DOCUMENT),
        options.JSON_OBJECT: ("", '{"anything": [1, 2]}'),
        options.REGEX: (r"\d{3}-[a-z]+", "123-abc"),
        options.GRAMMAR: ('root ::= "yes" | "no"', "no"),
        options.CHOICE: (json.dumps(["red", "green"]), "green"),
        options.STRUCTURAL_TAG: (
            json.dumps(
                {
                    "type": "structural_tag",
                    "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
                    "triggers": ["<f>"],
                }
            ),
            "call <f>42</f> done",
        ),
    }
    assert set(cases) == set(options)
    for option, (spec, text) in cases.items():
        grammar = backend.compile_grammar(option, spec, {QWEN_IM_END})
        ids = encode(qwen, text)
        assert grammar.validate_tokens(ids) == ids, option
        assert grammar.accept_tokens("req", ids + [QWEN_IM_END]), option
        assert grammar.is_terminated(), option
    rejected = backend.compile_grammar(options.CHOICE, json.dumps(["red", "green"]), {QWEN_IM_END})
    assert rejected.validate_tokens(encode(qwen, "blue")) == []


def test_malformed_requests_fail_with_the_reason(plugin, qwen, backend):
    options = plugin.StructuredOutputOptions
    with pytest.raises(tokensieve.GrammarError) as err:
        backend.compile_grammar(options.REGEX, "(ab")
    assert err.value.offset is not None
    with pytest.raises(tokensieve.GrammarError) as err:
        backend.compile_grammar(
            options.JSON, json.dumps({"type": "object", "properties": {"a": {"type": 3}}})
        )
    assert err.value.pointer is not None
    with pytest.raises(ValueError, match="Lark"):
        backend.compile_grammar(options.GRAMMAR, "start: NUMBER\n%import common.NUMBER")
    with pytest.raises(ValueError, match="format form"):
        backend.compile_grammar(
            options.STRUCTURAL_TAG, json.dumps({"type": "structural_tag", "format": {}})
        )
    # Ignoring at_least_one would allow output with no tag: refused.
    with pytest.raises(ValueError, match="at_least_one"):
        backend.compile_grammar(
            options.STRUCTURAL_TAG,
            json.dumps({"structures": [], "triggers": ["<f"], "at_least_one": True}),
        )
    # The front end's check needs no model tokenizer.
    with pytest.raises(ValueError, match="tokensieve cannot compile this regex"):
        plugin.validate_key(options.REGEX, "(ab")
    plugin.validate_key(options.JSON, json.dumps(SCHEMA))


def test_padded_vocab_and_default_stop_tokens(plugin, qwen, backend):
    # No per-request stop ids: the tokenizer's own (<|endoftext|>, <|im_end|>).
    grammar = backend.compile_grammar(plugin.StructuredOutputOptions.REGEX, "a+")
    bitmask = backend.allocate_token_bitmask(1)
    grammar.fill_bitmask(bitmask, 0)
    # Ids past the tokenizer's 151,665 are padding rows of the logits.
    assert not any(allowed(bitmask[0], t) for t in range(151665, 152064))
    assert not allowed(bitmask[0], QWEN_IM_END)
    assert grammar.accept_tokens("req", encode(qwen, "a"))
    grammar.fill_bitmask(bitmask, 0)
    assert allowed(bitmask[0], QWEN_IM_END) and allowed(bitmask[0], QWEN_ENDOFTEXT)
