"""Convert LoCoMo (snap-research/locomo, CC BY-NC 4.0) into the eval format, at evaluation time.

One store per conversation: ``<out>/<sample_id>/memories.jsonl`` + ``queries.jsonl``. The rules are
those of the eval README: one memory per dialogue turn, ``created_at`` = session date-time + the turn's
position in seconds, gold = the repaired evidence ids. The data itself is never bundled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_orchestrator.evaluation.datasets import MEMORIES_FILE, QUERIES_FILE, write_jsonl
from memory_orchestrator.ports import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    InvalidRequest,
    format_timestamp,
)
from memory_orchestrator.ports.text import extract_entities

#: LoCoMo's question categories (Maharana et al., 2024).
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
#: The categories the headline numbers are reported on.
HEADLINE_CATEGORIES = (1, 2, 3, 4)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D0*(\d+):0*(\d+)")
_SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"


@dataclass(slots=True)
class ConversionReport:
    """Counts of one conversion, per conversation and in total."""

    conversations: list[str] = field(default_factory=list)
    memories: int = 0
    queries: int = 0
    #: Evidence ids rewritten to exist (split lists, zero padding removed).
    repaired_ids: int = 0
    #: Evidence ids that name no turn of the conversation.
    dropped_ids: int = 0
    #: Questions left without any evidence (not written).
    skipped_questions: int = 0
    dropped_examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "conversations": list(self.conversations),
            "memories": self.memories,
            "queries": self.queries,
            "repaired_ids": self.repaired_ids,
            "dropped_ids": self.dropped_ids,
            "skipped_questions": self.skipped_questions,
            "dropped_examples": list(self.dropped_examples),
        }


def parse_session_time(text: str) -> datetime:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    try:
        return datetime.strptime(text.strip(), _SESSION_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise InvalidRequest(f"unreadable LoCoMo session date-time: {text!r}") from exc


def repair_evidence(raw: Sequence[str], known: set[str]) -> tuple[list[str], int, list[str]]:
    """Repair a question's evidence ids.

    Returns ``(ids, repaired, dropped)``: ids split on ``;`` and spaces and stripped of zero padding
    (``D01:3`` -> ``D1:3``), kept when they name a turn in ``known``, without duplicates; the number of
    ids whose spelling had to change; the pieces that name no turn.
    """
    ids: list[str] = []
    repaired = 0
    dropped: list[str] = []
    for entry in raw:
        pieces = [piece for piece in re.split(r"[;\s]+", str(entry)) if piece]
        split = len(pieces) > 1
        for piece in pieces:
            match = _DIA_ID.fullmatch(piece)
            fixed = f"D{match.group(1)}:{match.group(2)}" if match else piece
            if fixed not in known:
                dropped.append(piece)
                continue
            if split or fixed != piece:
                repaired += 1
            if fixed not in ids:
                ids.append(fixed)
    return ids, repaired, dropped


def sessions(conversation: Mapping[str, Any]) -> list[tuple[int, datetime, list[Mapping[str, Any]]]]:
    """The sessions of one conversation in order: (number, date-time, turns); empty ones left out."""
    found = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None or not isinstance(turns, list) or not turns:
            continue
        stamp = conversation.get(f"{key}_date_time")
        if not isinstance(stamp, str):
            raise InvalidRequest(f"LoCoMo {key} has no {key}_date_time")
        found.append((int(match.group(1)), parse_session_time(stamp), turns))
    return sorted(found, key=lambda session: session[0])


def turn_memory(
    sample_id: str, turn: Mapping[str, Any], created_at: datetime, known: Sequence[str]
) -> dict[str, Any]:
    """The eval-format memory of one dialogue turn."""
    speaker = str(turn["speaker"])
    text = str(turn.get("text", ""))
    content = f"{speaker}: {text}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [image: {caption}]"
    entities = [speaker]
    for name in extract_entities(text, known):
        if name.casefold() not in {e.casefold() for e in entities} and len(name) <= MAX_ENTITY_CHARS:
            entities.append(name)
    return {
        "id": f"{sample_id}/{turn['dia_id']}",
        "content": content,
        "category": "general",
        "importance": 3,
        "entities": entities[:MAX_ENTITIES],
        "tags": [],
        "source": speaker,
        "created_at": format_timestamp(created_at),
    }


def convert_sample(
    sample: Mapping[str, Any], report: ConversionReport
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Convert one LoCoMo sample into (memories, queries) rows, updating ``report``."""
    sample_id = str(sample["sample_id"])
    conversation = sample["conversation"]
    speakers = [str(conversation.get(key, "")) for key in ("speaker_a", "speaker_b") if conversation.get(key)]
    memories: list[dict[str, Any]] = []
    ordered = sessions(conversation)
    if not ordered:
        raise InvalidRequest(f"LoCoMo sample {sample_id} has no sessions")
    for _, started, turns in ordered:
        for position, turn in enumerate(turns):
            memories.append(turn_memory(sample_id, turn, started + timedelta(seconds=position), speakers))
    # "now" is the last session's date-time; its own turns are stamped a few seconds later, so the
    # moment is moved just past the last turn or the last session would not exist "as of now".
    _, last_started, last_turns = ordered[-1]
    now = format_timestamp(last_started + timedelta(seconds=len(last_turns)))
    known = {str(turn["dia_id"]) for _, _, turns in ordered for turn in turns}
    queries = _convert_questions(sample_id, sample.get("qa", []), known, now, report)
    report.conversations.append(sample_id)
    report.memories += len(memories)
    report.queries += len(queries)
    return memories, queries


def _convert_questions(
    sample_id: str, qa: Sequence[Mapping[str, Any]], known: set[str], now: str, report: ConversionReport
) -> list[dict[str, Any]]:
    queries = []
    for index, item in enumerate(qa, start=1):
        ids, repaired, dropped = repair_evidence(item.get("evidence") or [], known)
        report.repaired_ids += repaired
        report.dropped_ids += len(dropped)
        report.dropped_examples.extend(f"{sample_id}/q{index:03d}: {piece}" for piece in dropped)
        if not ids:
            report.skipped_questions += 1
            continue
        category = int(item.get("category", 0))
        queries.append(
            {
                "id": f"{sample_id}/q{index:03d}",
                "query": str(item["question"]),
                "now": now,
                "gold": [f"{sample_id}/{dia_id}" for dia_id in ids],
                "kind": f"{category}-{CATEGORY_NAMES.get(category, 'unknown')}",
                "category": category,
                "conversation": sample_id,
            }
        )
    return queries


def load_locomo(path: str | Path) -> list[Mapping[str, Any]]:
    """Read a LoCoMo JSON file (a list of samples)."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidRequest(f"cannot read LoCoMo file {source}: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(s, dict) and "sample_id" in s for s in data):
        raise InvalidRequest(f"{source} is not a LoCoMo file (a list of samples with sample_id)")
    return data


def import_locomo(path: str | Path, out: str | Path) -> ConversionReport:
    """Convert the LoCoMo file at ``path`` into one eval-format store per conversation under ``out``."""
    report = ConversionReport()
    target = Path(out)
    for sample in load_locomo(path):
        memories, queries = convert_sample(sample, report)
        folder = target / str(sample["sample_id"])
        write_jsonl(folder / MEMORIES_FILE, memories)
        write_jsonl(folder / QUERIES_FILE, queries)
    return report
