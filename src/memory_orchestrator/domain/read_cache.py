"""The read cache: identical reads of one store within a time-to-live are answered from memory.

A key is the operation and its whole request (query, filters, budget, ``now``, overrides), so two
reads share an answer only when they asked exactly the same thing. Any write through the process
clears the store's cache (:meth:`ReadCache.invalidate`); a read that started before a write never
stores its answer afterwards (a generation counter), so a cached answer is never older than the last
write we made. A store that can say cheaply when anyone last changed it (``ports.VersionedStore``:
SQLite's commit counter) is watched too (:meth:`ReadCache.watch`): an answer is served only while the
store's version is the one it was computed at, so a write by another process (another HTTP worker,
the CLI, an agent writing to the same file) is seen by the very next read. Other stores' writes by
other processes are seen once the time-to-live has passed.
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
class Stamp:
    """What a read saw when it started: our write generation and the store's version (if watched)."""

    generation: int
    version: int | None


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
        #: key -> (stored at, trace id, answer, store version it was computed at)
        self._entries: OrderedDict[str, tuple[float, str, Any, int | None]] = OrderedDict()
        #: The store's version (``watch``), or None: then only our own writes and the TTL count.
        self._version: Callable[[], int | None] | None = None
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

    def watch(self, version: Callable[[], int | None]) -> None:
        """Serve an answer only while ``version()`` (cheap, synchronous: a number that changes with
        every change anyone commits to the store; None when it cannot be read) is what it was when
        the answer was computed."""
        self._version = version

    def stamp(self) -> Stamp:
        """What a read starting now must remember to store its answer (see :meth:`put`)."""
        return Stamp(self.generation, None if self._version is None else self._version())

    def get(self, key: str) -> CachedRead | None:
        """The fresh answer under ``key``, counted as a hit; ``None`` (a miss) otherwise: none kept,
        older than the TTL, or the store has changed since (a watched version)."""
        entry = self._entries.get(key)
        now = self._clock()
        if entry is None or now - entry[0] >= self.ttl_s or not self._unchanged_since(entry[3]):
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return CachedRead(value=entry[2], trace_id=entry[1], age_s=now - entry[0])

    def _unchanged_since(self, version: int | None) -> bool:
        # an unreadable version (None) never equals a kept one: ``put`` keeps none without one
        return self._version is None or self._version() == version

    def put(self, key: str, value: Any, trace_id: str, *, stamp: Stamp) -> None:
        """Keep ``value``, computed by a read that started at ``stamp``, unless we wrote since then
        (its version, if watched and readable, is checked by every ``get``)."""
        watched_but_unknown = self._version is not None and stamp.version is None
        if not self.enabled or stamp.generation != self.generation or watched_but_unknown:
            return
        self._entries[key] = (self._clock(), trace_id, value, stamp.version)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def invalidate(self) -> None:
        """Forget every answer (a write changed the store)."""
        self.generation += 1
        self._entries.clear()
