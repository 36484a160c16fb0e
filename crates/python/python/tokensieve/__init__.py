"""tokensieve: token bitmasks for constrained decoding, from Rust; see __init__.pyi for the documented API."""

from __future__ import annotations

import importlib.util
from typing import Any, Optional, Sequence

from ._errors import GrammarError
from ._tokensieve import (
    CUDA_FEATURE as _CUDA_FEATURE,
    DEFAULT_BACKEND,
    CompiledGrammar,
    Compiler,
    Matcher,
    TokenizerInfo,
    __version__,
    apply_token_bitmask_inplace_cpu as _apply_cpu,
    apply_token_bitmask_inplace_cuda as _apply_cuda,
    available_backends,
    fill_draft_bitmasks,
    fill_next_token_bitmask_batch,
)

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


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def allocate_token_bitmask(rows: int, vocab_size: int, *, kind: str = "auto") -> Any:
    if rows < 0 or vocab_size <= 0:
        raise ValueError(f"rows must be >= 0 and vocab_size > 0, got {rows}, {vocab_size}")
    words = (vocab_size + 31) // 32
    if kind not in ("auto", "torch", "numpy"):
        raise ValueError(f"kind must be 'auto', 'torch' or 'numpy', got {kind!r}")
    if kind == "torch" or (kind == "auto" and _has_module("torch")):
        import torch

        return torch.full((rows, words), -1, dtype=torch.int32)
    if kind == "numpy" or (kind == "auto" and _has_module("numpy")):
        import numpy

        return numpy.full((rows, words), -1, dtype=numpy.int32)
    import array

    # Neither torch nor numpy: a writable 2-D view of C ints (4 bytes on
    # every platform CPython's abi3 wheels target).
    buf = array.array("i", [-1]) * (rows * words)
    return memoryview(buf).cast("B").cast("i", [rows, words])


def _is_cuda_tensor(x: Any) -> bool:
    return getattr(x, "is_cuda", False) is True


def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, indices: Optional[Sequence[int]] = None
) -> None:
    if not _is_cuda_tensor(logits):
        _apply_cpu(logits, bitmask, None if indices is None else list(indices))
        return
    if not _CUDA_FEATURE:
        # Raises the clear error (the wheel has no CUDA device).
        _apply_cuda(logits, bitmask, None)
        return
    import torch

    device = logits.device
    if not _is_cuda_tensor(bitmask):
        bitmask = bitmask.to(device, non_blocking=True)
    ix = None
    if indices is not None:
        ix = torch.as_tensor(list(indices), dtype=torch.int32, device=device)
    # Queued on torch's current stream, after the work that writes the
    # logits and the copies above, and not waited for: like torch's own ops.
    _apply_cuda(logits, bitmask, ix, torch.cuda.current_stream(device).cuda_stream)
