"""The orchestrator over real Mnemon: our MCP server over stdio, passthrough, and concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory_orchestrator.adapters.mnemon import create_backend
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from memory_orchestrator.ports import Edge, EdgeType, NewMemory
from services.mnemon.fixture import mnemon_options

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.slow]

ORCHESTRATOR = orchestrator_command()
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _server_env(mnemon_env: dict[str, str], data_dir: Path, **extra: str) -> dict[str, str]:
    env = settings_free_environment()
    env.update(mnemon_env)
    env.update(
        {
            "ORCHESTRATOR_DATA_DIR": str(data_dir),
            "ORCHESTRATOR_BACKEND__NAME": "mnemon",
            "ORCHESTRATOR_BACKEND__MNEMON__DATA_DIR": mnemon_env["MNEMON_DATA_DIR"],
            "ORCHESTRATOR_BACKEND__MNEMON__CREATE": "true",
        }
    )
    env.update(extra)
    return env


async def _seed(mnemon_env: dict[str, str]) -> dict[str, str]:
    """A small Mnemon store: an invoice dispute that caused a vendor decision, plus unrelated notes."""
    memories = {
        "invoice": NewMemory(
            "Stratus Hosting sent a third invoice with surprise egress charges",
            entities=("Stratus Hosting",),
            source="finance",
            created_at=T0,
        ),
        "decision": NewMemory(
            "Decision: we stop using Stratus Hosting and move Atlas to our own Kubernetes cluster",
            category="decision",
            entities=("Stratus Hosting", "Atlas"),
            source="team",
            created_at=T0 + timedelta(days=2),
        ),
        "lunch": NewMemory("Team lunch moved to Thursdays", source="team", created_at=T0 + timedelta(days=3)),
        "oncall": NewMemory(
            "Atlas on-call rotation starts in April",
            entities=("Atlas",),
            source="team",
            created_at=T0 + timedelta(days=4),
        ),
    }
    async with create_backend(mnemon_options(mnemon_env)) as backend:
        written = await backend.remember_many(list(memories.values()))
        ids = {key: result.id for key, result in zip(memories, written, strict=True)}
        await backend.link(Edge(ids["invoice"], ids["decision"], EdgeType.CAUSAL, 0.9))
    return ids


@asynccontextmanager
async def _session(env: dict[str, str], errlog: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=ORCHESTRATOR, args=["serve"], env=env)
    async with Client(stdio_client(params, errlog=errlog)) as client:
        yield client


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def test_mcp_server_over_stdio_on_a_seeded_mnemon_store(
    mnemon_env: dict[str, str], tmp_path: Path
) -> None:
    ids = await _seed(mnemon_env)
    with (tmp_path / "stderr.log").open("w+") as errlog:
        async with _session(_server_env(mnemon_env, tmp_path / "orchestrator"), errlog) as client:
            found = await _ok(
                client,
                "memory_search",
                {"query": "why did we stop using Stratus?"},
            )
            packed = await _ok(
                client,
                "memory_context",
                {
                    "query": "why did we stop using Stratus?",
                    "response_budget": {"max_chars": 600},
                },
            )
            written = await _ok(
                client, "memory_write", {"content": "Atlas cutover is planned for May", "entities": ["Atlas"]}
            )
            repeat = await _ok(
                client, "memory_write", {"content": "Atlas cutover is planned for May", "entities": ["Atlas"]}
            )
            expanded = await _ok(client, "memory_expand", {"seeds": [ids["decision"]], "intent": "WHY"})
            health = await _ok(client, "memory_health", {})
    found_ids = [item["memory_id"] for item in found["items"]]
    assert found_ids[0] == ids["decision"]
    assert ids["invoice"] in found_ids  # reached over the causal edge stored in Mnemon
    assert packed["chars"] <= 600 and ids["decision"] in packed["context_block"]
    assert written["action"] == "added" and repeat["action"] == "skipped" and repeat["id"] == written["id"]
    assert ids["invoice"] in [item["memory_id"] for item in expanded["items"]]
    assert health["backend"] == "mnemon"
    async with create_backend(mnemon_options(mnemon_env)) as backend:
        assert [record.content for record in await backend.get([written["id"]])] == [
            "Atlas cutover is planned for May"
        ]


async def test_passthrough_answers_with_mnemons_own_recall(
    mnemon_env: dict[str, str], tmp_path: Path
) -> None:
    ids = await _seed(mnemon_env)
    env = _server_env(mnemon_env, tmp_path / "orchestrator", ORCHESTRATOR_PIPELINE__PASSTHROUGH="true")
    with (tmp_path / "stderr.log").open("w+") as errlog:
        async with _session(env, errlog) as client:
            found = await _ok(
                client, "memory_search", {"query": "Stratus invoice egress charges", "top_k": 5}
            )
    async with create_backend(mnemon_options(mnemon_env)) as backend:
        raw = await backend.transport.call(
            ["recall", "--verbose", "--limit", "15", "--", "Stratus invoice egress charges"]
        )
    matched = [
        item["insight"]["id"]
        for item in raw["results"]
        if any(item["signals"].get(name, 0) > 0 for name in ("keyword", "entity", "similarity"))
    ]
    assert [item["memory_id"] for item in found["items"]][:1] == [ids["invoice"]]
    assert set(item["memory_id"] for item in found["items"]) <= set(matched)


WORKER = r"""
import asyncio, json, sys, uuid
from memory_orchestrator.entrypoints.config.bootstrap import open_runtime
from memory_orchestrator.entrypoints.config.settings import load_settings
from memory_orchestrator.domain.requests import WriteRequest
from memory_orchestrator.ports import NewMemory
from pathlib import Path

async def main(flag, worker, count):
    settings = load_settings()
    async with open_runtime(settings) as runtime:
        while not Path(flag).exists():
            await asyncio.sleep(0.005)
        results = []
        for index in range(count):
            # Distinct words per note, so the write path's near-duplicate check keeps every one.
            memory = NewMemory(f"Kafka note {uuid.uuid4().hex} from worker {worker}", source=f"w{worker}")
            outcome = await runtime.orchestrator.write(WriteRequest(memory))
            results.append([outcome.id, outcome.action.value, list(outcome.warnings)])
    print(json.dumps(results))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def _race(env: dict[str, str], flag: Path, workers: int, count: int) -> list[list[Any]]:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(flag), str(worker), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for worker in range(workers)
    ]
    time.sleep(2.0)  # every interpreter opens the store before the race begins
    flag.write_text("go")
    rows = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        rows.extend(json.loads(stdout))
    return rows


async def test_four_processes_writing_through_the_orchestrator_lose_nothing(
    mnemon_env: dict[str, str], tmp_path: Path
) -> None:
    async with create_backend(mnemon_options(mnemon_env)):
        pass  # the store exists before the race
    rows = _race(_server_env(mnemon_env, tmp_path / "orchestrator"), tmp_path / "start", workers=4, count=25)
    assert len(rows) == 100
    assert [row for row in rows if row[1] != "added" or row[2]] == []
    ids = {memory_id for memory_id, _, _ in rows}
    assert len(ids) == 100
    async with create_backend(mnemon_options(mnemon_env)) as backend:
        assert len(await backend.get(sorted(ids))) == 100
        assert len(await backend.recent(limit=1000)) == 100
