"""Packing: budgets are never exceeded, cuts are recorded, groups and trimming keep ids and meaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.domain.packaging import (
    ELLIPSIS,
    choose_grouping,
    estimate_tokens,
    excerpt,
    pack,
    summarise,
)
from memory_orchestrator.domain.requests import Budget
from memory_orchestrator.domain.results import QueryPlan, ResultItem
from memory_orchestrator.ports import Intent

DAY = datetime(2026, 3, 10, 9, tzinfo=UTC)


def plan(
    query: str = "atlas delay",
    *,
    intent: Intent = Intent.GENERAL,
    entities: tuple[str, ...] = (),
    strategy: str = "expanded",
) -> QueryPlan:
    return QueryPlan(query, query, (query,), intent, (), entities, None, strategy, 1, 0.8)


def item(
    memory_id: str,
    content: str,
    *,
    day: int = 0,
    entities: tuple[str, ...] = (),
    score: float = 1.0,
    superseded_by: tuple[str, ...] = (),
) -> ResultItem:
    return ResultItem(
        memory_id=memory_id,
        content=content,
        summary=content[:40],
        score=score,
        signals={},
        reasons=(),
        entities=entities,
        category="fact",
        source="user",
        created_at=DAY + timedelta(days=day),
        superseded=bool(superseded_by),
        superseded_by=superseded_by,
    )


ITEMS = [item(f"mem-{n}", f"memory number {n} about the atlas delay and the vendor", day=n) for n in range(6)]


def test_max_items_is_honoured_and_the_rest_cut() -> None:
    packed = pack(ITEMS, plan(), Budget(max_items=2), chars_per_token=4, max_item_chars=600)
    assert [i.memory_id for i in packed.items] == ["mem-0", "mem-1"]
    assert packed.cut == ("mem-2", "mem-3", "mem-4", "mem-5")
    assert "[mem-0] 2026-03-10 user: memory number 0" in packed.context_block


@pytest.mark.parametrize("max_chars", [60, 120, 200, 333, 1000])
def test_char_budget_is_never_exceeded(max_chars: int) -> None:
    packed = pack(
        ITEMS, plan(), Budget(max_items=10, max_chars=max_chars), chars_per_token=4, max_item_chars=600
    )
    assert packed.chars == len(packed.context_block) <= max_chars
    assert len(packed.items) + len(packed.cut) == len(ITEMS)


@pytest.mark.parametrize("max_tokens", [10, 40, 90])
def test_token_budget_is_never_exceeded(max_tokens: int) -> None:
    packed = pack(
        ITEMS, plan(), Budget(max_items=10, max_tokens=max_tokens), chars_per_token=4, max_item_chars=600
    )
    assert packed.est_tokens == estimate_tokens(packed.chars, 4) <= max_tokens


def test_item_that_does_not_fit_is_trimmed_when_room_is_worth_it() -> None:
    long_item = item(
        "mem-big", "vendor " * 20 + "the atlas delay was caused by late sensors " + "filler " * 40
    )
    packed = pack([long_item], plan(), Budget(max_chars=200), chars_per_token=4, max_item_chars=600)
    assert packed.items[0].truncated
    assert "atlas" in packed.items[0].content
    assert packed.chars <= 200


def test_oversized_memory_is_trimmed_around_the_query_terms() -> None:
    text = "intro " * 100 + "the atlas delay came from the vendor " + "outro " * 100
    packed = pack([item("mem-1", text)], plan(), Budget(), chars_per_token=4, max_item_chars=120)
    trimmed = packed.items[0]
    assert trimmed.truncated and len(trimmed.content) <= 120
    assert "atlas delay" in trimmed.content
    assert trimmed.content.startswith(ELLIPSIS) and trimmed.content.endswith(ELLIPSIS)


def test_excerpt_without_terms_keeps_the_start() -> None:
    assert excerpt("alpha beta gamma delta epsilon", 14, ["zzz"]).startswith("alpha")


def test_grouping_by_entity_keeps_rank_order_inside_groups() -> None:
    items = [
        item("m1", "Atlas launch moved", entities=("Atlas",)),
        item("m2", "Vendor X late again", entities=("Vendor X",)),
        item("m3", "Atlas budget approved", entities=("Atlas",)),
    ]
    packed = pack(
        items, plan(entities=("Atlas", "Vendor X")), Budget(), chars_per_token=4, max_item_chars=600
    )
    assert packed.grouping == "entity"
    assert [i.memory_id for i in packed.items] == ["m1", "m3", "m2"]
    block = packed.context_block
    assert block.index("## Atlas") < block.index("[m3]") < block.index("## Vendor X") < block.index("[m2]")


def test_episodic_and_when_are_chronological_by_day() -> None:
    items = [item("late", "b", day=3), item("early", "a", day=1)]
    packed = pack(items, plan(strategy="episodic"), Budget(), chars_per_token=4, max_item_chars=600)
    assert packed.grouping == "time"
    assert [i.memory_id for i in packed.items] == ["early", "late"]
    assert "## 2026-03-11" in packed.context_block
    assert choose_grouping(plan(intent=Intent.WHEN), None, "") == "time"


def test_task_grouping_puts_task_related_first() -> None:
    items = [item("m1", "lunch menu"), item("m2", "release checklist for atlas")]
    packed = pack(
        items,
        plan(),
        Budget(),
        chars_per_token=4,
        max_item_chars=600,
        group_by="task",
        task="prepare the atlas release",
    )
    assert [i.memory_id for i in packed.items] == ["m2", "m1"]
    assert "## Related to the task" in packed.context_block


def test_superseded_items_are_marked_in_the_block() -> None:
    packed = pack(
        [item("m1", "old fact", superseded_by=("m2",))],
        plan(),
        Budget(),
        chars_per_token=4,
        max_item_chars=600,
    )
    assert "(superseded by m2)" in packed.context_block


def test_empty_input_gives_an_empty_block() -> None:
    packed = pack([], plan(), Budget(), chars_per_token=4, max_item_chars=600)
    assert (packed.context_block, packed.chars, packed.est_tokens, packed.cut) == ("", 0, 0, ())


def test_summary_is_extractive() -> None:
    items = [item("m1", "Atlas slipped to April. More later.", entities=("Atlas",)), item("m2", "x", day=2)]
    text = summarise(items, plan(entities=("Atlas",)))
    assert text == "2 memories about Atlas (2026-03-10 to 2026-03-12). Top: Atlas slipped to April."
    assert summarise([], plan()) == "No memories matched."
