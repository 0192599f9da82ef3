"""Keeping the sidecar's memory ids in step with the server's observations.

* Ids: an observation's id is :func:`graph.memory_id` of its entity and text. The server holds each
  text once per entity, so a second copy (``dedup=False``) or the same text stored again after it was
  forgotten gets the next free *generation*: the id of ``text + "\\0" + n``, n = 1, 2 ... Ids in use
  or ever used are in the sidecar, so every id is stable across restarts.
* Reconciliation: an observation in the graph without an active row (written by another agent, or by
  hand) is *adopted*: it gets an id and ``created_at`` = the moment it was first seen. An active row
  whose observation is no longer in the graph (deleted by someone else) is marked forgotten.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory_orchestrator.adapters.mcp_kg.graph import Graph, memory_id
from memory_orchestrator.adapters.mcp_kg.sidecar import Row
from memory_orchestrator.adapters.mcp_kg.snapshot import ADOPTED_SOURCE
from memory_orchestrator.ports import Change, ChangeKind
from memory_orchestrator.ports.autolinks import DEFAULT_LIMITS, LinkLimits, MemorySketch

#: A memory sharing fewer than this share of the new memory's tokens cannot pass a similarity rule.
MIN_SHARED_TOKENS = 0.3
EXTERNAL_DELETE = "observation removed from the graph outside the orchestrator"


def allocate(entity: str, text: str, used: set[str]) -> str:
    """The first free id of this observation (its plain id, else the next generation); marks it used."""
    candidate, generation = memory_id(entity, text), 0
    while candidate in used:
        generation += 1
        candidate = memory_id(entity, f"{text}\0{generation}")
    used.add(candidate)
    return candidate


@dataclass(slots=True)
class Reconciliation:
    """What the sidecar must record so that its active rows match the graph."""

    adopted: list[Row] = field(default_factory=list)
    forgotten: list[tuple[str, datetime]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.adopted or self.forgotten)


def reconcile(graph: Graph, rows: Sequence[Row], now: datetime) -> Reconciliation:
    """Adopt observations without a row; forget rows without an observation."""
    present = {(entity.name, text) for entity in graph.entities for text in entity.observations}
    covered = {(row.entity, row.text) for row in rows if row.forgotten_at is None}
    used = {row.id for row in rows}
    result = Reconciliation()
    for entity in graph.entities:
        for text in dict.fromkeys(entity.observations):
            if (entity.name, text) in covered:
                continue
            new_id = allocate(entity.name, text, used)
            row = Row(new_id, entity.name, text, now, now, source=ADOPTED_SOURCE, adopted=True)
            result.adopted.append(row)
            result.changes.append(Change(ChangeKind.ADDED, new_id, now, detail="found in the graph"))
    for row in rows:
        if row.forgotten_at is None and (row.entity, row.text) not in present:
            result.forgotten.append((row.id, now))
            result.changes.append(Change(ChangeKind.FORGOTTEN, row.id, now, detail=EXTERNAL_DELETE))
    return result


def candidates(
    new: MemorySketch, pool: Iterable[MemorySketch], limits: LinkLimits = DEFAULT_LIMITS
) -> list[MemorySketch]:
    """Every memory the link rules could pick for ``new``: same source, within the proximity window,
    sharing an entity, or sharing enough tokens (the rules themselves choose among them)."""
    window = limits.proximity_hours * 3600
    needed = max(1, math.ceil(MIN_SHARED_TOKENS * len(new.tokens)))
    return [
        item
        for item in pool
        if item.id != new.id
        and (
            item.source == new.source
            or abs((item.created_at - new.created_at).total_seconds()) <= window
            or not new.entities.isdisjoint(item.entities)
            or len(new.tokens & item.tokens) >= needed
        )
    ]
