"""Shared fixtures of the pytest suite: the repository root, the real tokenizers of ../shared/data, a tiny byte vocabulary."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import tokensieve as ts

REPO = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("TOKENSIEVE_SHARED_DATA", REPO.parent / "shared" / "data"))
TOKENIZERS = SHARED / "tokenizers"

# name -> (folder, the model's vocab_size: logits width, padded when larger)
REAL_TOKENIZERS = {
    "llama3": ("llama3", 128256),
    "qwen2.5": ("qwen2.5", 152064),
    "mistral": ("mistral7b", 32000),
    "phi3.5": ("phi3.5-mini", 32064),
    "gpt2": ("gpt2", 50257),
}


def tokenizer_path(name: str) -> Path:
    folder, _ = REAL_TOKENIZERS[name]
    path = TOKENIZERS / folder / "tokenizer.json"
    if not path.exists():
        print(f"tokensieve tests: {path} not found, skipping", file=sys.stderr)
        pytest.skip(f"real tokenizer {name} not found at {path} (../shared/data absent)")
    return path


_INFOS: dict = {}


def real_info(name: str) -> ts.TokenizerInfo:
    """The TokenizerInfo of a real tokenizer, with the model's (padded) vocab size; loaded once."""
    if name not in _INFOS:
        _, vocab_size = REAL_TOKENIZERS[name]
        _INFOS[name] = ts.TokenizerInfo.from_tokenizer_json(
            tokenizer_path(name), vocab_size=vocab_size
        )
    return _INFOS[name]


@pytest.fixture(params=list(REAL_TOKENIZERS))
def any_real(request) -> tuple[str, ts.TokenizerInfo]:
    return request.param, real_info(request.param)


@pytest.fixture(scope="session")
def llama3() -> ts.TokenizerInfo:
    return real_info("llama3")


@pytest.fixture(scope="session")
def gpt2() -> ts.TokenizerInfo:
    return real_info("gpt2")


# A small fixture vocabulary that needs no files: every printable ASCII byte,
# a few multi-byte tokens, two special tokens and a stop token; padded to 128.
TINY_TOKENS = (
    [bytes([b]) for b in range(32, 127)]
    + [b"\n", b"true", b"false", b"null", b'{"', b'":', b'",', b"12", b"ab"]
    + [b"<s>", b"<tool>", b"</s>"]
)
TINY_SPECIAL = [len(TINY_TOKENS) - 3, len(TINY_TOKENS) - 2]
TINY_STOP = len(TINY_TOKENS) - 1


@pytest.fixture(scope="session")
def tiny() -> ts.TokenizerInfo:
    return ts.TokenizerInfo.from_token_bytes(
        TINY_TOKENS, vocab_size=128, special_token_ids=TINY_SPECIAL
    )


def tiny_encode(text: str) -> list[int]:
    """Single-byte tokens of the tiny vocabulary (ids follow the byte value)."""
    return [b - 32 if 32 <= b < 127 else 95 for b in text.encode()]


def allowed(row) -> set[int]:
    """Allowed token ids of one bitmask row (numpy int32 words)."""
    import numpy as np

    bits = np.unpackbits(np.asarray(row).view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each skip also goes to the file TOKENSIEVE_SKIP_LOG names, beside the Rust tests' skips,
    so that scripts/test.sh ends with one line counting them all by reason."""
    log = os.environ.get("TOKENSIEVE_SKIP_LOG")
    if not log or not report.skipped:
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"skipped: {report.nodeid}: {reason}\n")
