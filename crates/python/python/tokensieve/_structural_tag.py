"""The ``structures``/``triggers`` form of a structural tag, as SGLang and vLLM send it, read into what ``Compiler.compile_structural_tag`` takes (both plug-ins use it)."""

from __future__ import annotations

import json


def from_structures_json(text: str) -> tuple[list, list]:
    """``(tags, triggers)`` of a structural tag in its ``structures``/``triggers`` form;
    ``ValueError`` naming what is wrong or not supported."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"structural tag is not JSON: {err}") from err
    if not isinstance(spec, dict) or "structures" not in spec:
        raise ValueError(
            "tokensieve compiles structural tags in their structures/triggers form;"
            " the format form (model-native tags) is not supported"
        )
    if spec.get("at_least_one"):
        # Ignoring it would allow output with no tag at all: a wider language.
        raise ValueError(
            "tokensieve cannot force at least one structural tag (at_least_one=true);"
            " its tags are optional regions of free text"
        )
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not all(isinstance(t, str) for t in triggers):
        raise ValueError("structural tag: triggers must be a list of strings")
    tags = []
    for structure in spec["structures"]:
        if not isinstance(structure, dict) or not {"begin", "end"} <= structure.keys():
            raise ValueError("structural tag: each structure needs begin and end")
        schema = structure.get("schema")
        tags.append(
            {
                "begin": structure["begin"],
                # A missing schema means any JSON value (SGLang fills in {}).
                "schema": {} if schema is None else schema,
                "end": structure["end"],
            }
        )
    return tags, triggers
