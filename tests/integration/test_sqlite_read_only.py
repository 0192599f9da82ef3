"""A SQLite store that cannot be written is opened read-only: reads work, writes fail naming the file.

The real case needs a read-only folder. Tests run as root, which ignores file modes, so a read-only
tmpfs is mounted when the machine allows it (it skips with the reason otherwise); the fallback itself
is also exercised everywhere by making the writable open fail the way a read-only folder makes it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from memory_orchestrator.ports import BackendRejected, NewMemory

ORCHESTRATOR = orchestrator_command()


@pytest.mark.anyio
async def test_a_store_that_cannot_be_written_is_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    async with SqliteBackend(path) as backend:
        kept = await backend.remember(NewMemory("Kafka lag alert fired at 02:00"))

    async def refuse(self: SqliteBackend) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(SqliteBackend, "_connect_writable", refuse)
    async with SqliteBackend(path) as backend:
        assert backend.read_only
        assert [hit.record.id for hit in await backend.search("Kafka lag")] == [kept.id]
        assert [record.id for record in await backend.get([kept.id])] == [kept.id]
        with pytest.raises(BackendRejected, match=f"{path}.*read-only"):
            await backend.remember(NewMemory("another memory"))
        with pytest.raises(BackendRejected, match="read-only"):
            await backend.forget(kept.id)


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine does not allow mounting a tmpfs (the fallback test above still runs)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = settings_free_environment()
    env.update(ORCHESTRATOR_DATA_DIR=str(folder), ORCHESTRATOR_BACKEND__NAME="sqlite")
    return subprocess.run(
        [ORCHESTRATOR, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_reads_work_from_a_read_only_data_folder(read_only_folder: Path) -> None:
    assert run(read_only_folder, "remember", "Kafka lag alert fired at 02:00").returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_folder)], check=True)
    found = run(read_only_folder, "search", "-q", "Kafka lag", "--json")
    assert found.returncode == 0, found.stderr
    assert "Kafka lag alert fired" in found.stdout
    refused = run(read_only_folder, "remember", "another memory")
    assert refused.returncode != 0
    assert "read-only" in refused.stderr and str(read_only_folder) in refused.stderr
    assert "Traceback" not in refused.stderr + found.stderr
