"""The schemas a client lists: what a model reads on every session, so they are kept lean.

Inputs keep every field with its type, numeric bounds and a few words of description, without
pydantic's generated titles or string bounds (the server checks those and answers a one-line error).
Outputs are published as the names of their top-level fields: structured results validate against
that, the tool descriptions say what matters in them, and the full shapes cost a model thousands of
tokens per session (``tools/list`` went from ~9.5k to under 4k tokens).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

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


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The published output schema of a tool: an object and the names of its fields."""
    # The field names straight from the model: generating its whole JSON schema only to read them
    # cost ~2-4 ms per tool at every server start.
    names = (field.alias or name for name, field in model.model_fields.items())
    return {"type": "object", "properties": {name: {} for name in names}}
