"""Session and provenance logic: reading 'since', changes on any backend, session points, why-chains."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.provenance import explain_why
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.domain.sessions import (
    SESSION_SOURCE,
    SessionSummary,
    collect_changes,
    last_session_time,
    ordered_points,
    parse_since,
    session_entity,
)
from memory_orchestrator.ports import (
    Capabilities,
    ChangeKind,
    Edge,
    EdgeType,
    FixedClock,
    InvalidRequest,
    NewMemory,
)

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 days", NOW - timedelta(days=2)),
        ("3 hours ago", NOW - timedelta(hours=3)),
        ("last 2 weeks", NOW - timedelta(weeks=2)),
        ("an hour ago", NOW - timedelta(hours=1)),
        ("90 minutes", NOW - timedelta(minutes=90)),
        ("2026-03-01T08:30:00Z", datetime(2026, 3, 1, 8, 30, tzinfo=UTC)),
        ("2026-03-01", datetime(2026, 3, 1, tzinfo=UTC)),
        ("yesterday", datetime(2026, 3, 9, tzinfo=UTC)),
    ],
)
def test_parse_since_reads_timestamps_and_phrases(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


def test_parse_since_last_session_uses_the_given_moment() -> None:
    moment = NOW - timedelta(hours=5)
    assert parse_since("last session", NOW, last_session=moment) == moment


def test_parse_since_last_session_without_a_stored_session_says_what_to_do() -> None:
    with pytest.raises(InvalidRequest, match="no earlier session"):
        parse_since("last session", NOW)


@pytest.mark.parametrize("text", ["whenever", "2030-01-01"])
def test_parse_since_rejects_unreadable_or_future_times(text: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_since(text, NOW)


class NoChangeLogBackend(InMemoryBackend):
    """The reference backend with its change log switched off, as some stores have none."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(vector_search=False, intent_recall=False, change_log=False)


async def _history(backend: InMemoryBackend, clock: FixedClock) -> dict[str, str]:
    clock.set(NOW - timedelta(days=5))
    old = (await backend.remember(NewMemory("Deploys run on Fridays", entities=("Ops",)))).id
    clock.set(NOW - timedelta(hours=6))
    new = (await backend.remember(NewMemory("Deploys run on Tuesdays now", entities=("Ops",)))).id
    await backend.link(Edge(new, old, EdgeType.SUPERSEDES))
    clock.set(NOW - timedelta(hours=2))
    other = (await backend.remember(NewMemory("The Billing API moved to v3", entities=("Billing",)))).id
    clock.set(NOW - timedelta(hours=1))
    await backend.forget(other)
    clock.set(NOW)
    return {"old": old, "new": new, "other": other}


@pytest.mark.anyio
async def test_changes_from_the_change_log_list_every_kind_oldest_first() -> None:
    clock = FixedClock(NOW)
    async with InMemoryBackend(clock=clock) as backend:
        ids = await _history(backend, clock)
        report = await collect_changes(backend, NOW - timedelta(days=1), NOW)
    assert report.method == "change_log"
    assert report.ids(ChangeKind.ADDED) == [ids["new"], ids["other"]]
    assert report.ids(ChangeKind.SUPERSEDED) == [ids["old"]]
    assert report.ids(ChangeKind.FORGOTTEN) == [ids["other"]]
    times = [event.at for event in report.events]
    assert times == sorted(times)
    assert report.to_dict()["superseded"] == [ids["old"]]


@pytest.mark.anyio
async def test_changes_scoped_to_an_entity_say_what_they_could_not_match() -> None:
    clock = FixedClock(NOW)
    async with InMemoryBackend(clock=clock) as backend:
        ids = await _history(backend, clock)
        report = await collect_changes(backend, NOW - timedelta(days=1), NOW, entity="ops")
    assert report.ids(ChangeKind.ADDED) == [ids["new"]]
    assert ids["other"] not in report.ids(ChangeKind.ADDED)
    assert any("could not be matched" in note for note in report.not_visible)


@pytest.mark.anyio
async def test_changes_without_a_change_log_are_reconstructed_and_say_what_is_missing() -> None:
    clock = FixedClock(NOW)
    async with NoChangeLogBackend(clock=clock) as backend:
        ids = await _history(backend, clock)
        report = await collect_changes(backend, NOW - timedelta(days=1), NOW)
    assert report.method == "reconstructed"
    # The forgotten memory is invisible without a log; the supersession is read from the edge.
    assert report.ids(ChangeKind.ADDED) == [ids["new"]]
    assert report.ids(ChangeKind.SUPERSEDED) == [ids["old"]]
    assert report.ids(ChangeKind.FORGOTTEN) == []
    assert any("forgotten" in note for note in report.not_visible)


@pytest.mark.anyio
async def test_changes_report_a_failing_backend_instead_of_raising() -> None:
    async with InMemoryBackend() as backend:
        backend.fail_next("changes")
        report = await collect_changes(backend, NOW - timedelta(days=1), NOW)
    assert report.method == "unavailable"
    assert report.events == ()
    assert report.not_visible


@pytest.mark.anyio
async def test_last_session_time_is_the_newest_session_summary() -> None:
    clock = FixedClock(NOW - timedelta(days=2))
    async with InMemoryBackend(clock=clock) as backend:
        assert await last_session_time(backend, NOW) is None
        await backend.remember(NewMemory("we chose SQLite", source=SESSION_SOURCE))
        clock.set(NOW - timedelta(days=1))
        await backend.remember(NewMemory("unrelated note"))
        assert await last_session_time(backend, NOW) == NOW - timedelta(days=2, microseconds=-1)


def test_session_points_are_ordered_context_facts_decisions_without_repeats() -> None:
    summary = SessionSummary(
        session_id="s1",
        decisions=("Use SQLite by default", "use  sqlite by default"),
        key_points=("Neo4j needs Docker",),
        context=("We compared stores",),
    )
    points, dropped = ordered_points(summary)
    assert points == [
        ("context", "We compared stores"),
        ("fact", "Neo4j needs Docker"),
        ("decision", "Use SQLite by default"),
    ]
    assert dropped == ["use  sqlite by default"]
    assert session_entity("s1") == "session s1"


async def _decision_history(backend: InMemoryBackend, clock: FixedClock) -> dict[str, str]:
    contents = {
        "root": ("Laptops in the team have no Docker", "fact", ("Docker",)),
        "cause": ("Running Neo4j locally needs Docker", "fact", ("Neo4j",)),
        "decision": ("We decided the default backend is SQLite", "decision", ("SQLite",)),
        "effect": ("The SQLite adapter gained FTS5 keyword search", "fact", ("SQLite",)),
    }
    ids: dict[str, str] = {}
    for offset, (name, (content, category, entities)) in enumerate(contents.items()):
        clock.set(NOW - timedelta(days=10 - offset))
        memory = NewMemory(content, category=category, entities=entities)
        ids[name] = (await backend.remember(memory)).id
    await backend.link(
        Edge(ids["root"], ids["cause"], EdgeType.CAUSAL, 0.5, metadata={"evidence": "no Docker"})
    )
    await backend.link(Edge(ids["cause"], ids["decision"], EdgeType.CAUSAL, 0.8))
    await backend.link(Edge(ids["decision"], ids["effect"], EdgeType.CAUSAL, 0.9))
    clock.set(NOW)
    return ids


@pytest.mark.anyio
async def test_why_follows_causes_back_several_hops_and_orders_the_chain() -> None:
    clock = FixedClock(NOW)
    async with InMemoryBackend(clock=clock) as backend:
        ids = await _decision_history(backend, clock)
        orchestrator = Orchestrator(backend, clock=clock)
        report = await explain_why(orchestrator, backend, "why is SQLite the default backend?", depth=3)
    assert report.focus_id == ids["decision"]
    assert [(link.role, link.record.id) for link in report.chain] == [
        ("cause", ids["root"]),
        ("cause", ids["cause"]),
        ("decision", ids["decision"]),
        ("consequence", ids["effect"]),
    ]
    scores = {link.record.id: link.score for link in report.chain}
    assert scores[ids["cause"]] == pytest.approx(0.8)
    assert scores[ids["root"]] == pytest.approx(0.4)  # weights multiply along the path
    assert report.chain[0].evidence == "no Docker"
    assert report.trace_id


@pytest.mark.anyio
async def test_why_depth_one_stops_at_the_direct_cause() -> None:
    clock = FixedClock(NOW)
    async with InMemoryBackend(clock=clock) as backend:
        ids = await _decision_history(backend, clock)
        report = await explain_why(
            Orchestrator(backend, clock=clock), backend, "why SQLite default?", depth=1
        )
    assert [link.record.id for link in report.chain if link.role == "cause"] == [ids["cause"]]


@pytest.mark.anyio
async def test_why_lists_the_supersession_history_of_the_decision() -> None:
    clock = FixedClock(NOW - timedelta(days=3))
    async with InMemoryBackend(clock=clock) as backend:
        old = (await backend.remember(NewMemory("Deploys happen on Fridays", category="decision"))).id
        clock.set(NOW)
        new = (
            await backend.remember(NewMemory("We decided deploys happen on Tuesdays", category="decision"))
        ).id
        await backend.link(Edge(new, old, EdgeType.SUPERSEDES))
        report = await explain_why(
            Orchestrator(backend, clock=clock), backend, "why do deploys happen on Tuesdays?"
        )
    assert report.focus_id == new
    assert [(link.role, link.record.id) for link in report.supersession] == [("replaces", old)]


@pytest.mark.anyio
async def test_why_without_causal_links_says_so_and_lists_related_memories() -> None:
    clock = FixedClock(NOW)
    async with InMemoryBackend(clock=clock) as backend:
        await backend.remember(
            NewMemory("We picked Ruff as the linter", category="decision", entities=("Ruff",))
        )
        clock.set(NOW + timedelta(minutes=1))
        await backend.remember(NewMemory("Ruff runs in CI on every push", entities=("Ruff",)))
        report = await explain_why(Orchestrator(backend, clock=clock), backend, "why did we pick Ruff?")
    assert report.chain[0].role == "decision"
    assert any("no causal links" in note for note in report.notes)
    assert all(link.role == "related" for link in report.chain[1:])


@pytest.mark.anyio
async def test_why_prefers_a_top_decision_whose_causes_are_recorded() -> None:
    clock = FixedClock(NOW - timedelta(days=2))
    async with InMemoryBackend(clock=clock) as backend:
        cause = (await backend.remember(NewMemory("CI minutes ran out in March"))).id
        decision = (
            await backend.remember(NewMemory("We decided to cache wheels in CI", category="decision"))
        ).id
        await backend.link(Edge(cause, decision, EdgeType.CAUSAL, 0.9))
        clock.set(NOW)
        # a newer decision on the same topic, without recorded causes, ranks first
        later = (
            await backend.remember(
                NewMemory(
                    "Wheels in CI: we cache wheels in CI and cache them 7 days",
                    category="decision",
                    source="session",
                )
            )
        ).id
        orchestrator = Orchestrator(backend, clock=clock)
        top = (await orchestrator.search(SearchRequest("why do we cache wheels in CI?", top_k=3))).items
        report = await explain_why(orchestrator, backend, "why do we cache wheels in CI?")
    assert top[0].memory_id == later
    assert report.focus_id == decision
    assert [(link.role, link.record.id) for link in report.chain] == [
        ("cause", cause),
        ("decision", decision),
    ]
