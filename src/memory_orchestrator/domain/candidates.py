"""The candidate pool: one memory on its way through retrieval, expansion and ranking."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from memory_orchestrator.domain.results import PathStep
from memory_orchestrator.ports import MemoryRecord
from memory_orchestrator.ports.text import tokenize


@dataclass(slots=True)
class Candidate:
    """A memory found by retrieval and/or expansion, with what is known about how it was found.

    ``relevance`` is the fused direct-retrieval relevance in ``[0, 1]`` (0 for memories reached
    only by expansion). ``inherited`` is the decayed share of a seed's relevance passed along the
    graph path; ``proximity`` is that path's own strength (edge weights times the hop decay).
    """

    record: MemoryRecord
    relevance: float = 0.0
    rrf: float = 0.0
    #: Best rank per retrieval list (``keyword#0`` = keyword channel, first subquery).
    ranks: dict[str, int] = field(default_factory=dict)
    channels: set[str] = field(default_factory=set)
    subqueries: set[int] = field(default_factory=set)
    inherited: float = 0.0
    proximity: float = 0.0
    seed_id: str | None = None
    path: tuple[PathStep, ...] = ()
    _words: frozenset[str] | None = None

    def words(self) -> frozenset[str]:
        """The memory's content tokens, computed once (ranking and dedup both need them)."""
        if self._words is None:
            self._words = content_words(self.record.content)
        return self._words

    @property
    def memory_id(self) -> str:
        """The memory's id."""
        return self.record.id

    @property
    def expanded(self) -> bool:
        """True when the memory was reached over the graph."""
        return bool(self.path)

    @property
    def direct(self) -> bool:
        """True when a retrieval channel found the memory itself."""
        return bool(self.ranks)


def content_words(content: str) -> frozenset[str]:
    """The tokens of a memory's content; cached, as the same memories come back query after query."""
    return frozenset(content_tokens(content))


@lru_cache(maxsize=16384)
def content_tokens(content: str) -> tuple[str, ...]:
    """The distinct tokens of a memory's content, in order; cached, so that ranking, dedup and the
    entity evidence tokenize each memory once."""
    # A tuple of strings, not the set: the cycle collector stops tracking such tuples, while every
    # cached set would be walked by each full collection (the caches decided a server's tail latency).
    return tuple(dict.fromkeys(tokenize(content)))
