"""`serve --http` as a real subprocess: /metrics after a few calls (auth, one and two processes), the
JSON log lines of the calls, and `orchestrator stats` on the store the server wrote."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memory_orchestrator.entrypoints.mcp.auth import hash_token
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment
from services.processes import free_port, stop

pytestmark = pytest.mark.slow

ORCHESTRATOR = orchestrator_command()
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _environment(data_dir: Path, **extra: str) -> dict[str, str]:
    env = settings_free_environment()
    env.update(ORCHESTRATOR_DATA_DIR=str(data_dir), ORCHESTRATOR_BACKEND__NAME="sqlite", **extra)
    return env


@contextmanager
def serving(data_dir: Path, **extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    process = subprocess.Popen(
        [ORCHESTRATOR, "serve", "--http", "--host", "127.0.0.1", "--port", str(port)],
        env=_environment(data_dir, **extra),
        stdout=subprocess.DEVNULL,
        stderr=(data_dir / "stderr.log").open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (data_dir / "stderr.log").read_text()
            try:
                if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not become ready in time"
                time.sleep(0.2)
        yield base, process
    finally:
        stop(process, timeout_s=15)


def _call(base: str, tool: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    answer = httpx.post(f"{base}/mcp", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


def _scrape(base: str, token: str | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx.get(f"{base}/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_metrics_need_a_token_move_with_calls_and_logs_carry_request_ids(tmp_path: Path) -> None:
    reader = f'name = "reader", sha256 = "{hash_token("r-secret")}", stores = ["default"], write = false'
    writer = f'name = "writer", sha256 = "{hash_token("w-secret")}", stores = ["default"], write = true'
    config = tmp_path / "orchestrator.toml"
    config.write_text(f"[auth]\ntokens = [{{ {reader} }}, {{ {writer} }}]\n")
    with serving(tmp_path, ORCHESTRATOR_CONFIG=str(config)) as (base, _process):
        assert httpx.get(f"{base}/metrics").status_code == 401
        assert httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer guess"}).status_code == 401
        before = _scrape(base, "r-secret")
        for content in ("Stratus invoices tripled in March", "We left Stratus because of the invoices"):
            assert not _call(base, "memory_write", {"content": content, "entities": ["Stratus"]}, "w-secret")[
                "isError"
            ]
        found = _call(base, "memory_search", {"query": "why did we leave Stratus?"}, "r-secret")
        again = _call(base, "memory_search", {"query": "why did we leave Stratus?"}, "r-secret")
        assert _call(base, "memory_search", {"bogus": 1}, "r-secret")["isError"]
        after = _scrape(base, "r-secret")
    search_ok = ("orchestrator_tool_latency_seconds_count", (("status", "ok"), ("tool", "memory_search")))
    assert search_ok not in before and after[search_ok] == 2
    assert after[("orchestrator_errors_total", (("kind", "InvalidRequest"),))] == 1
    assert after[("orchestrator_cache_requests_total", (("result", "hit"),))] == 1
    assert after[("orchestrator_cache_hit_ratio", ())] == 0.5
    assert after[("orchestrator_channel_candidates_count", (("channel", "keyword"),))] == 1
    assert (
        after[("orchestrator_stage_latency_seconds_count", (("operation", "search"), ("stage", "retrieval")))]
        == 1
    )

    lines = [
        json.loads(line)
        for line in (tmp_path / "stderr.log").read_text().splitlines()
        if line.startswith("{")
    ]
    calls = [line for line in lines if line.get("event") == "tool_call"]
    assert len(calls) == 5
    assert all(line["ts"].endswith("+00:00") and line["request_id"].startswith("tr-") for line in calls)
    traced = [line for line in calls if "trace_id" in line]
    assert traced and all(line["request_id"] == line["trace_id"] for line in traced)
    searches = [line["trace_id"] for line in calls if line["tool"] == "memory_search" and "trace_id" in line]
    assert searches == [found["structuredContent"]["trace_id"], again["structuredContent"]["trace_id"]]

    stats = subprocess.run(
        [ORCHESTRATOR, "stats", "--json"],
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stats.returncode == 0, stats.stderr
    report = json.loads(stats.stdout)
    assert (report["store"], report["memories"]) == ("default", 2)
    assert report["operations"]["search"]["count"] == 2 and report["operations"]["write"]["count"] == 2
    assert report["cache"] == {"hits": 1, "misses": 1, "hit_rate": 0.5}


def test_metrics_with_two_worker_processes_sum_every_worker(tmp_path: Path) -> None:
    with serving(tmp_path, ORCHESTRATOR_HTTP__WORKERS="2") as (base, process):
        with ThreadPoolExecutor(max_workers=6) as pool:  # concurrent, so both workers take calls
            list(pool.map(lambda n: _call(base, "memory_search", {"query": f"question {n}"}), range(12)))
        scrapes = [_scrape(base) for _ in range(6)]  # answered by either worker
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
    assert len(children) == 2
    key = ("orchestrator_tool_latency_seconds_count", (("status", "ok"), ("tool", "memory_search")))
    assert [scrape[key] for scrape in scrapes] == [12] * 6
    assert all(scrape[("orchestrator_reads_total", (("operation", "search"),))] == 12 for scrape in scrapes)
