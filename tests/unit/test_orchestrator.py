"""The Orchestrator over the in-memory backend: intents, strategies, dedup, supersession, budgets, traces."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.pipeline import PipelineInput, filtering_window
from memory_orchestrator.domain.planner import plan
from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    ExpandRequest,
    PlanOverrides,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.domain.results import SearchResult
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    FixedClock,
    Intent,
    InvalidRequest,
    NewMemory,
    NotFound,
    WriteAction,
)

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)  # Wednesday
#: (content, days before NOW, category, entities)
PROJECT = (
    ("Vendor X shipped the sensor batch three weeks late.", 40, "fact", ("Vendor X",)),
    ("Lunch menu: pasta on Friday.", 38, "general", ()),
    ("We postponed the Atlas launch to April.", 35, "decision", ("Atlas",)),
    ("Vendor X is based in Lyon and makes lidar sensors.", 30, "fact", ("Vendor X",)),
    ("Atlas design review went well.", 20, "context", ("Atlas",)),
    ("Retro notes: the team wants shorter standups.", 9, "insight", ()),
    ("Decided to hire a second QA engineer for Atlas.", 8, "decision", ("Atlas",)),
    ("Offsite planning started for June.", 1, "general", ()),
)


async def store(rows: tuple[tuple[str, int, str, tuple[str, ...]], ...] = PROJECT) -> InMemoryBackend:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    await backend.open()
    for content, days, category, entities in rows:
        await backend.remember(
            NewMemory(content, category=category, entities=entities, created_at=NOW - timedelta(days=days))
        )
    return backend


def orchestrator(backend: InMemoryBackend, **config: object) -> Orchestrator:
    return Orchestrator(backend, config=PipelineConfig(**config), clock=FixedClock(NOW))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_why_finds_the_cause_through_a_causal_edge_keywords_miss() -> None:
    backend = await store()
    await backend.link(Edge("mem-000001", "mem-000003", EdgeType.CAUSAL, 0.9))
    keyword_only = {hit.record.id for hit in await backend.search("Why was the Atlas launch postponed")}
    assert "mem-000001" not in keyword_only
    result = await orchestrator(backend).search(SearchRequest("Why was the Atlas launch postponed?"))
    assert result.plan.intent == Intent.WHY and result.plan.strategy == "expanded"
    ids = [item.memory_id for item in result.items]
    assert ids[0] == "mem-000003"
    cause = result.items[ids.index("mem-000001")]
    assert cause.path[0].edge_type == EdgeType.CAUSAL and cause.path[0].from_id == "mem-000003"
    assert "causal chain from mem-000003 (1 hop)" in cause.reasons
    assert ids.index("mem-000001") < ids.index("mem-000002")  # the cause beats unrelated memories
    assert "graph" in cause.channels


@pytest.mark.anyio
async def test_when_honours_the_time_window_read_from_the_query() -> None:
    result = await orchestrator(await store()).search(SearchRequest("what did we decide last week?"))
    window = result.plan.time_window
    assert window is not None and window.start == datetime(2026, 3, 9, tzinfo=UTC)
    assert result.items and all(window.contains(item.created_at) for item in result.items)
    assert "mem-000007" in {item.memory_id for item in result.items}
    # "decide" matches no word of last week's memories: the window's own memories answer.
    assert all("window" in item.channels for item in result.items)


@pytest.mark.anyio
async def test_empty_window_falls_back_to_any_time_with_a_warning() -> None:
    result = await orchestrator(await store()).search(SearchRequest("sensors from Vendor X in 2024"))
    assert result.items
    assert any("time window" in warning for warning in result.warnings)


@pytest.mark.anyio
async def test_a_window_in_a_question_with_more_to_match_is_a_boost_not_a_filter() -> None:
    rows = (
        ("Went to a robotics convention with my colleagues last month", 2, "fact", ()),
        ("Colleagues and I planned the robotics booth", 30, "fact", ()),
        ("Bought groceries for the week", 25, "fact", ()),
    )
    orch = orchestrator(await store(rows))
    # February (the month before NOW): the convention was told in March, after it happened
    result = await orch.search(
        SearchRequest("what robotics convention did I attend with colleagues in February?")
    )
    window = result.plan.time_window
    assert window is not None and window.start == datetime(2026, 2, 1, tzinfo=UTC)
    ids = [item.content for item in result.items]
    assert ids[:2] == [rows[0][0], rows[1][0]]
    assert result.items[1].signals["time"] == 1.0 and result.items[0].signals["time"] == 0.5
    assert not any("time window" in warning for warning in result.warnings)
    outside = await orch.search(
        SearchRequest("what robotics convention did I attend with colleagues in 2019?")
    )
    assert outside.items
    assert any("no memory in the time window" in warning for warning in outside.warnings)


@pytest.mark.anyio
async def test_entity_question_builds_a_profile_across_memories() -> None:
    orch = orchestrator(await store())
    result = await orch.context(ContextRequest("Tell me about Vendor X"))
    assert result.plan.intent == Intent.ENTITY and "Vendor X" in result.plan.entities
    assert {"mem-000001", "mem-000004"} <= {item.memory_id for item in result.items[:2]}
    assert result.context_block.splitlines()[1] == "## Vendor X"
    assert "[mem-000004]" in result.context_block and "[mem-000001]" in result.context_block


@pytest.mark.anyio
async def test_episodic_query_lists_recent_memories_chronologically() -> None:
    result = await orchestrator(await store()).search(SearchRequest("what happened?", top_k=3))
    assert result.plan.strategy == "episodic"
    assert [item.memory_id for item in result.items] == ["mem-000006", "mem-000007", "mem-000008"]


@pytest.mark.anyio
async def test_memories_created_after_now_are_invisible() -> None:
    result = await orchestrator(await store()).search(
        SearchRequest("Atlas", now=NOW - timedelta(days=25), expand=False)
    )
    assert {item.memory_id for item in result.items} <= {
        "mem-000001",
        "mem-000002",
        "mem-000003",
        "mem-000004",
    }
    assert "mem-000003" in {item.memory_id for item in result.items}


@pytest.mark.anyio
async def test_duplicates_are_merged_into_one_item() -> None:
    backend = await store()
    await backend.remember(
        NewMemory("We postponed the Atlas launch to April!", dedup=False, created_at=NOW - timedelta(days=34))
    )
    result = await orchestrator(backend).search(SearchRequest("Atlas launch postponed", expand=False))
    top = result.items[0]
    assert top.memory_id in {"mem-000003", "mem-000009"}
    assert set(top.absorbed_ids) == {"mem-000003", "mem-000009"} - {top.memory_id}
    assert len([i for i in result.items if i.memory_id in {"mem-000003", "mem-000009"}]) == 1
    explained = await orchestrator(backend).explain(SearchRequest("Atlas launch postponed", expand=False))
    assert any(drop["reason"].startswith("duplicate of") for drop in explained["drops"])


@pytest.mark.anyio
async def test_superseded_memory_is_flagged_and_ranked_after_its_replacement() -> None:
    backend = await store()
    orch = orchestrator(backend)
    outcome = await orch.write(
        WriteRequest(
            NewMemory("We moved the Atlas launch to May.", category="decision", entities=("Atlas",)),
            supersedes=("mem-000003",),
        )
    )
    assert outcome.action == WriteAction.ADDED and outcome.superseded == ("mem-000003",)
    result = await orch.search(SearchRequest("When is the Atlas launch?"))
    ids = [item.memory_id for item in result.items]
    assert ids.index(outcome.id) < ids.index("mem-000003")
    old = result.items[ids.index("mem-000003")]
    assert old.superseded and old.superseded_by == (outcome.id,)


@pytest.mark.anyio
async def test_context_budget_is_never_exceeded_and_cuts_are_listed() -> None:
    orch = orchestrator(await store())
    result = await orch.context(
        ContextRequest("Atlas Vendor X sensors launch", budget=Budget(max_items=3, max_chars=220))
    )
    assert result.chars == len(result.context_block) <= 220
    assert len(result.items) <= 3
    assert result.cut and not set(result.cut) & {item.memory_id for item in result.items}
    assert result.est_tokens == -(-result.chars // 4)
    document = await orch.trace(result.trace_id)
    assert {drop["memory_id"] for drop in document["drops"] if drop["reason"] == "budget"} == set(result.cut)


@pytest.mark.anyio
async def test_results_and_traces_are_json_safe() -> None:
    orch = orchestrator(await store())
    result = await orch.search(SearchRequest("Atlas launch"))
    json.dumps(result.to_dict())
    document = await orch.explain(SearchRequest("Atlas launch"))
    json.dumps(document)
    assert set(document["stages"]) >= {"retrieval", "ranking", "dedup"}
    assert document["plan"]["canonical"] == "Atlas launch"
    assert document["result"]["items"][0]["signals"]["relevance"] > 0


@pytest.mark.anyio
async def test_a_result_converts_the_same_each_time_into_dicts_of_its_own() -> None:
    result = await orchestrator(await store()).search(SearchRequest("Atlas launch"))
    first = result.to_dict()
    first["items"][0]["signals"]["relevance"] = -1.0  # a caller changing what it got
    first["items"][0]["created_at"] = "changed"
    again = result.to_dict()
    assert again["items"][0]["signals"]["relevance"] > 0
    assert again["items"][0]["created_at"].endswith("Z")
    assert again == made_anew(result).to_dict()


def made_anew(result: SearchResult) -> SearchResult:
    """The same result made anew (nothing computed by an earlier ``to_dict`` carried over)."""
    items = tuple(dataclasses.replace(item) for item in result.items)
    return dataclasses.replace(result, items=items)


@pytest.mark.anyio
async def test_overrides_reach_the_plan() -> None:
    result = await orchestrator(await store()).search(
        SearchRequest("Atlas", overrides=PlanOverrides(intent=Intent.WHY, strategy="direct", hops=0))
    )
    assert (result.plan.intent, result.plan.strategy, result.plan.hops) == (Intent.WHY, "direct", 0)
    assert all(not item.path for item in result.items)


@pytest.mark.anyio
async def test_expand_walks_from_seed_ids_and_from_entities() -> None:
    backend = await store()
    await backend.link(Edge("mem-000001", "mem-000003", EdgeType.CAUSAL, 0.9))
    orch = orchestrator(backend)
    result = await orch.expand(ExpandRequest(seeds=("mem-000003",), intent=Intent.WHY, hops=1))
    assert result.seeds == ("mem-000003",)
    assert result.items[0].memory_id == "mem-000001"
    assert result.items[0].path[0].edge_type == EdgeType.CAUSAL
    by_entity = await orch.expand(ExpandRequest(seed_entities=("Vendor X",), edge_types=(EdgeType.CAUSAL,)))
    assert "mem-000001" in by_entity.seeds
    assert "mem-000003" in {item.memory_id for item in by_entity.items}
    with pytest.raises(NotFound):
        await orch.expand(ExpandRequest(seeds=("mem-999999",)))


@pytest.mark.anyio
async def test_write_skips_duplicates_and_replace_updates() -> None:
    backend = await store()
    orch = orchestrator(backend)
    skipped = await orch.write(WriteRequest(NewMemory("Vendor X shipped the sensor batch three weeks late!")))
    assert (skipped.action, skipped.id, skipped.duplicate_of) == (
        WriteAction.SKIPPED,
        "mem-000001",
        "mem-000001",
    )
    assert len(backend.records) == len(PROJECT)
    updated = await orch.write(
        WriteRequest(NewMemory("Vendor X shipped the sensor batch three weeks late!!"), replace=True)
    )
    assert updated.action == WriteAction.UPDATED and updated.superseded == ("mem-000001",)
    assert backend.records["mem-000001"].superseded_by == (updated.id,)


@pytest.mark.anyio
async def test_write_proposes_contradictions_and_creates_links() -> None:
    backend = await store()
    orch = orchestrator(backend)
    outcome = await orch.write(
        WriteRequest(
            NewMemory("Vendor X is no longer based in Lyon and makes lidar sensors.", entities=("Vendor X",)),
            links=(Edge("", "mem-000001", EdgeType.ENTITY, 0.8),),
        )
    )
    assert outcome.action == WriteAction.ADDED
    assert any(c.id == "mem-000004" and c.edge_type == EdgeType.SUPERSEDES for c in outcome.candidates)
    assert [(e.source, e.target) for e in outcome.links_created] == [(outcome.id, "mem-000001")]
    assert backend.records["mem-000004"].superseded_by == ()  # only proposed, not applied


@pytest.mark.anyio
async def test_replay_reports_what_changed_since() -> None:
    backend = await store()
    orch = orchestrator(backend)
    first = await orch.search(SearchRequest("hire QA engineer", expand=False))
    same = await orch.replay(first.trace_id)
    assert same.added == () and same.removed == () and same.original_ids == same.current_ids
    new = await orch.write(WriteRequest(NewMemory("QA engineer hire approved by finance.")))
    replayed = await orch.replay(first.trace_id)
    assert new.id in replayed.added
    with pytest.raises(NotFound):
        await orch.trace("tr-unknown")


@pytest.mark.anyio
async def test_an_as_of_question_sees_the_answer_before_a_later_supersession() -> None:
    backend = await store(())
    old = await backend.remember(
        NewMemory(
            "Atlas releases go out on Thursdays.", category="decision", created_at=NOW - timedelta(days=60)
        )
    )
    new = await backend.remember(
        NewMemory(
            "Atlas releases go out on Tuesdays.", category="decision", created_at=NOW - timedelta(days=10)
        )
    )
    await backend.link(Edge(new.id, old.id, EdgeType.SUPERSEDES, 1.0))
    before = await orchestrator(backend).search(
        SearchRequest("when do Atlas releases go out", now=NOW - timedelta(days=30))
    )
    assert [item.memory_id for item in before.items] == [old.id]
    assert not before.items[0].superseded
    after = await orchestrator(backend).search(SearchRequest("when do Atlas releases go out"))
    assert after.items[0].memory_id == new.id
    assert next(item for item in after.items if item.memory_id == old.id).superseded


def test_time_phrases_do_not_count_as_words_that_make_a_window_soft() -> None:
    def window_filters(query: str) -> bool:
        planned = plan(query, now=NOW)
        assert planned.time_window is not None
        return filtering_window(planned, PipelineInput(query, NOW, keep=10)) is not None

    assert window_filters("what changed in the last two weeks?")
    assert window_filters("Atlas decisions last week")
    assert not window_filters("what robotics convention did I attend with colleagues in February?")


@pytest.mark.anyio
async def test_a_question_that_is_mostly_its_window_also_lists_the_windows_memories() -> None:
    rows = (
        ("We go with Postgres for the ledger", 20, "decision", ()),  # February 26: no "decision" in it
        ("The decision log template was updated", 21, "fact", ()),
        ("Decision: Friday deploys stop", 60, "decision", ()),  # January: outside the window
    )
    result = await orchestrator(await store(rows)).search(
        SearchRequest("what decisions were made in February?")
    )
    contents = [item.content for item in result.items]
    assert set(contents) == {rows[0][0], rows[1][0]}
    assert "window" in result.items[0].channels or "window" in result.items[1].channels


@pytest.mark.anyio
async def test_library_requests_with_a_lone_surrogate_are_invalid_and_change_nothing() -> None:
    backend = await store()
    orch = orchestrator(backend)
    before = dict(backend.records)
    calls = [
        orch.search(SearchRequest("why \udcff")),
        orch.context(ContextRequest("x", task="\ud800")),
        orch.search(SearchRequest("x", filters=Filters(entities=("Ana\udcff",)))),
        orch.expand(ExpandRequest(seeds=("mem-\udcff",))),
        orch.write(WriteRequest(NewMemory("ok"), supersedes=("mem-\ud800",))),
        orch.write(WriteRequest(NewMemory("caf\udce9"))),
    ]
    for call in calls:
        with pytest.raises(InvalidRequest, match="not valid Unicode text"):
            await call
    assert backend.records == before
