"""Planning a batch of writes against a snapshot: which memories are new, their rows and edges.

Pure (no I/O): the backend then records the rows and edges in the sidecar and the observations in the
server. Within a batch, each memory sees the ones planned before it (for duplicates, ids and the
automatic edges), exactly as if they had been written one by one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory_orchestrator.adapters.mcp_kg import ledger
from memory_orchestrator.adapters.mcp_kg.sidecar import Row
from memory_orchestrator.adapters.mcp_kg.snapshot import Snapshot
from memory_orchestrator.ports import Edge, MemoryRecord, NewMemory, WriteAction, WriteResult, ensure_utc
from memory_orchestrator.ports.autolinks import entities_for, link_candidates, plan_edges, sketch
from memory_orchestrator.ports.text import content_hash, name_candidates


@dataclass(slots=True)
class Batch:
    """The planned outcome of a batch: results in the order asked, new rows and their edges."""

    results: list[WriteResult] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def holder_row(snap: Snapshot, memory: NewMemory, used: set[str], now: datetime) -> Row:
    """The row of a new memory: on its first entity name (the graph's spelling), else ``notes/<source>``."""
    names = entities_for(memory, snap.known(name_candidates(memory.content)))
    # The server matches entity names exactly: reuse the graph's spelling of a known name.
    names = tuple(snap.spellings.get(name.casefold(), name) for name in names)
    holder = names[0] if names else f"notes/{memory.source}"
    return Row(
        ledger.allocate(holder, memory.content, used),
        holder,
        memory.content,
        ensure_utc(memory.created_at) if memory.created_at else now,
        now,
        memory.category,
        memory.importance,
        tuple(memory.tags),
        names,
        memory.source,
        dict(memory.metadata),
    )


def _record(row: Row) -> MemoryRecord:
    return MemoryRecord(
        row.id, row.text, row.created_at, row.updated_at, row.category, row.importance,
        row.tags, row.entities, row.source, row.metadata,
    )  # fmt: skip


def plan_batch(snap: Snapshot, memories: Sequence[NewMemory], now: datetime) -> Batch:
    """Duplicates (of the store or of an earlier memory of the batch) skipped, the rest planned."""
    used = set(snap.used_ids)
    pool = list(snap.sketches)
    counts = dict(snap.entity_uses)
    by_hash = dict(snap.by_hash)
    records = dict(snap.records)
    batch = Batch()
    for memory in memories:
        digest = content_hash(memory.content)
        if memory.dedup and digest in by_hash:
            existing = by_hash[digest]
            skipped = WriteResult(
                existing, WriteAction.SKIPPED, duplicate_of=existing, record=records.get(existing)
            )
            batch.results.append(skipped)
            continue
        row = holder_row(snap, memory, used, now)
        record = _record(row)
        new = sketch(record)
        others = ledger.candidates(new, pool)
        planned = plan_edges(new, others, at=now, entity_counts=counts)
        created = Counter(edge.type.value for edge in planned)
        candidates = link_candidates(new, others)
        batch.results.append(
            WriteResult(
                row.id, WriteAction.ADDED, candidates=candidates, edges_created=created, record=record
            )
        )
        batch.rows.append(row)
        batch.edges.extend(planned)
        pool.append(new)
        records[row.id] = record
        by_hash.setdefault(digest, row.id)
        for name in new.entities:
            counts[name] = counts.get(name, 0) + 1
    return batch
