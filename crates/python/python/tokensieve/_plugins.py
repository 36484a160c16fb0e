"""Entry points SGLang and vLLM call when they load plug-ins, and the serving-stack releases tokensieve's hooks were tested with.

These functions import nothing from the serving stack before checking its
version, so an untested release gets one clear log line rather than an
import error from code written against another release's internals. Both
stacks run every installed plug-in in every process, including servers that
never ask for tokensieve: a plug-in here logs and returns instead of raising.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Optional

logger = logging.getLogger("tokensieve")

#: SGLang releases whose grammar-backend interface tokensieve.sglang was checked against.
TESTED_SGLANG_VERSIONS = ("0.5.23",)

#: vLLM releases whose structured-output code tokensieve.vllm was checked against.
TESTED_VLLM_VERSIONS = ("0.33.0",)


def _check(stack: str, tested: tuple[str, ...], version: Optional[str]) -> str:
    if version is None:
        try:
            version = importlib.metadata.version(stack)
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(
                f"tokensieve's {stack} backend needs {stack} {', '.join(tested)};"
                f" {stack} is not installed."
            ) from None
    if version not in tested:
        raise RuntimeError(
            f"tokensieve's {stack} backend was tested with {stack} {', '.join(tested)};"
            f" this is {stack} {version}. Its hooks use {stack} internals that change"
            f" between releases: install a tested {stack}, or a tokensieve release"
            f" tested with yours."
        )
    return version


def check_sglang_version(version: Optional[str] = None) -> str:
    """The installed SGLang version when tokensieve was tested with it;
    ``RuntimeError`` naming the tested versions otherwise."""
    return _check("sglang", TESTED_SGLANG_VERSIONS, version)


def check_vllm_version(version: Optional[str] = None) -> str:
    """The installed vLLM version when tokensieve was tested with it;
    ``RuntimeError`` naming the tested versions otherwise."""
    return _check("vllm", TESTED_VLLM_VERSIONS, version)


def sglang_plugin() -> None:
    """Entry point of group ``sglang.srt.plugins``: registers the
    ``tokensieve`` grammar backend (:func:`tokensieve.sglang.install`)."""
    try:
        check_sglang_version()
    except RuntimeError as err:
        logger.warning("%s The tokensieve grammar backend is not registered.", err)
        return
    from tokensieve import sglang

    sglang.install()


def vllm_plugin() -> None:
    """Entry point of group ``vllm.general_plugins``: installs the
    ``tokensieve`` structured-output backend (:func:`tokensieve.vllm.install`)."""
    try:
        check_vllm_version()
    except RuntimeError as err:
        logger.warning("%s The tokensieve structured-output backend is not installed.", err)
        return
    try:
        from tokensieve import vllm

        vllm.install()
    except Exception:
        # vLLM calls general plug-ins outside any try: an exception here would
        # stop every vLLM server on this machine, tokensieve or not.
        logger.exception("tokensieve: installing the vLLM backend failed")
