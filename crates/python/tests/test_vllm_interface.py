"""tokensieve.vllm against vLLM's own release: its interface classes loaded from the wheel without torch, and the code the plug-in hooks into, read from the wheel's source."""

from __future__ import annotations

import ast
import inspect
import sys

import pytest

import serving_peers as peers
from serving_peers import VLLM_VERSION

BACKEND_TYPES = "vllm/v1/structured_output/backend_types.py"


@pytest.fixture(scope="module")
def vllm_types():
    """vLLM's ``backend_types`` module from the release wheel (it imports
    torch only for type checking), and tokensieve.vllm built on it."""
    root = peers.extracted("vllm", VLLM_VERSION, "vllm/v1/structured_output/")
    torch_loaded_before = "torch" in sys.modules
    module = peers.load_single_file("vllm.v1.structured_output.backend_types", root / BACKEND_TYPES)
    import tokensieve.vllm as plugin

    yield module, plugin, torch_loaded_before
    sys.modules.pop("tokensieve.vllm", None)
    peers.unload("vllm")


def test_interface_module_loads_without_torch(vllm_types):
    module, _, torch_loaded_before = vllm_types
    if not torch_loaded_before:
        assert "torch" not in sys.modules
    assert inspect.isabstract(module.StructuredOutputBackend)
    assert inspect.isabstract(module.StructuredOutputGrammar)


def test_every_abstract_method_is_implemented_with_the_same_signature(vllm_types):
    module, plugin, _ = vllm_types
    pairs = [
        (plugin.TokensieveBackend, module.StructuredOutputBackend),
        (plugin.TokensieveGrammar, module.StructuredOutputGrammar),
    ]
    for ours, theirs in pairs:
        assert issubclass(ours, theirs)
        assert not inspect.isabstract(ours), ours.__abstractmethods__
        assert theirs.__abstractmethods__, "vLLM's class lost its abstract methods"
        for name in theirs.__abstractmethods__:
            assert name in ours.__dict__, f"{ours.__name__}.{name} is inherited, not implemented"
            assert peers.signature_parameters(getattr(ours, name)) == peers.signature_parameters(
                getattr(theirs, name)
            ), f"{ours.__name__}.{name}"


def test_the_backend_is_built_the_way_vllm_builds_its_own(vllm_types):
    module, plugin, _ = vllm_types
    # StructuredOutputManager.grammar_init: Backend(vllm_config, tokenizer=..., vocab_size=...)
    fields = list(module.StructuredOutputBackend.__dataclass_fields__)
    assert fields == ["vllm_config", "tokenizer", "vocab_size"]
    assert list(plugin.TokensieveBackend.__dataclass_fields__) == fields


def test_every_request_type_has_a_compile_path(vllm_types):
    module, plugin, _ = vllm_types
    body = inspect.getsource(plugin.compile_request)
    for option in module.StructuredOutputOptions:
        assert f"StructuredOutputOptions.{option.name}" in body, option


def test_the_tested_versions_are_the_ones_downloaded(vllm_types):
    from tokensieve import _plugins

    assert _plugins.TESTED_VLLM_VERSIONS == (VLLM_VERSION,)
    assert _plugins.check_vllm_version(VLLM_VERSION) == VLLM_VERSION
    with pytest.raises(RuntimeError, match=VLLM_VERSION.replace(".", r"\.")):
        _plugins.check_vllm_version("0.32.0")


# --- the code the plug-in hooks into, as the release has it ----------------


def _function(module: ast.Module, class_name: str, name: str) -> ast.FunctionDef:
    return peers.methods(peers.class_node(module, class_name))[name]


def test_the_backend_names_are_a_literal_the_plugin_can_widen():
    module = peers.parse("vllm", VLLM_VERSION, "vllm/config/structured_outputs.py")
    alias = next(
        node
        for node in module.body
        if isinstance(node, ast.Assign)
        and any(
            isinstance(t, ast.Name) and t.id == "StructuredOutputsBackend" for t in node.targets
        )
    )
    assert isinstance(alias.value, ast.Subscript) and ast.unparse(alias.value.value) == "Literal"
    names = [elt.value for elt in alias.value.slice.elts]
    assert "auto" in names and "guidance" in names and "tokensieve" not in names
    config = peers.class_node(module, "StructuredOutputsConfig")
    assert "config" in {ast.unparse(d) for d in config.decorator_list}
    backend_field = next(
        node
        for node in config.body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "backend"
    )
    assert ast.unparse(backend_field.annotation) == "StructuredOutputsBackend"
    # vllm.config.utils.config makes it a pydantic dataclass (rebuild_dataclass).
    utils = peers.source("vllm", VLLM_VERSION, "vllm/config/utils.py")
    assert "from pydantic.dataclasses import dataclass" in utils


def test_request_validation_has_the_signature_the_hook_wraps():
    module = peers.parse("vllm", VLLM_VERSION, "vllm/sampling_params.py")
    validate = _function(module, "SamplingParams", "_validate_structured_outputs")
    assert [p[0] for p in peers.ast_parameters(validate)] == [
        "self",
        "model_config",
        "structured_outputs_config",
        "tokenizer",
    ]
    text = ast.unparse(validate)
    # An unknown backend name falls through to the "auto" branch: the hook
    # must take tokensieve's requests before vLLM does.
    assert "backend = structured_outputs_config.backend" in text
    assert "self.structured_outputs._backend = backend" in text
    assert "self.structured_outputs.__post_init__()" in text
    top_level = {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    assert "check_json_nesting" in top_level
    params = peers.class_node(module, "StructuredOutputsParams")
    field_names = {ast.unparse(n.target) for n in params.body if isinstance(n, ast.AnnAssign)}
    assert {
        "json",
        "regex",
        "choice",
        "grammar",
        "json_object",
        "structural_tag",
        "_backend",
    } <= field_names


def test_grammar_init_builds_a_backend_only_when_none_exists():
    module = peers.parse("vllm", VLLM_VERSION, "vllm/v1/structured_output/__init__.py")
    grammar_init = _function(module, "StructuredOutputManager", "grammar_init")
    assert [p[0] for p in peers.ast_parameters(grammar_init)] == ["self", "request"]
    text = ast.unparse(grammar_init)
    assert "if self.backend is None:" in text
    assert "request_backend = structured_outputs._backend" in text
    assert "self.backend.compile_grammar" not in text  # compiled later, by _create_grammar
    create = ast.unparse(_function(module, "StructuredOutputManager", "_create_grammar"))
    assert (
        "self.backend.compile_grammar(request_type, grammar_spec, stop_token_ids=stop_token_ids)"
        in create
    )
    init = ast.unparse(_function(module, "StructuredOutputManager", "__init__"))
    assert "self.tokenizer = " in init and "self.vllm_config = vllm_config" in init


def test_the_request_key_comes_from_the_function_validate_request_uses():
    module = peers.parse("vllm", VLLM_VERSION, "vllm/v1/structured_output/request.py")
    names = {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    assert "get_structured_output_key" in names


def test_general_plugins_are_loaded_from_the_entry_point_group_the_plugin_uses():
    text = peers.source("vllm", VLLM_VERSION, "vllm/plugins/__init__.py")
    assert 'DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"' in text
    module = ast.parse(text)
    loader = next(
        n
        for n in module.body
        if isinstance(n, ast.FunctionDef) and n.name == "load_general_plugins"
    )
    # Every loaded plug-in function is called with no argument.
    assert "func()" in ast.unparse(loader)
    # Plug-ins load before the CLI parser and in the engine-core process.
    assert "load_general_plugins()" in peers.source(
        "vllm", VLLM_VERSION, "vllm/engine/arg_utils.py"
    )
    assert "load_general_plugins()" in peers.source("vllm", VLLM_VERSION, "vllm/v1/engine/core.py")


def test_widening_the_backend_literal_reaches_construction_and_the_cli_parser(vllm_types):
    """The plug-in's first hook on a pydantic dataclass made the way
    vllm.config.utils.config makes StructuredOutputsConfig (that module
    imports torch, so the class itself cannot be built here)."""
    pydantic = pytest.importorskip(
        "pydantic", reason="pydantic (a vLLM dependency) is not installed"
    )
    import types
    from typing import Literal

    from pydantic.dataclasses import dataclass

    _, plugin, _ = vllm_types
    aliases = types.ModuleType("aliases")
    aliases.StructuredOutputsBackend = Literal["auto", "xgrammar", "guidance"]

    @dataclass(config=pydantic.ConfigDict(extra="forbid"))
    class StructuredOutputsConfig:
        backend: aliases.StructuredOutputsBackend = "auto"
        disable_any_whitespace: bool = False

    with pytest.raises(pydantic.ValidationError):
        StructuredOutputsConfig(backend="tokensieve")
    for _ in range(2):  # idempotent
        plugin.widen_literal_field(
            StructuredOutputsConfig, "backend", aliases, "StructuredOutputsBackend", "tokensieve"
        )
    assert StructuredOutputsConfig(backend="tokensieve").backend == "tokensieve"
    assert StructuredOutputsConfig(backend="guidance").backend == "guidance"
    # vLLM's --structured-outputs-config parser: TypeAdapter(cls).validate_json.
    parsed = pydantic.TypeAdapter(StructuredOutputsConfig).validate_json(
        '{"backend": "tokensieve"}'
    )
    assert parsed.backend == "tokensieve"
    with pytest.raises(pydantic.ValidationError):
        StructuredOutputsConfig(backend="tokensieves")
    assert aliases.StructuredOutputsBackend.__args__ == (
        "auto",
        "xgrammar",
        "guidance",
        "tokensieve",
    )
