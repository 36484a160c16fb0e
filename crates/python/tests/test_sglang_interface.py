"""tokensieve.sglang against SGLang's own release: every method of its grammar object and backend, and the code that calls them, read from the wheel's source (its modules import torch at load time)."""

from __future__ import annotations

import ast
import inspect

import pytest

import serving_peers as peers
from serving_peers import SGLANG_VERSION

from tokensieve import sglang as plugin

BASE = "sglang/srt/constrained/base_grammar_backend.py"
REASONER = "sglang/srt/constrained/reasoner_grammar_backend.py"

#: BaseGrammarBackend members a backend inherits rather than overrides:
#: SGLang's cache and compile-thread plumbing, and XGrammar-only framing.
INHERITED_BACKEND_MEMBERS = {
    "__init__",
    "_not_supported",
    "_init_value_dispatch",
    "get_cached_or_future_value",
    "set_cache",
    "initialize_vocab_mask_buffer",
    "get_request_grammar_key",
    "reserve_framing_tokens",
    "compile_framed_grammar",
    "init_strict_reasoning_grammar",
    "enable_strict_thinking",
}


def _sglang(path: str) -> ast.Module:
    return peers.parse("sglang", SGLANG_VERSION, path)


def _base_methods(class_name: str) -> dict[str, ast.FunctionDef]:
    return peers.methods(peers.class_node(_sglang(BASE), class_name))


def _parameter_names(params) -> list[str]:
    return [name for name, _, _ in params if name != "self"]


def test_the_grammar_object_has_every_method_of_sglangs(capsys):
    base = _base_methods("BaseGrammarObject")
    assert {
        "accept_token",
        "rollback",
        "fill_vocab_mask",
        "copy",
        "try_jump_forward",
    } <= base.keys()
    for name, node in base.items():
        if name == "__init__":
            continue
        assert name in plugin.TokensieveGrammar.__dict__, f"TokensieveGrammar.{name} missing"
        ours = plugin.TokensieveGrammar.__dict__[name]
        decorators = peers.decorator_names(node)
        if "property" in decorators:
            assert isinstance(ours, property) and ours.fset is not None, name
            continue
        if "staticmethod" in decorators:
            assert isinstance(ours, staticmethod), f"{name} is a staticmethod in SGLang"
            ours = ours.__func__
        # SGLang calls some of these with keywords (allocate_vocab_mask(vocab_size=...,
        # batch_size=..., device=...), apply_vocab_mask(logits=..., vocab_mask=...)).
        assert _parameter_names(peers.signature_parameters(ours)) == _parameter_names(
            peers.ast_parameters(node)
        ), name


def test_the_grammar_object_keeps_the_attributes_sglang_reads():
    init = ast.unparse(_base_methods("BaseGrammarObject")["__init__"])
    for attribute in ("_finished", "grammar_stats", "current_token"):
        assert f"self.{attribute}" in init
    import numpy as np
    import tokensieve

    info = tokensieve.TokenizerInfo.from_token_bytes(
        [bytes([b]) for b in range(256)], stop_token_ids=[]
    )
    grammar = plugin.TokensieveGrammar(tokensieve.Compiler(info).compile_regex("a").matcher())
    assert grammar.current_token is None and grammar.finished is False
    assert hasattr(grammar, "grammar_stats")
    mask = grammar.allocate_vocab_mask(vocab_size=256, batch_size=2, device="cpu")
    # A torch tensor where torch is installed (as in every SGLang process),
    # else a numpy array.
    try:
        import torch
    except ImportError:
        assert isinstance(mask, np.ndarray)
    else:
        assert isinstance(mask, torch.Tensor) and mask.dtype == torch.int32
    assert tuple(mask.shape) == (2, 8)


def test_the_backend_has_every_method_of_sglangs_or_inherits_it():
    base = _base_methods("BaseGrammarBackend")
    overridden = set(base) - INHERITED_BACKEND_MEMBERS
    assert {
        "dispatch_json",
        "dispatch_regex",
        "dispatch_ebnf",
        "dispatch_structural_tag",
    } <= overridden
    for name in sorted(overridden):
        assert name in plugin.TokensieveGrammarBackend.__dict__, (
            f"TokensieveGrammarBackend.{name} missing"
        )
        ours = plugin.TokensieveGrammarBackend.__dict__[name]
        if isinstance(ours, property):
            assert "property" in peers.decorator_names(base[name]), name
            continue
        if isinstance(ours, staticmethod):
            ours = ours.__func__
        assert _parameter_names(peers.signature_parameters(ours)) == _parameter_names(
            peers.ast_parameters(base[name])
        ), name
    # The mask helpers SGLang's reasoning wrapper takes from the backend.
    for name in ("allocate_vocab_mask", "move_vocab_mask", "apply_vocab_mask"):
        assert isinstance(plugin.TokensieveGrammarBackend.__dict__[name], staticmethod), name


def test_the_reasoning_wrapper_uses_only_what_we_provide():
    """SGLang's ReasonerGrammarObject/Backend wrap a backend's grammar: every
    attribute they read from it must exist on ours (or on SGLang's base,
    which ours subclasses inside SGLang)."""
    module = _sglang(REASONER)
    base_backend = set(_base_methods("BaseGrammarBackend"))
    grammar_reads, backend_reads = set(), set()
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            owner = node.value
            if isinstance(owner.value, ast.Name) and owner.value.id == "self":
                if owner.attr == "grammar":
                    grammar_reads.add(node.attr)
                elif owner.attr == "grammar_backend":
                    backend_reads.add(node.attr)
    assert {"accept_token", "fill_vocab_mask", "rollback"} <= grammar_reads
    assert {"allocate_vocab_mask", "set_token_filter"} <= backend_reads
    for name in grammar_reads:
        assert hasattr(plugin.TokensieveGrammar, name), f"grammar.{name}"
    for name in backend_reads:
        assert hasattr(plugin.TokensieveGrammarBackend, name) or name in base_backend, (
            f"grammar_backend.{name}"
        )
    reasoner_init = peers.methods(peers.class_node(module, "ReasonerGrammarBackend"))["__init__"]
    assert _parameter_names(peers.ast_parameters(reasoner_init)) == [
        "grammar_backend",
        "reasoning_parser",
        "tokenizer",
        "enable_strict_thinking",
    ]


def test_a_registered_backend_is_built_with_the_factorys_four_arguments():
    module = _sglang(BASE)
    register = next(
        n
        for n in module.body
        if isinstance(n, ast.FunctionDef) and n.name == "register_grammar_backend"
    )
    assert _parameter_names(peers.ast_parameters(register)) == ["name", "init_func"]
    create = next(
        n
        for n in module.body
        if isinstance(n, ast.FunctionDef) and n.name == "create_grammar_backend"
    )
    calls = [
        n
        for n in ast.walk(create)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "GRAMMAR_BACKEND_REGISTRY[name]"
    ]
    assert len(calls) == 1
    assert [ast.unparse(a) for a in calls[0].args] == [
        "server_args",
        "tokenizer",
        "vocab_size",
        "eos_token_ids",
    ]
    assert list(inspect.signature(plugin.create_grammar_backend).parameters)[:4] == [
        "server_args",
        "tokenizer",
        "vocab_size",
        "eos_token_ids",
    ]
    # Registered backends skip SGLang's own reasoning wrapper: the factory
    # applies it (the source says so by returning before the wrapper).
    text = ast.unparse(create)
    assert text.index("GRAMMAR_BACKEND_REGISTRY[name](") < text.index("ReasonerGrammarBackend(")


def test_the_names_install_and_the_factory_import_exist():
    choices = peers.source("sglang", SGLANG_VERSION, "sglang/srt/arg_groups/choices.py")
    assert "add_grammar_backend_choices = GRAMMAR_BACKEND_CHOICES.extend" in choices
    exec_fields = peers.source("sglang", SGLANG_VERSION, "sglang/srt/arg_groups/fields/exec_.py")
    assert "choices=GRAMMAR_BACKEND_CHOICES" in exec_fields
    fields = "".join(
        peers.source("sglang", SGLANG_VERSION, f"sglang/srt/arg_groups/fields/{name}")
        for name in ("serving.py",)
    )
    for name in (
        "constrained_json_disable_any_whitespace",
        "reasoning_parser",
        "enable_strict_thinking",
    ):
        assert f"{name}:" in fields, name
    runtime = peers.source("sglang", SGLANG_VERSION, "sglang/srt/runtime_context.py")
    assert "def get_serving(" in runtime
    parser = peers.parse("sglang", SGLANG_VERSION, "sglang/srt/parser/reasoning_parser.py")
    init = peers.methods(peers.class_node(parser, "ReasoningParser"))["__init__"]
    assert {"model_type", "stream_reasoning", "tokenizer"} <= set(
        _parameter_names(peers.ast_parameters(init))
    )
    kernels = peers.source("sglang", SGLANG_VERSION, "sglang/kernels/ops/grammar/bitmask_ops.py")
    assert "def apply_token_bitmask_inplace_triton(" in kernels


def test_plugins_load_from_the_entry_point_group_the_plugin_uses():
    text = peers.source("sglang", SGLANG_VERSION, "sglang/srt/plugins/__init__.py")
    assert 'GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"' in text
    assert "func()" in text
    # Loaded before the command line is parsed, so the new choice is there.
    launch = peers.source("sglang", SGLANG_VERSION, "sglang/launch_server.py")
    assert launch.index("load_plugins()") < launch.index("prepare_server_args(sys.argv[1:])")


def test_the_tested_version_is_the_one_downloaded():
    from tokensieve import _plugins

    assert _plugins.TESTED_SGLANG_VERSIONS == (SGLANG_VERSION,)
    assert _plugins.check_sglang_version(SGLANG_VERSION) == SGLANG_VERSION
    with pytest.raises(RuntimeError, match=SGLANG_VERSION.replace(".", r"\.")):
        _plugins.check_sglang_version("0.5.22")


def test_the_prefetch_script_downloads_the_tested_releases():
    script = (peers.REPO_ROOT / "scripts" / "python-serving-peers.sh").read_text()
    assert f"sglang=={SGLANG_VERSION}" in script
    assert f"vllm=={peers.VLLM_VERSION}" in script
