"""The Python example of docs/python.md runs as written (on Llama 3's tokenizer)."""

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
