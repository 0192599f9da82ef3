"""The read cache: identical reads within the TTL come from memory, writes through us clear it, and
a cached answer's trace says so."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.read_cache import ReadCache
from memory_orchestrator.domain.requests import Budget, ContextRequest, SearchRequest, WriteRequest
from memory_orchestrator.domain.results import SearchResult
from memory_orchestrator.ports import Edge, EdgeType, FixedClock, NewMemory
from memory_orchestrator.ports.notifying import NotifyingBackend

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountingBackend(InMemoryBackend):
    """Counts the keyword searches the pipeline makes (a cached read makes none)."""

    searches = 0

    async def search(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def, override]
        self.searches += 1
        return await super().search(*args, **kwargs)  # type: ignore[arg-type]


async def setup(ttl: float = 10.0) -> tuple[CountingBackend, NotifyingBackend, Orchestrator, Ticks]:
    raw = CountingBackend(clock=FixedClock(NOW))
    await raw.open()
    for text in ("Atlas launch moved to April.", "Vendor X ships lidar sensors.", "Atlas review done."):
        await raw.remember(NewMemory(text, entities=("Atlas",) if "Atlas" in text else ()))
    ticks = Ticks()
    cache = ReadCache(ttl, clock=ticks)
    backend = NotifyingBackend(raw, cache.invalidate)
    return raw, backend, Orchestrator(backend, clock=FixedClock(NOW), cache=cache), ticks


async def cache_stage(orchestrator: Orchestrator, answer: SearchResult) -> dict[str, Any]:
    """What the trace of ``answer`` says of the cache."""
    stage: dict[str, Any] = (await orchestrator.trace(answer.trace_id))["stages"]["cache"]
    return stage


@pytest.mark.anyio
async def test_a_repeated_search_is_answered_from_the_cache_and_its_trace_says_so() -> None:
    raw, _, orchestrator, ticks = await setup()
    first = await orchestrator.search(SearchRequest("Atlas launch"))
    searches = raw.searches
    ticks.now += 5
    second = await orchestrator.search(SearchRequest("Atlas launch"))
    assert raw.searches == searches  # nothing asked of the store
    assert [i.memory_id for i in second.items] == [i.memory_id for i in first.items]
    assert second.trace_id != first.trace_id
    trace = await orchestrator.trace(second.trace_id)
    assert trace["stages"]["cache"] == {"hit": True, "answer_of": first.trace_id, "age_s": 5.0, "ttl_s": 10.0}
    assert trace["result_ids"] == [i.memory_id for i in first.items]
    assert await cache_stage(orchestrator, first) == {"hit": False}
    assert orchestrator.cache is not None and (orchestrator.cache.hits, orchestrator.cache.misses) == (1, 1)


@pytest.mark.anyio
async def test_a_different_request_or_an_expired_answer_runs_the_pipeline() -> None:
    raw, _, orchestrator, ticks = await setup()
    await orchestrator.search(SearchRequest("Atlas launch"))
    before = raw.searches
    await orchestrator.search(SearchRequest("Atlas launch", top_k=3))
    assert raw.searches > before
    before = raw.searches
    ticks.now += 10  # the TTL has passed
    again = await orchestrator.search(SearchRequest("Atlas launch"))
    assert raw.searches > before
    assert await cache_stage(orchestrator, again) == {"hit": False}


@pytest.mark.anyio
async def test_any_write_through_us_clears_the_cache() -> None:
    raw, backend, orchestrator, _ = await setup()
    request = SearchRequest("Atlas launch")
    await orchestrator.search(request)
    await orchestrator.write(WriteRequest(NewMemory("Atlas launch confirmed for April 14.")))
    after_write = await orchestrator.search(request)
    assert "Atlas launch confirmed for April 14." in {item.content for item in after_write.items}
    # writes that bypass the orchestrator (link, link_many, forget) clear it too, through the wrapper
    for change in (
        backend.link(Edge("mem-000001", "mem-000003", EdgeType.CAUSAL, 0.9)),
        backend.link_many([Edge("mem-000003", "mem-000001", EdgeType.ENTITY, 0.5)]),
        backend.forget("mem-000002"),
    ):
        await orchestrator.search(request)
        await change
        before = raw.searches
        await orchestrator.search(request)
        assert raw.searches > before


@pytest.mark.anyio
async def test_context_is_cached_per_budget_and_a_zero_ttl_caches_nothing() -> None:
    raw, _, orchestrator, _ = await setup()
    small = ContextRequest("Atlas", budget=Budget(max_items=1))
    first = await orchestrator.context(small)
    before = raw.searches
    cached = await orchestrator.context(small)
    assert raw.searches == before and cached.context_block == first.context_block
    await orchestrator.context(ContextRequest("Atlas", budget=Budget(max_items=2)))
    assert raw.searches > before

    raw, _, _, _ = await setup()
    plain = Orchestrator(raw, clock=FixedClock(NOW), cache=ReadCache(0))
    await plain.search(SearchRequest("Atlas"))
    before = raw.searches
    result = await plain.search(SearchRequest("Atlas"))
    assert raw.searches > before
    assert "cache" not in (await plain.trace(result.trace_id))["stages"]


def test_an_answer_computed_across_a_write_is_not_kept() -> None:
    cache = ReadCache(10, clock=Ticks())
    stamp = cache.stamp()
    cache.invalidate()  # a write landed while the read ran
    cache.put("k", "stale", "tr-1", stamp=stamp)
    assert cache.get("k") is None
    cache.put("k", "fresh", "tr-2", stamp=cache.stamp())
    hit = cache.get("k")
    assert hit is not None and hit.value == "fresh"


class Version:
    """A store version the test changes by hand (None: unreadable)."""

    def __init__(self) -> None:
        self.value: int | None = 1

    def __call__(self) -> int | None:
        return self.value


def test_a_watched_store_changed_by_someone_else_is_read_again() -> None:
    cache, version = ReadCache(10, clock=Ticks()), Version()
    cache.watch(version)
    cache.put("k", "answer", "tr-1", stamp=cache.stamp())
    assert cache.get("k") is not None
    version.value = 2  # another process committed: no write went through us
    assert cache.get("k") is None
    stamp = cache.stamp()
    version.value = 3  # ... and again while the next read ran: its answer is dropped on first use
    cache.put("k", "already old", "tr-2", stamp=stamp)
    assert cache.get("k") is None
    cache.put("k", "current", "tr-3", stamp=cache.stamp())
    hit = cache.get("k")
    assert hit is not None and hit.value == "current"


def test_an_unreadable_store_version_caches_nothing() -> None:
    cache, version = ReadCache(10, clock=Ticks()), Version()
    cache.watch(version)
    cache.put("k", "answer", "tr-1", stamp=cache.stamp())
    version.value = None
    assert cache.get("k") is None
    cache.put("k", "answer", "tr-2", stamp=cache.stamp())
    version.value = 1
    assert cache.get("k") is None  # nothing was kept without a version


def test_an_expired_answer_is_servable_only_on_an_unchanged_watched_store_within_twice_the_ttl() -> None:
    ticks, version = Ticks(), Version()
    watched, unwatched = ReadCache(10, clock=ticks), ReadCache(10, clock=ticks)
    watched.watch(version)
    for cache in (watched, unwatched):
        cache.put("k", "answer", "tr-1", stamp=cache.stamp())
    ticks.now += 10
    assert watched.get("k") is None and unwatched.get("k") is None  # expired: a miss
    stale = watched.stale("k")
    assert stale is not None and stale.stale and stale.value == "answer" and stale.age_s == 10
    assert unwatched.stale("k") is None  # others' writes are seen only through the TTL there
    ticks.now += 9.9
    assert watched.stale("k") is not None
    version.value = 2  # someone changed the store
    assert watched.stale("k") is None
    version.value = 1
    ticks.now += 0.1  # twice the TTL
    assert watched.get("k") is None and watched.stale("k") is None
    assert watched.stale_served == 2


@pytest.mark.anyio
async def test_a_degraded_answer_is_not_cached_so_the_first_read_after_recovery_is_right() -> None:
    raw, _, orchestrator, _ticks = await setup()
    raw.fail_always("search")
    raw.fail_always("recall")
    degraded = await orchestrator.search(SearchRequest("Atlas launch"))
    assert degraded.warnings and not degraded.items
    raw.heal()
    recovered = await orchestrator.search(SearchRequest("Atlas launch"))
    assert recovered.items and not recovered.warnings


class GatedBackend(CountingBackend):
    """Keyword searches wait at a gate the test opens, so reads can be made to overlap."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def search(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def, override]
        self.waiting.set()
        await self.gate.wait()
        return await super().search(*args, **kwargs)


async def gated(
    ticks: Ticks | None = None, version: Version | None = None
) -> tuple[GatedBackend, Orchestrator]:
    raw = GatedBackend(clock=FixedClock(NOW))
    await raw.open()
    raw.gate.set()
    for text in ("Atlas launch moved to April.", "Vendor X ships lidar sensors.", "Atlas review done."):
        await raw.remember(NewMemory(text, entities=("Atlas",) if "Atlas" in text else ()))
    cache = ReadCache(10, clock=ticks or Ticks())
    if version is not None:
        cache.watch(version)
    orchestrator = Orchestrator(NotifyingBackend(raw, cache.invalidate), clock=FixedClock(NOW), cache=cache)
    raw.gate.clear()
    return raw, orchestrator


async def in_the_store(
    raw: GatedBackend, orchestrator: Orchestrator, request: SearchRequest
) -> asyncio.Task[SearchResult]:
    """A search started and held at the gate, in the store."""
    first = asyncio.ensure_future(orchestrator.search(request))
    await raw.waiting.wait()
    return first


async def behind(orchestrator: Orchestrator, request: SearchRequest) -> asyncio.Task[SearchResult]:
    """A search started later, given a turn to reach the cache (and wait there if it shares)."""
    later = asyncio.ensure_future(orchestrator.search(request))
    await asyncio.sleep(0)
    return later


async def overlapping(
    request: SearchRequest, waiting: int
) -> tuple[GatedBackend, Orchestrator, asyncio.Task[SearchResult], list[asyncio.Task[SearchResult]]]:
    """A fresh store with one search of ``request`` held in it and ``waiting`` more behind it."""
    raw, orchestrator = await gated()
    first = await in_the_store(raw, orchestrator, request)
    return raw, orchestrator, first, [await behind(orchestrator, request) for _ in range(waiting)]


async def searches_of_one_run(request: SearchRequest) -> int:
    """How many keyword searches one pipeline run of ``request`` makes on the same data."""
    raw, orchestrator = await gated()
    raw.gate.set()
    await orchestrator.search(request)
    return raw.searches


@pytest.mark.anyio
async def test_identical_reads_that_overlap_share_one_computation_and_their_traces_say_so() -> None:
    request = SearchRequest("Atlas launch")
    one_run = await searches_of_one_run(request)
    raw, orchestrator, first, others = await overlapping(request, 3)
    raw.gate.set()
    leader, *followers = await asyncio.gather(first, *others)
    assert raw.searches == one_run  # one pipeline run answered all four
    for follower in followers:
        assert [i.memory_id for i in follower.items] == [i.memory_id for i in leader.items]
        assert follower.trace_id != leader.trace_id
        trace = await orchestrator.trace(follower.trace_id)
        assert trace["stages"]["cache"] == {
            "hit": True,
            "answer_of": leader.trace_id,
            "age_s": 0.0,
            "ttl_s": 10.0,
            "shared": True,
        }
    assert orchestrator.cache is not None and orchestrator.cache.shared == 3
    # the shared answer was kept as well: the next identical read is a plain hit
    again = await orchestrator.search(request)
    assert "shared" not in await cache_stage(orchestrator, again)
    assert raw.searches == one_run


@pytest.mark.anyio
async def test_a_read_after_a_write_does_not_share_a_computation_started_before_it() -> None:
    request = SearchRequest("Atlas launch")
    raw, orchestrator = await gated()
    first = await in_the_store(raw, orchestrator, request)
    # a write through the store wrapper (the orchestrator's own write path would search, at the gate)
    await orchestrator.backend.remember(NewMemory("Atlas launch confirmed for April 14."))
    second = await behind(orchestrator, request)  # while the first still runs
    raw.gate.set()
    await first
    after = await second
    assert "Atlas launch confirmed for April 14." in {item.content for item in after.items}
    assert await cache_stage(orchestrator, after) == {"hit": False}
    assert orchestrator.cache is not None and orchestrator.cache.shared == 0


@pytest.mark.anyio
async def test_when_the_computation_they_wait_for_is_cancelled_one_of_those_waiting_computes_it() -> None:
    request = SearchRequest("Atlas launch")
    one_run = await searches_of_one_run(request)
    raw, orchestrator, first, (second, third) = await overlapping(request, 2)
    first.cancel()  # e.g. its caller's deadline passed
    with pytest.raises(asyncio.CancelledError):
        await first
    raw.gate.set()
    computed, shared = await asyncio.gather(second, third)
    assert raw.searches == one_run  # the cancelled read never reached the store; one run for both
    assert computed.items and not computed.warnings
    assert await cache_stage(orchestrator, computed) == {"hit": False}
    assert (await cache_stage(orchestrator, shared))["answer_of"] == computed.trace_id


@pytest.mark.anyio
async def test_a_degraded_answer_is_shared_with_the_reads_waiting_for_it_but_not_kept() -> None:
    request = SearchRequest("Atlas launch")
    raw, orchestrator = await gated()
    raw.fail_always("search")
    raw.fail_always("recall")
    first = await in_the_store(raw, orchestrator, request)
    second = await behind(orchestrator, request)
    raw.gate.set()
    leader, follower = await asyncio.gather(first, second)
    assert leader.warnings and follower.warnings == leader.warnings
    assert (await cache_stage(orchestrator, follower))["shared"] is True
    raw.heal()
    recovered = await orchestrator.search(request)
    assert await cache_stage(orchestrator, recovered) == {"hit": False}


async def _refreshed(orchestrator: Orchestrator) -> None:
    await asyncio.gather(*orchestrator._refreshes)


async def answered_on_a_watched_store(
    request: SearchRequest,
) -> tuple[GatedBackend, Orchestrator, Ticks, Version, SearchResult]:
    """A store watched through a version the test changes, with ``request`` answered once."""
    ticks, version = Ticks(), Version()
    raw, orchestrator = await gated(ticks, version)
    raw.gate.set()
    return raw, orchestrator, ticks, version, await orchestrator.search(request)


@pytest.mark.anyio
async def test_an_expired_answer_is_served_while_one_read_refreshes_it_in_the_background() -> None:
    request = SearchRequest("Atlas launch")
    raw, orchestrator, ticks, _version, first = await answered_on_a_watched_store(request)
    one_run = raw.searches
    ticks.now += 12  # past the TTL, the store unchanged
    raw.gate.clear()
    with anyio.fail_after(5):
        served = await orchestrator.search(request)  # not held by the refresh at the gate
        again = await orchestrator.search(request)
    for answer in (served, again):
        stage = await cache_stage(orchestrator, answer)
        assert stage["stale"] is True and stage["answer_of"] == first.trace_id and stage["age_s"] == 12
        assert answer.items == first.items
    await raw.waiting.wait()
    assert len(orchestrator._refreshes) == 1  # one refresh for both reads
    raw.gate.set()
    await _refreshed(orchestrator)
    assert raw.searches == 2 * one_run
    fresh = await orchestrator.search(request)
    stage = await cache_stage(orchestrator, fresh)
    assert "stale" not in stage and stage["answer_of"] not in (first.trace_id, served.trace_id)
    assert raw.searches == 2 * one_run


@pytest.mark.anyio
async def test_an_answer_older_than_twice_the_ttl_or_of_a_changed_store_is_computed_by_the_read() -> None:
    request = SearchRequest("Atlas launch")
    raw, orchestrator, ticks, version, _first = await answered_on_a_watched_store(request)
    one_run = raw.searches
    ticks.now += 20  # twice the TTL
    too_old = await orchestrator.search(request)
    version.value = 7  # someone changed the store
    changed = await orchestrator.search(request)
    for answer in (too_old, changed):
        stage = await cache_stage(orchestrator, answer)
        assert stage == {"hit": False} and not orchestrator._refreshes
    assert raw.searches == 3 * one_run


@pytest.mark.anyio
async def test_a_failed_refresh_is_not_kept_and_the_stale_answer_is_served_until_one_succeeds() -> None:
    request = SearchRequest("Atlas launch")
    raw, orchestrator, ticks, _version, first = await answered_on_a_watched_store(request)
    ticks.now += 12
    raw.fail_always("search")
    raw.fail_always("recall")
    stale = await orchestrator.search(request)
    await _refreshed(orchestrator)  # degraded (the store failed): not kept
    raw.heal()
    again = await orchestrator.search(request)  # the old answer, not the degraded one
    await _refreshed(orchestrator)
    fresh = await orchestrator.search(request)
    for answer in (stale, again):
        stage = await cache_stage(orchestrator, answer)
        assert stage["stale"] is True and stage["answer_of"] == first.trace_id
        assert answer.items == first.items and not answer.warnings
    stage = await cache_stage(orchestrator, fresh)
    assert "stale" not in stage and stage["answer_of"] != first.trace_id
    assert fresh.items and not fresh.warnings
