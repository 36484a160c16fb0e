"""SGLang grammar backend served by tokensieve: the per-request grammar object, the backend, and the install function its plug-in entry point calls.

Turn it on with ``--grammar-backend tokensieve`` once the ``tokensieve`` wheel is
installed next to SGLang: SGLang's plug-in loader (entry point group
``sglang.srt.plugins``) calls ``tokensieve._plugins:sglang_plugin``, whose
:func:`install` adds the name to SGLang's
``--grammar-backend`` choices and registers :func:`create_grammar_backend`
through SGLang's own ``register_grammar_backend``. See ``docs/python-serving.md``.

Written against SGLang 0.5.23's ``sglang/srt/constrained/base_grammar_backend.py``
(:data:`TESTED_SGLANG_VERSIONS`). The classes also import without SGLang (their
bases are then ``object``), so the call sequences SGLang makes can be replayed on
numpy buffers in tests; inside SGLang they subclass SGLang's own base classes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from typing import Any, List, Optional, Sequence, Tuple

import tokensieve
from tokensieve._structural_tag import from_structures_json
from tokensieve._plugins import TESTED_SGLANG_VERSIONS, check_sglang_version  # noqa: F401 (re-exported)

logger = logging.getLogger(__name__)

#: The name SGLang knows this backend by (``--grammar-backend tokensieve``).
BACKEND_NAME = "tokensieve"

#: SGLang's own XGrammar backend keeps 200 steps of rollback
#: (``MAX_ROLLBACK_TOKENS``); EAGLE's tree walk rolls back one step per node
#: and jump-forward retokenization rolls back the re-split tail.
MAX_ROLLBACK_TOKENS = 200

#: Environment variable choosing the tokensieve backend (``"auto"``,
#: ``tokensieve.DEFAULT_BACKEND``, by default; ``"earley"`` for no background
#: table builds, ``"regex-fsm"`` for regular constraints only).
BACKEND_ENV = "TOKENSIEVE_SGLANG_BACKEND"

if importlib.util.find_spec("sglang") is not None:
    # Inside SGLang: its grammar manager tests isinstance against these.
    from sglang.srt.constrained.base_grammar_backend import (
        BaseGrammarBackend as _BackendBase,
        BaseGrammarObject as _GrammarBase,
        GrammarStats as _GrammarStats,
        InvalidGrammarObject,
    )
else:
    _BackendBase = object
    _GrammarBase = object
    _GrammarStats = None

    class InvalidGrammarObject:  # type: ignore[no-redef]
        """A constraint that did not compile, as SGLang represents it:
        the request is aborted with ``error_message``."""

        def __init__(self, error_message: str = "Unknown grammar error"):
            self.error_message = error_message
            self.grammar_stats = None

        def __repr__(self) -> str:
            return f"InvalidGrammarObject(error_message={self.error_message!r})"


def _new_stats(dispatch_type: str) -> Any:
    return None if _GrammarStats is None else _GrammarStats(dispatch_type=dispatch_type)


class TokensieveGrammar(_GrammarBase):
    """One request's grammar state: SGLang's ``BaseGrammarObject`` over a
    :class:`tokensieve.Matcher`.

    A refused token raises ``ValueError`` from :meth:`accept_token` (SGLang
    aborts the request on it, as with its XGrammar backend); tokens that arrive
    after the grammar terminated are ignored."""

    def __init__(
        self,
        matcher: tokensieve.Matcher,
        key_string: Optional[str] = None,
        grammar_stats: Any = None,
    ) -> None:
        if _GrammarBase is not object:
            super().__init__()
        self._finished = False
        self.current_token: Optional[int] = None
        self.grammar_stats = grammar_stats
        self.matcher = matcher
        self.key_string = key_string

    # --- the decoding loop -------------------------------------------------

    def maybe_init_reasoning(self, reasoning: bool) -> None:
        """Reasoning is SGLang's ``ReasonerGrammarObject``'s business: it
        wraps this object when the server has a reasoning parser."""

    def accept_token(self, token: int) -> None:
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if not self.matcher.accept_token(token):
            raise ValueError(
                f"token {token} is not allowed by the grammar here"
                f" (key string: {self.key_string!r})"
            )

    def rollback(self, k: int) -> None:
        if k > 0:
            self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    @property
    def finished(self) -> bool:
        return self._finished

    @finished.setter
    def finished(self, finished: bool) -> None:
        self._finished = finished

    # --- masks -------------------------------------------------------------

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        # SGLang passes the logits' width; rows must also cover every token id
        # of the tokenizer when it has more ids than the model has logits.
        return _allocate_vocab_mask(max(vocab_size, self.matcher.vocab_size), batch_size, device)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: Sequence[Any], vocab_mask: Any) -> None:
        """Fills the listed rows (SGLang's ``GrammarRow(row, grammar)``) in one
        call when every grammar is ours: the rows are filled in parallel with
        the GIL released. Other grammar objects (SGLang's reasoning wrapper)
        are filled one by one, as SGLang's base class does."""
        if not entries:
            return
        if all(type(entry.grammar) is TokensieveGrammar for entry in entries):
            tokensieve.fill_next_token_bitmask_batch(
                [entry.grammar.matcher for entry in entries],
                vocab_mask,
                rows=[entry.row for entry in entries],
            )
            return
        for entry in entries:
            entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        _reset_vocab_mask(vocab_mask)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return _move_vocab_mask(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        _apply_vocab_mask(logits, vocab_mask)

    # --- cache copies and jump-forward --------------------------------------

    def copy(self) -> "TokensieveGrammar":
        """An independent grammar in the same state (SGLang copies the cached,
        untouched template for each request that hits the cache)."""
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return TokensieveGrammar(self.matcher.fork(), self.key_string, stats)

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        text = self.matcher.jump_forward_string()
        if text:
            return [], text
        return None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        _, text = helper
        return text, -1

    def jump_and_retokenize(
        self, old_output_ids: List[int], new_output_ids: List[int], next_state: int
    ) -> None:
        """The output was re-tokenized after a jump-forward: roll back to the
        longest common prefix of the old and new ids, then accept the rest of
        the new ones."""
        common = 0
        for old_id, new_id in zip(old_output_ids, new_output_ids, strict=False):
            if old_id != new_id:
                break
            common += 1
        if common < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - common)
        for position in range(common, len(new_output_ids)):
            token = new_output_ids[position]
            if not self.matcher.accept_token(token):
                raise ValueError(
                    f"token {token} at position {position} of the re-tokenized output"
                    f" is not allowed by the grammar (key string: {self.key_string!r})"
                )

    def __repr__(self) -> str:
        return (
            f"TokensieveGrammar(key_string={self.key_string!r}, current_token={self.current_token})"
        )


def _allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> Any:
    mask = tokensieve.allocate_token_bitmask(batch_size, vocab_size)
    # A pinned host buffer lets the later copy to the GPU be truly
    # non-blocking (SGLang's XGrammar backend pins its masks for that reason).
    if hasattr(mask, "pin_memory"):
        import torch

        if torch.cuda.is_available():
            mask = mask.pin_memory()
    return mask


def _reset_vocab_mask(vocab_mask: Any) -> None:
    # -1 sets all 32 bits of every word: every token allowed. Works for
    # torch tensors and numpy arrays alike.
    vocab_mask[...] = -1


def _move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
    if hasattr(vocab_mask, "to"):
        return vocab_mask.to(device, non_blocking=True)
    return vocab_mask


def _apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
    if getattr(logits, "is_cuda", False) and not _wheel_has_cuda():
        # A wheel built without tokensieve's CUDA device: SGLang's own Triton
        # kernel reads the same bitmask layout.
        from sglang.kernels.ops.grammar.bitmask_ops import (
            apply_token_bitmask_inplace_triton,
        )

        apply_token_bitmask_inplace_triton(logits, vocab_mask)
        return
    tokensieve.apply_token_bitmask_inplace(logits, vocab_mask)


def _wheel_has_cuda() -> bool:
    from tokensieve import _tokensieve

    return bool(getattr(_tokensieve, "CUDA_FEATURE", False))


def _set_token_filter(
    vocab_mask: Any,
    token_ids: Sequence[int],
    batch_idx: int,
    is_allowed: bool = True,
    reset_vocab_mask: bool = True,
) -> None:
    """SGLang's strict-thinking filter on one mask row: with ``is_allowed``
    these tokens are added to the row (to a cleared row when
    ``reset_vocab_mask``), otherwise they are removed from it (from a full
    row when ``reset_vocab_mask``)."""
    row = vocab_mask[batch_idx]
    if reset_vocab_mask:
        row[...] = 0 if is_allowed else -1
    words: dict[int, int] = {}
    for token_id in token_ids:
        words[token_id // 32] = words.get(token_id // 32, 0) | (1 << (token_id % 32))
    for word, bits in words.items():
        current = int(row[word]) & 0xFFFFFFFF
        value = current | bits if is_allowed else current & ~bits & 0xFFFFFFFF
        # Back to a signed 32-bit value for the int32 buffer.
        row[word] = value - (1 << 32) if value >= 1 << 31 else value


class TokensieveGrammarBackend(_BackendBase):
    """SGLang's ``BaseGrammarBackend`` compiling with a :class:`tokensieve.Compiler`.

    ``json`` keys compile as JSON Schema (``"$$ANY$$"``: any JSON value),
    ``regex`` as regular expressions, ``ebnf`` as GBNF grammars (root rule
    ``root``), ``structural_tag`` in its ``structures``/``triggers`` form.
    A constraint that does not compile becomes SGLang's
    ``InvalidGrammarObject`` carrying tokensieve's message, and the request is
    aborted with it."""

    def __init__(
        self,
        tokenizer: Any = None,
        vocab_size: Optional[int] = None,
        eos_token_ids: Optional[Sequence[int]] = None,
        *,
        any_whitespace: bool = True,
        backend: str = tokensieve.DEFAULT_BACKEND,
        max_rollback: int = MAX_ROLLBACK_TOKENS,
        tokenizer_info: Optional[tokensieve.TokenizerInfo] = None,
    ) -> None:
        if _BackendBase is not object:
            super().__init__()
        if tokenizer_info is None:
            tokenizer_info = _tokenizer_info(tokenizer, vocab_size, eos_token_ids)
        self.tokenizer_info = tokenizer_info
        self.vocab_size = tokenizer_info.vocab_size
        self.any_whitespace = any_whitespace
        self.compiler = tokensieve.Compiler(tokenizer_info, backend, max_rollback=max_rollback)

    # --- dispatch (SGLang calls these from its compile thread pool) --------

    def dispatch_json(self, key_string: str) -> Any:
        if key_string == "$$ANY$$":
            # SGLang's marker for "any JSON", arrays and scalars included.
            return self._compile(
                "json", key_string, lambda: self.compiler.compile_json_schema(True)
            )
        return self._compile(
            "json",
            key_string,
            lambda: self.compiler.compile_json_schema(
                key_string, any_whitespace=self.any_whitespace
            ),
        )

    def dispatch_regex(self, key_string: str) -> Any:
        return self._compile("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._compile("ebnf", key_string, lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> Any:
        try:
            tags, triggers = from_structures_json(key_string)
        except ValueError as err:
            logger.error("tokensieve: invalid structural_tag %r: %s", key_string, err)
            return InvalidGrammarObject(str(err))
        return self._compile(
            "structural_tag",
            key_string,
            lambda: self.compiler.compile_structural_tag(tags, triggers),
        )

    def dispatch_fallback(self, key_type: str, key_string: str) -> Any:
        raise ValueError(f"Invalid key_type: {key_type}={key_string}")

    def _compile(self, dispatch_type: str, key_string: str, compile_fn: Any) -> Any:
        try:
            compiled = compile_fn()
        except (tokensieve.GrammarError, ValueError, TypeError) as err:
            logger.error("tokensieve: invalid %s %r: %s", dispatch_type, key_string, err)
            return InvalidGrammarObject(str(err))
        return TokensieveGrammar(compiled.matcher(), key_string, _new_stats(dispatch_type))

    # --- masks, as SGLang's reasoning wrapper asks the backend for them ----

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> Any:
        return _allocate_vocab_mask(vocab_size, batch_size, device)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return _move_vocab_mask(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        _apply_vocab_mask(logits, vocab_mask)

    @property
    def is_support_token_filter(self) -> bool:
        return True

    @staticmethod
    def set_token_filter(
        vocab_mask: Any,
        token_ids: Sequence[int],
        batch_idx: int,
        is_allowed: bool = True,
        reset_vocab_mask: bool = True,
    ) -> None:
        _set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed, reset_vocab_mask)

    def reset(self) -> None:
        if _BackendBase is not object:
            super().reset()
        self.compiler.clear_cache()


def _tokenizer_info(
    tokenizer: Any, vocab_size: Optional[int], eos_token_ids: Optional[Sequence[int]]
) -> tokensieve.TokenizerInfo:
    if tokenizer is None:
        raise ValueError("tokensieve's SGLang backend needs the server's tokenizer")
    stop_ids = sorted(eos_token_ids) if eos_token_ids else None
    size = vocab_size
    if size is not None and hasattr(tokenizer, "__len__"):
        # Logits narrower than the tokenizer (added tokens past the model's
        # vocab) still need a row wide enough for every token id.
        size = max(size, len(tokenizer))
    try:
        return tokensieve.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=size, stop_token_ids=stop_ids
        )
    except (tokensieve.GrammarError, TypeError, AttributeError) as err:
        raise ValueError(
            f"tokensieve cannot read SGLang's tokenizer ({type(tokenizer).__name__}): {err};"
            " it needs a Hugging Face fast tokenizer (tokenizer.json)"
        ) from err


def create_grammar_backend(
    server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Sequence[int]] = None
) -> Any:
    """The factory SGLang calls for ``--grammar-backend tokensieve`` (the
    signature of ``register_grammar_backend``'s ``init_func``).

    SGLang wraps only its built-in backends in its reasoning wrapper; this
    factory applies the same ``ReasonerGrammarBackend`` under the same
    conditions (a ``--reasoning-parser`` whose think-end token the tokenizer
    encodes), so reasoning models stay unconstrained while they think."""
    from sglang.srt.runtime_context import get_serving

    serving = get_serving()
    backend: Any = TokensieveGrammarBackend(
        tokenizer,
        vocab_size,
        eos_token_ids,
        any_whitespace=not serving.constrained_json_disable_any_whitespace,
        backend=os.environ.get(BACKEND_ENV, tokensieve.DEFAULT_BACKEND),
    )
    if serving.reasoning_parser:
        from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        parser = ReasoningParser(
            model_type=serving.reasoning_parser, stream_reasoning=False, tokenizer=tokenizer
        )
        if parser.detector.get_think_end_token_ids(tokenizer):
            backend = ReasonerGrammarBackend(
                backend,
                parser,
                tokenizer,
                enable_strict_thinking=serving.enable_strict_thinking,
            )
        else:
            logger.warning(
                "tokensieve: the reasoning parser's think-end token %r does not encode;"
                " grammars apply from the first token",
                parser.detector.think_end_token,
            )
    return backend


def install() -> None:
    """Registers the backend with SGLang now (idempotent): adds ``tokensieve``
    to ``--grammar-backend``'s choices and registers
    :func:`create_grammar_backend`. ``RuntimeError`` on an SGLang release this
    module was not tested with. The plug-in entry point
    (``tokensieve._plugins:sglang_plugin``) calls it."""
    check_sglang_version()
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    register_grammar_backend(BACKEND_NAME, create_grammar_backend)
