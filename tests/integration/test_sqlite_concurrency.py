"""Several OS processes writing one SQLite store at once: nothing lost, duplicates stored once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import SqliteBackend
from memory_orchestrator.ports import EdgeType

pytestmark = pytest.mark.slow

# Each worker waits for the start file so that all of them write at the same moment.
WORKER = r"""
import asyncio, json, sys, time
from pathlib import Path
from memory_orchestrator.adapters.sqlite import SqliteBackend
from memory_orchestrator.ports import NewMemory

async def main(path, start_flag, worker, count, same):
    results = []
    async with SqliteBackend(Path(path)) as backend:
        while not Path(start_flag).exists():
            await asyncio.sleep(0.005)
        for index in range(count):
            text = same if same else f"worker {worker} wrote note {index} about Kafka"
            written = await backend.remember(NewMemory(text, source=f"w{worker}", entities=("Kafka",)))
            results.append([written.id, written.action.value])
    print(json.dumps(results))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
"""


def _run_workers(db: Path, workers: int, count: int, same: str = "") -> list[list[list[str]]]:
    flag = db.parent / "start"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(flag), str(worker), str(count), same],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(workers)
    ]
    time.sleep(1.0)  # let every interpreter start and open the store before the race begins
    flag.write_text("go")
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        outputs.append(json.loads(stdout))
    return outputs


@pytest.fixture
async def prepared(tmp_path: Path) -> Path:
    db = tmp_path / "shared.db"
    async with SqliteBackend(db):
        pass  # migrate once so the workers race on writes, not on schema creation
    return db


@pytest.mark.anyio
async def test_concurrent_processes_lose_no_write(prepared: Path) -> None:
    outputs = _run_workers(prepared, workers=4, count=25)
    ids = [memory_id for output in outputs for memory_id, action in output if action == "added"]
    assert len(ids) == 100
    assert len(set(ids)) == 100
    async with SqliteBackend(prepared) as backend:
        assert await backend.count() == 100
        assert len(await backend.get(ids)) == 100
        hits = await backend.search("worker note kafka", limit=200)
        assert len(hits) == 100
        linked = await backend.neighbors([ids[-1]], edge_types=[EdgeType.ENTITY])
        assert linked, "entity edges are built under concurrency too"


@pytest.mark.anyio
async def test_processes_remembering_the_same_content_store_it_once(prepared: Path) -> None:
    outputs = _run_workers(prepared, workers=6, count=1, same="The release train leaves every Tuesday")
    results = [output[0] for output in outputs]
    assert len({memory_id for memory_id, _ in results}) == 1
    assert sorted(action for _, action in results) == ["added"] + ["skipped"] * 5
    async with SqliteBackend(prepared) as backend:
        assert await backend.count() == 1
