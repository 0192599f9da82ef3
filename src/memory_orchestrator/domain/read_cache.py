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

One computation per read at a time: identical reads that arrive while an answer is being computed
wait for that computation and share its answer (:meth:`ReadCache.start`, :meth:`ReadCache.flight`,
:meth:`ReadCache.finish`), unless we wrote, or the watched store changed, since it started. So a
burst of identical reads (many agents asking the same thing, or many answers expiring together
under load) costs one pipeline run per distinct read, not one per caller.

Stale while refreshed: on a watched store, an answer past its TTL whose store version has not
changed since it was computed can differ from a fresh computation only by the passing of time (what
"now" and recency make of it). Up to twice the TTL it is served (:meth:`ReadCache.stale`) while one
read refreshes it in the background (``Orchestrator._cached``), so that answers expiring together
under load hold no reader; past that, or once anything changed, a read computes it as above.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
    #: The answer of an identical read that was running when this one came, shared, not kept.
    shared: bool = False
    #: Past its time-to-live on a watched store that has not changed: served while it is refreshed.
    stale: bool = False


@dataclass(eq=False, slots=True)
class Flight:
    """One computation of a read under way: its key, what it started at, and its answer to share
    (``None`` when it failed: one of those waiting computes it again)."""

    key: str
    stamp: Stamp
    answer: asyncio.Future[Any] = field(repr=False)


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
        #: Reads answered by an identical read's computation that was under way.
        self.shared = 0
        #: Reads answered past the TTL while the answer was refreshed (:meth:`stale`).
        self.stale_served = 0
        self._flights: dict[str, Flight] = {}

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
        older than the TTL, or the store has changed since (a watched version). An answer past its
        TTL is kept for :meth:`stale` while that may still serve it."""
        entry = self._entries.get(key)
        now = self._clock()
        if entry is None or now - entry[0] >= self.ttl_s or not self._unchanged_since(entry[3]):
            if entry is not None and not self._servable_stale(entry, now):
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return CachedRead(value=entry[2], trace_id=entry[1], age_s=now - entry[0])

    def stale(self, key: str) -> CachedRead | None:
        """The answer under ``key`` that has outlived its TTL by less than another TTL, on a watched
        store whose version is still the one it was computed at (so only the passing of time can
        make it differ from a fresh computation: "now" and recency); ``None`` otherwise. Served while
        one refresh of it runs, so that answers expiring under load do not hold their readers."""
        entry = self._entries.get(key)
        now = self._clock()
        if entry is None or not self._servable_stale(entry, now):
            return None
        self._entries.move_to_end(key)
        self.stale_served += 1
        return CachedRead(value=entry[2], trace_id=entry[1], age_s=now - entry[0], stale=True)

    def _servable_stale(self, entry: tuple[float, str, Any, int | None], now: float) -> bool:
        return (
            self._version is not None and now - entry[0] < 2 * self.ttl_s and self._unchanged_since(entry[3])
        )

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

    # -- one computation per read ------------------------------------------------------------

    def start(self, key: str) -> Flight:
        """A computation of ``key`` starts now: identical reads may wait for it (:meth:`flight`)."""
        flight = Flight(key, self.stamp(), asyncio.get_running_loop().create_future())
        self._flights[key] = flight
        return flight

    def flight(self, key: str) -> Flight | None:
        """The computation of ``key`` under way whose answer a read starting now may share: none
        when we wrote, or the watched store changed, since it started."""
        flight = self._flights.get(key)
        if flight is None or flight.stamp != self.stamp():
            return None
        return flight

    def finish(self, flight: Flight, value: Any | None, trace_id: str | None) -> None:
        """``flight`` ended with ``value`` (``None``: it failed). Those waiting get it; it is kept
        when ``trace_id`` is given (a complete answer) and nothing was written since it started."""
        if self._flights.get(flight.key) is flight:
            del self._flights[flight.key]
        if not flight.answer.done():
            flight.answer.set_result(value)
        if value is not None and trace_id is not None:
            self.put(flight.key, value, trace_id, stamp=flight.stamp)
