"""``orchestrator stats``: what a local store holds and what its stored traces say about it."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from memory_orchestrator.entrypoints.cli import output as out
from memory_orchestrator.entrypoints.cli.pipeline import with_runtime
from memory_orchestrator.entrypoints.cli.state import JsonOption, print_json
from memory_orchestrator.entrypoints.config.bootstrap import Runtime
from memory_orchestrator.entrypoints.telemetry.stats import trace_stats


def stats(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Read at most this many of the newest traces.")
    ] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Memories in the store and, from its stored traces: calls per operation, latency percentiles
    per operation and stage, candidates per channel, recall depth, expansion rate, dedup ratio, read
    cache hit rate."""
    report = with_runtime(ctx, lambda runtime: _collect(runtime, limit))
    if as_json:
        print_json(report)
        return
    _show(report)


async def _collect(runtime: Runtime, limit: int) -> dict[str, Any]:
    store = runtime.settings.store_name()
    health = await runtime.backend.health(probe=False)
    documents = []
    if runtime.traces is not None:
        for trace_id, _at in await runtime.traces.recent(limit=limit):
            document = await runtime.traces.load(trace_id)
            if document is not None:
                documents.append(document)
    return {
        "store": store,
        "backend": runtime.settings.backend.name,
        "memories": health.memory_count,
        "status": health.status,
        "traces_stored": runtime.traces is not None,
        **trace_stats(documents, store),
    }


def _show(report: dict[str, Any]) -> None:
    console = out.console
    console.print(
        Text(
            f"store {report['store']} ({report['backend']}): {report['memories']} memories, "
            f"status {report['status']}; {report['traces']} traces of this store"
            f" ({report['other_stores']} of other stores, {report['unlabelled']} unlabelled)"
        )
    )
    if not report["traces_stored"]:
        console.print(Text("traces are not stored (features.store_traces off or traces.retention 0)"))
    columns = ("count", "p50 ms", "p95 ms", "max ms")
    for title, rows in (("operations", report["operations"]), ("stages", report["stages"])):
        if rows:
            table = [(name, r["count"], r["p50_ms"], r["p95_ms"], r["max_ms"]) for name, r in rows.items()]
            console.print(out.table(title, (title[:-1], *columns), table))
    if report["channels"]:
        rows = [(n, c["reads"], c["mean"], c["p50"], c["max"]) for n, c in report["channels"].items()]
        console.print(out.table("candidates per channel", ("channel", "reads", "mean", "p50", "max"), rows))
    depth, expansion, dedup, cache = (report[k] for k in ("recall_depth", "expansion", "dedup", "cache"))
    lines = (
        f"recall depth: mean {depth['mean']}, p50 {depth['p50']}, max {depth['max']} "
        f"({depth['reads']} reads)",
        f"expansion rate: {_share(expansion['rate'])} ({expansion['expanded']} of {expansion['reads']} "
        f"reads; {expansion['added']} memories added)",
        f"dedup ratio: {_share(dedup['ratio'])} ({dedup['merged']} of {dedup['entered']} merged)",
        f"cache hit rate: {_share(cache['hit_rate'])} ({cache['hits']} hits, {cache['misses']} misses)",
        f"degraded reads: {report['degraded_reads']}",
    )
    for line in lines:
        console.print(Text(line))


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def register(app: typer.Typer) -> None:
    """Mount ``stats`` on ``app``."""
    app.command()(stats)
