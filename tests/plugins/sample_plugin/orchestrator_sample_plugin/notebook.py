"""A deliberately small backend keeping every memory in one JSON file (good enough for a sample)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    Capabilities,
    Change,
    ChangeKind,
    Edge,
    EdgeType,
    Filters,
    HealthCheck,
    Hit,
    InvalidRequest,
    MemoryRecord,
    Neighbor,
    NewMemory,
    NotFound,
    RecallQuery,
    WriteAction,
    WriteResult,
    format_timestamp,
    parse_timestamp,
)

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


class NotebookBackend(AsyncLifecycle):
    """Memories and edges in a JSON file, read on ``open`` and rewritten after every change."""

    name = "notebook"

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._memories: dict[str, dict[str, Any]] = {}
        self._edges: list[dict[str, Any]] = []

    @property
    def capabilities(self) -> Capabilities:
        """Keyword search only; no change log."""
        return Capabilities(intent_recall=False, change_log=False)

    async def open(self) -> None:
        """Read the file if it exists."""
        if self.path.is_file():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._memories, self._edges = data["memories"], data["edges"]

    async def aclose(self) -> None:
        """Nothing to release."""

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"memories": self._memories, "edges": self._edges}), encoding="utf-8")

    def _record(self, row: dict[str, Any]) -> MemoryRecord:
        created = parse_timestamp(row["created_at"])
        superseded_by = tuple(
            e["source"] for e in self._edges if e["type"] == "supersedes" and e["target"] == row["id"]
        )
        return MemoryRecord(
            id=row["id"],
            content=row["content"],
            created_at=created,
            updated_at=created,
            category=row["category"],
            importance=row["importance"],
            tags=tuple(row["tags"]),
            entities=tuple(row["entities"]),
            source=row["source"],
            superseded_by=superseded_by,
        )

    def _active(self, now: datetime | None = None, filters: Filters = Filters()) -> list[MemoryRecord]:
        records = [self._record(row) for row in self._memories.values() if not row["forgotten"]]
        return [r for r in records if (now is None or r.created_at <= now) and filters.admits(r)]

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store ``memory`` unless identical content is already there."""
        if not memory.content.strip():
            raise InvalidRequest("content must not be empty")
        for record in self._active():
            if memory.dedup and record.content.strip() == memory.content.strip():
                return WriteResult(id=record.id, action=WriteAction.SKIPPED, duplicate_of=record.id)
        memory_id = f"nb-{uuid.uuid4().hex[:12]}"
        self._memories[memory_id] = {
            "id": memory_id,
            "content": memory.content,
            "created_at": format_timestamp(memory.created_at or datetime.now(UTC)),
            "category": memory.category,
            "importance": memory.importance,
            "tags": list(memory.tags),
            "entities": list(memory.entities),
            "source": memory.source,
            "forgotten": False,
        }
        self._save()
        return WriteResult(
            id=memory_id, action=WriteAction.ADDED, record=self._record(self._memories[memory_id])
        )

    async def link(self, edge: Edge) -> Edge:
        """Store an edge between two known memories."""
        if edge.source == edge.target:
            raise InvalidRequest("an edge needs two different memories")
        for memory_id in (edge.source, edge.target):
            if memory_id not in self._memories or self._memories[memory_id]["forgotten"]:
                raise NotFound(f"unknown memory {memory_id}")
        self._edges.append(
            {"source": edge.source, "target": edge.target, "type": edge.type.value, "weight": edge.weight}
        )
        self._save()
        return edge

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Same as keyword search."""
        return await self.search(query.text, limit=query.limit, filters=query.filters, now=query.now)

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Memories sharing words with ``text``, by share of the query's words."""
        wanted = _words(text)
        scored = []
        for record in self._active(now, filters):
            shared = len(wanted & _words(record.content))
            if shared:
                scored.append(Hit(record=record, score=shared / len(wanted), via="keyword"))
        scored.sort(key=lambda hit: (-hit.score, hit.record.id))
        return scored[:limit]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """One hop only, both directions."""
        active = {record.id: record for record in self._active(filters=filters)}
        found: dict[str, Neighbor] = {}
        for row in self._edges:
            edge = Edge(row["source"], row["target"], EdgeType(row["type"]), row["weight"])
            if edge_types is not None and edge.type not in edge_types:
                continue
            for start, end in ((edge.source, edge.target), (edge.target, edge.source)):
                if start in ids and end not in ids and end in active and end not in found:
                    found[end] = Neighbor(record=active[end], edge=edge, from_id=start)
        ordered = sorted(found.values(), key=lambda n: (-n.edge.weight, n.record.id))
        return ordered[:limit]

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in order."""
        active = {record.id: record for record in self._active()}
        return [active[memory_id] for memory_id in ids if memory_id in active]

    async def forget(self, memory_id: str) -> None:
        """Soft delete."""
        row = self._memories.get(memory_id)
        if row is None or row["forgotten"]:
            raise NotFound(f"unknown memory {memory_id}")
        row["forgotten"] = True
        self._save()

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest first."""
        return sorted(self._active(now, filters), key=lambda r: (r.created_at, r.id), reverse=True)[:limit]

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Additions since ``since`` (no log of other changes)."""
        added = [r for r in self._active() if r.created_at >= since]
        added.sort(key=lambda r: r.created_at)
        return [
            Change(kind=ChangeKind.ADDED, memory_id=r.id, at=r.created_at, record=r) for r in added[:limit]
        ]

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names, most used first."""
        counts: dict[str, int] = {}
        for record in self._active():
            for entity in record.entities:
                counts[entity] = counts.get(entity, 0) + 1
        return sorted(counts, key=lambda name: (-counts[name], name))[:limit]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Always ok; says which file it uses."""
        check = HealthCheck(name="file", status="ok", detail=f"notebook {self.path}")
        return BackendHealth(
            backend=self.name, status="ok", checks=(check,), memory_count=len(self._active())
        )
