"""The schemas a client lists: what a model reads on every session, so they are kept lean.

Inputs keep every field with its type, numeric bounds and a few words of description, without
pydantic's generated titles or string bounds (the server checks those and answers a one-line error).
Outputs are published as the names of their top-level fields: structured results validate against
that, the tool descriptions say what matters in them, and the full shapes cost a model thousands of
tokens per session (``tools/list`` went from ~9.5k to under 4k tokens).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

#: The published input schemas of the tool models, as :func:`input_schema` generates them, keyed by
#: :func:`model_key`: generating them cost ~9 ms at every server start and built every input model
#: (which are otherwise built at their first use). ``python -m
#: memory_orchestrator.entrypoints.mcp.published`` writes the file again; a test fails when it is not
#: what the models generate.
STORED_INPUTS = Path(__file__).with_name("published_inputs.json")

#: Generated or server-checked details a model does not need to call a tool well (the server still
#: validates every argument and answers a one-line error naming the field).
_DROP = frozenset({"title", "pattern", "format", "minLength", "maxLength", "maxItems"})


def lean(schema: Any) -> Any:
    """``schema`` without titles, string bounds, empty defaults, and with ``X | None`` as ``X``."""
    if isinstance(schema, list):
        return [lean(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) == 1:  # optional: omitting it is how a caller says "none"
            merged = {**kept[0], **{k: v for k, v in schema.items() if k != "anyOf"}}
            return lean(merged)
    return {
        key: lean(value)
        for key, value in schema.items()
        if key not in _DROP and not _empty_default(key, value)
    }


def _empty_default(key: str, value: Any) -> bool:
    # An omitted field takes its default; objects' defaults (all-empty filters, a budget) say nothing.
    return key == "default" and (value in (None, "", []) or isinstance(value, dict))


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The published input schema of a tool (its own description is the tool's, not repeated)."""
    published: dict[str, Any] = lean(model.model_json_schema())
    published.pop("description", None)
    for definition in published.get("$defs", {}).values():
        # a nested object is described by the field that holds it, not twice
        definition.pop("description", None)
        definition.pop("additionalProperties", None)
    return published


def model_key(model: type[BaseModel]) -> str:
    """The name a model's schema is stored under."""
    return f"{model.__module__}:{model.__qualname__}"


def input_schemas(models: Iterable[type[BaseModel]]) -> list[dict[str, Any]]:
    """The published input schemas of ``models``: as stored in :data:`STORED_INPUTS`, or generated
    for a model it does not hold (or when it cannot be read)."""
    try:
        stored: dict[str, dict[str, Any]] = json.loads(STORED_INPUTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = {}
    return [stored.get(model_key(model)) or input_schema(model) for model in models]


def generated_input_schemas() -> dict[str, dict[str, Any]]:
    """What :data:`STORED_INPUTS` should hold: the input schema of every tool's model."""
    from memory_orchestrator.entrypoints.mcp.tools import tool_specs

    return {model_key(spec.input_model): input_schema(spec.input_model) for spec in tool_specs()}


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The published output schema of a tool: an object and the names of its fields."""
    # The field names straight from the model: generating its whole JSON schema only to read them
    # cost ~2-4 ms per tool at every server start.
    names = (field.alias or name for name, field in model.model_fields.items())
    return {"type": "object", "properties": {name: {} for name in names}}


if __name__ == "__main__":  # python -m memory_orchestrator.entrypoints.mcp.published
    STORED_INPUTS.write_text(json.dumps(generated_input_schemas(), indent=1) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {STORED_INPUTS}\n")
