"""``orchestrator demo``: load the bundled Atlas example set and show search, context and explain.

The demo writes into its own store (``demo``), never the default store that ``serve`` hands to agents;
``orchestrator demo --clean`` forgets what it loaded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.rule import Rule
from rich.text import Text

from memory_orchestrator.domain.requests import Budget, ContextRequest, SearchRequest
from memory_orchestrator.entrypoints.cli import output as out
from memory_orchestrator.entrypoints.cli.invocation import apply_store
from memory_orchestrator.entrypoints.cli.pipeline import show_search, show_warnings
from memory_orchestrator.entrypoints.cli.state import (
    JsonOption,
    print_json,
    run,
    settings_of,
    state_of,
)
from memory_orchestrator.entrypoints.cli.trace_view import show_trace
from memory_orchestrator.entrypoints.config.bootstrap import Runtime, open_runtime
from memory_orchestrator.evaluation.datasets import ingest, load_dataset
from memory_orchestrator.examples import example_path

#: The demo asks its questions "as of" this moment, inside the example set's timeline.
DEMO_NOW = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
#: A WHY question whose cause shares no word with it: only the causal edge can bring the cause in.
DEMO_QUESTION = "why did we stop using Stratus?"
#: The store the demo writes to unless ``--store`` names another one.
DEMO_STORE = "demo"
#: Memories forgotten per page by ``demo --clean``.
CLEAN_PAGE = 200


async def load_example_if_empty(runtime: Runtime) -> dict[str, Any]:
    """Ingest the Atlas set when the store holds no memory; say what happened."""
    if await runtime.backend.recent(limit=1):
        return {
            "loaded": False,
            "reason": "the store already holds memories; the example set was not loaded again",
        }
    (dataset,) = load_dataset(example_path("atlas"))
    report = await ingest(runtime.backend, dataset)
    return {
        "loaded": True,
        "memories": report.written,
        "links": report.links,
        "warnings": list(report.warnings),
    }


async def run_demo(runtime: Runtime) -> dict[str, Any]:
    """Load the example set if needed, then run one search, one context and one explain."""
    loading = await load_example_if_empty(runtime)
    search = SearchRequest(query=DEMO_QUESTION, top_k=6, now=DEMO_NOW)
    context = ContextRequest(query=DEMO_QUESTION, budget=Budget(max_items=6, max_tokens=400), now=DEMO_NOW)
    return {
        "store": loading,
        "search": await runtime.orchestrator.search(search),
        "context": await runtime.orchestrator.context(context),
        "explain": await runtime.orchestrator.explain(search),
    }


async def clean_store(runtime: Runtime) -> int:
    """Forget every active memory of the runtime's store; how many were forgotten."""
    forgotten = 0
    while page := await runtime.backend.recent(limit=CLEAN_PAGE):
        for record in page:
            await runtime.backend.forget(record.id)
        forgotten += len(page)
    return forgotten


def demo(
    ctx: typer.Context,
    clean: Annotated[
        bool, typer.Option("--clean", help="Forget every memory of the demo store and exit.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Load the bundled Atlas example set into its own store ('demo') and show the pipeline."""
    store = state_of(ctx).store or DEMO_STORE
    prefix = "orchestrator" if store == DEMO_STORE else f"orchestrator --store {store}"
    cleanup = f"{prefix} demo --clean"

    async def action() -> dict[str, Any]:
        settings = settings_of(ctx)
        apply_store(settings, store)
        async with open_runtime(settings) as runtime:
            if clean:
                return {"forgotten": await clean_store(runtime)}
            return await run_demo(runtime)

    results = run(action)
    if clean:
        if as_json:
            print_json({"store": store, **results})
        else:
            out.console.print(Text(f"Forgot {results['forgotten']} memories of the store {store!r}."))
        return
    results["store"] |= {"name": store, "cleanup": cleanup}
    if as_json:
        print_json(
            {
                "store": results["store"],
                "search": results["search"].to_dict(),
                "context": results["context"].to_dict(),
                "explain": results["explain"],
            }
        )
        return
    show_demo(results)


def show_demo(results: dict[str, Any]) -> None:
    """The three outputs, each under a heading."""
    store = results["store"]
    out.console.print(
        Text(
            f"The demo uses its own store {store['name']!r}; other stores are untouched. "
            f"Clean up with: {store['cleanup']}"
        )
    )
    if store["loaded"]:
        out.console.print(
            Text(f"Loaded the Atlas example set: {store['memories']} memories, {store['links']} links.")
        )
    else:
        out.console.print(Text(store["reason"]))
    out.console.print(Text(f'Questions are asked as of {DEMO_NOW:%Y-%m-%d}. Question: "{DEMO_QUESTION}"'))
    out.console.print(Rule("1. search: ranked memories with reasons"))
    show_search(results["search"])
    out.console.print(Rule("2. context: a budgeted block an agent can paste"))
    context = results["context"]
    out.console.print(Text(context.context_block))
    out.console.print(Text(f"{context.chars} chars, ~{context.est_tokens} tokens, trace {context.trace_id}"))
    show_warnings(context.warnings)
    out.console.print(Rule("3. explain: how the pipeline decided"))
    show_trace(results["explain"])
    out.console.print(
        Text(
            f"\nTry: orchestrator --store {store['name']} search -q 'when is the Atlas cutover?' "
            "--now 2026-05-01T09:00:00Z"
        )
    )


def register(app: typer.Typer) -> None:
    """Mount ``demo`` on ``app``."""
    app.command()(demo)
