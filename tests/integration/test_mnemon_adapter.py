"""The Mnemon adapter against the real binary: each behaviour of Mnemon it must absorb, one test each."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.mnemon import MnemonBackend, create_backend
from memory_orchestrator.adapters.mnemon.cli import CliTransport
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.read_cache import ReadCache
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.ports import (
    BackendRejected,
    InvalidRequest,
    NewMemory,
    NotFound,
    PluginError,
    RecallQuery,
    WriteAction,
)
from services.mnemon.fixture import mnemon_options

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)


def _backend(env: dict[str, str], store: str = "default", **extra: object) -> MnemonBackend:
    return create_backend(mnemon_options(env, store, **extra))


def _raw(env: dict[str, str], store: str = "default") -> CliTransport:
    return CliTransport(env["MNEMON_BIN"], env["MNEMON_DATA_DIR"], store)


async def test_mnemon_skipped_answer_maps_to_the_stored_id(mnemon_env: dict[str, str]) -> None:
    # With Mnemon's own dedup on, a repeat is "skipped" and its returned id is never stored.
    async with _backend(mnemon_env, diff=True) as backend:
        first = await backend.remember(NewMemory("The billing database runs PostgreSQL 16"))
        again = await backend.remember(NewMemory("The billing database runs PostgreSQL 16", dedup=False))
        assert again.action is WriteAction.SKIPPED
        assert again.id == first.id == again.duplicate_of
        assert [record.id for record in await backend.get([again.id])] == [first.id]


async def test_mnemon_diff_is_off_by_default_so_older_memories_are_never_rewritten(
    mnemon_env: dict[str, str],
) -> None:
    older = "The staging cluster runs Kubernetes 1.29 on three nodes"
    newer = "The staging cluster runs Kubernetes 1.29 on three nodes since the upgrade"
    async with _backend(mnemon_env) as backend:
        kept = await backend.remember(NewMemory(older))
        added = await backend.remember(NewMemory(newer))
        assert added.action is WriteAction.ADDED
        assert {record.content for record in await backend.get([kept.id, added.id])} == {older, newer}
        assert kept.id in [candidate.id for candidate in added.candidates]
    async with _backend(mnemon_env, "rewrites", diff=True) as backend:
        replaced = await backend.remember(NewMemory(older))
        update = await backend.remember(NewMemory(newer))
        assert update.action is WriteAction.UPDATED
        assert await backend.get([replaced.id]) == []


async def test_mnemon_recall_drops_padding_and_orders_ties_by_id(mnemon_env: dict[str, str]) -> None:
    async with _backend(mnemon_env) as backend:
        for index in range(6):
            await backend.remember(NewMemory(f"Lunch menu note {index}: soup and bread", source="cafe"))
        raw = await _raw(mnemon_env).call(["recall", "--limit", "5", "--", "zyzzyva quasar"])
        assert len(raw["results"]) > 0  # Mnemon pads a nonsense query with unrelated items
        assert await backend.recall(RecallQuery("zyzzyva quasar", limit=5)) == []
        first = await backend.recall(RecallQuery("lunch soup", limit=6))
        second = await backend.recall(RecallQuery("lunch soup", limit=6))
        assert [hit.record.id for hit in first] == [hit.record.id for hit in second]
        keys = [(-hit.score, hit.record.id) for hit in first]
        assert keys == sorted(keys) and len(first) == 6


async def test_mnemon_locked_store_is_retried_not_failed(mnemon_env: dict[str, str]) -> None:
    async with _backend(mnemon_env) as backend:
        await backend.remember(NewMemory("first note"))
        database = Path(mnemon_env["MNEMON_DATA_DIR"]) / "data" / "default" / "mnemon.db"
        holding = threading.Event()

        def hold_write_lock() -> None:
            # Another writer (as a second Mnemon process would be) keeps the store locked for a moment.
            other = sqlite3.connect(database, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            holding.set()
            time.sleep(0.4)
            other.execute("ROLLBACK")
            other.close()

        thread = threading.Thread(target=hold_write_lock)
        thread.start()
        holding.wait()
        written = await backend.remember(NewMemory("written while another writer held the store"))
        thread.join()
        assert written.action is WriteAction.ADDED
        assert len(await backend.recent(limit=10)) == 2


async def test_mnemon_unknown_store_is_an_error_and_creates_nothing(mnemon_env: dict[str, str]) -> None:
    backend = create_backend({**mnemon_options(mnemon_env, "typo"), "create": False})
    with pytest.raises(NotFound, match="unknown Mnemon store 'typo'"):
        await backend.open()
    assert not (Path(mnemon_env["MNEMON_DATA_DIR"]) / "data" / "typo").exists()
    with pytest.raises(InvalidRequest):
        create_backend(mnemon_options(mnemon_env, "../escape"))


async def test_mnemon_content_over_8000_bytes_is_refused_before_calling(mnemon_env: dict[str, str]) -> None:
    async with _backend(mnemon_env) as backend:
        with pytest.raises(InvalidRequest, match="8000"):
            await backend.remember(NewMemory("é" * 4001))  # 4,001 characters, 8,002 bytes
        assert await backend.recent() == []
        assert await backend.changes(T0) == []


async def test_mnemon_markup_characters_round_trip(mnemon_env: dict[str, str]) -> None:
    text = 'Use <b>bold</b> & keep a > b -- even --flags and "quotes"'
    async with _backend(mnemon_env) as backend:
        written = await backend.remember(NewMemory(text, tags=("html",)))
        [record] = await backend.get([written.id])
        assert record.content == text
        [hit] = await backend.search("bold quotes")
        assert hit.record.content == text
        recalled = await backend.recall(RecallQuery("bold quotes flags"))
        assert recalled[0].record.content == text


async def test_mnemon_backdated_memories_go_through_import_and_keep_their_dates(
    mnemon_env: dict[str, str],
) -> None:
    async with _backend(mnemon_env) as backend:
        written = await backend.remember_many(
            [
                NewMemory(f"day {day} standup notes", source="team", created_at=T0 + timedelta(days=day))
                for day in range(3)
            ]
        )
        records = await backend.get([result.id for result in written])
        assert [record.created_at for record in records] == [
            T0,
            T0 + timedelta(days=1),
            T0 + timedelta(days=2),
        ]
        as_of = await backend.recent(now=T0 + timedelta(hours=30))
        assert [record.content for record in as_of] == ["day 1 standup notes", "day 0 standup notes"]
    log = sqlite3.connect(Path(mnemon_env["MNEMON_DATA_DIR"]) / "data" / "default" / "mnemon.db")
    operations = [row[0] for row in log.execute("SELECT operation FROM oplog")]
    log.close()
    assert operations.count("import") == 3 and "remember" not in operations


async def test_mnemon_health_warns_near_the_store_cap(mnemon_env: dict[str, str]) -> None:
    async with _backend(mnemon_env) as backend:
        await backend.remember_many(
            [
                NewMemory(f"filler memory number {index}", created_at=T0 + timedelta(minutes=index))
                for index in range(905)
            ]
        )
        health = await backend.health(probe=True)
        assert health.memory_count == 905
        assert health.status == "degraded"
        capacity = next(check for check in health.checks if check.name == "capacity")
        assert "905 of 1000" in capacity.detail
        assert next(check for check in health.checks if check.name == "cli").status == "ok"


async def test_mnemon_unknown_schema_is_refused(mnemon_env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "fake" / "data" / "default"
    folder.mkdir(parents=True)
    fake = sqlite3.connect(folder / "mnemon.db")
    fake.execute("CREATE TABLE insights (id TEXT)")
    fake.execute("PRAGMA user_version = 7")
    fake.close()
    backend = create_backend({**mnemon_options(mnemon_env), "data_dir": str(tmp_path / "fake")})
    with pytest.raises(BackendRejected, match="schema version 7"):
        await backend.open()


def test_mnemon_bin_naming_a_wrong_binary_is_an_error(
    mnemon_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MNEMON_BIN", str(tmp_path / "missing"))
    with pytest.raises(PluginError, match="MNEMON_BIN"):
        create_backend(mnemon_options(mnemon_env) | {"binary": "mnemon"})
    monkeypatch.setenv("MNEMON_BIN", "/bin/true")
    with pytest.raises(PluginError, match="not a Mnemon binary"):
        create_backend(mnemon_options(mnemon_env) | {"binary": "mnemon"})


async def test_mnemon_errors_are_translated_with_one_line_messages(mnemon_env: dict[str, str]) -> None:
    async with _backend(mnemon_env) as backend:
        await backend.remember(NewMemory("anchor"))
        transport = _raw(mnemon_env)
        with pytest.raises(NotFound) as missing:
            await transport.call(["forget", "00000000-0000-0000-0000-000000000000"])
        assert "\n" not in str(missing.value) and "Usage" not in str(missing.value)
        with pytest.raises(InvalidRequest):
            await transport.call(["recall", "--limit", "0", "--", "x"])


async def test_mnemon_keyword_channel_stems_where_mnemons_own_search_does_not(
    mnemon_env: dict[str, str],
) -> None:
    async with _backend(mnemon_env) as ours, _backend(mnemon_env, search="mnemon") as native:
        written = await ours.remember(NewMemory("Three invoices arrived from the hosting vendor"))
        assert [hit.record.id for hit in await ours.search("invoice")] == [written.id]
        assert await native.search("invoice") == []
        assert [hit.record.id for hit in await native.search("invoices vendor")] == [written.id]


async def _edges_by_content(backend: MnemonBackend, ids: list[str]) -> set[tuple[str, str, str, float]]:
    contents = {record.id: record.content for record in await backend.get(ids)}
    found = set()
    for memory_id in ids:
        for item in await backend.neighbors([memory_id], limit=10_000):
            edge = item.edge
            found.add((contents[edge.source], contents[edge.target], edge.type.value, round(edge.weight, 4)))
    return found


async def test_mnemon_bulk_writes_build_the_same_graph_as_one_by_one(mnemon_env: dict[str, str]) -> None:
    topics = ["Kafka", "Postgres", "Redis"]
    memories = [
        NewMemory(
            f"Team note {index} about the {topics[index % 3]} cluster"
            + (" because the disk filled up" if index % 4 == 3 else ""),
            entities=(topics[index % 3],),
            source=f"s{index % 2}",
            created_at=T0 + timedelta(hours=5 * index),
        )
        for index in range(12)
    ]
    async with _backend(mnemon_env, "bulk") as bulk, _backend(mnemon_env, "single") as single:
        assert bulk.capabilities.bulk_writes
        many = await bulk.remember_many(memories)
        one = [await single.remember(memory) for memory in memories]
        assert [result.action for result in many] == [WriteAction.ADDED] * 12
        bulk_edges = await _edges_by_content(bulk, [result.id for result in many])
        single_edges = await _edges_by_content(single, [result.id for result in one])
    assert len(bulk_edges) > 20
    assert bulk_edges == single_edges


async def test_a_cached_read_sees_a_memory_an_agent_stored_with_mnemon_itself(
    mnemon_env: dict[str, str],
) -> None:
    # agents write to Mnemon with its own CLI, past us: the read cache watches Mnemon's file
    async with _backend(mnemon_env) as backend:
        await backend.remember(NewMemory("The Atlas launch moved to April"))
        cache = ReadCache(60)
        cache.watch(backend.store_version)
        orchestrator = Orchestrator(backend, cache=cache)
        first = await orchestrator.search(SearchRequest("Atlas launch"))
        again = await orchestrator.search(SearchRequest("Atlas launch"))
        assert "cache" in (await orchestrator.trace(again.trace_id))["stages"]
        version = backend.store_version()
        await _raw(mnemon_env).call(["remember", "--", "The Atlas launch review is on Friday"])
        assert backend.store_version() != version
        after = await orchestrator.search(SearchRequest("Atlas launch"))
    assert len(first.items) == 1
    assert "The Atlas launch review is on Friday" in [item.content for item in after.items]
