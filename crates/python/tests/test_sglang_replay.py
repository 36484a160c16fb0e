"""tokensieve.sglang driven the way SGLang 0.5.23 drives a grammar backend (compile and cache copies, batched mask rows, EAGLE's draft tree, accept, rollback, jump-forward, termination, strict-thinking filters), on numpy buffers and the Llama 3 tokenizer."""

from __future__ import annotations

import ast
import collections
import json

import numpy as np
import pytest

import serving_peers as peers
from serving_peers import SGLANG_VERSION

import tokensieve
from tokensieve import sglang as plugin

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
)
DOCUMENT = '{"name": "Ada", "age": 36}'
EOT = 128009
VOCAB = 128256


@pytest.fixture(scope="module")
def backend():
    path = peers.tokenizer_json("llama3")
    if path is None:
        pytest.skip("../shared/data/tokenizers is absent")
    info = tokensieve.TokenizerInfo.from_tokenizer_json(
        str(path), vocab_size=VOCAB, stop_token_ids=[EOT]
    )
    return plugin.TokensieveGrammarBackend(tokenizer_info=info)


@pytest.fixture(scope="module")
def grammar_row():
    """SGLang's GrammarRow, with the fields its source gives it."""
    module = peers.parse("sglang", SGLANG_VERSION, "sglang/srt/constrained/base_grammar_backend.py")
    node = peers.class_node(module, "GrammarRow")
    fields = [ast.unparse(n.target) for n in node.body if isinstance(n, ast.AnnAssign)]
    assert fields == ["row", "grammar"]
    return collections.namedtuple("GrammarRow", fields)


def encode(backend, text: str) -> list[int]:
    return backend.tokenizer_info.encode(text)


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def mask_after(grammar, prefix: list[int]) -> np.ndarray:
    matcher = grammar.matcher.compiled_grammar.matcher()
    assert matcher.accept_tokens(prefix)
    row = np.zeros((1, (VOCAB + 31) // 32), dtype=np.int32)
    matcher.fill_next_token_bitmask(row, 0)
    return row[0]


def test_cached_copies_and_a_batch_mask_as_sglang_builds_it(backend, grammar_row):
    doc = encode(backend, DOCUMENT)
    # GrammarManager: compile on a miss, cache a copy, hand copies to hits.
    compiled = backend.dispatch_json(SCHEMA)
    assert isinstance(compiled, plugin.TokensieveGrammar)
    template = compiled.copy()
    requests = [template.copy() for _ in range(5)]
    for request in requests:
        request.maybe_init_reasoning(False)
    for i, request in enumerate(requests):
        for token in doc[: 2 * i]:
            request.accept_token(token)
    finished, ended = requests[3], requests[4]
    finished.finished = True
    for token in doc[2 * 4 :] + [EOT]:
        ended.accept_token(token)
    assert ended.is_terminated()
    grammars = [requests[0], None, requests[1], requests[2], finished, ended]

    # SamplingBatchInfo.update_regex_vocab_mask
    first = next(g for g in grammars if g)
    vocab_mask = first.allocate_vocab_mask(vocab_size=VOCAB, batch_size=len(grammars), device="cpu")
    entries = [
        grammar_row(row=row, grammar=g)
        for row, g in enumerate(grammars)
        if g and not g.finished and not g.is_terminated()
    ]
    assert [e.row for e in entries] == [0, 2, 3]
    first.fill_vocab_mask_batched(entries, vocab_mask)
    vocab_mask = first.move_vocab_mask(vocab_mask, "cpu")
    # A torch tensor where torch is installed (as in SGLang), else numpy:
    # read through numpy either way (no copy for a CPU tensor).
    mask = np.asarray(vocab_mask)
    for entry, prefix in zip(entries, (doc[:0], doc[:2], doc[:4]), strict=True):
        np.testing.assert_array_equal(mask[entry.row], mask_after(compiled, prefix))
    for row in (1, 4, 5):  # rows SGLang leaves unconstrained
        assert (mask[row] == -1).all()

    # GrammarMask.apply, then the sampler and the result processor.
    logits = np.random.default_rng(7).standard_normal((len(grammars), VOCAB)).astype(np.float32)
    first.apply_vocab_mask(logits=logits, vocab_mask=vocab_mask)
    for entry in entries:
        words = mask[entry.row].view(np.uint32)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:VOCAB].astype(bool)
        np.testing.assert_array_equal(np.isneginf(logits[entry.row]), ~bits)
        entry.grammar.accept_token(int(logits[entry.row].argmax()))
    assert not np.isneginf(logits[1]).any()
    # The cached template never moved.
    assert template.matcher.validate_tokens(doc) == len(doc)


def test_mixed_grammar_objects_are_filled_one_by_one(backend, grammar_row):
    class Wrapper:
        """Another grammar object in the batch (SGLang's reasoning wrapper
        is one): it fills its row itself."""

        def __init__(self, inner):
            self.inner = inner

        def fill_vocab_mask(self, vocab_mask, idx):
            self.inner.fill_vocab_mask(vocab_mask, idx)

    regex = backend.dispatch_regex(r"[0-9]+")
    wrapped = Wrapper(backend.dispatch_regex(r"[a-z]+"))
    mask = regex.allocate_vocab_mask(vocab_size=VOCAB, batch_size=2, device="cpu")
    regex.fill_vocab_mask_batched([grammar_row(0, regex), grammar_row(1, wrapped)], mask)
    digit, letter = encode(backend, "7")[0], encode(backend, "x")[0]
    assert allowed(mask[0], digit) and not allowed(mask[0], letter)
    assert allowed(mask[1], letter) and not allowed(mask[1], digit)


def traverse_tree(next_token, next_sibling, draft, grammar, bitmask):
    """SGLang's EAGLE traverse_tree: depth-first over the draft tree, each
    accepted node filling its row, then rolling back one step."""

    def dfs(curr, parent):
        if curr == 0:
            accepted = True
        else:
            token = int(draft[curr])
            accepted = allowed(bitmask[parent], token)
        if accepted:
            if curr != 0:
                grammar.accept_token(int(draft[curr]))
            if not grammar.is_terminated():
                grammar.fill_vocab_mask(bitmask, curr)
                if next_token[curr] != -1:
                    dfs(int(next_token[curr]), curr)
            if curr != 0:
                grammar.rollback(1)
        if next_sibling[curr] != -1:
            dfs(int(next_sibling[curr]), parent)

    dfs(0, -1)


def test_an_eagle_draft_tree(backend):
    doc = encode(backend, DOCUMENT)
    grammar = backend.dispatch_json(SCHEMA)
    for token in doc[:3]:
        grammar.accept_token(token)
    bad = encode(backend, "}")[0]
    # Node 0: committed token; 1 -> 3 -> 4 a valid path, 2 a refused sibling of 1,
    # 5 a sibling of 3 that is valid too (a different continuation).
    other = encode(backend, ' "B')[0]
    assert other != doc[4] and allowed(mask_after(grammar, doc[:4]), other)
    draft = np.array([doc[2], doc[3], bad, doc[4], doc[5], other])
    next_token = np.array([1, 3, -1, 4, -1, -1])
    next_sibling = np.array([-1, 2, -1, 5, -1, -1])
    bitmask = grammar.allocate_vocab_mask(vocab_size=VOCAB, batch_size=len(draft), device="cpu")
    traverse_tree(next_token, next_sibling, draft, grammar, bitmask)
    np.testing.assert_array_equal(bitmask[0], mask_after(grammar, doc[:3]))
    np.testing.assert_array_equal(bitmask[1], mask_after(grammar, doc[:4]))
    assert (bitmask[2] == -1).all()  # refused: never filled
    np.testing.assert_array_equal(bitmask[3], mask_after(grammar, doc[:5]))
    np.testing.assert_array_equal(bitmask[4], mask_after(grammar, doc[:6]))
    np.testing.assert_array_equal(bitmask[5], mask_after(grammar, doc[:4] + [int(draft[5])]))
    # The walk leaves the grammar where it found it.
    assert grammar.matcher.validate_tokens(doc[3:]) == len(doc) - 3


def test_accept_rollback_and_termination(backend):
    doc = encode(backend, DOCUMENT)
    grammar = backend.dispatch_json(SCHEMA)
    with pytest.raises(ValueError, match="not allowed"):
        grammar.accept_token(encode(backend, "]")[0])
    assert grammar.current_token is not None
    for token in doc:
        grammar.accept_token(token)
    grammar.rollback(2)
    for token in doc[-2:]:
        grammar.accept_token(token)
    assert not grammar.is_terminated()
    grammar.accept_token(EOT)
    assert grammar.is_terminated()
    grammar.accept_token(doc[0])  # after termination: ignored, as SGLang expects
    grammar.rollback(1)
    assert not grammar.is_terminated()


def test_jump_forward_and_retokenize(backend):
    grammar = backend.dispatch_json(
        json.dumps(
            {
                "type": "object",
                "properties": {"answer": {"const": "forty-two"}},
                "required": ["answer"],
            }
        )
    )
    old_ids = encode(backend, '{"ans')
    for token in old_ids:
        grammar.accept_token(token)
    helper = grammar.try_jump_forward(None)
    assert helper is not None and helper[0] == []
    text, state = grammar.jump_forward_str_state(helper)
    assert text == 'wer"' and state == -1  # whitespace may follow the key
    # SGLang appends the text and re-tokenizes the output: "ans" + "wer" is
    # one token now, so the grammar rolls back "ans" and accepts the new ids.
    new_ids = encode(backend, '{"ans' + text)
    assert new_ids[0] == old_ids[0] and new_ids[1] != old_ids[1]
    grammar.jump_and_retokenize(old_ids, new_ids, state)
    rest = encode(backend, ': "forty-two"}')
    assert grammar.matcher.validate_tokens(rest) == len(rest)
    with pytest.raises(ValueError, match="re-tokenized"):
        grammar.jump_and_retokenize(new_ids, new_ids + encode(backend, "x"), state)
    finished = backend.dispatch_json(SCHEMA)
    for token in encode(backend, DOCUMENT) + [EOT]:
        finished.accept_token(token)
    assert finished.try_jump_forward(None) is None


def test_each_constraint_kind_and_its_errors(backend):
    cases = [
        (backend.dispatch_regex(r"(yes|no)!"), "no!"),
        (backend.dispatch_ebnf('root ::= "a" root | "b"'), "aab"),
        (backend.dispatch_json("$$ANY$$"), "[1, 2]"),
        (
            backend.dispatch_structural_tag(
                json.dumps(
                    {
                        "type": "structural_tag",
                        "structures": [
                            {"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}
                        ],
                        "triggers": ["<f>"],
                    }
                )
            ),
            "call <f>42</f> done",
        ),
    ]
    for grammar, text in cases:
        assert isinstance(grammar, plugin.TokensieveGrammar), text
        for token in encode(backend, text) + [EOT]:
            grammar.accept_token(token)
        assert grammar.is_terminated(), text
    errors = {
        "offset": backend.dispatch_regex("(ab"),
        "/properties/a": backend.dispatch_json(json.dumps({"properties": {"a": {"type": 3}}})),
        "line": backend.dispatch_ebnf("root ::= ("),
        "format form": backend.dispatch_structural_tag(
            json.dumps({"type": "structural_tag", "format": {}})
        ),
        "at_least_one": backend.dispatch_structural_tag(
            json.dumps(
                {
                    "structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}],
                    "triggers": ["<f>"],
                    "at_least_one": True,
                }
            )
        ),
        "not JSON": backend.dispatch_structural_tag("{"),
    }
    for needle, grammar in errors.items():
        assert isinstance(grammar, plugin.InvalidGrammarObject), needle
        assert needle in grammar.error_message, (needle, grammar.error_message)
    with pytest.raises(ValueError, match="Invalid key_type"):
        backend.dispatch_fallback("xml", "<a/>")


def test_strict_thinking_token_filter_and_mask_reset(backend):
    # The reasoning wrapper allocates through the backend when no grammar is set.
    mask = backend.allocate_vocab_mask(VOCAB, 2, "cpu")
    backend.set_token_filter(mask, [5, 31, 31, 40], 0, is_allowed=True, reset_vocab_mask=True)
    allowed_ids = [t for t in range(VOCAB) if allowed(mask[0], t)]
    assert allowed_ids == [5, 31, 40]
    backend.set_token_filter(mask, [0, 31, 100], 1, is_allowed=False, reset_vocab_mask=True)
    assert [t for t in range(VOCAB) if not allowed(mask[1], t)] == [0, 31, 100]
    # Narrowing a filled row without resetting it.
    backend.set_token_filter(mask, [40], 0, is_allowed=False, reset_vocab_mask=False)
    assert [t for t in range(VOCAB) if allowed(mask[0], t)] == [5, 31]
    plugin.TokensieveGrammar.reset_vocab_mask(mask)
    assert (mask == -1).all()
    assert backend.is_support_token_filter


def test_reset_clears_the_compile_cache(backend):
    backend.dispatch_regex("abc")
    assert backend.compiler.cache_info()["entries"] > 0
    backend.reset()
    assert backend.compiler.cache_info()["entries"] == 0


def test_masks_cover_a_tokenizer_wider_than_the_logits():
    """Phi-3.5's tokenizer has 32,011 ids; SGLang may size masks by a model
    vocab below that (the backend widens it to the tokenizer)."""
    path = peers.tokenizer_json("phi3.5-mini")
    if path is None:
        return
    info = tokensieve.TokenizerInfo.from_tokenizer_json(str(path))
    grammar = plugin.TokensieveGrammarBackend(tokenizer_info=info).dispatch_regex("[0-9]+")
    mask = grammar.allocate_vocab_mask(vocab_size=32000, batch_size=1, device="cpu")
    assert mask.shape == (1, (info.vocab_size + 31) // 32)
    grammar.fill_vocab_mask(mask, 0)
    logits = np.zeros((1, 32000), dtype=np.float32)
    grammar.apply_vocab_mask(logits=logits, vocab_mask=mask)
    assert np.isfinite(logits[0]).sum() > 0
