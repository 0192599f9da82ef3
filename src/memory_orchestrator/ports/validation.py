"""Input validation shared by every backend: bad input raises ``InvalidRequest`` before anything changes."""

from __future__ import annotations

import math

from memory_orchestrator.ports.errors import InvalidRequest
from memory_orchestrator.ports.records import (
    CATEGORIES,
    MAX_CONTENT_BYTES,
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Edge,
    EdgeType,
    NewMemory,
)

#: Upper bound on ``limit`` arguments, so one call cannot ask a store for everything.
MAX_LIMIT = 10_000


def lone_surrogate(text: str) -> int | None:
    """Position of the first lone surrogate in ``text`` (what undecodable bytes of a command line
    become, or a JSON ``"\\ud800"`` escape: nothing can store or encode it), or ``None``."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def validate_text(name: str, text: str) -> None:
    """Raise ``InvalidRequest`` when ``text`` is not valid Unicode (holds a :func:`lone_surrogate`)."""
    position = lone_surrogate(text)
    if position is not None:
        code = ord(text[position])
        raise InvalidRequest(
            f"{name} is not valid Unicode text (lone surrogate U+{code:04X} at character {position})"
        )


def validate_new_memory(memory: NewMemory) -> None:
    """Raise ``InvalidRequest`` with a one-line reason when ``memory`` cannot be stored."""
    if not isinstance(memory.content, str) or not memory.content.strip():
        raise InvalidRequest("content must be a non-empty string")
    validate_text("content", memory.content)
    size = len(memory.content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise InvalidRequest(f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES} UTF-8 bytes")
    if memory.category not in CATEGORIES:
        raise InvalidRequest(f"category {memory.category!r} is not one of {', '.join(CATEGORIES)}")
    if isinstance(memory.importance, bool) or not isinstance(memory.importance, int):
        raise InvalidRequest("importance must be an integer from 1 to 5")
    if not 1 <= memory.importance <= 5:
        raise InvalidRequest(f"importance {memory.importance} is out of range; use 1 to 5")
    _check_names("tag", memory.tags, MAX_TAGS, MAX_TAG_CHARS)
    _check_names("entity", memory.entities, MAX_ENTITIES, MAX_ENTITY_CHARS)
    if not isinstance(memory.source, str) or not memory.source.strip():
        raise InvalidRequest("source must be a non-empty string")
    if len(memory.source) > MAX_SOURCE_CHARS:
        raise InvalidRequest(f"source is longer than {MAX_SOURCE_CHARS} characters")
    validate_text("source", memory.source)
    for key, value in memory.metadata.items():
        validate_text("metadata", str(key))
        validate_text("metadata", str(value))


def _check_names(kind: str, names: tuple[str, ...], max_count: int, max_chars: int) -> None:
    if len(names) > max_count:
        raise InvalidRequest(f"{len(names)} {kind} values given; at most {max_count} are allowed")
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequest(f"every {kind} must be a non-empty string")
        if len(name) > max_chars:
            raise InvalidRequest(f"{kind} {name[:40]!r}... is longer than {max_chars} characters")
        validate_text(kind, name)


def validate_edge(edge: Edge) -> None:
    """Raise ``InvalidRequest`` when ``edge`` has empty ids, is a self-edge, or has a bad type or weight."""
    if (
        not isinstance(edge.source, str)
        or not edge.source
        or not isinstance(edge.target, str)
        or not edge.target
    ):
        raise InvalidRequest("an edge needs a non-empty source id and target id")
    validate_text("edge source", edge.source)
    validate_text("edge target", edge.target)
    if edge.source == edge.target:
        raise InvalidRequest(f"a memory cannot be linked to itself ({edge.source})")
    try:
        EdgeType(edge.type)
    except ValueError:
        kinds = ", ".join(kind.value for kind in EdgeType)
        raise InvalidRequest(f"edge type {edge.type!r} is not one of {kinds}") from None
    weight = edge.weight
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        raise InvalidRequest("edge weight must be a number from 0 to 1")
    if not 0.0 <= weight <= 1.0:
        raise InvalidRequest(f"edge weight {weight} is out of range; use 0 to 1")


def validate_limit(limit: int, *, name: str = "limit") -> None:
    """Raise ``InvalidRequest`` unless ``limit`` is an integer from 1 to :data:`MAX_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"{name} must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")


def validate_hops(hops: int) -> None:
    """Raise ``InvalidRequest`` unless ``hops`` is an integer from 1 to 5."""
    if isinstance(hops, bool) or not isinstance(hops, int) or not 1 <= hops <= 5:
        raise InvalidRequest(f"hops must be an integer from 1 to 5, got {hops!r}")
