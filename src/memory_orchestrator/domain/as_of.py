"""Supersession as of the question's moment: a memory replaced only later is still current then.

Backends report every ``supersedes`` edge in ``superseded_by`` whatever the superseding memory's
age, so an "as of March" question would see March's answer marked superseded by a May decision
that did not exist yet. Only superseders created at or before ``now`` count.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.ports import MemoryBackend


async def drop_future_superseders(
    backend: MemoryBackend, candidates: Collection[Candidate], now: datetime, timeout_s: float
) -> str | None:
    """Keep in each candidate's ``superseded_by`` only superseders that existed at ``now``.

    One ``get`` for the superseders not already among ``candidates``; returns a warning (and
    changes nothing) when that lookup fails.
    """
    wanted = {memory_id for item in candidates for memory_id in item.record.superseded_by}
    if not wanted:
        return None
    known = {item.memory_id: item.record.created_at for item in candidates}
    missing = sorted(wanted - set(known))
    if missing:
        try:
            records = await within(backend.get(missing), timeout_s)
        except Exception as exc:  # supersession then stays as the backend reported it
            return f"as-of supersession check failed ({type(exc).__name__}); superseded marks kept"
        known.update({record.id: record.created_at for record in records})
    existing = {memory_id for memory_id in wanted if memory_id in known and known[memory_id] <= now}
    for item in candidates:
        kept = tuple(memory_id for memory_id in item.record.superseded_by if memory_id in existing)
        if kept != item.record.superseded_by:
            item.record = replace(item.record, superseded_by=kept)
    return None
