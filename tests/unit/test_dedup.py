"""Dedup: exact and near duplicates merged into the stronger item; stale facts demoted and marked."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.dedup import deduplicate
from memory_orchestrator.domain.ranking import RankedItem, RankingContext
from memory_orchestrator.ports import Intent, MemoryRecord

NOW = datetime(2026, 3, 18, tzinfo=UTC)
CONFIG = PipelineConfig()


def item(memory_id: str, content: str, score: float, *, days_old: int = 5, **fields: object) -> RankedItem:
    created = NOW - timedelta(days=days_old)
    rec = MemoryRecord(id=memory_id, content=content, created_at=created, updated_at=created, **fields)  # type: ignore[arg-type]
    return RankedItem(Candidate(rec, channels={"keyword"}), score, {}, superseded_by=list(rec.superseded_by))


def test_exact_duplicate_is_absorbed_by_the_stronger_item() -> None:
    outcome = deduplicate(
        [item("m1", "Vendor X shipped late", 0.9), item("m2", "vendor x  shipped LATE", 0.5)], CONFIG
    )
    assert [kept.record.id for kept in outcome.kept] == ["m1"]
    assert outcome.kept[0].absorbed_ids == ["m2"]
    assert outcome.drops == [("m2", "duplicate of m1")]
    assert "cross-validated by duplicate m2" in outcome.kept[0].reasons


def test_near_duplicate_at_threshold_merges_entities() -> None:
    first = item("m1", "sensors from vendor x arrived two weeks late", 0.9, entities=("Vendor X",))
    second = item("m2", "sensors from vendor x arrived two weeks late!!", 0.8, entities=("Sensors",))
    outcome = deduplicate([first, second], CONFIG)
    assert len(outcome.kept) == 1
    assert outcome.kept[0].absorbed_entities == ["Sensors"]


def test_partly_redundant_item_is_penalised_not_merged() -> None:
    first = item("m1", "atlas launch moved to april after sensor delay", 0.9)
    second = item("m2", "atlas launch moved to april after sensor delay confirmed by board", 0.85)
    outcome = deduplicate([first, second], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m1", "m2"]
    penalised = outcome.kept[1]
    assert 0.6 <= penalised.signals["duplication"] < CONFIG.dedup_threshold
    assert penalised.score < 0.85


def test_distinct_items_are_untouched() -> None:
    outcome = deduplicate(
        [item("m1", "alpha beta gamma", 0.9), item("m2", "delta epsilon zeta", 0.8)], CONFIG
    )
    assert [kept.record.id for kept in outcome.kept] == ["m1", "m2"]
    assert outcome.drops == []
    assert all(kept.signals["duplication"] == 0.0 for kept in outcome.kept)


def test_explicit_supersession_moves_the_older_after_current_items() -> None:
    old = item("m1", "we deploy with jenkins", 0.9, days_old=30, superseded_by=("m3",))
    old.superseded = True
    other = item("m2", "deploys happen on tuesdays", 0.5)
    new = item("m3", "we deploy with github actions", 0.4, days_old=1)
    outcome = deduplicate([old, other, new], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m2", "m3", "m1"]
    assert {"older": "m1", "newer": "m3", "why": "explicit supersedes edge"} in outcome.stale


def test_newer_negation_on_same_entity_marks_the_older_stale() -> None:
    old = item("m1", "Atlas uses the Postgres database for storage", 0.9, days_old=20, entities=("Atlas",))
    new = item(
        "m2", "Atlas no longer uses the Postgres database for storage", 0.7, days_old=2, entities=("Atlas",)
    )
    outcome = deduplicate([old, new], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m2", "m1"]
    assert outcome.kept[1].superseded
    assert outcome.kept[1].superseded_by == ["m2"]
    assert outcome.stale == [{"older": "m1", "newer": "m2", "why": "contradiction: negation"}]


def test_changed_value_on_same_entity_marks_the_older_stale() -> None:
    old = item("m1", "Atlas budget is 40000 euros", 0.9, days_old=20, entities=("Atlas",))
    new = item("m2", "Atlas budget is 55000 euros", 0.8, days_old=2, entities=("Atlas",))
    outcome = deduplicate([old, new], CONFIG)
    assert outcome.stale[0]["why"] == "contradiction: changed value"


def test_same_speaker_alone_is_not_a_contradiction() -> None:
    old = item("m1", "Caroline: I love painting", 0.9, days_old=20, entities=("Caroline",), source="Caroline")
    new = item(
        "m2", "Caroline: I don't love painting", 0.8, days_old=2, entities=("Caroline",), source="Caroline"
    )
    outcome = deduplicate([old, new], CONFIG)
    assert outcome.stale == []
    assert not outcome.kept[0].superseded


def test_a_why_question_infers_no_contradictions_but_keeps_explicit_supersession() -> None:
    context = RankingContext(query="why", intent=Intent.WHY, entities=(), now=NOW)
    atlas = ("Atlas",)
    before = item("m1", "Atlas budget is 40000 euros", 0.9, days_old=20, entities=atlas)
    after = item("m2", "Atlas budget is 55000 euros", 0.8, days_old=2, entities=atlas)
    old = item("m3", "we deploy with jenkins", 0.7, days_old=30, superseded_by=("m4",))
    new = item("m4", "we deploy with github actions", 0.6, days_old=1)
    for ranked in (before, after, old, new):
        ranked.context = context
    outcome = deduplicate([before, after, old, new], CONFIG)
    assert outcome.stale == [{"older": "m3", "newer": "m4", "why": "explicit supersedes edge"}]
    assert not before.superseded
    # The same pair in a question about the current state: the old budget is outdated.
    for ranked in (before, after):
        ranked.context = replace(context, intent=Intent.GENERAL)
    assert deduplicate([before, after], CONFIG).stale == [
        {"older": "m1", "newer": "m2", "why": "contradiction: changed value"}
    ]
