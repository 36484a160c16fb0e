# Typed public API of the `tokensieve` Python package: the contract plug-ins and users code against.
"""tokensieve: token bitmasks for constrained decoding (JSON Schema, regex,
choice lists, GBNF grammars, structural tags), from Rust, without the GIL.

The loop::

    info = TokenizerInfo.from_tokenizer_json("tokenizer.json", vocab_size=128256)
    compiler = Compiler(info)                      # backend "auto" by default
    grammar = compiler.compile_json_schema({"type": "object"})
    matcher = grammar.matcher()
    bitmask = allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)       # row 0
    apply_token_bitmask_inplace(logits, bitmask)   # forbidden logits -> -inf
    token = int(logits.argmax())
    assert matcher.accept_token(token)

Bitmask layout (XGrammar / vLLM): ``int32[rows, ceil(vocab_size / 32)]``, bit
``j % 32`` of word ``j // 32`` set = token ``j`` allowed. ``uint32`` buffers
of the same shape are accepted too.

Buffers: numpy arrays (and anything with the Python buffer protocol) and torch
CPU tensors are used in place, never copied. Every call checks dtype, shape,
C-contiguity and writability first and raises ``ValueError`` saying which is
wrong (``TypeError`` for an object that is no array at all); nothing is
written when a check fails.

Threads: every object here may be shared between Python threads. Compiles,
mask fills, draft fills and batch fills run with the GIL released. One
matcher is meant to be driven by one request at a time; concurrent calls on
the same matcher are serialised (never a crash), not made meaningful.

Stop tokens: a mask allows a stop token exactly when the grammar may end
there (``is_accepting()``); accepting one terminates the matcher. Special
tokens are never allowed unless they are stop tokens; padded ids
(``>= tokenizer size``, ``< vocab_size``) never are.
"""

from collections.abc import Sequence
from os import PathLike
from typing import Any, Literal, Mapping, Optional, Union

__version__: str

DEFAULT_BACKEND: str
"""``"auto"``: the backend a :class:`Compiler` (and the SGLang and vLLM
plug-ins, and ``python -m tokensieve.bench``) use when none is named."""

class GrammarError(ValueError):
    """A constraint could not be compiled, a backend could not be created, or
    a tokenizer could not be read. Never raised for a token that is merely
    refused (those return ``False``).

    ``str(err)`` is the full message (location included)."""

    message: str
    """The full message, e.g. ``invalid JSON schema at /properties/a: ...``."""
    kind: str
    """What went wrong: ``"unsupported"``, ``"unsupported_spec"``,
    ``"invalid_schema"``, ``"invalid_regex"``, ``"invalid_grammar"``,
    ``"invalid_spec"``, ``"limit_exceeded"``, ``"vocabulary"``,
    ``"unknown_backend"``, ``"invalid_config"``, ``"cancelled"``,
    ``"timeout"``, ``"panic"``."""
    pointer: Optional[str]
    """JSON pointer into the schema (``""`` = the schema root), or None."""
    line: Optional[int]
    """1-based line in a grammar (or tokenizer file), or None."""
    column: Optional[int]
    """1-based column in a grammar, or None."""
    offset: Optional[int]
    """Byte offset into a regular expression, or None."""
    def __init__(
        self,
        message: str,
        *,
        kind: str = ...,
        pointer: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        offset: Optional[int] = None,
    ) -> None: ...

class TokenizerInfo:
    """A vocabulary: token id -> the exact bytes it appends to the output,
    which ids are special, which are stop tokens, and the model's vocab size
    (the width of logits and bitmask rows, which may exceed the tokenizer's:
    those padded ids are never allowed)."""

    @staticmethod
    def from_tokenizer_json(
        path_or_json_text: Union[str, bytes, PathLike[str]],
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> TokenizerInfo:
        """From a Hugging Face ``tokenizer.json``: a path, or the JSON text
        itself (a ``str``/``bytes`` whose first non-space character is
        ``{``). Byte-level BPE, byte-fallback (``<0xNN>``) and metaspace
        vocabularies are resolved to bytes. ``stop_token_ids=None``: the added
        tokens with a known stop name (``</s>``, ``<|eot_id|>``,
        ``<|im_end|>``, ``<|endoftext|>`` ...) plus, for a path, the ``eos``
        of a ``tokenizer_config.json`` / ``generation_config.json`` next to
        it. ``vocab_size=None``: the tokenizer's size. Raises
        :class:`GrammarError` (kind ``"vocabulary"``) for an unreadable or
        unsupported file, a ``vocab_size`` below the tokenizer's, or a stop
        id outside it."""
    @staticmethod
    def from_huggingface(
        hf_tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> TokenizerInfo:
        """From a ``transformers`` fast tokenizer (its ``backend_tokenizer``)
        or a ``tokenizers.Tokenizer``, through its ``tokenizer.json`` text
        (``to_str()``). ``stop_token_ids=None``: the known stop names, plus
        the tokenizer's ``eos_token_id`` when it has one."""
    @staticmethod
    def from_gguf(
        path: Union[str, PathLike[str]],
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> TokenizerInfo:
        """From the tokenizer metadata of a GGUF model file.
        ``stop_token_ids=None``: the file's eos/eot ids and known stop names."""
    @staticmethod
    def from_token_bytes(
        tokens: Sequence[bytes],
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
        special_token_ids: Optional[Sequence[int]] = None,
    ) -> TokenizerInfo:
        """From the bytes of every token, in id order (``tokens[i]`` is what
        id ``i`` appends). ``special_token_ids``: ids never matched by a
        grammar. ``stop_token_ids=None``: the tokens whose bytes are a known
        stop name (``</s>``, ``<|endoftext|>``, ...); pass ``[]`` for none.
        Stop tokens are taken out of grammar matching and allowed exactly
        where the grammar may end."""
    @property
    def vocab_size(self) -> int:
        """Width of logits and bitmask rows (>= ``tokenizer_size``)."""
    @property
    def tokenizer_size(self) -> int:
        """Ids the tokenizer defines; ids from here to ``vocab_size`` are padding."""
    @property
    def stop_token_ids(self) -> list[int]:
        """Stop token ids, ascending."""
    @property
    def special_token_ids(self) -> list[int]:
        """Special token ids (never matched by a grammar), ascending."""
    @property
    def vocab_type(self) -> str:
        """``"byte_level"``, ``"byte_fallback"``, ``"metaspace"`` or ``"raw"``."""
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of a token (a special token's text; ``b""`` for padding).
        ``IndexError`` for an id >= ``vocab_size``."""
    def decode(self, token_ids: Sequence[int]) -> bytes:
        """Concatenated bytes of these tokens."""
    def encode(self, text: str) -> list[int]:
        """The tokenizer's own encoding of ``text`` as a continuation (no
        special tokens added, no prepended space). Only for a
        TokenizerInfo built from a ``tokenizer.json`` (path, text or
        Hugging Face object); otherwise ``ValueError``."""

class CompiledGrammar:
    """A compiled constraint: immutable, shared by every matcher made from it
    (and by threads)."""

    @property
    def tokenizer_info(self) -> TokenizerInfo: ...
    @property
    def backend(self) -> str:
        """The backend that compiled it."""
    @property
    def kind(self) -> str:
        """``"json_schema"``, ``"json_object"``, ``"regex"``, ``"choice"``,
        ``"ebnf"`` or ``"structural_tag"``."""
    @property
    def compile_time_s(self) -> float:
        """Wall time of the compilation that produced it (a cache hit keeps
        the original figure)."""
    @property
    def memory_bytes(self) -> int:
        """Approximate heap bytes held (0 when the backend does not say)."""
    def matcher(self, *, max_rollback: Optional[int] = None) -> Matcher:
        """A fresh matcher at the start of the output (same as ``Matcher(self)``)."""

class Compiler:
    """Compiles constraints for one vocabulary with one backend, through a
    cache shared by every thread that uses this compiler.

    ``backend``: ``"auto"`` (default, :data:`DEFAULT_BACKEND`: everything
    ``"earley"`` takes, answered by earley from the first mask; where the
    language is regular, a regex-fsm table is built on a background thread
    of the lowest priority, within a budget, and live matchers move onto it
    at their next call, at the same position and with the same rollback
    history: masks, acceptance, rollback and jump-forward are the same
    before and after the move), ``"earley"`` (any grammar, recursive
    schemas; no background work), ``"regex-fsm"`` (alias ``"outlines"``:
    regular languages only; recursion needs ``max_depth``), ``"none"``
    (every token allowed), or a backend registered in Rust
    (:func:`available_backends` lists them). An unknown name raises
    :class:`GrammarError` (kind ``"unknown_backend"``) listing the
    available ones. ``options={"tables": False}`` makes ``"auto"`` earley
    with no thread.

    ``cache_size``: compiled grammars kept (least recently compiled evicted
    first; errors are cached too). ``0`` disables the cache.
    ``max_rollback``: steps every matcher of this compiler keeps for
    ``rollback`` (speculative decoding).
    ``threads``: threads that fill the rows of one
    :func:`fill_next_token_bitmask_batch` call on this compiler's matchers,
    the calling thread included (``1``: the caller alone); ``None`` = one
    per CPU core. The caller fills rows from the start and pool threads take
    rows off the same counter as they come, so a busy machine never makes a
    batch wait for a thread that has not started.
    ``spin_us``: how long pool threads stay awake after a batch, waiting for
    the next one, before they sleep (default 1,000 µs). Waking a sleeping
    thread takes tens of microseconds, a good part of a warm batch; ``0``
    never spins, for machines whose cores are all taken by other work.
    With both ``None`` the compiler shares the process-wide pool (one
    thread per core, 1,000 µs); either one gives it a pool of its own.
    ``think_end_token``: reasoning models; matchers are unconstrained until
    this token (e.g. ``"</think>"``), constrained after it.
    ``options``: backend knobs, ``{name: value}`` (an unknown knob is a
    :class:`GrammarError`).

    Every ``compile_*`` releases the GIL while it compiles; two threads asking
    for the same constraint share one compilation."""

    def __init__(
        self,
        info: TokenizerInfo,
        backend: str = "auto",
        *,
        cache_size: int = 1024,
        max_rollback: int = 32,
        threads: Optional[int] = None,
        spin_us: Optional[int] = None,
        think_end_token: Optional[str] = None,
        options: Optional[Mapping[str, Union[str, int, bool]]] = None,
    ) -> None: ...
    @property
    def tokenizer_info(self) -> TokenizerInfo: ...
    @property
    def backend(self) -> str: ...
    @property
    def max_rollback(self) -> int: ...
    def compile_json_schema(
        self,
        schema: Union[str, Mapping[str, Any], bool],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[tuple[str, str]] = None,
        strict: bool = True,
        max_depth: Optional[int] = None,
    ) -> CompiledGrammar:
        """JSON text that validates against ``schema`` (JSON text, or a dict
        serialised with ``json.dumps``).

        Whitespace (XGrammar's rules): ``any_whitespace=True`` allows any JSON
        whitespace wherever JSON does and ignores ``indent``/``separators``.
        ``any_whitespace=False`` allows exactly the layout of
        ``json.dumps(value, indent=indent, separators=separators)``, where
        ``separators=None`` means ``(", ", ": ")`` without indent and
        ``(",", ": ")`` with one.
        ``strict=True``: objects without ``additionalProperties`` get no
        extra properties (XGrammar's / OpenAI's strict mode); ``False`` = JSON
        Schema's own meaning (extra properties allowed).
        ``max_depth``: nesting bound for recursive schemas on backends that
        cannot express recursion (``regex-fsm``); ``None`` = an error there.
        Malformed or unsupported schemas raise :class:`GrammarError` with
        ``pointer`` set."""
    def compile_builtin_json(self) -> CompiledGrammar:
        """Any JSON object (``{...}``, the ``json_object`` response format)."""
    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """Output that the regular expression matches as a whole (no anchors
        needed). Errors carry ``offset``."""
    def compile_grammar(self, gbnf: str, root: str = "root") -> CompiledGrammar:
        """A GBNF grammar (llama.cpp syntax; rule ``root`` is the start).
        Errors carry ``line`` and ``column``."""
    def compile_choice(self, choices: Sequence[str]) -> CompiledGrammar:
        """Exactly one of these strings."""
    def compile_structural_tag(
        self,
        tags: Sequence[Union[Mapping[str, Any], Any]],
        triggers: Sequence[str],
        *,
        strict: bool = True,
    ) -> CompiledGrammar:
        """Free text in which tagged regions are constrained (function
        calling), XGrammar's / SGLang's structural tag:

        - ``tags``: each a mapping (or an object with these attributes, like
          ``xgrammar.StructuralTagItem``) with ``begin`` (str), ``schema``
          (JSON Schema as a dict or JSON text) and ``end`` (str). Instead of
          ``schema`` a tag may carry exactly one of ``regex`` (str),
          ``grammar`` (GBNF text; its start rule is ``root``, or the tag's
          ``root`` field), ``choice`` (list of str) or ``content`` (the
          Rust ``ConstraintSpec`` as JSON, e.g. ``{"json_schema": "..."}``).
        - ``triggers``: prefixes of ``begin`` strings. The output is free
          text until a trigger appears; from there it must continue into one
          tag whose ``begin`` starts with that trigger, then the content,
          then ``end``, then free text again. Every ``begin`` must start with
          one of the triggers.

        Schemas inside tags compile with ``any_whitespace=True`` and this
        ``strict``."""
    def cache_info(self) -> dict[str, int]:
        """``{"entries", "hits", "misses"}`` of this compiler's cache."""
    def clear_cache(self) -> None: ...

class Matcher:
    """One request's position in a compiled grammar. Cheap to make and to
    ``fork``. A refused token leaves the state unchanged."""

    def __init__(self, compiled_grammar: CompiledGrammar, *, max_rollback: Optional[int] = None) -> None:
        """``max_rollback``: at most this many steps may be rolled back; at
        most the compiler's ``max_rollback`` (larger is a ``ValueError``),
        ``None`` = the compiler's."""
    @property
    def compiled_grammar(self) -> CompiledGrammar: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_rollback(self) -> int: ...
    @property
    def rollback_available(self) -> int:
        """How many steps ``rollback`` can undo now."""
    def accept_token(self, token_id: int) -> bool:
        """Advances by one token. ``False`` (state unchanged) when the
        grammar refuses it, when it is not a grammar token of the vocabulary
        (special, padding, out of range, negative) or when the matcher has
        terminated. Accepting a stop token where the grammar may end
        terminates the matcher. ``RuntimeError`` only for a matcher in an
        error state (a step exceeded a work limit, or the backend panicked)."""
    def accept_tokens(self, token_ids: Sequence[int]) -> bool:
        """All or nothing: ``True`` and every token accepted, or ``False``
        and the state unchanged (a refusal is undone by rolling back when
        the tokens fit ``max_rollback``, so steps older than that window may
        no longer be undoable afterwards; longer lists work on a fork)."""
    def accept_string(self, text: Union[str, bytes]) -> bool:
        """Advances by raw text (e.g. a jump-forward string), all or nothing;
        one rollback step."""
    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """How many of ``token_ids``, from the start, the grammar would accept
        in a row (a stop token counts, and nothing after it). The state is
        unchanged."""
    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last ``num_tokens`` steps (tokens, or strings accepted by
        ``accept_string``). ``ValueError`` past ``rollback_available``."""
    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Writes the mask of the next token into row ``row`` of ``bitmask``
        (2-D ``[rows, words]``, or 1-D ``[words]`` with ``row=0``), ``words >=
        ceil(vocab_size / 32)``; words past the vocabulary are written 0. A
        terminated matcher writes a full row (every token allowed), as
        :func:`fill_next_token_bitmask_batch` does. GIL released."""
    def jump_forward_string(self) -> str:
        """Text certain to come next whatever is sampled (may be ``""``);
        never splits a UTF-8 character. Does not advance."""
    def is_accepting(self) -> bool:
        """May the output end here (is a stop token allowed)?"""
    def is_terminated(self) -> bool:
        """Has a stop token been accepted?"""
    def reset(self) -> None:
        """Back to the start of the output."""
    def maybe_init_reasoning(self, thinking: bool) -> None:
        """Reasoning models (a compiler made with ``think_end_token``):
        ``True`` = this request starts inside the thinking section
        (unconstrained until the think-end token), ``False`` = it starts
        constrained. No effect on other compilers' matchers."""
    def fork(self) -> Matcher:
        """An independent copy in the current state (SGLang's ``copy()``)."""
    def __copy__(self) -> Matcher: ...
    def stats(self) -> dict[str, float]:
        """``masks``, ``mask_time_total_s``, ``mask_time_max_s``,
        ``tokens_accepted``, ``rollbacks``, ``compile_time_s``, and
        ``cache_hit`` (``True`` when the backend's compile came from a cache of
        its own: for ``"auto"``, a regex-fsm table built for the same
        constraint earlier, so this matcher is on the table from the start;
        the :class:`Compiler`'s own cache is not counted)."""

def allocate_token_bitmask(
    rows: int, vocab_size: int, *, kind: Literal["auto", "torch", "numpy"] = "auto"
) -> Any:
    """A ``[rows, ceil(vocab_size / 32)]`` int32 buffer with every bit set
    (everything allowed). ``kind="auto"``: a torch CPU tensor when torch can
    be imported, else a numpy array; without either, a writable 2-D
    ``memoryview`` of C ints (which every function here accepts)."""

def fill_next_token_bitmask_batch(
    matchers: Sequence[Optional[Matcher]],
    bitmask: Any,
    rows: Optional[Sequence[int]] = None,
) -> None:
    """Fills one row per matcher in a single call, rows in parallel, the GIL
    released. ``rows=None``: matcher ``i`` fills row ``i``; otherwise
    ``rows[i]`` (distinct, in range). ``None`` entries and terminated
    matchers get a full row (every token allowed). Listing the same matcher
    twice is allowed (its rows are filled one after the other)."""

def fill_draft_bitmasks(
    matcher: Matcher, draft_tokens: Sequence[int], bitmask: Any, first_row: int = 0
) -> int:
    """Speculative decoding: fills rows ``first_row .. first_row + k`` (``k =
    len(draft_tokens)``) where row ``first_row + i`` is the mask after
    accepting ``draft_tokens[:i]``, leaves the matcher where it was, and
    returns how many draft tokens, from the start, the grammar accepts
    (``n``). Rows after the first refused token (``first_row + n + 1 ..``),
    and rows after an accepted stop token, are full (every token allowed):
    the verifier rejects the draft at or before them, so they are never
    sampled from, and a full row keeps sampling kernels away from all -inf
    rows. Equivalent to: fill; then for each token: accept or stop; fill;
    and finally roll back what was accepted. GIL released."""

def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, indices: Optional[Sequence[int]] = None
) -> None:
    """Writes -inf into the logits of forbidden tokens, in place. ``logits``:
    ``[rows, vocab]`` or ``[vocab]``, float32/float16 numpy, or a torch
    tensor of float32/float16/bfloat16; ``bitmask``: ``[rows, words]`` (or
    ``[words]``), ``words >= ceil(vocab / 32)``; row ``r`` of the logits is
    masked by row ``r`` of the bitmask. ``indices``: only these rows. CUDA
    tensors (logits and bitmask on the same GPU) need a wheel built with
    the ``cuda`` feature (else ``RuntimeError``); a CPU bitmask is copied
    to the logits' GPU, and the kernel is queued on torch's current stream
    and not waited for, as torch's own operations are. Allowed logits keep
    their exact bits."""

def available_backends() -> list[str]:
    """Names of every registered backend."""

__all__ = [
    "GrammarError",
    "TokenizerInfo",
    "Compiler",
    "CompiledGrammar",
    "Matcher",
    "allocate_token_bitmask",
    "fill_next_token_bitmask_batch",
    "fill_draft_bitmasks",
    "apply_token_bitmask_inplace",
    "available_backends",
    "DEFAULT_BACKEND",
]
