"""The read cache: identical reads of one store within a time-to-live are answered from memory.

A key is the operation and its whole request (query, filters, budget, ``now``, overrides), so two
reads share an answer only when they asked exactly the same thing. Any write through the process
clears the store's cache (:meth:`ReadCache.invalidate`); a read that started before a write never
stores its answer afterwards (a generation counter), so a cached answer is never older than the last
write we made. Writes by other processes are seen once the time-to-live has passed.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Answers kept per store at most (least recently used go first).
DEFAULT_MAX_ENTRIES = 512


@dataclass(frozen=True, slots=True)
class CachedRead:
    """A cached answer, the trace that computed it and how old it is."""

    value: Any
    trace_id: str
    age_s: float


def cache_key(operation: str, request: Mapping[str, Any]) -> str:
    """The key of a read: the operation and its request document in a canonical form."""
    return operation + "\x00" + json.dumps(request, sort_keys=True, default=str, separators=(",", ":"))


class ReadCache:
    """Answers of identical reads, kept ``ttl_s`` seconds (0 disables), cleared by any write."""

    def __init__(
        self,
        ttl_s: float,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = max(0.0, ttl_s)
        self.max_entries = max(1, max_entries)
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, str, Any]] = OrderedDict()
        #: Bumped by every write; an answer computed across a write is not kept.
        self.generation = 0
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        """Whether answers are kept at all."""
        return self.ttl_s > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedRead | None:
        """The fresh answer under ``key``, counted as a hit; ``None`` (a miss) otherwise."""
        entry = self._entries.get(key)
        now = self._clock()
        if entry is None or now - entry[0] >= self.ttl_s:
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return CachedRead(value=entry[2], trace_id=entry[1], age_s=now - entry[0])

    def put(self, key: str, value: Any, trace_id: str, *, generation: int) -> None:
        """Keep ``value`` unless a write happened since ``generation`` was read."""
        if not self.enabled or generation != self.generation:
            return
        self._entries[key] = (self._clock(), trace_id, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def invalidate(self) -> None:
        """Forget every answer (a write changed the store)."""
        self.generation += 1
        self._entries.clear()
