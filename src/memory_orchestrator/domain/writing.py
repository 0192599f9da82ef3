"""The write path's decisions (pure): duplicates, contradictions and link proposals.

The orchestrator searches the backend for memories like the new one and hands the hits here:
an identical or near-identical memory (token Jaccard at or above ``write_dedup_threshold``) makes
the write a skip (or, with ``replace``, an update that supersedes it); a memory about the same
entity that the new one negates or gives another value for is proposed as a ``supersedes``
candidate; the closest remaining memories are proposed as links.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from memory_orchestrator.ports import EdgeType, LinkCandidate, MemoryRecord, NewMemory
from memory_orchestrator.ports.text import (
    content_hash,
    extract_entities,
    has_negation,
    jaccard,
    overlap,
    tokenize,
)

#: Word overlap above which a memory on the same entity can contradict the new one.
CONTRADICTION_OVERLAP = 0.5
#: Similarity from which an existing memory is worth proposing as a link.
LINK_SIMILARITY = 0.3
MAX_LINK_CANDIDATES = 5
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass(frozen=True, slots=True)
class Duplicate:
    """An existing memory the new one repeats; ``exact`` when the normalised text is identical."""

    record: MemoryRecord
    similarity: float
    exact: bool


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    # The same stored memories come back as the similar ones of write after write, and each write
    # compares every one of them three ways: each text is tokenized once.
    return frozenset(tokenize(text))


@lru_cache(maxsize=4096)
def _hash(text: str) -> str:
    return content_hash(text)


def find_duplicate(memory: NewMemory, existing: Sequence[MemoryRecord], threshold: float) -> Duplicate | None:
    """The existing memory ``memory`` duplicates (exact first, then the most similar), if any."""
    digest = content_hash(memory.content)
    for record in existing:
        if _hash(record.content) == digest:
            return Duplicate(record, 1.0, True)
    words = _words(memory.content)
    best: Duplicate | None = None
    for record in existing:
        score = jaccard(words, _words(record.content))
        if score < threshold or not same_claim(memory.content, record.content):
            continue
        if best is None or score > best.similarity:
            best = Duplicate(record, score, False)
    return best


def same_claim(first: str, second: str) -> bool:
    """False when two similar texts differ by a negation or a number (an update, not a repeat).

    Stop-word tokens drop "no" and "not", so "X is no longer in Lyon" looks like "X is in Lyon".
    """
    if has_negation(first) != has_negation(second):
        return False
    return set(_NUMBER.findall(first)) == set(_NUMBER.findall(second))


def memory_entities(memory: NewMemory, known: Sequence[str] = ()) -> set[str]:
    """Casefolded entities of a new memory: the given ones plus those found in its text."""
    return {name.casefold() for name in (*memory.entities, *extract_entities(memory.content, known))}


def contradiction_candidates(
    memory: NewMemory, existing: Sequence[MemoryRecord], known: Sequence[str] = ()
) -> list[LinkCandidate]:
    """Existing memories the new one may contradict (proposed as ``supersedes`` candidates)."""
    names = memory_entities(memory, known) - {memory.source.casefold()}
    words = _words(memory.content)
    negated = has_negation(memory.content)
    values = set(_NUMBER.findall(memory.content))
    found: list[LinkCandidate] = []
    for record in existing:
        shared = names & {name.casefold() for name in record.entities}
        similarity = overlap(words, _words(record.content))
        if not shared or similarity < CONTRADICTION_OVERLAP:
            continue
        why = None
        if negated != has_negation(record.content):
            why = "negation"
        elif values and set(_NUMBER.findall(record.content)) - values and _NUMBER.search(record.content):
            why = "changed value"
        if why is not None:
            reason = f"may contradict: {why} about {', '.join(sorted(shared))}"
            found.append(
                LinkCandidate(record.id, record.content, round(similarity, 6), EdgeType.SUPERSEDES, reason)
            )
    return found


def link_proposals(
    memory: NewMemory, existing: Sequence[MemoryRecord], exclude: set[str], known: Sequence[str] = ()
) -> list[LinkCandidate]:
    """The closest existing memories by shared entities or words, best first."""
    names = memory_entities(memory, known)
    words = _words(memory.content)
    scored: list[LinkCandidate] = []
    for record in existing:
        if record.id in exclude:
            continue
        shared = names & {name.casefold() for name in record.entities}
        theirs = _words(record.content)
        similarity = max(jaccard(words, theirs), overlap(words, theirs))
        if shared and similarity < LINK_SIMILARITY:
            scored.append(
                LinkCandidate(
                    record.id,
                    record.content,
                    round(min(0.5, 0.3 + 0.1 * len(shared)), 6),
                    EdgeType.ENTITY,
                    f"shares {', '.join(sorted(shared))}",
                )
            )
        elif similarity >= LINK_SIMILARITY:
            reason = f"similar content ({similarity:.2f})"
            scored.append(
                LinkCandidate(record.id, record.content, round(similarity, 6), EdgeType.SEMANTIC, reason)
            )
    scored.sort(key=lambda candidate: (-candidate.similarity, candidate.id))
    return scored[:MAX_LINK_CANDIDATES]
