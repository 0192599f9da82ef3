"""Vector storage (SQLite's ``VectorStore``) and plugin retrieval channels fused by the pipeline."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.entrypoints.config.bootstrap import build_channels
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.plugins import hookimpl
from memory_orchestrator.plugins.manager import PluginManager
from memory_orchestrator.ports import (
    Filters,
    FixedClock,
    Hit,
    InvalidRequest,
    MemoryBackend,
    NewMemory,
    PluginError,
    VectorStore,
    stores_vectors,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def blob(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


@pytest.mark.anyio
async def test_sqlite_keeps_vectors_per_space_for_active_memories(tmp_path: Path) -> None:
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        assert stores_vectors(backend)
        a = (await backend.remember(NewMemory("alpha"))).id
        b = (await backend.remember(NewMemory("beta"))).id
        assert [r.id for r in await backend.without_vectors("m1", limit=10)] == [a, b]
        assert await backend.put_vectors("m1", [(a, blob(1, 0)), ("mem-unknown", blob(0, 1))]) == 1
        assert [r.id for r in await backend.without_vectors("m1", limit=10)] == [b]
        assert [r.id for r in await backend.without_vectors("m2", limit=10)] == [a, b]
        first = await backend.vectors_after("m1", 0, limit=10)
        assert first.rows == [(a, blob(1, 0))]
        assert await backend.put_vectors("m1", [(b, blob(0, 1)), (a, blob(0.5, 0.5))]) == 2
        newer = await backend.vectors_after("m1", first.cursor, limit=10)
        # the replaced vector of a comes again, after the cursor; nothing older does
        assert sorted(newer.rows) == sorted([(a, blob(0.5, 0.5)), (b, blob(0, 1))])
        assert (await backend.vectors_after("m1", newer.cursor, limit=10)).rows == []
        await backend.forget(b)
        assert await backend.put_vectors("m1", [(b, blob(1, 1))]) == 0
    # the vectors survive a restart
    async with SqliteBackend(tmp_path / "m.db") as reopened:
        assert len((await reopened.vectors_after("m1", 0, limit=10)).rows) == 2


@pytest.mark.anyio
async def test_vector_space_names_are_checked(tmp_path: Path) -> None:
    async with SqliteBackend(tmp_path / "m.db") as backend:
        for space in ("", "  ", "x" * 101):
            with pytest.raises(InvalidRequest):
                await backend.put_vectors(space, [])


def test_the_memory_backend_keeps_no_vectors() -> None:
    assert not stores_vectors(InMemoryBackend())


class Reversed:
    """A real (tiny) channel: memories ranked by reverse insertion order, to show fusion."""

    name = "reversed"

    def supports(self, backend: MemoryBackend) -> bool:
        return isinstance(backend, VectorStore)

    async def search(
        self, backend: MemoryBackend, text: str, *, limit: int, filters: Filters, now: datetime
    ) -> list[Hit]:
        assert isinstance(backend, SqliteBackend)
        records = list(reversed(await backend.all_records()))[:limit]
        return [Hit(record, 1.0 / (rank + 1), via=self.name) for rank, record in enumerate(records)]


@pytest.mark.anyio
async def test_a_plugin_channel_adds_candidates_the_keyword_channel_misses(tmp_path: Path) -> None:
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        await backend.remember(NewMemory("Kafka consumer lag alert at night"))
        unrelated = (await backend.remember(NewMemory("The office plants were watered"))).id
        plain = Orchestrator(backend, clock=FixedClock(T0))
        fused = Orchestrator(backend, clock=FixedClock(T0), channels=[Reversed()])
        request = SearchRequest("Kafka lag", top_k=5, expand=False)
        assert unrelated not in [item.memory_id for item in (await plain.search(request)).items]
        result = await fused.search(request)
        assert unrelated in [item.memory_id for item in result.items]
        explained = await fused.explain(request)
        assert "reversed#0" in explained["stages"]["retrieval"]["lists"]


@pytest.mark.anyio
async def test_a_channel_weighted_zero_is_off_and_an_unsupported_one_warns() -> None:
    async with InMemoryBackend(clock=FixedClock(T0)) as backend:
        await backend.remember(NewMemory("Kafka consumer lag alert"))
        warned = Orchestrator(backend, clock=FixedClock(T0), channels=[Reversed()])
        result = await warned.search(SearchRequest("Kafka", top_k=5))
        assert any("channel reversed does not run on backend memory" in w for w in result.warnings)
        config = PipelineConfig(channel_weights={"keyword": 1.0, "recall": 0.0, "reversed": 0.0})
        off = Orchestrator(backend, clock=FixedClock(T0), channels=[Reversed()], config=config)
        assert not (await off.search(SearchRequest("Kafka", top_k=5))).warnings


class ChannelPlugin:
    @hookimpl
    def register_channels(self, register):  # type: ignore[no-untyped-def]
        register("reversed", lambda options: Reversed())


def test_channels_come_from_plugins_and_only_when_enabled(tmp_path: Path) -> None:
    manager = PluginManager()
    manager.register(ChannelPlugin(), name="channel-plugin")
    assert build_channels(Settings(data_dir=tmp_path), manager) == ()
    enabled = Settings(data_dir=tmp_path, channels={"enabled": ["reversed"]})
    assert [channel.name for channel in build_channels(enabled, manager)] == ["reversed"]
    assert [info.channels for info in manager.plugins()] == [("reversed",)]
    with pytest.raises(PluginError, match=r"unregistered channel.*nope"):
        build_channels(Settings(data_dir=tmp_path, channels={"enabled": ["nope"]}), manager)
    with pytest.raises(PluginError, match="not registered"):
        manager.create_channel("nope", {})
