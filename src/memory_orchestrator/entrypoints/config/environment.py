"""Settings from ``ORCHESTRATOR_*`` environment variables, and the merge of settings from several places.

A variable names a key path joined by ``__`` (``ORCHESTRATOR_BACKEND__NEO4J__PASSWORD`` is
``backend.neo4j.password``), in any letter case. A value meant for a table or a list (a model, a
dict, a list, or a union holding one) is JSON (``ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS='{"keyword":
2}'``); where the key may also be plain text (``str | list[str]``), a value that is not JSON stays text.
Anything else is text, which pydantic then converts and checks. These are pydantic-settings' rules
for this project's settings, read here without it: importing it cost every command ~10 ms, a sixth
of what ``serve`` adds to the MCP SDK's own start (``tests/unit/test_settings_environment.py``
pins them).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping, Sequence, Set
from typing import Any

from pydantic import BaseModel

from memory_orchestrator.ports import InvalidRequest

#: What joins the keys of a path in a variable's name.
DELIMITER = "__"
#: A path that leads nowhere the model knows (its value is kept as text; validation names it).
_UNKNOWN = object()
_COMPLEX = (BaseModel, Mapping, Sequence, Set)  # tuple is a Sequence, set and frozenset are Sets


def environment_values(
    model: type[BaseModel], prefix: str, environ: Mapping[str, str], *, ignore: Set[str] = frozenset()
) -> dict[str, Any]:
    """The settings ``environ`` gives ``model``: a nested dict of its variables named ``prefix`` +
    a key path (``prefix`` upper case; variables named in ``ignore``, upper case, are not settings).
    A variable with a longer path is merged into one with a shorter (``ORCHESTRATOR_BACKEND`` as JSON,
    then ``ORCHESTRATOR_BACKEND__NAME``)."""
    named = [
        (name, name[len(prefix) :].lower().split(DELIMITER), value)
        for name, value in environ.items()
        if name.upper().startswith(prefix) and name.upper() not in ignore
    ]
    values: dict[str, Any] = {}
    for name, path, value in sorted(named, key=lambda item: (len(item[1]), item[0])):
        _place(values, path, _decoded(name, _annotation_at(model, path), value))
    return values


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The layers merged key by key, tables recursively; a later layer wins."""
    result: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            earlier = result.get(key)
            both_tables = isinstance(earlier, Mapping) and isinstance(value, Mapping)
            result[key] = merged(earlier, value) if both_tables else value  # type: ignore[arg-type]
    return result


def _place(values: dict[str, Any], path: list[str], value: Any) -> None:
    node = values
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    last = path[-1]
    earlier = node.get(last)
    node[last] = merged(earlier, value) if isinstance(earlier, dict) and isinstance(value, dict) else value


def _annotation_at(model: type[BaseModel], path: list[str]) -> Any:
    annotation: Any = model
    for key in path:
        annotation = _child(annotation, key)
        if annotation is _UNKNOWN:
            break
    return annotation


def _child(annotation: Any, key: str) -> Any:
    """The type of ``key`` inside ``annotation``: a model's field, a dict's values."""
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            field = option.model_fields.get(key)
            if field is not None:
                return field.annotation
        origin = typing.get_origin(option)
        if isinstance(origin, type) and issubclass(origin, Mapping):
            arguments = typing.get_args(option)
            return arguments[1] if len(arguments) == 2 else Any
    return _UNKNOWN


def _decoded(name: str, annotation: Any, value: str) -> Any:
    if annotation is _UNKNOWN or not value:
        return value
    options = _options(annotation)
    union = len(options) > 1
    if not any(_is_complex(option) for option in options):
        return value
    try:
        return json.loads(value)
    except ValueError:
        if union:  # text is one of the things it may be
            return value
        raise InvalidRequest(f"environment variable {name} is not valid JSON") from None


def _options(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None`` included), else the annotation alone; ``Annotated``
    unwrapped."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(
            typing.get_args(member)[0] if typing.get_origin(member) is typing.Annotated else member
            for member in typing.get_args(annotation)
        )
    return (annotation,)


def _is_complex(annotation: Any) -> bool:
    kind = typing.get_origin(annotation) or annotation
    if not isinstance(kind, type) or issubclass(kind, str | bytes):
        return False
    return issubclass(kind, _COMPLEX) or dataclasses.is_dataclass(kind)
