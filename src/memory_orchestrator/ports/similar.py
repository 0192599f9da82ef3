"""An optional backend protocol: the memories most like a new one, for the write path's check."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from memory_orchestrator.ports.records import MemoryRecord


@runtime_checkable
class SimilarMemories(Protocol):
    """A backend that finds the stored memories sharing the most words with a text, cheaply.

    The write path compares a new memory with these for near-duplicates, contradictions and link
    proposals, all measured on shared words. It needs the few closest memories, not a keyword
    search's ranking of every match (which grows with the store); a backend without this protocol
    is asked through ``search``.
    """

    async def similar_memories(self, text: str, *, limit: int) -> list[MemoryRecord]:
        """Up to ``limit`` active memories sharing the most (and the rarest) of ``text``'s words, best
        first, each with its ``superseded_by``; empty when none shares a word."""
        ...
