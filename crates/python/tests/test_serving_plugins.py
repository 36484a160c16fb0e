"""The plug-in entry points SGLang and vLLM call: the version guard that keeps an untested release untouched, and the entry points the wheel declares."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest

from tokensieve import _plugins


@pytest.mark.parametrize(
    "entry, stack, tested",
    [
        (_plugins.vllm_plugin, "vllm", _plugins.TESTED_VLLM_VERSIONS),
        (_plugins.sglang_plugin, "sglang", _plugins.TESTED_SGLANG_VERSIONS),
    ],
)
def test_an_untested_release_gets_a_warning_and_no_hooks(monkeypatch, caplog, entry, stack, tested):
    real_version = importlib.metadata.version

    def version(name):
        return "0.0.1" if name == stack else real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with caplog.at_level(logging.WARNING, logger="tokensieve"):
        assert entry() is None
    [record] = [r for r in caplog.records if r.name == "tokensieve"]
    assert f"this is {stack} 0.0.1" in record.getMessage()
    for release in tested:
        assert release in record.getMessage()
    assert record.getMessage().endswith(("backend is not installed.", "backend is not registered."))


@pytest.mark.parametrize(
    "entry, stack", [(_plugins.vllm_plugin, "vllm"), (_plugins.sglang_plugin, "sglang")]
)
def test_a_missing_stack_gets_a_warning(monkeypatch, caplog, entry, stack):
    real_version = importlib.metadata.version

    def version(name):
        if name == stack:
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with caplog.at_level(logging.WARNING, logger="tokensieve"):
        assert entry() is None
    assert any(f"{stack} is not installed" in r.getMessage() for r in caplog.records)


def test_the_wheel_declares_both_entry_points():
    try:
        dist = importlib.metadata.distribution("tokensieve")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("tokensieve is not installed as a distribution (no entry points to read)")
    declared = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    groups = {"vllm.general_plugins", "sglang.srt.plugins"}
    if not any(group in groups for group, _ in declared):
        pytest.skip(
            "the tokensieve wheel declares no serving entry points ([project.entry-points] in pyproject.toml)"
        )
    assert declared[("vllm.general_plugins", "tokensieve")] == "tokensieve._plugins:vllm_plugin"
    assert declared[("sglang.srt.plugins", "tokensieve")] == "tokensieve._plugins:sglang_plugin"
    for group in groups:
        [ep] = [ep for ep in dist.entry_points if ep.group == group]
        assert callable(ep.load())
