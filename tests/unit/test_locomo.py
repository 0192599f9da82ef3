"""The LoCoMo importer against a small hand-made file with messy evidence ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_orchestrator.evaluation.datasets import load_dataset
from memory_orchestrator.evaluation.locomo import (
    import_locomo,
    parse_session_time,
    repair_evidence,
)
from memory_orchestrator.ports import InvalidRequest

FIXTURE = Path(__file__).parent.parent / "fixtures" / "locomo_tiny.json"


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def converted(tmp_path: Path) -> tuple[Path, object]:
    report = import_locomo(FIXTURE, tmp_path / "out")
    return tmp_path / "out" / "conv-x", report


def test_session_times_parse_as_utc() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
    with pytest.raises(InvalidRequest, match="unreadable"):
        parse_session_time("yesterday")


def test_evidence_repair_splits_unpads_and_drops_unknown() -> None:
    known = {"D1:3", "D2:2", "D1:1"}

    assert repair_evidence(["D01:3; D2:2"], known) == (["D1:3", "D2:2"], 2, [])
    assert repair_evidence(["D1:03 D9:9", "D"], known) == (["D1:3"], 1, ["D9:9", "D"])
    assert repair_evidence(["D1:1", "D1:1"], known) == (["D1:1"], 0, [])


def test_one_memory_per_turn_with_speaker_caption_time_and_entities(converted: tuple[Path, object]) -> None:
    folder, _ = converted
    memories = _rows(folder / "memories.jsonl")

    assert [m["id"] for m in memories] == [
        "conv-x/D1:1",
        "conv-x/D1:2",
        "conv-x/D1:3",
        "conv-x/D2:1",
        "conv-x/D2:2",
    ]
    first, second, third = memories[:3]
    assert first["content"] == "Ada: Hi Brian! I adopted a cat named Pixel."
    assert second["content"] == "Brian: Lovely! Here is my garden. [image: a photo of a garden with roses]"
    # session date-time plus the turn's position in seconds keeps the order of turns
    assert [m["created_at"] for m in memories] == [
        "2023-05-08T13:56:00Z",
        "2023-05-08T13:56:01Z",
        "2023-05-08T13:56:02Z",
        "2023-06-02T10:04:00Z",
        "2023-06-02T10:04:01Z",
    ]
    assert first["source"] == "Ada" and second["source"] == "Brian"
    assert first["entities"][0] == "Ada" and "Brian" in first["entities"]
    assert "Globex Corporation" in third["entities"]


def test_queries_have_repaired_gold_now_and_slices(converted: tuple[Path, object]) -> None:
    folder, report = converted
    queries = _rows(folder / "queries.jsonl")

    # the question with no evidence is skipped
    assert [q["id"] for q in queries] == ["conv-x/q001", "conv-x/q002", "conv-x/q003", "conv-x/q005"]
    assert queries[1]["gold"] == ["conv-x/D1:3", "conv-x/D2:2"]
    assert queries[2]["gold"] == ["conv-x/D1:3"]
    assert queries[3]["gold"] == ["conv-x/D1:1"]
    # "now" is just past the last turn of the last non-empty session
    assert {q["now"] for q in queries} == {"2023-06-02T10:04:02Z"}
    assert [(q["kind"], q["category"], q["conversation"]) for q in queries] == [
        ("4-single-hop", 4, "conv-x"),
        ("1-multi-hop", 1, "conv-x"),
        ("2-temporal", 2, "conv-x"),
        ("5-adversarial", 5, "conv-x"),
    ]
    assert report.to_dict() == {
        "conversations": ["conv-x"],
        "memories": 5,
        "queries": 4,
        "repaired_ids": 3,
        "dropped_ids": 2,
        "skipped_questions": 1,
        "dropped_examples": ["conv-x/q003: D9:9", "conv-x/q003: D"],
    }


def test_converted_folder_loads_as_one_store_per_conversation(converted: tuple[Path, object]) -> None:
    folder, _ = converted

    [store] = load_dataset(folder.parent)

    assert store.name == "conv-x"
    assert len(store.memories) == 5 and len(store.queries) == 4
    assert store.queries[0].slices["category"] == "4"


def test_a_file_that_is_not_locomo_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(InvalidRequest, match="not a LoCoMo file"):
        import_locomo(bad, tmp_path / "out")
