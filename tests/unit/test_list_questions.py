"""Questions that ask for several things: detection, the plan's cue and the heavier entity weight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.list_questions import SEVERAL_CUE, asks_for_several, is_list_question
from memory_orchestrator.domain.planner import plan
from memory_orchestrator.domain.ranking import RankingContext, rank
from memory_orchestrator.domain.requests import PlanOverrides
from memory_orchestrator.ports import Intent, MemoryRecord

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "question",
    [
        "What books has Melanie read",
        "How many times has Melanie gone to the beach",
        "What have John and Maria both done",
        "What types of pottery have Melanie and her kids made",
        "What are some changes Caroline has faced",
        "What has Melanie painted",
        "Where has Maria made friends",
    ],
)
def test_questions_asking_for_several_things(question: str) -> None:
    assert asks_for_several(question) is not None


@pytest.mark.parametrize(
    "question",
    [
        "When did Caroline go to the support group",
        "What is Caroline's identity",
        "What did Melanie paint recently",
        "Why did we change babysitters",
        "What has John been writing about",  # one ongoing thing
    ],
)
def test_questions_asking_for_one_thing(question: str) -> None:
    assert asks_for_several(question) is None


def test_the_plan_carries_the_cue_and_it_survives_an_intent_override() -> None:
    planned = plan("What books has Melanie read?", now=NOW)
    assert is_list_question(planned.intent_cues)
    assert any(cue.startswith(SEVERAL_CUE + "What books has") for cue in planned.intent_cues)
    overridden = plan("What books has Melanie read?", now=NOW, overrides=PlanOverrides(intent=Intent.ENTITY))
    assert overridden.intent_cues[0] == "override" and is_list_question(overridden.intent_cues)
    assert not is_list_question(plan("When did Melanie read it?", now=NOW).intent_cues)


def _turn(memory_id: str, speaker: str, text: str, relevance: float) -> Candidate:
    created = NOW - timedelta(days=5)
    memory = MemoryRecord(
        id=memory_id, content=f"{speaker}: {text}", created_at=created, updated_at=created, source=speaker
    )
    return Candidate(memory, relevance=relevance, ranks={"keyword#0": 1})


def test_a_list_question_leans_more_on_the_named_person() -> None:
    pool = [
        _turn("caroline", "Caroline", "Which book are you reading now, Mel? I love books!", 0.95),
        _turn("melanie", "Melanie", "I read 'Charlotte's Web' last week, a classic book", 0.70),
    ]
    query = "What books has Melanie read"

    def first(several: bool) -> str:
        context = RankingContext(query, Intent.GENERAL, ("Melanie",), NOW, several=several)
        ranked, _ = rank(pool, context, PipelineConfig())
        return ranked[0].record.id

    assert first(several=False) == "caroline"
    assert first(several=True) == "melanie"
