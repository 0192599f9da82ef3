"""The re-ranker: signals, weights, expansion shares, supersession, scorers and deterministic order."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.ranking import (
    RankingContext,
    matched_entities,
    name_pattern,
    noise,
    rank,
    recency,
)
from memory_orchestrator.domain.results import PathStep
from memory_orchestrator.ports import EdgeType, Intent, MemoryRecord, ScoringContext

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
CONFIG = PipelineConfig()


def record(memory_id: str, content: str, *, days_old: float = 10, **fields: object) -> MemoryRecord:
    created = NOW - timedelta(days=days_old)
    return MemoryRecord(id=memory_id, content=content, created_at=created, updated_at=created, **fields)  # type: ignore[arg-type]


def context(
    intent: Intent = Intent.GENERAL, entities: tuple[str, ...] = (), **fields: object
) -> RankingContext:
    return RankingContext(query="q", intent=intent, entities=entities, now=NOW, **fields)  # type: ignore[arg-type]


def test_relevance_orders_direct_hits() -> None:
    strong = Candidate(record("m1", "atlas launch delayed by vendor"), relevance=1.0, ranks={"keyword#0": 1})
    weak = Candidate(record("m2", "atlas budget review meeting"), relevance=0.4, ranks={"keyword#0": 2})
    ranked, warnings = rank([weak, strong], context(), CONFIG)
    assert [item.record.id for item in ranked] == ["m1", "m2"]
    assert ranked[0].signals["relevance"] == 1.0
    assert "matched the query (keyword #1)" in ranked[0].reasons
    assert warnings == []


def test_expanded_neighbour_inherits_share_below_its_seed() -> None:
    seed = Candidate(record("m1", "atlas launch delayed by vendor"), relevance=1.0, ranks={"keyword#0": 1})
    step = PathStep("m1", "m3", EdgeType.TEMPORAL, 1.0)
    neighbour = Candidate(
        record("m3", "sensors arrived late again"), inherited=0.6, seed_id="m1", path=(step,)
    )
    weak = Candidate(record("m2", "some other atlas note"), relevance=0.3, ranks={"keyword#0": 9})
    ranked, _ = rank([weak, neighbour, seed], context(), CONFIG)
    assert [item.record.id for item in ranked] == ["m1", "m3", "m2"]
    assert ranked[1].signals["graph"] == 0.6
    assert "1 hop from m1 via temporal" in ranked[1].reasons


def test_direct_hit_that_is_also_a_neighbour_is_corroborated() -> None:
    step = PathStep("m0", "m1", EdgeType.CAUSAL, 1.0)
    both = Candidate(
        record("m1", "deploy failed on friday"), relevance=0.5, inherited=0.4, path=(step,), seed_id="m0"
    )
    alone = Candidate(record("m2", "deploy checklist updated"), relevance=0.5)
    ranked, _ = rank([alone, both], context(), CONFIG)
    assert ranked[0].record.id == "m1"
    gap = ranked[0].score - ranked[1].score
    assert gap == pytest.approx(CONFIG.weights.graph * 0.4)


def test_entity_overlap_counts_entities_source_and_mentions() -> None:
    by_speaker = record("m1", "I went to the support group", source="Caroline")
    mentions = record("m2", "Caroline said the group helped")
    other = record("m3", "Melanie painted a sunrise", source="Melanie")
    ranked, _ = rank(
        [Candidate(r, relevance=0.5) for r in (other, mentions, by_speaker)],
        context(entities=("Caroline",)),
        CONFIG,
    )
    signals = {item.record.id: item.signals["entity"] for item in ranked}
    assert signals == {"m1": 1.0, "m2": 1.0, "m3": 0.0}
    assert ranked[-1].record.id == "m3"
    assert "entity match: Caroline" in ranked[0].reasons


def test_recency_counts_fully_only_when_time_matters() -> None:
    old = Candidate(record("old", "release notes for atlas", days_old=300), relevance=0.8)
    new = Candidate(record("new", "release notes for atlas v2", days_old=1), relevance=0.75)
    general, _ = rank([old, new], context(), CONFIG)
    when, _ = rank([old, new], context(Intent.WHEN), CONFIG)
    assert general[0].record.id == "old"
    assert when[0].record.id == "new"
    assert "recent" in when[0].reasons


def test_recency_half_life() -> None:
    assert recency(NOW - timedelta(days=30), NOW, 30) == pytest.approx(0.5)
    assert recency(NOW + timedelta(days=1), NOW, 30) == 1.0


def test_why_prefers_decisions_and_stated_reasons() -> None:
    reason = Candidate(record("m1", "we moved the launch because sensors were late"), relevance=0.6)
    plain = Candidate(record("m2", "the launch is in april", category="fact"), relevance=0.6)
    ranked, _ = rank([plain, reason], context(Intent.WHY), CONFIG)
    assert ranked[0].record.id == "m1"
    assert ranked[0].signals["type_match"] == 1.0


def test_superseded_memory_is_demoted_and_flagged() -> None:
    stale = Candidate(record("m1", "we use postgres 14", superseded_by=("m2",)), relevance=1.0)
    fresh = Candidate(record("m2", "we use postgres 16"), relevance=0.5)
    ranked, _ = rank([stale, fresh], context(), CONFIG)
    assert [item.record.id for item in ranked] == ["m2", "m1"]
    assert ranked[1].superseded
    assert "superseded by m2" in ranked[1].reasons


def test_noise_penalises_content_free_memories() -> None:
    assert noise("ok!") == 1.0
    assert noise("thanks, see you") == 1.0
    assert noise("thanks, parcel arrived") == pytest.approx(1 / 3)
    assert noise("the sensors from vendor x arrived late") == 0.0


def test_cross_reference_rewards_agreeing_lists() -> None:
    agreed = Candidate(
        record("m1", "atlas vendor delay"), relevance=0.7, ranks={"keyword#0": 2, "recall#0": 1}
    )
    single = Candidate(record("m2", "atlas vendor delay note"), relevance=0.7, ranks={"keyword#0": 1})
    ranked, _ = rank([single, agreed], context(total_lists=2), CONFIG)
    assert ranked[0].record.id == "m1"
    assert ranked[0].signals["cross_reference"] == 1.0
    assert "confirmed by 2 retrieval lists" in ranked[0].reasons


class TagScorer:
    name = "tag_match"
    weight = 0.5

    def score(self, context: ScoringContext, record: MemoryRecord, signals: Mapping[str, float]) -> float:
        return 1.0 if "pinned" in record.tags else 0.0


class BrokenScorer:
    name = "broken"
    weight = 1.0

    def score(self, context: ScoringContext, record: MemoryRecord, signals: Mapping[str, float]) -> float:
        raise RuntimeError("boom")


def test_plugin_scorers_add_weighted_signal_and_failures_warn() -> None:
    pinned = Candidate(record("m1", "atlas note", tags=("pinned",)), relevance=0.5)
    other = Candidate(record("m2", "atlas note two"), relevance=0.6)
    ranked, warnings = rank([other, pinned], context(), CONFIG, [TagScorer(), BrokenScorer()])
    assert ranked[0].record.id == "m1"
    assert ranked[0].signals["tag_match"] == 1.0
    assert "broken" not in ranked[0].signals
    assert warnings == ["scorer broken failed (RuntimeError); ignored"]


def test_ties_break_on_newer_then_id() -> None:
    a = Candidate(record("b", "same words here", days_old=5), relevance=0.5)
    b = Candidate(record("a", "same words here", days_old=5), relevance=0.5)
    c = Candidate(record("c", "same words here", days_old=1), relevance=0.5)
    ranked, _ = rank([a, b, c], context(), CONFIG)
    assert [item.record.id for item in ranked] == ["c", "a", "b"]


def test_an_entity_most_candidates_carry_boosts_little() -> None:
    speaker = [Candidate(record(f"c{n}", f"note {n}", source="Caroline"), relevance=0.5) for n in range(11)]
    other = [Candidate(record("m0", "melanie note"), relevance=0.5)]
    ranked, _ = rank(speaker + other, context(entities=("Caroline",)), CONFIG)
    assert ranked[0].signals["entity"] == pytest.approx(2 * (1 - 11 / 12), abs=1e-6)
    half = [Candidate(record(f"c{n}", f"note {n}", source="Caroline"), relevance=0.5) for n in range(5)]
    rest = [Candidate(record(f"m{n}", f"note {n}"), relevance=0.5) for n in range(7)]
    ranked, _ = rank(half + rest, context(entities=("Caroline",)), CONFIG)
    assert ranked[0].signals["entity"] == 1.0 and ranked[0].record.source == "Caroline"


def test_a_name_used_to_address_someone_is_not_an_entity_match() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def matches(content: str, source: str = "Melanie") -> list[str]:
        record = MemoryRecord(
            id="m", content=content, created_at=now, updated_at=now, source=source, entities=("Caroline",)
        )
        return matched_entities(record, [name_pattern("Caroline")])

    assert matches("Wow, Caroline! That sounds great") == []
    assert matches("Hey Caroline, how was the trip?") == []
    assert matches("Caroline, so glad you came") == []
    assert matches("I told Caroline about the parade") == ["Caroline"]
    assert matches("Thanks, Mel!", source="Caroline") == ["Caroline"]  # her own words
    assert matches("Adoption papers are signed") == ["Caroline"]  # an entity the writer gave
