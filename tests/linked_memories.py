"""A small store for graph-walk tests: memories far apart in time and in words, so no automatic
edge joins them, linked only by the edges a test names."""

from __future__ import annotations

from datetime import datetime, timedelta

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.ports import Edge, EdgeType, FixedClock, NewMemory


def mid(number: int) -> str:
    """The id the in-memory backend gives its ``number``-th memory."""
    return f"mem-{number:06d}"


async def linked_graph(
    count: int, edges: list[tuple[int, int, EdgeType, float]], *, now: datetime, newest_first: bool
) -> InMemoryBackend:
    """Memories ``mid(1)..mid(count)`` ten days apart (``mid(1)`` the newest or the oldest), plus
    ``edges`` as (source number, target number, type, weight); the backend's call log starts empty."""
    backend = InMemoryBackend(clock=FixedClock(now))
    await backend.open()
    for n in range(count):
        days = 10 * (n + 1) if newest_first else 10 * (count - n)
        content = f"unique{n} word{n}a word{n}b"
        await backend.remember(NewMemory(content, source=f"s{n}", created_at=now - timedelta(days=days)))
    backend.edges.clear()
    for source, target, kind, weight in edges:
        await backend.link(Edge(mid(source), mid(target), kind, weight))
    backend.calls.clear()
    return backend
