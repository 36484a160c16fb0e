"""The Python examples of docs/python.md and of the README run as written (on Llama 3's tokenizer)."""

from __future__ import annotations

import re

from conftest import REPO, tokenizer_path


def test_the_loop_example(capsys):
    doc = (REPO / "docs" / "python.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "accept_token" in b)
    scope = {"TOKENIZER_JSON": str(tokenizer_path("llama3"))}
    exec(compile(code, "docs/python.md", "exec"), scope)
    assert scope["matcher"].is_terminated()
    value = scope["json"].loads(scope["text"])
    assert set(value) == {"city", "temp"} and -50 <= value["temp"] <= 50


def test_the_readme_example():
    """The README's Python example runs as written, its tokenizer.json being Llama 3's."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Python", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    code = code.replace('"tokenizer.json"', repr(str(tokenizer_path("llama3"))))
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    # The first token the mask allowed was accepted, and it opens the object.
    assert scope["matcher"].rollback_available == 1
    assert not scope["matcher"].is_terminated()
