"""CLI commands that talk to the backend directly: remember, link, recall, get, forget, health, import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.text import Text

from memory_orchestrator.domain.results import edge_to_dict, record_to_dict
from memory_orchestrator.entrypoints.cli import output as out
from memory_orchestrator.entrypoints.cli.invocation import apply_store
from memory_orchestrator.entrypoints.cli.progress import TerminalProgress
from memory_orchestrator.entrypoints.cli.state import (
    CategoryOption,
    EntityOption,
    JsonOption,
    NowOption,
    SinceOption,
    SourceOption,
    UntilOption,
    build_filters,
    guarded,
    parse_time_option,
    print_json,
    run,
    settings_of,
)
from memory_orchestrator.entrypoints.config.bootstrap import open_backend
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.evaluation.datasets import Dataset, ingest, load_dataset
from memory_orchestrator.examples import example_path
from memory_orchestrator.ports import (
    BackendError,
    BackendHealth,
    Edge,
    EdgeType,
    HealthCheck,
    Intent,
    InvalidRequest,
    NewMemory,
    RecallQuery,
)


def remember(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The memory text.")],
    category: Annotated[
        str, typer.Option(help="preference|decision|fact|insight|context|general")
    ] = "general",
    importance: Annotated[int, typer.Option(min=1, max=5, help="1 (trivia) .. 5 (critical).")] = 3,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    entity: Annotated[
        list[str] | None, typer.Option("--entity", help="An entity it names (repeatable).")
    ] = None,
    source: Annotated[str, typer.Option(help="Who or what said it.")] = "user",
    created_at: Annotated[str | None, typer.Option(help="Back-date the memory (ISO 8601).")] = None,
    dedup: Annotated[bool, typer.Option("--dedup/--no-dedup", help="Skip identical content.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Store a memory straight in the backend (no orchestration; see `write` for the checked path)."""

    async def action() -> None:
        memory = NewMemory(
            content=content,
            category=category,
            importance=importance,
            tags=tuple(tag or ()),
            entities=tuple(entity or ()),
            source=source,
            created_at=parse_time_option(created_at, "--created-at"),
            dedup=dedup,
        )
        async with open_backend(settings_of(ctx)) as backend:
            result = await backend.remember(memory)
        if as_json:
            print_json(out.write_result_to_dict(result))
        else:
            out.show_write(result)

    run(action)


def link(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="Id of the memory the edge starts at.")],
    target: Annotated[str, typer.Argument(help="Id of the memory the edge ends at.")],
    edge_type: Annotated[EdgeType, typer.Option("--type", help="Edge type.")] = EdgeType.SEMANTIC,
    weight: Annotated[float, typer.Option(min=0.0, max=1.0, help="Edge strength.")] = 1.0,
    as_json: JsonOption = False,
) -> None:
    """Create a typed edge between two memories (``supersedes``: SOURCE replaces TARGET)."""

    async def action() -> None:
        async with open_backend(settings_of(ctx)) as backend:
            edge = await backend.link(Edge(source, target, edge_type, weight))
        if as_json:
            print_json(edge_to_dict(edge))
        else:
            out.console.print(Text(f"linked {source} -[{edge_type.value}]-> {target}"))

    run(action)


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many hits.")] = 10,
    intent: Annotated[Intent | None, typer.Option(help="Intent hint for backends that use it.")] = None,
    category: CategoryOption = None,
    source: SourceOption = None,
    entity: EntityOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    now: NowOption = None,
    as_json: JsonOption = False,
) -> None:
    """The backend's own retrieval, without planning, expansion or re-ranking."""

    async def action() -> None:
        request = RecallQuery(
            text=query,
            limit=limit,
            intent=intent,
            filters=build_filters(category, source, entity, since, until, parse_time_option(now, "--now")),
            now=parse_time_option(now, "--now"),
        )
        async with open_backend(settings_of(ctx)) as backend:
            hits = await backend.recall(request)
        if as_json:
            print_json({"query": query, "hits": [out.hit_to_dict(hit) for hit in hits]})
        else:
            out.show_hits(hits, f"recall: {query}")

    run(action)


def get(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(help="Memory ids.")],
    as_json: JsonOption = False,
) -> None:
    """Show memories by id (unknown or forgotten ids are reported and exit non-zero)."""

    async def action() -> int:
        async with open_backend(settings_of(ctx)) as backend:
            records = await backend.get(ids)
        found = {record.id for record in records}
        missing = [memory_id for memory_id in ids if memory_id not in found]
        if as_json:
            print_json({"memories": [record_to_dict(r) for r in records], "missing": missing})
        else:
            out.show_records(records)
            if missing:
                out.console.print(Text(f"not found: {', '.join(missing)}"))
        return 3 if missing else 0

    code = run(action)
    if code:
        raise typer.Exit(code)


def forget(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="Id of the memory to forget (soft delete).")],
    as_json: JsonOption = False,
) -> None:
    """Soft-delete a memory; its edges are hidden too."""

    async def action() -> None:
        async with open_backend(settings_of(ctx)) as backend:
            await backend.forget(memory_id)
        if as_json:
            print_json({"forgotten": memory_id})
        else:
            out.console.print(Text(f"forgotten: {memory_id}"))

    run(action)


def health(
    ctx: typer.Context,
    probe: Annotated[bool, typer.Option(help="Make a real write/read/forget round trip.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Readiness of the configured backend; exits 1 when it is in error."""

    async def action() -> bool:
        settings = settings_of(ctx)
        try:
            async with open_backend(settings) as backend:
                report = await backend.health(probe=probe)
        except BackendError as exc:
            # An unreachable store is a health answer, not a crash of the health command.
            check = HealthCheck(name="open", status="error", detail=str(exc))
            report = BackendHealth(backend=settings.backend.name, status="error", checks=(check,))
        if as_json:
            print_json(out.health_to_dict(report))
        else:
            out.show_health(report)
        return report.ok

    if not run(action):
        raise typer.Exit(1)


def import_dataset(
    ctx: typer.Context,
    path: Annotated[
        Path | None, typer.Argument(help="memories.jsonl, queries.jsonl or a dataset folder.")
    ] = None,
    corpus: Annotated[Path | None, typer.Option(help="memories.jsonl when PATH is a queries file.")] = None,
    example: Annotated[
        str | None, typer.Option("--example", help="A bundled example set by name (atlas) instead of PATH.")
    ] = None,
    progress: Annotated[
        bool, typer.Option(help="Show progress with rate and ETA on stderr (a bar on a terminal).")
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Load an eval-format dataset; a folder of several stores goes into one store each (named after it)."""
    source = guarded(lambda: dataset_source(path, example))

    async def action() -> list[dict[str, Any]]:
        return await _import_all(settings_of(ctx), load_dataset(source, corpus=corpus), source, progress)

    reports = run(action)
    if as_json:
        print_json({"stores": reports})
        return
    rows = [(r["store"], r["written"], r["skipped"], r["links"], len(r["warnings"])) for r in reports]
    out.console.print(
        out.table(f"imported {example or source}", ("store", "written", "skipped", "links", "warnings"), rows)
    )
    for report in reports:
        for warning in report["warnings"]:
            out.console.print(Text(f"warning ({report['store']}): {warning}"))


async def _import_all(
    settings: Settings, datasets: list[Dataset], source: Path, progress: bool
) -> list[dict[str, Any]]:
    """Write each dataset into its store, with progress on stderr; one summary per store."""
    reports = []
    with TerminalProgress(unit="memories", enabled=progress) as bar:
        for dataset in datasets:
            if len(datasets) > 1:
                apply_store(settings, dataset.name)
            # The store written is the configured one (--store, or the default) unless the dataset
            # holds several stores.
            store = settings.store_name()
            bar.stage(f"importing {dataset.name or source.name} into store {store}", len(dataset.memories))
            async with open_backend(settings) as backend:
                report = await ingest(backend, dataset, on_progress=lambda _d, _t: bar.advance())
            reports.append(_import_summary(store, report))
    return reports


def dataset_source(path: Path | None, example: str | None) -> Path:
    """PATH, or the folder of the bundled example set ``example``; exactly one of them."""
    if (path is None) == (example is None):
        raise InvalidRequest("give a dataset PATH or --example NAME (e.g. --example atlas), not both")
    return example_path(example) if example is not None else cast(Path, path)


def _import_summary(store: str, report: Any) -> dict[str, Any]:
    return {
        "store": store,
        "written": report.written,
        "skipped": report.skipped,
        "links": report.links,
        "backdated": report.backdated,
        "warnings": list(report.warnings),
        "ids": dict(report.ids),
    }


def register(app: typer.Typer) -> None:
    """Mount the backend commands on ``app``."""
    app.command()(remember)
    app.command()(link)
    app.command()(recall)
    app.command()(get)
    app.command()(forget)
    app.command()(health)
    app.command("import")(import_dataset)
