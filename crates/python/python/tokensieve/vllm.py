"""vLLM structured-output backend served by tokensieve: the backend and grammar classes, and the general plug-in that installs them.

vLLM picks its structured-output backend from a fixed list, so the plug-in
(entry point group ``vllm.general_plugins``: ``tokensieve._plugins:vllm_plugin``,
which calls :func:`install`) adds
the name ``tokensieve`` in three places, each a pass-through for every other
backend name:

1. ``StructuredOutputsConfig.backend`` accepts ``"tokensieve"`` (the pydantic
   dataclass is rebuilt with the wider ``Literal``);
2. ``SamplingParams._validate_structured_outputs`` checks requests for that
   backend with tokensieve (vLLM would otherwise treat an unknown name as
   ``auto``);
3. ``StructuredOutputManager.grammar_init`` builds :class:`TokensieveBackend`
   when the engine's first structured request resolved to ``tokensieve``.

Turn it on with ``--structured-outputs-config.backend tokensieve``; see
``docs/python-serving.md``. Installed only on the vLLM releases in
:data:`TESTED_VLLM_VERSIONS`.

The backend classes need only vLLM's ``backend_types`` module, which imports
without torch; the plug-in's hooks need the full vLLM.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional, get_args

import tokensieve
from tokensieve._structural_tag import from_structures_json
from tokensieve._plugins import TESTED_VLLM_VERSIONS, check_vllm_version  # noqa: F401 (re-exported)
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

#: The value of ``structured_outputs_config.backend`` that selects tokensieve.
BACKEND_NAME = "tokensieve"

#: Environment variable choosing the tokensieve backend (``"auto"``,
#: ``tokensieve.DEFAULT_BACKEND``, by default; ``"earley"`` for no background
#: table builds, ``"regex-fsm"`` for regular constraints only).
BACKEND_ENV = "TOKENSIEVE_VLLM_BACKEND"

#: Rollback every matcher keeps at least; vLLM rolls back at most the number
#: of speculative tokens, and a larger value costs only history memory.
MIN_ROLLBACK = 32

#: Distinct per-request stop-token sets kept compiled at once (each needs its
#: own TokenizerInfo and compile cache).
MAX_STOP_SETS = 8


@dataclass
class TokensieveGrammar(StructuredOutputGrammar):
    """One request's grammar: vLLM's ``StructuredOutputGrammar`` over a
    :class:`tokensieve.Matcher`."""

    matcher: tokensieve.Matcher = field(hash=False)
    vocab_size: int
    num_processed_tokens: int = field(default=0, repr=False, hash=False, init=False)
    _is_terminated: bool = field(default=False, repr=False, hash=False, init=False)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advances over ``tokens``; tokens after a stop token are ignored.
        ``False`` when the grammar refuses one (the tokens before it stay
        accepted, as with vLLM's XGrammar backend)."""
        if self._is_terminated:
            return True
        # One native call for the common case; the loop below finds where a
        # refused token is, and handles tokens after a stop token.
        if self.matcher.accept_tokens(tokens):
            self.num_processed_tokens += len(tokens)
            self._is_terminated = self.matcher.is_terminated()
            return True
        for token in tokens:
            if not self.matcher.accept_token(token):
                logger.error(
                    "tokensieve: request %s: token %s is not allowed by the grammar",
                    request_id,
                    token,
                )
                return False
            self.num_processed_tokens += 1
            if self.matcher.is_terminated():
                self._is_terminated = True
                break
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts (up to and
        including a stop token); the state is unchanged."""
        if self._is_terminated:
            return []
        return tokens[: self.matcher.validate_tokens(tokens)]

    def rollback(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens
        self._is_terminated = self.matcher.is_terminated()

    def fill_bitmask(self, bitmask: "torch.Tensor", batch_index: int) -> None:
        # Releases the GIL: vLLM's thread pool fills large batches in parallel.
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self._is_terminated

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0
        self._is_terminated = False


@dataclass
class TokensieveBackend(StructuredOutputBackend):
    """vLLM's engine-level ``StructuredOutputBackend``: compiles each
    request's constraint with a shared :class:`tokensieve.Compiler`.

    ``tokenizer`` must be a Hugging Face fast tokenizer (or anything
    :meth:`tokensieve.TokenizerInfo.from_huggingface` reads, such as a
    ``tokenizers.Tokenizer``).
    The request's stop tokens (``stop_token_ids``) are the ones allowed where
    the grammar may end; each distinct set gets its own compiler."""

    def __post_init__(self) -> None:
        so_config = getattr(self.vllm_config, "structured_outputs_config", None)
        self.any_whitespace = not getattr(so_config, "disable_any_whitespace", False)
        spec_config = getattr(self.vllm_config, "speculative_config", None)
        num_spec = getattr(spec_config, "num_speculative_tokens", 0) or 0
        self.max_rollback = max(MIN_ROLLBACK, num_spec)
        self.backend_name = os.environ.get(BACKEND_ENV, tokensieve.DEFAULT_BACKEND)
        if hasattr(self.tokenizer, "__len__"):
            # Like vLLM's guidance backend: rows wide enough for every token
            # id even when the model's logits are narrower than the tokenizer.
            self.vocab_size = max(self.vocab_size, len(self.tokenizer))
        self._lock = threading.Lock()
        self._compilers: dict[Optional[frozenset[int]], tokensieve.Compiler] = {}
        # Built eagerly: a tokenizer tokensieve cannot read fails at startup.
        self._compiler_for(None)

    def _tokenizer_info(self, stop_token_ids: Optional[list[int]]) -> tokensieve.TokenizerInfo:
        try:
            return tokensieve.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=stop_token_ids
            )
        except (tokensieve.GrammarError, TypeError, AttributeError) as err:
            raise ValueError(
                f"tokensieve cannot read vLLM's tokenizer ({type(self.tokenizer).__name__}):"
                f" {err}; it needs a Hugging Face fast tokenizer (tokenizer_mode='hf')"
            ) from err

    def _compiler_for(self, stop_token_ids: Optional[set[int]]) -> tokensieve.Compiler:
        key = frozenset(stop_token_ids) if stop_token_ids else None
        with self._lock:
            compiler = self._compilers.get(key)
        if compiler is not None:
            return compiler
        # Reading the vocabulary takes a while: other stop sets keep compiling
        # meanwhile (two threads may both build one; the first one is kept).
        info = self._tokenizer_info(None if key is None else sorted(key))
        built = tokensieve.Compiler(info, self.backend_name, max_rollback=self.max_rollback)
        with self._lock:
            compiler = self._compilers.get(key)
            if compiler is None:
                if len(self._compilers) >= MAX_STOP_SETS:
                    # Keep the default set; drop the oldest request-specific one.
                    oldest = next(k for k in self._compilers if k is not None)
                    del self._compilers[oldest]
                compiler = self._compilers[key] = built
            return compiler

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> StructuredOutputGrammar:
        compiler = self._compiler_for(stop_token_ids)
        compiled = compile_request(compiler, request_type, grammar_spec, self.any_whitespace)
        return TokensieveGrammar(
            matcher=compiled.matcher(max_rollback=self.max_rollback),
            vocab_size=self.vocab_size,
        )

    def allocate_token_bitmask(self, max_num_seqs: int) -> "torch.Tensor":
        # A torch int32 tensor inside vLLM (it calls fill_/copy_/numpy() on it).
        return tokensieve.allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        with self._lock:
            for compiler in self._compilers.values():
                compiler.clear_cache()
            self._compilers.clear()


def compile_request(
    compiler: tokensieve.Compiler,
    request_type: StructuredOutputOptions,
    grammar_spec: str,
    any_whitespace: bool = True,
) -> tokensieve.CompiledGrammar:
    """Compiles one vLLM structured-output request (its
    ``StructuredOutputKey``). Raises :class:`tokensieve.GrammarError` or
    ``ValueError`` with the reason when it does not compile."""
    separators = None if any_whitespace else (",", ":")
    if request_type == StructuredOutputOptions.JSON:
        return compiler.compile_json_schema(
            grammar_spec, any_whitespace=any_whitespace, separators=separators
        )
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return compiler.compile_json_schema(
            {"type": "object"}, any_whitespace=any_whitespace, separators=separators, strict=False
        )
    if request_type == StructuredOutputOptions.REGEX:
        return compiler.compile_regex(grammar_spec)
    if request_type == StructuredOutputOptions.GRAMMAR:
        if "::=" not in grammar_spec:
            raise ValueError(
                "tokensieve reads GBNF grammars (rules written `name ::= ...`, start rule"
                " `root`); this grammar has no `::=` (Lark grammars are not supported)"
            )
        return compiler.compile_grammar(grammar_spec)
    if request_type == StructuredOutputOptions.CHOICE:
        choices = json.loads(grammar_spec)
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise ValueError("choice must be a JSON list of strings")
        return compiler.compile_choice(choices)
    if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
        tags, triggers = from_structures_json(grammar_spec)
        return compiler.compile_structural_tag(tags, triggers)
    raise ValueError(f"tokensieve does not compile {request_type!s} requests")


# --- request validation (the front-end process) ---------------------------


#: A byte-level vocabulary: compiling against it checks that a constraint is
#: well formed without the model's tokenizer, as vLLM's own validators do.
@functools.lru_cache(maxsize=1)
def _validation_compiler() -> tokensieve.Compiler:
    info = tokensieve.TokenizerInfo.from_token_bytes(
        [bytes([b]) for b in range(256)], stop_token_ids=[]
    )
    backend = os.environ.get(BACKEND_ENV, tokensieve.DEFAULT_BACKEND)
    # A validation compile is thrown away: auto without tables accepts what
    # auto accepts (earley's language) and starts no background build.
    options = {"tables": False} if backend == "auto" else None
    return tokensieve.Compiler(info, backend, options=options)


def validate_request(structured_outputs: Any, any_whitespace: bool = True) -> None:
    """Raises ``ValueError`` with tokensieve's message when the request's
    constraint (vLLM's ``StructuredOutputsParams``) does not compile."""
    from vllm.v1.structured_output.request import get_structured_output_key

    validate_key(*get_structured_output_key(structured_outputs), any_whitespace)


def validate_key(
    request_type: StructuredOutputOptions, grammar_spec: str, any_whitespace: bool = True
) -> None:
    """Raises ``ValueError`` with tokensieve's message when this
    ``StructuredOutputKey`` does not compile (against a byte vocabulary)."""
    try:
        compile_request(_validation_compiler(), request_type, grammar_spec, any_whitespace)
    except (tokensieve.GrammarError, ValueError, TypeError, KeyError) as err:
        raise ValueError(
            f"tokensieve cannot compile this {request_type.name.lower()}: {err}"
        ) from err


# --- the plug-in ------------------------------------------------------------


_installed = False


def install() -> None:
    """Installs the three hooks (idempotent). ``RuntimeError`` on an untested
    vLLM. Offline use (``vllm.LLM``) with a ``structured_outputs_config``
    dict: call this before constructing the ``LLM``, which validates the dict
    before it loads plug-ins."""
    global _installed
    check_vllm_version()
    if _installed:
        return
    _accept_backend_name()
    _hook_request_validation()
    _hook_grammar_init()
    _installed = True


def _accept_backend_name() -> None:
    from vllm.config import structured_outputs as so_module

    widen_literal_field(
        so_module.StructuredOutputsConfig,
        "backend",
        so_module,
        "StructuredOutputsBackend",
        BACKEND_NAME,
    )


def widen_literal_field(
    cls: type, field_name: str, alias_module: Any, alias_name: str, value: str
) -> None:
    """Adds ``value`` to the ``Literal`` type of ``cls.field_name`` (a pydantic
    dataclass whose annotation is the alias ``alias_module.alias_name``) and
    rebuilds the class's validator, so that constructing the class, and
    parsing it with a ``TypeAdapter`` (vLLM's command line does), accept it."""
    import pydantic.dataclasses

    names = get_args(getattr(alias_module, alias_name))
    if value in names:
        return
    widened = Literal[(*names, value)]  # type: ignore[valid-type]
    setattr(alias_module, alias_name, widened)
    cls.__annotations__[field_name] = widened
    cls.__dataclass_fields__[field_name].type = widened
    pydantic.dataclasses.rebuild_dataclass(cls, force=True)


def _hook_request_validation() -> None:
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams, check_json_nesting

    original = SamplingParams._validate_structured_outputs

    @functools.wraps(original)
    def _validate_structured_outputs(self, model_config, structured_outputs_config, tokenizer):
        if (
            structured_outputs_config is None
            or self.structured_outputs is None
            or structured_outputs_config.backend != BACKEND_NAME
        ):
            return original(self, model_config, structured_outputs_config, tokenizer)
        params = self.structured_outputs
        if getattr(model_config, "is_diffusion", False):
            raise VLLMValidationError(
                "Structured outputs are not supported for diffusion language models."
            )
        if tokenizer is None:
            raise VLLMValidationError(
                "Structured outputs requires a tokenizer so it can't be used with"
                " 'skip_tokenizer_init'"
            )
        if params._backend and params._backend != BACKEND_NAME:
            raise VLLMValidationError(
                "Request-level structured output backend selection is not supported."
                f" The request specified '{params._backend}', but vLLM was initialised"
                f" with '{BACKEND_NAME}'."
            )
        if params.json_object is False:
            raise VLLMValidationError(
                "structured_outputs.json_object must be True if set; omit"
                " structured_outputs to disable structured outputs"
            )
        for name in ("grammar", "json", "structural_tag"):
            value = getattr(params, name)
            if isinstance(value, str) and not value.strip():
                raise VLLMValidationError(f"structured_outputs.{name} cannot be an empty string")
        if isinstance(params.choice, list) and not params.choice:
            raise VLLMValidationError("structured_outputs.choice cannot be an empty list")
        check_json_nesting(params.json)
        check_json_nesting(params.structural_tag, structural_tag=True)
        try:
            validate_request(params, not structured_outputs_config.disable_any_whitespace)
        except ValueError as err:
            raise VLLMValidationError(str(err)) from err
        params._backend = BACKEND_NAME
        params.__post_init__()

    SamplingParams._validate_structured_outputs = _validate_structured_outputs


def _hook_grammar_init() -> None:
    from vllm.v1.structured_output import StructuredOutputManager

    original = StructuredOutputManager.grammar_init

    @functools.wraps(original)
    def grammar_init(self, request):
        structured = request.structured_output_request
        if (
            structured is not None
            and self.backend is None
            and request.sampling_params.structured_outputs._backend == BACKEND_NAME
        ):
            self.backend = TokensieveBackend(
                self.vllm_config,
                tokenizer=self.tokenizer,
                vocab_size=self.vllm_config.model_config.get_vocab_size(),
            )
            self.backend_name = BACKEND_NAME
        return original(self, request)

    StructuredOutputManager.grammar_init = grammar_init
