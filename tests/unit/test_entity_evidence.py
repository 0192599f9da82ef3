"""Whether the candidates back the entity boost: a question that names the wrong person."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig, RankingWeights
from memory_orchestrator.domain.entity_evidence import contested, entity_share, question_stems, stem
from memory_orchestrator.domain.ranking import RankingContext, rank
from memory_orchestrator.ports import Intent, MemoryRecord

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
QUESTION = "What position does Tim play on the team he signed with"


def turn(memory_id: str, speaker: str, text: str, relevance: float) -> Candidate:
    created = NOW - timedelta(days=3)
    memory = MemoryRecord(
        id=memory_id, content=f"{speaker}: {text}", created_at=created, updated_at=created, source=speaker
    )
    return Candidate(memory, relevance=relevance, ranks={"keyword#0": 1})


def ranked_ids(candidates: list[Candidate], config: PipelineConfig) -> list[str]:
    context = RankingContext(query=QUESTION, intent=Intent.GENERAL, entities=("Tim",), now=NOW)
    ranked, _ = rank(candidates, context, config)
    return [item.record.id for item in ranked]


def test_stem_joins_the_usual_word_forms() -> None:
    assert stem("painted") == stem("painting") == stem("paints") == "paint"
    assert stem("running") == stem("runs") == "run"
    assert stem("games") == stem("game")
    assert stem("making") == stem("make")
    assert stem("families") == stem("family")
    assert stem("classes") == "class"
    assert stem("sing") == "sing"  # too short to lose "-ing"


def test_question_stems_leave_out_the_names_and_possessive_s() -> None:
    stems = question_stems("How many times did Tim's goals change", ("Tim",))
    # "times" stems to "tim" but stays: the name is taken out as a word, before stemming
    assert stems == {"many", stem("times"), "goal", stem("change")}


def _pool() -> list[Candidate]:
    # Tim asks the question's words; John's turn is the one that says them (the answer).
    return [
        turn("tim-1", "Tim", "Congrats on the new team! Did you sign for long?", 0.8),
        turn("tim-2", "Tim", "Cool! What position will you play? Any big games coming up?", 0.75),
        turn("john-1", "John", "I signed with the team and I play the shooting guard position!", 0.85),
    ]


def test_a_memory_without_the_name_that_says_the_question_weakens_the_boost() -> None:
    pool = _pool()
    matches = {"tim-1": ["Tim"], "tim-2": ["Tim"], "john-1": []}
    assert entity_share(QUESTION, ("Tim",), pool, matches, 0.0) == 0.0
    assert entity_share(QUESTION, ("Tim",), pool, matches, 0.25) == 0.25


def test_the_boost_stays_when_a_named_memory_says_as_much() -> None:
    pool = [*_pool(), turn("tim-3", "Tim", "I play the point guard position on the team I signed with", 0.5)]
    matches = {"tim-1": ["Tim"], "tim-2": ["Tim"], "tim-3": ["Tim"], "john-1": []}
    assert entity_share(QUESTION, ("Tim",), pool, matches, 0.0) == 1.0


def test_the_boost_stays_when_the_other_match_covers_only_a_minority_of_the_words() -> None:
    question = "Which popular time management technique does Tim use to prepare for exams"
    pool = [
        turn("tim-1", "Tim", "Exams are overwhelming this week.", 0.9),
        turn("john-1", "John", "I know the stress of exams and how you prepare, you got this", 0.8),
    ]
    matches = {"tim-1": ["Tim"], "john-1": []}
    # John says 2 of 7 words (more than Tim's 1): not enough to say the question was about him
    assert entity_share(question, ("Tim",), pool, matches, 0.0) == 1.0


def test_a_telling_spread_over_a_few_other_turns_also_contests_the_name() -> None:
    # no single other turn says a majority of the 6 words, but their best three say 2 more in total
    assert contested(named=[2, 1, 1, 0], other=[2, 2, 2, 1], words=6)
    assert not contested(named=[2, 2, 1], other=[2, 2, 2], words=6)  # one more only
    assert not contested(named=[3, 1], other=[3, 2], words=6)  # a tie at the top, 1 more in all


def test_one_other_turn_with_most_words_contests_the_name() -> None:
    assert contested(named=[1], other=[2], words=3)
    assert not contested(named=[1], other=[2], words=4)  # 2 of 4 is no majority
    assert not contested(named=[2], other=[2], words=3)  # as good as the named one


def test_without_entities_there_is_nothing_to_weaken() -> None:
    assert entity_share(QUESTION, (), _pool(), {}, 0.0) == 1.0


def test_rank_puts_the_other_speakers_answer_first() -> None:
    boosted = PipelineConfig(weights=replace(RankingWeights(), contested_entity=1.0))
    assert ranked_ids(_pool(), boosted)[0] == "tim-1"  # the old behaviour: the full boost
    ranked = ranked_ids(_pool(), PipelineConfig())
    assert ranked[0] == "john-1"


def test_the_reasons_say_the_boost_was_withheld() -> None:
    context = RankingContext(query=QUESTION, intent=Intent.GENERAL, entities=("Tim",), now=NOW)
    ranked, _ = rank(_pool(), context, PipelineConfig())
    tim = next(item for item in ranked if item.record.id == "tim-1")
    assert tim.signals["entity"] == 0.0
    assert "entity match: Tim (boost withheld: other memories say the question better)" in tim.reasons
    boosted = PipelineConfig(weights=replace(RankingWeights(), contested_entity=1.0))
    ranked, _ = rank(_pool(), context, boosted)
    assert "entity match: Tim" in next(item for item in ranked if item.record.id == "tim-1").reasons
