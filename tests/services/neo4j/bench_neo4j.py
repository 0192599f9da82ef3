"""Benchmark of the Neo4j backend (and SQLite for comparison): startup, ingest, recall, neighbours.

Not a test: run it by hand, e.g.::

    .venv/bin/python tests/services/neo4j/bench_neo4j.py --sizes 10000 --concurrency 8
    NEO4J_URI=bolt://127.0.0.1:7687 .venv/bin/python tests/services/neo4j/bench_neo4j.py --sizes 10000 100000

Without ``NEO4J_URI`` it starts the embedded launcher (and reports its startup time). Memories are
synthetic but shaped like agent memories: people, projects and tools as entities, a few sources,
timestamps minutes apart, causal wording in some, so every automatic edge rule fires.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memory_orchestrator.adapters.neo4j import Neo4jBackend
from memory_orchestrator.adapters.neo4j import create_backend as create_neo4j
from memory_orchestrator.adapters.sqlite import create_backend as create_sqlite
from memory_orchestrator.ports import MemoryBackend, NewMemory, RecallQuery
from services.neo4j.bulk_load import bulk_load
from services.neo4j.fixture import launcher_service, service_from_env

PEOPLE = ["Alice", "Bob", "Carol", "Dmitri", "Erin", "Farah", "Gustavo", "Hana", "Ivan", "Jun"]
PROJECTS = [f"Project{name}" for name in ("Atlas", "Orion", "Vega", "Lyra", "Nova", "Pulse", "Echo")]
TOOLS = ["PostgreSQL", "Redis", "Kafka", "Kubernetes", "Terraform", "GraphQL", "FastAPI", "Neo4j"]
VERBS = ["chose", "migrated", "reviewed", "deployed", "rolled back", "benchmarked", "documented"]
OBJECTS = ["the billing service", "the login flow", "the search index", "the nightly job", "the cache"]
REASONS = ["latency was too high", "costs doubled", "the vendor dropped support", "tests were flaky"]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "sprint",
    "budget",
    "outage",
    "ticket",
    "release",
    "incident",
    "metric",
    "dashboard",
]
SOURCES = ["chat", "standup", "ops", "docs", "email"]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def synthetic_memories(count: int, seed: int = 7) -> list[NewMemory]:
    """``count`` deterministic memories, five minutes apart on average."""
    rng = random.Random(seed)
    memories: list[NewMemory] = []
    moment = T0
    for index in range(count):
        moment += timedelta(minutes=rng.randint(1, 9))
        person, project, tool = rng.choice(PEOPLE), rng.choice(PROJECTS), rng.choice(TOOLS)
        text = f"{person} {rng.choice(VERBS)} {rng.choice(OBJECTS)} of {project} to {tool}"
        if rng.random() < 0.3:
            text += f" because {rng.choice(REASONS)}"
        text += f" ({' '.join(rng.sample(WORDS, 3))} #{index})"
        memories.append(NewMemory(text, source=rng.choice(SOURCES), created_at=moment))
    return memories


def queries(count: int, seed: int = 11) -> list[str]:
    """Recall questions over the same vocabulary."""
    rng = random.Random(seed)
    return [
        f"why did {rng.choice(PEOPLE)} move {rng.choice(PROJECTS)} to {rng.choice(TOOLS)}"
        for _ in range(count)
    ]


async def ingest(
    backend: MemoryBackend, memories: Sequence[NewMemory], concurrency: int
) -> tuple[float, list[str]]:
    """Seconds taken to remember every memory with ``concurrency`` writes in flight; the new ids."""
    ids: list[str] = []
    pending = iter(memories)

    async def worker() -> None:
        for memory in pending:
            ids.append((await backend.remember(memory)).id)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, ids


async def latencies(calls: Sequence[Callable[[], Awaitable[Any]]]) -> dict[str, float]:
    """p50 / p95 / mean in milliseconds of the calls run one after another (after 5 warm-ups)."""
    for call in calls[:5]:
        await call()
    timings: list[float] = []
    for call in calls:
        started = time.perf_counter()
        await call()
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return {
        "p50_ms": round(statistics.median(timings), 2),
        "p95_ms": round(timings[int(len(timings) * 0.95) - 1], 2),
        "mean_ms": round(statistics.fmean(timings), 2),
        "n": len(timings),
    }


async def measure(backend: MemoryBackend, size: int, concurrency: int, probes: int) -> dict[str, Any]:
    """Ingest ``size`` memories through ``remember``, then time recall and neighbours."""
    memories = synthetic_memories(size)
    seconds, ids = await ingest(backend, memories, concurrency)
    return {
        "size": size,
        "ingest_seconds": round(seconds, 2),
        "ingest_per_second": round(size / seconds, 1),
        "concurrency": concurrency,
        **await measure_reads(backend, memories, ids, probes),
    }


async def measure_bulk(backend: Neo4jBackend, size: int, probes: int) -> dict[str, Any]:
    """Bulk-load ``size`` memories (same node layout and edge rules), then time recall and neighbours."""
    memories = synthetic_memories(size)
    started = time.perf_counter()
    ids, edges = await bulk_load(backend, memories)
    seconds = time.perf_counter() - started
    return {
        "size": size,
        "bulk_load_seconds": round(seconds, 2),
        "bulk_load_per_second": round(size / seconds, 1),
        "edges": edges,
        **await measure_reads(backend, memories, ids, probes),
    }


async def measure_reads(
    backend: MemoryBackend, memories: Sequence[NewMemory], ids: Sequence[str], probes: int
) -> dict[str, Any]:
    """p50/p95 of recall and of neighbours (10 seeds 1 hop, 1 seed 2 hops) on the loaded store."""
    rng = random.Random(3)
    now = memories[-1].created_at
    recall_calls = [
        (lambda text=text: backend.recall(RecallQuery(text, limit=10, now=now))) for text in queries(probes)
    ]
    picked = [rng.sample(ids, 10) for _ in range(probes)]
    one_hop = [(lambda seeds=seeds: backend.neighbors(seeds, hops=1, limit=100)) for seeds in picked]
    two_hops = [(lambda seeds=seeds: backend.neighbors(seeds[:1], hops=2, limit=50)) for seeds in picked]
    return {
        "recall": await latencies(recall_calls),
        "neighbors_10_seeds_1_hop": await latencies(one_hop),
        "neighbors_1_seed_2_hops": await latencies(two_hops),
    }


async def run(args: argparse.Namespace, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every requested size on Neo4j and (unless skipped) SQLite, each on a fresh store."""
    results: list[dict[str, Any]] = []
    for size in args.bulk_sizes:
        store = f"bulk{uuid.uuid4().hex[:8]}"
        async with create_neo4j({**options, "store": store}) as neo4j:
            results.append({"backend": "neo4j", **await measure_bulk(neo4j, size, args.probes)})
            print(json.dumps(results[-1]), flush=True)
    for size in args.sizes:
        store = f"bench{uuid.uuid4().hex[:8]}"
        async with create_neo4j({**options, "store": store, "max_connection_pool_size": 32}) as neo4j:
            results.append({"backend": "neo4j", **await measure(neo4j, size, args.concurrency, args.probes)})
            print(json.dumps(results[-1]), flush=True)
        if size <= args.sqlite_max:
            with tempfile.TemporaryDirectory() as folder:
                path = str(Path(folder) / "bench.db")
                async with create_sqlite({"path": path, "store": store}) as sqlite:
                    results.append(
                        {"backend": "sqlite", **await measure(sqlite, size, args.concurrency, args.probes)}
                    )
                    print(json.dumps(results[-1]), flush=True)
    return results


def main() -> None:
    """Parse arguments, get a Neo4j, run, print JSON lines (and optionally save them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000], help="ingested via remember")
    parser.add_argument(
        "--bulk-sizes", type=int, nargs="*", default=[], help="Neo4j only: bulk-loaded, reads timed"
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--sqlite-max", type=int, default=100_000, help="largest size also run on SQLite")
    parser.add_argument("--out", type=Path, help="write all results as JSON here")
    args = parser.parse_args()
    service = service_from_env()
    if service is not None:
        results = asyncio.run(run(args, service.backend_options("unused")))
    else:
        with launcher_service() as launched:
            print(json.dumps({"neo4j_startup_seconds": round(launched.startup_seconds, 2)}), flush=True)
            results = asyncio.run(run(args, launched.backend_options("unused")))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
