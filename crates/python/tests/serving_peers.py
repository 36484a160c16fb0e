"""Test helpers for the serving plug-ins: the SGLang and vLLM release wheels (downloaded without dependencies at test time), their sources, and real tokenizers.

Nothing from either project is kept in the repository: each wheel is fetched
with ``pip download --no-deps`` into ``target/serving-peers/`` (or
``$TOKENSIEVE_PEER_CACHE``) the first time a test needs it, and read from
there. The vLLM wheel is a binary wheel (about 340 MB); its sdist cannot be
fetched with pip without building its metadata, which needs torch.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

#: The releases the plug-ins were written against (tokensieve._plugins holds
#: the same numbers; a test checks that they agree).
SGLANG_VERSION = "0.5.23"
VLLM_VERSION = "0.33.0"

SHARED = Path(os.environ.get("TOKENSIEVE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
TOKENIZERS = SHARED / "tokenizers"


def cache_dir() -> Path:
    path = Path(os.environ.get("TOKENSIEVE_PEER_CACHE", REPO_ROOT / "target" / "serving-peers"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def peer_wheel(name: str, version: str) -> Path:
    """The release wheel of ``name==version``, downloaded once; skips the
    test with the reason when the package registry cannot be reached."""
    directory = cache_dir()
    prefix = f"{name}-{version}-"
    found = sorted(directory.glob(f"{prefix}*.whl"))
    if found:
        return found[0]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(directory),
        f"{name}=={version}",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"could not download the {name} {version} wheel: {err}")
    found = sorted(directory.glob(f"{prefix}*.whl"))
    if result.returncode != 0 or not found:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        pytest.skip(
            f"could not download the {name} {version} wheel (package registry"
            f" unreachable?): {' / '.join(tail)}"
        )
    return found[0]


def extracted(name: str, version: str, prefix: str) -> Path:
    """The wheel's files under ``prefix`` (a package path such as
    ``vllm/v1/structured_output/``), extracted once; returns the root that
    holds the top-level package."""
    wheel = peer_wheel(name, version)
    root = cache_dir() / f"{name}-{version}-src"
    marker = root / f".{prefix.strip('/').replace('/', '.')}.done"
    if not marker.exists():
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(prefix) and m.endswith(".py")]
            if not members:
                raise AssertionError(f"{wheel.name} has no {prefix}*.py: the layout changed")
            archive.extractall(root, members)
        marker.write_text("")
    return root


def source(name: str, version: str, path: str) -> str:
    """The text of one file of the release (``path`` inside the wheel)."""
    root = extracted(name, version, path.rsplit("/", 1)[0] + "/")
    return (root / path).read_text()


def parse(name: str, version: str, path: str) -> ast.Module:
    return ast.parse(source(name, version, path), filename=f"{name}-{version}/{path}")


def class_node(module: ast.Module, class_name: str) -> ast.ClassDef:
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return node
    raise AssertionError(f"class {class_name} not found")


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    """Methods defined in the class body (a property's getter under its name)."""
    found: dict[str, ast.FunctionDef] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in found:
            found[node.name] = node
    return found


def decorator_names(func: ast.FunctionDef) -> set[str]:
    names = set()
    for dec in func.decorator_list:
        if isinstance(dec, ast.Name):
            names.add(dec.id)
        elif isinstance(dec, ast.Attribute):
            names.add(dec.attr)
    return names


def ast_parameters(func: ast.FunctionDef) -> list[tuple[str, str, bool]]:
    """``(name, kind, has_default)`` per parameter, ``self`` included, in the
    shape :func:`signature_parameters` gives for a live function."""
    args = func.args
    out: list[tuple[str, str, bool]] = []
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    for i, arg in enumerate(positional):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append((arg.arg, kind, i >= first_default))
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", False))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((arg.arg, "KEYWORD_ONLY", default is not None))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", False))
    return out


def signature_parameters(func) -> list[tuple[str, str, bool]]:
    import inspect

    return [
        (p.name, p.kind.name, p.default is not inspect.Parameter.empty)
        for p in inspect.signature(func).parameters.values()
    ]


def load_single_file(dotted: str, path: Path) -> types.ModuleType:
    """Executes one module file of a release under its own dotted name, its
    parent packages registered as empty namespace shells so that none of
    their ``__init__`` files (which import torch) runs. The caller removes
    the entries with :func:`unload`."""
    parts = dotted.split(".")
    base = path.parents[len(parts) - 1]
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            shell = types.ModuleType(name)
            shell.__path__ = [str(base.joinpath(*parts[:i]))]
            sys.modules[name] = shell
    spec = importlib.util.spec_from_file_location(dotted, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = module
    spec.loader.exec_module(module)
    return module


def unload(top: str) -> None:
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def tokenizer_json(name: str) -> Optional[Path]:
    """A real ``tokenizer.json`` from ``../shared/data/tokenizers``; None (said
    on stderr) when the shared data is absent."""
    path = TOKENIZERS / name / "tokenizer.json"
    if not path.exists():
        print(f"serving tests: {path} not found; shared data absent", file=sys.stderr)
        return None
    return path
