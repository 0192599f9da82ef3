"""How a write becomes Mnemon CLI arguments or an ``import`` draft, and how its answer is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memory_orchestrator.ports import BackendRejected, NewMemory, ensure_utc

#: What a stored memory came back as: (stored id, Mnemon's action, Mnemon's answer for it).
Stored = tuple[str, str, Mapping[str, Any]]


def stamp(moment: datetime) -> str:
    """RFC 3339 UTC at second precision, as Mnemon stores times."""
    return ensure_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def needs_draft(memory: NewMemory) -> bool:
    """Back-dated memories go through ``import`` (the only way Mnemon takes a past ``created_at``); so do
    tags or entities holding commas (the CLI splits ``--tags``/``--entities`` on commas)."""
    return memory.created_at is not None or any("," in name for name in (*memory.tags, *memory.entities))


def remember_args(memory: NewMemory, *, diff: bool) -> list[str]:
    """``mnemon remember`` arguments (user text after ``--``)."""
    args = ["remember", "--cat", memory.category, "--imp", str(memory.importance), "--source", memory.source]
    if memory.tags:
        args += ["--tags", ",".join(memory.tags)]
    if memory.entities:
        args += ["--entities", ",".join(memory.entities)]
    if not diff:
        args.append("--no-diff")
    return [*args, "--", memory.content]


def draft(memories: Sequence[NewMemory]) -> dict[str, Any]:
    """An ``import`` draft (schema version 1) holding ``memories`` in order."""
    insights = []
    for memory in memories:
        item: dict[str, Any] = {
            "content": memory.content,
            "category": memory.category,
            "importance": memory.importance,
            "tags": list(memory.tags),
            "entities": list(memory.entities),
            "source": memory.source,
        }
        if memory.created_at is not None:
            item["created_at"] = stamp(memory.created_at)
        insights.append(item)
    return {"schema_version": "1", "source": memories[0].source, "insights": insights}


def imported(answer: Any, count: int) -> list[Stored]:
    """The stored id and action of each of the ``count`` drafted memories, in draft order."""
    rows = {int(row["index"]): row for row in (answer or {}).get("results", [])}
    found = []
    for index in range(count):
        row = rows.get(index)
        if row is None or row.get("error"):
            reason = (row or {}).get("error", "no result")
            raise BackendRejected(f"mnemon import: {reason}", backend="mnemon")
        found.append((str(row["id"]), str(row.get("action", "added")), row))
    return found


def remembered(answer: Any) -> Stored:
    """The stored memory of a ``remember`` answer.

    On ``skipped`` Mnemon returns a fresh id that is never stored; the stored memory is ``replaced_id``.
    """
    if not isinstance(answer, Mapping) or "id" not in answer:
        raise BackendRejected("mnemon remember gave no id", backend="mnemon")
    action = str(answer.get("action", "added"))
    memory_id = str(answer.get("replaced_id") or answer["id"]) if action == "skipped" else str(answer["id"])
    return memory_id, action, answer
