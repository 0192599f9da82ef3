"""The planner: intent, entities, time windows, decomposition, strategy and overrides, at a fixed now."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_orchestrator.domain.planner import plan
from memory_orchestrator.domain.requests import PlanOverrides
from memory_orchestrator.domain.time_expressions import infer_time_window
from memory_orchestrator.ports import Filters, Intent, InvalidRequest, TimeRange

NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)  # a Wednesday
NEW_YEAR = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)  # a Friday, two days into the year


def day(year: int, month: int, dom: int) -> datetime:
    return datetime(year, month, dom, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "intent", "cue"),
    [
        ("Why did we delay the Atlas launch?", Intent.WHY, "why"),
        ("What was the reason for switching vendors", Intent.WHY, "what was the reason"),
        ("how come the build broke after March", Intent.WHY, "how come"),
        ("When did Caroline go to the support group?", Intent.WHEN, "when"),
        ("What year did Melanie start painting?", Intent.WHEN, "what year"),
        ("timeline of the Atlas project", Intent.WHEN, "timeline"),
        ("Who is Vendor X?", Intent.ENTITY, "who is"),
        ("Tell me about Project Atlas", Intent.ENTITY, "tell me about"),
        ("database connection pool settings", Intent.GENERAL, None),
    ],
)
def test_intent_and_the_cue_that_decided_it(query: str, intent: Intent, cue: str | None) -> None:
    result = plan(query, now=NOW)
    assert result.intent == intent
    if cue is not None:
        assert cue in result.intent_cues


@pytest.mark.parametrize(
    ("text", "now", "window"),
    [
        ("what did we decide today", NOW, (day(2026, 3, 18), day(2026, 3, 19))),
        ("notes from yesterday", NOW, (day(2026, 3, 17), day(2026, 3, 18))),
        ("what happened last week", NOW, (day(2026, 3, 9), day(2026, 3, 16))),
        ("plans this week", NOW, (day(2026, 3, 16), day(2026, 3, 23))),
        ("last month", NOW, (day(2026, 2, 1), day(2026, 3, 1))),
        ("this year", NOW, (day(2026, 1, 1), day(2027, 1, 1))),
        ("in March", NOW, (day(2026, 3, 1), day(2026, 4, 1))),
        ("in Q1", NOW, (day(2026, 1, 1), day(2026, 4, 1))),
        ("in Q3 2025", NOW, (day(2025, 7, 1), day(2025, 10, 1))),
        ("on 2026-03-14", NOW, (day(2026, 3, 14), day(2026, 3, 15))),
        ("during 2025-11", NOW, (day(2025, 11, 1), day(2025, 12, 1))),
        ("in 2024", NOW, (day(2024, 1, 1), day(2025, 1, 1))),
        ("on March 14, 2025", NOW, (day(2025, 3, 14), day(2025, 3, 15))),
        ("3 days ago", NOW, (day(2026, 3, 15), day(2026, 3, 16))),
        ("since February", NOW, (day(2026, 2, 1), None)),
        ("before 2026-03-01", NOW, (None, day(2026, 3, 1))),
        ("after March 3", NOW, (day(2026, 3, 4), None)),
        ("since 2026-02-01 and before March 10", NOW, (day(2026, 2, 1), day(2026, 3, 10))),
        # Spans: a week by a day in it (Monday to Monday), and ranges to the last day's end.
        ("what happened in the week of March 4?", NOW, (day(2026, 3, 2), day(2026, 3, 9))),
        ("between February 16 and February 20", NOW, (day(2026, 2, 16), day(2026, 2, 21))),
        ("from March 3 to 7", NOW, (day(2026, 3, 3), day(2026, 3, 8))),
        ("between 2024 and 2025", NOW, (day(2024, 1, 1), day(2026, 1, 1))),
        # Year boundaries: the most recent past occurrence, calendar units crossing into last year.
        ("last week", NEW_YEAR, (day(2025, 12, 22), day(2025, 12, 29))),
        ("last month", NEW_YEAR, (day(2025, 12, 1), day(2026, 1, 1))),
        ("last year", NEW_YEAR, (day(2025, 1, 1), day(2026, 1, 1))),
        ("in December", NEW_YEAR, (day(2025, 12, 1), day(2026, 1, 1))),
        ("in Q4", NEW_YEAR, (day(2025, 10, 1), day(2026, 1, 1))),
        ("since March", NEW_YEAR, (day(2025, 3, 1), None)),
        ("on December 31", NEW_YEAR, (day(2025, 12, 31), day(2026, 1, 1))),
        ("yesterday", datetime(2026, 1, 1, 8, tzinfo=UTC), (day(2025, 12, 31), day(2026, 1, 1))),
    ],
)
def test_time_window_relative_to_now(
    text: str, now: datetime, window: tuple[datetime | None, datetime | None]
) -> None:
    reading = infer_time_window(text, now)
    assert reading.window == TimeRange(*window)
    assert reading.phrases


def test_last_n_days_is_open_ended_from_now_minus_n() -> None:
    reading = infer_time_window("in the last 7 days", NOW)
    assert reading.window == TimeRange(datetime(2026, 3, 11, 15, 30, tzinfo=UTC), None)


@pytest.mark.parametrize(
    "text",
    [
        "the 2025 budget review",
        "What may happen to Atlas",
        "Vendor X delays",
        "March Hare",
        "from the bank to the river",
    ],
)
def test_no_window_without_a_time_expression(text: str) -> None:
    assert infer_time_window(text, NOW).window is None


def test_entities_from_regexes_capitalised_words_and_known_names() -> None:
    result = plan(
        "Did Caroline mention Project Atlas, the @ops-team or vendor x in docs/plan.md?",
        now=NOW,
        known_entities=("Vendor X", "Unrelated Name"),
    )
    assert {"Caroline", "Project Atlas", "@ops-team", "Vendor X", "docs/plan.md"} <= set(result.entities)
    assert "Unrelated Name" not in result.entities
    assert "Did" not in result.entities


def test_task_contributes_entities_but_not_query_text() -> None:
    result = plan("what is blocking the release", now=NOW, task="finish the Project Atlas release")
    assert "Project Atlas" in result.entities
    assert result.canonical == "what is blocking the release"


def test_conjunction_decomposes_into_parallel_subqueries() -> None:
    result = plan("Vendor X delays and their impact on Atlas", now=NOW, known_entities=("Vendor X",))
    assert result.subqueries == (
        "Vendor X delays and their impact on Atlas",
        "Vendor X delays",
        "their impact on Atlas",
    )


def test_short_conjuncts_are_not_split_into_fragments() -> None:
    result = plan("What did Caroline and Melanie do together?", now=NOW)
    assert result.subqueries == ("What did Caroline and Melanie do together",)
    assert {"Caroline", "Melanie"} <= set(result.entities)


@pytest.mark.parametrize("query", ["", "   ", "what happened?", "anything new since yesterday?"])
def test_content_free_query_is_episodic(query: str) -> None:
    result = plan(query, now=NOW)
    assert result.strategy == "episodic"
    assert result.hops == 0
    assert result.subqueries == ()


def test_episodic_keeps_the_time_window() -> None:
    result = plan("what happened last week?", now=NOW)
    assert result.strategy == "episodic"
    assert result.time_window == TimeRange(day(2026, 3, 9), day(2026, 3, 16))


def test_why_walks_two_hops_and_general_one() -> None:
    assert plan("why did the deploy fail", now=NOW).hops == 2
    assert plan("deploy failure details", now=NOW).hops == 1
    assert plan("why did the deploy fail", now=NOW, max_hops=1).hops == 1


def test_exact_lookup_is_direct() -> None:
    result = plan('"Quarterly Planning Notes"', now=NOW)
    assert result.strategy == "direct"
    assert result.hops == 0


def test_overrides_win_over_every_inferred_decision() -> None:
    window = TimeRange(day(2025, 1, 1), day(2025, 2, 1))
    result = plan(
        "why did we delay Atlas last week",
        now=NOW,
        overrides=PlanOverrides(
            intent=Intent.ENTITY,
            entities=("Vendor X",),
            time_window=window,
            strategy="direct",
            hops=0,
            subqueries=("atlas delay",),
        ),
    )
    assert result.intent == Intent.ENTITY
    assert result.intent_cues[0] == "override"
    assert result.entities == ("Vendor X",)
    assert result.time_window == window
    assert (result.strategy, result.hops, result.subqueries) == ("direct", 0, ("atlas delay",))


def test_unknown_strategy_override_is_invalid() -> None:
    with pytest.raises(InvalidRequest, match="strategy"):
        plan("anything", now=NOW, overrides=PlanOverrides(strategy="magic"))


def test_confidence_grows_with_cues_entities_and_words() -> None:
    vague = plan("stuff about things", now=NOW)
    precise = plan("Why did Vendor X delay the Atlas launch in March?", now=NOW)
    assert 0.0 <= vague.confidence < precise.confidence <= 1.0


def test_a_filter_time_range_is_the_window_and_the_text_is_not_read() -> None:
    window = TimeRange(day(2025, 6, 1), day(2025, 7, 1))
    result = plan("what happened last week", now=NOW, filters=Filters(time_range=window))
    assert result.time_window == window
    assert "time: filters" in result.intent_cues
