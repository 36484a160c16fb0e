"""The typed stub (tokensieve/__init__.pyi) and the runtime agree: every name, method and keyword the stub promises exists."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import tokensieve as ts

STUB = Path(__file__).resolve().parents[1] / "python" / "tokensieve" / "__init__.pyi"


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def test_every_stub_name_exists():
    tree = stub_tree()
    missing = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(ts, node.name, None)
            if cls is None:
                missing.append(node.name)
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not hasattr(cls, item.name):
                    missing.append(f"{node.name}.{item.name}")
        elif isinstance(node, ast.FunctionDef) and not hasattr(ts, node.name):
            missing.append(node.name)
    assert not missing, f"in the stub but not in the package: {missing}"
    constants = [
        n.target.id
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and not n.target.id.startswith("_")
    ]
    for name in constants:
        if not hasattr(ts, name):
            missing.append(name)
    assert not missing, f"in the stub but not in the package: {missing}"
    assert sorted(ts.__all__) == sorted(
        [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))] + constants
    )


def test_keywords_match():
    """Keyword-only and defaulted parameters of the stub are accepted at run time
    (native methods expose their signatures through __text_signature__)."""
    tree = stub_tree()
    checked = 0
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(ts, node.name)
        for item in node.body:
            if not isinstance(item, ast.FunctionDef) or item.name.startswith("__"):
                continue
            obj = inspect.getattr_static(cls, item.name)
            target = getattr(obj, "__func__", obj)
            try:
                sig = inspect.signature(target)
            except (TypeError, ValueError):
                continue  # properties and the like
            stub_names = [a.arg for a in item.args.args + item.args.kwonlyargs if a.arg not in ("self", "cls")]
            runtime = [p for p in sig.parameters if p not in ("self", "cls", "$self", "$cls")]
            assert stub_names == runtime, f"{node.name}.{item.name}: stub {stub_names}, runtime {runtime}"
            checked += 1
    assert checked >= 20
