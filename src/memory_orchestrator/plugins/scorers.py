"""Built-in ranking signals registered through the ``scorers`` plugin."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from memory_orchestrator.ports import InvalidRequest, MemoryRecord, ScoringContext

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)


def read_weight(options: Mapping[str, Any], default: float, *, scorer: str) -> float:
    """The ``weight`` option of a scorer, validated to lie in ``[0, 5]``."""
    value = options.get("weight", default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 5.0:
        raise InvalidRequest(f"scorer {scorer!r}: weight must be a number between 0 and 5, got {value!r}")
    return float(value)


class TagMatchScorer:
    """Rewards memories whose tags the question names (a tag is a curated, high-precision topic).

    The signal is ``1 - 0.5**matches``: one named tag gives 0.5, two 0.75, so a memory with many
    tags cannot dominate; a tag counts when it appears in the query or task as a whole word (or
    phrase) or equals one of the planned entities.
    """

    name = "tag_match"

    def __init__(self, weight: float = 0.05) -> None:
        self.weight = weight

    def score(self, context: ScoringContext, record: MemoryRecord, signals: Mapping[str, float]) -> float:
        """Return the tag-match signal of ``record`` in ``[0, 1]``."""
        if not record.tags:
            return 0.0
        # The question is the same for every candidate of a request (a hundred or more), and their
        # tags recur: each tag is looked up once per question (see _Question).
        matches = _question(context.query, context.task, context.entities).named(record.tags)
        return 1.0 - 0.5**matches


class _Question:
    """A question's words and entities, and whether it names each tag met so far."""

    __slots__ = ("entities", "verdicts", "words")

    #: Tags remembered per question (a long-lived question meets at most the store's tags).
    MOST = 4096

    def __init__(self, words: tuple[str, ...], entities: frozenset[str]) -> None:
        self.words, self.entities = words, entities
        self.verdicts: dict[str, bool] = {}

    def named(self, tags: tuple[str, ...]) -> int:
        """How many of the distinct ``tags`` the question names."""
        verdicts, count = self.verdicts, 0
        for tag in set(tags):
            verdict = verdicts.get(tag)
            if verdict is None:
                if len(verdicts) >= self.MOST:
                    verdicts.clear()
                verdict = verdicts[tag] = _tag_named(tag, self.words, self.entities)
            count += verdict
        return count


@lru_cache(maxsize=64)  # a few concurrent requests' questions (up to ~4k characters each)
def _question(query: str, task: str, entities: tuple[str, ...]) -> _Question:
    return _Question(_words(f"{query} {task}"), frozenset(entity.casefold() for entity in entities))


def _words(text: str) -> tuple[str, ...]:
    return tuple(word.casefold() for word in _WORD.findall(text))


@lru_cache(maxsize=4096)  # tags are short and recur across memories
def _tag_words(folded_tag: str) -> tuple[str, ...]:
    return _words(folded_tag)


def _tag_named(tag: str, words: tuple[str, ...], entities: frozenset[str]) -> bool:
    folded = tag.casefold()
    if folded in entities:
        return True
    tag_words = _tag_words(folded)
    if not tag_words:
        return False
    size = len(tag_words)
    if size == 1:  # most tags are one word: a membership test in C, not a slice per position
        return tag_words[0] in words
    return any(words[start : start + size] == tag_words for start in range(len(words) - size + 1))


def create_tag_match_scorer(options: Mapping[str, Any]) -> TagMatchScorer:
    """Factory of :class:`TagMatchScorer` (option ``weight``, default 0.05)."""
    return TagMatchScorer(weight=read_weight(options, 0.05, scorer=TagMatchScorer.name))
