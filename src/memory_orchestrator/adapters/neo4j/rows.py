"""Conversions between port records and Neo4j parameters / result values."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_orchestrator.adapters.neo4j.cypher import EDGE_TYPES_BY_RELATIONSHIP, RELATIONSHIP_TYPES
from memory_orchestrator.ports import Edge, Filters, MemoryRecord, NewMemory, ensure_utc
from memory_orchestrator.ports.autolinks import MemorySketch
from memory_orchestrator.ports.text import STOP_WORDS, content_hash, name_candidates, tokenize

#: Lucene refuses boolean queries past 1024 clauses; a few hundred distinct terms is plenty to rank.
MAX_QUERY_TERMS = 200
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def uid(store: str, memory_id: str) -> str:
    """The store-qualified key of a memory or entity (``store:id``)."""
    return f"{store}:{memory_id}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    """``moment`` as integer microseconds since the Unix epoch: how the store keeps every timestamp.

    Integers are exact, order and index like the instants they stand for, and the Python driver decodes
    them about a hundred times faster than Neo4j ``DateTime`` values (which dominated read latency).
    """
    delta = ensure_utc(moment) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_native(value: Any) -> datetime:
    """A stored timestamp (microseconds, or a Neo4j/Python datetime) as an aware UTC datetime."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _EPOCH + timedelta(microseconds=value)
    native = value.to_native() if hasattr(value, "to_native") else value
    if not isinstance(native, datetime):
        raise TypeError(f"expected a timestamp, got {type(value).__name__}")
    return ensure_utc(native)


#: Bounds of the stored timestamps, standing in for an open side of a time range.
EARLIEST, LATEST = -(2**62), 2**62


def name_uids(store: str, text: str) -> list[str]:
    """Entity uids of every run of 1-4 words of ``text`` that could be a known name.

    The same keys ``ports.text.matched_names`` accepts (single stop words and 1-letter words never
    match), so looking them up finds exactly the known names the text mentions.
    """
    keys = {key for key in name_candidates(text) if " " in key or (key not in STOP_WORDS and len(key) >= 2)}
    return sorted(uid(store, key) for key in keys)


def fulltext_store(store: str) -> str:
    """The single Lucene token that marks a store's active memories in the full-text index."""
    return "s" + hashlib.sha256(store.encode("utf-8")).hexdigest()[:24]


def lucene_query(text: str, *, store: str, max_terms: int = MAX_QUERY_TERMS) -> str:
    """Memories of ``store`` containing any of the text's tokens; ``''`` when there is no token.

    The tokens come from the shared tokenizer (so every backend matches on the same terms); quoting
    and escaping keeps Lucene syntax in user text from ever being interpreted.
    """
    terms: list[str] = []
    for token in tokenize(text):
        if token not in terms:
            terms.append(token)
        if len(terms) >= max_terms:
            break
    if not terms:
        return ""
    alternatives = " OR ".join(f'"{_escape(term)}"' for term in terms)
    return f"fulltext_store:{fulltext_store(store)} AND content:({alternatives})"


def _escape(term: str) -> str:
    return _LUCENE_SPECIAL.sub(r"\\\1", term)


def record_from_node(node: Mapping[str, Any]) -> MemoryRecord:
    """The port record of a ``(:Memory)`` node."""
    return MemoryRecord(
        id=node["id"],
        content=node["content"],
        created_at=to_native(node["created_at"]),
        updated_at=to_native(node["updated_at"]),
        category=node.get("category") or "general",
        importance=int(node.get("importance") or 3),
        tags=tuple(node.get("tags") or ()),
        entities=tuple(node.get("entities") or ()),
        source=node.get("source") or "user",
        metadata=json.loads(node.get("metadata") or "{}"),
        superseded_by=tuple(node.get("superseded_by") or ()),
    )


def sketch_from_node(node: Mapping[str, Any]) -> MemorySketch:
    """What the link rules need of a stored memory (its tokens are computed here, not stored)."""
    return MemorySketch(
        id=node["id"],
        content=node["content"],
        source=node.get("source") or "user",
        created_at=to_native(node["created_at"]),
        tokens=frozenset(tokenize(node["content"])),
        entities=frozenset(node.get("entity_keys") or ()),
    )


def memory_properties(
    store: str,
    memory_id: str,
    memory: NewMemory,
    entities: tuple[str, ...],
    created_at: datetime,
    now: datetime,
) -> dict[str, Any]:
    """Node properties of a new memory; ``dedup_key`` only when the write takes part in dedup."""
    digest = content_hash(memory.content)
    props: dict[str, Any] = {
        "uid": uid(store, memory_id),
        "store": store,
        "id": memory_id,
        "content": memory.content,
        "content_hash": digest,
        "category": memory.category,
        "importance": memory.importance,
        "tags": list(memory.tags),
        "entities": list(entities),
        "entity_keys": [name.casefold() for name in entities],
        "source": memory.source,
        "created_at": micros(created_at),
        "updated_at": micros(now),
        "metadata": json.dumps(dict(memory.metadata), sort_keys=True),
        "forgotten": False,
        "fulltext_store": fulltext_store(store),
    }
    if memory.dedup:
        props["dedup_key"] = uid(store, digest)
    return props


def entity_params(store: str, entities: Iterable[str]) -> list[dict[str, str]]:
    """``MERGE`` rows for the entity nodes a memory mentions (one per casefolded name)."""
    rows: dict[str, dict[str, str]] = {}
    for name in entities:
        key = name.casefold()
        rows.setdefault(key, {"uid": uid(store, key), "key": key, "name": name})
    return list(rows.values())


def edge_params(store: str, edge: Edge, at: datetime) -> dict[str, Any]:
    """A row of ``CREATE_EDGES`` for ``edge`` (metadata as JSON, created_at defaulting to ``at``)."""
    return {
        "from": uid(store, edge.source),
        "to": uid(store, edge.target),
        "type": RELATIONSHIP_TYPES[edge.type],
        "weight": float(edge.weight),
        "metadata": json.dumps(dict(edge.metadata), sort_keys=True),
        "created_at": micros(edge.created_at or at),
    }


def edge_from_row(row: Mapping[str, Any]) -> Edge:
    """The port edge of a neighbours row (stored direction kept)."""
    created = row.get("created_at")
    return Edge(
        source=row["source"],
        target=row["target"],
        type=EDGE_TYPES_BY_RELATIONSHIP[row["type"]],
        weight=float(row["weight"] if row["weight"] is not None else 1.0),
        metadata=json.loads(row.get("metadata") or "{}"),
        created_at=to_native(created) if created is not None else None,
    )


def filter_params(
    store: str, filters: Filters, now: datetime | None, *, as_of: bool = True
) -> dict[str, Any]:
    """Parameters of ``MEMORY_FILTER``: empty restrictions become ``null`` (no restriction).

    With ``as_of`` memories created after ``now`` (default: the wall clock) are invisible.
    """
    window = filters.time_range
    moment = micros(now if now is not None else datetime.now(UTC)) if as_of else LATEST
    return {
        "store": store,
        "now": moment,
        "categories": list(filters.categories) or None,
        "sources": list(filters.sources) or None,
        "start": micros(window.start) if window and window.start else EARLIEST,
        "end": micros(window.end) if window and window.end else LATEST,
        "filter_entity_uids": [uid(store, name.casefold()) for name in filters.entities] or None,
    }
