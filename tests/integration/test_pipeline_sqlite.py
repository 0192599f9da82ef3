"""End to end on the embedded SQLite backend: write path, WHY expansion, WHEN window, budget, replay."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import create_backend
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import Budget, ContextRequest, SearchRequest, WriteRequest
from memory_orchestrator.ports import Edge, EdgeType, FixedClock, Intent, NewMemory, WriteAction

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
ROWS = (
    ("Vendor X shipped the sensor batch three weeks late.", 40, "fact", ("Vendor X",)),
    ("Lunch menu: pasta on Friday.", 38, "general", ()),
    ("We postponed the Atlas launch to April.", 35, "decision", ("Atlas",)),
    ("Vendor X is based in Lyon and makes lidar sensors.", 30, "fact", ("Vendor X",)),
    ("Atlas design review went well.", 20, "context", ("Atlas",)),
    ("Decided to hire a second QA engineer for Atlas.", 8, "decision", ("Atlas",)),
    ("Offsite planning started for June.", 1, "general", ()),
)


@pytest.mark.anyio
async def test_pipeline_end_to_end_on_sqlite(tmp_path: Path) -> None:
    clock = FixedClock(NOW)
    async with create_backend({"path": str(tmp_path) + "/", "store": "e2e", "clock": clock}) as backend:
        orch = Orchestrator(backend, clock=clock)
        ids = []
        for content, days, category, entities in ROWS:
            memory = NewMemory(
                content, category=category, entities=entities, created_at=NOW - timedelta(days=days)
            )
            outcome = await orch.write(WriteRequest(memory))
            assert outcome.action == WriteAction.ADDED
            ids.append(outcome.id)
        cause, launch = ids[0], ids[2]
        await backend.link(Edge(cause, launch, EdgeType.CAUSAL, 0.9))

        duplicate = await orch.write(
            WriteRequest(NewMemory("Vendor X shipped the sensor batch three weeks late!"))
        )
        assert (duplicate.action, duplicate.id) == (WriteAction.SKIPPED, cause)

        why = await orch.search(SearchRequest("Why was the Atlas launch postponed?"))
        assert why.plan.intent == Intent.WHY
        found = [item.memory_id for item in why.items]
        assert found[0] == launch
        assert cause in found and why.items[found.index(cause)].path[0].edge_type == EdgeType.CAUSAL

        when = await orch.search(SearchRequest("Atlas decisions last week"))
        window = when.plan.time_window
        assert window is not None and when.items
        assert all(window.contains(item.created_at) for item in when.items)
        assert ids[5] in {item.memory_id for item in when.items}

        context = await orch.context(
            ContextRequest("Tell me about Vendor X", budget=Budget(max_items=2, max_chars=400))
        )
        assert context.chars <= 400 and len(context.items) <= 2
        assert f"[{ids[3]}]" in context.context_block or f"[{cause}]" in context.context_block
        json.dumps(context.to_dict())

        replayed = await orch.replay(why.trace_id)
        assert replayed.current_ids == replayed.original_ids
