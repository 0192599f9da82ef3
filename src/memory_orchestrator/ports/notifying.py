"""A backend decorator that calls back after every write, so caches over the store can be cleared.

Every write method (``remember``, ``remember_many``, ``link``, ``link_many``, ``forget``) calls
``on_write`` once it returns or fails (a failed write may still have changed the store); reads pass
straight through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memory_orchestrator.ports.backend import MemoryBackend
from memory_orchestrator.ports.delegating import DelegatingBackend
from memory_orchestrator.ports.records import BackendHealth, Edge, NewMemory, WriteResult


class NotifyingBackend(DelegatingBackend):
    """Wraps a backend; ``on_write()`` runs after each write through it."""

    def __init__(self, inner: MemoryBackend, on_write: Callable[[], None]) -> None:
        super().__init__(inner)
        self._on_write = on_write

    async def remember(self, memory: NewMemory) -> WriteResult:
        """A write: notifies."""
        try:
            return await super().remember(memory)
        finally:
            self._on_write()

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """A write (the inner backend's bulk path when it has one): notifies."""
        try:
            return await super().remember_many(memories)
        finally:
            self._on_write()

    async def link(self, edge: Edge) -> Edge:
        """A write: notifies."""
        try:
            return await super().link(edge)
        finally:
            self._on_write()

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """A write (the inner backend's bulk path when it has one): notifies."""
        try:
            return await super().link_many(edges)
        finally:
            self._on_write()

    async def forget(self, memory_id: str) -> None:
        """A write: notifies."""
        try:
            await super().forget(memory_id)
        finally:
            self._on_write()

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Health (a probe writes and forgets a memory: notifies)."""
        try:
            return await super().health(probe=probe)
        finally:
            if probe:
                self._on_write()
