"""CLI commands that go through the Orchestrator: search, context, expand, explain, write, trace."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Annotated, Any

import typer
from rich.text import Text

from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    ExpandRequest,
    PlanOverrides,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.domain.results import ResultItem, SearchResult, WriteOutcome
from memory_orchestrator.entrypoints.cli import output as out
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
from memory_orchestrator.entrypoints.cli.trace_view import show_trace
from memory_orchestrator.entrypoints.config.bootstrap import Runtime, open_runtime
from memory_orchestrator.ports import Edge, EdgeType, Intent, InvalidRequest, NewMemory, format_timestamp

trace_app = typer.Typer(help="Show or replay stored traces.", no_args_is_help=True)

QueryOption = Annotated[str, typer.Option("--query", "-q", help="The question.")]
TaskOption = Annotated[str, typer.Option("--task", help="What the agent is working on (helps ranking).")]
IntentOption = Annotated[Intent | None, typer.Option("--intent", help="Override the detected intent.")]
ExpandOption = Annotated[bool, typer.Option("--expand/--no-expand", help="Follow graph edges.")]
HopsOption = Annotated[int | None, typer.Option("--hops", min=0, max=5, help="Override the hop budget.")]


def with_runtime(ctx: typer.Context, work: Callable[[Runtime], Awaitable[Any]]) -> Any:
    """Open the runtime from the CLI's settings, run ``work`` on it, handle expected errors."""

    async def action() -> Any:
        async with open_runtime(settings_of(ctx)) as runtime:
            return await work(runtime)

    return run(action)


def search(
    ctx: typer.Context,
    query: QueryOption,
    task: TaskOption = "",
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="How many results.")] = 10,
    expand: ExpandOption = True,
    intent: IntentOption = None,
    hops: HopsOption = None,
    category: CategoryOption = None,
    source: SourceOption = None,
    entity: EntityOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    now: NowOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ranked, explained memories for a question (planned, multi-channel, graph-expanded)."""
    request = guarded(
        lambda: SearchRequest(
            query=query,
            task=task,
            filters=build_filters(category, source, entity, since, until, parse_time_option(now, "--now")),
            top_k=top_k,
            expand=expand,
            now=parse_time_option(now, "--now"),
            overrides=PlanOverrides(intent=intent, hops=hops),
        )
    )
    result = with_runtime(ctx, lambda rt: rt.orchestrator.search(request))
    if as_json:
        print_json(result.to_dict())
    else:
        show_search(result)


def context(
    ctx: typer.Context,
    query: QueryOption,
    task: TaskOption = "",
    max_items: Annotated[int, typer.Option("--max-items", min=1, help="At most this many memories.")] = 10,
    max_chars: Annotated[int | None, typer.Option("--max-chars", min=1, help="Character budget.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Token budget.")] = None,
    group_by: Annotated[
        str | None, typer.Option("--group-by", help="entity|time|task (default: auto).")
    ] = None,
    expand: ExpandOption = True,
    intent: IntentOption = None,
    category: CategoryOption = None,
    source: SourceOption = None,
    entity: EntityOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    now: NowOption = None,
    as_json: JsonOption = False,
) -> None:
    """A budgeted context block an agent can paste, with the memory ids kept."""
    request = guarded(
        lambda: ContextRequest(
            query=query,
            task=task,
            filters=build_filters(category, source, entity, since, until, parse_time_option(now, "--now")),
            budget=Budget(max_items=max_items, max_chars=max_chars, max_tokens=max_tokens),
            expand=expand,
            now=parse_time_option(now, "--now"),
            overrides=PlanOverrides(intent=intent),
            group_by=group_by,
        )
    )
    result = with_runtime(ctx, lambda rt: rt.orchestrator.context(request))
    if as_json:
        print_json(result.to_dict())
        return
    out.console.print(Text(f"{result.summary}\n"))
    out.console.print(Text(result.context_block))
    size = f"{len(result.items)} items, {result.chars} chars, ~{result.est_tokens} tokens"
    out.console.print(Text(f"\n{size}, trace {result.trace_id}"))
    show_warnings(result.warnings)


def expand(
    ctx: typer.Context,
    seed: Annotated[
        list[str] | None, typer.Option("--seed", help="A memory id to start from (repeatable).")
    ] = None,
    seed_entity: Annotated[
        list[str] | None, typer.Option("--seed-entity", help="Start from memories naming this entity.")
    ] = None,
    edge_type: Annotated[
        list[EdgeType] | None, typer.Option("--edge-type", help="Follow only these.")
    ] = None,
    hops: Annotated[int, typer.Option(min=1, max=5, help="How far to walk.")] = 2,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many results.")] = 20,
    intent: Annotated[Intent, typer.Option(help="Which edges to prefer.")] = Intent.GENERAL,
    now: NowOption = None,
    as_json: JsonOption = False,
) -> None:
    """Memories linked to the seeds, with the path that reached each."""
    request = guarded(
        lambda: ExpandRequest(
            seeds=tuple(seed or ()),
            seed_entities=tuple(seed_entity or ()),
            edge_types=tuple(edge_type) if edge_type else None,
            hops=hops,
            limit=limit,
            intent=intent,
            now=parse_time_option(now, "--now"),
        )
    )
    result = with_runtime(ctx, lambda rt: rt.orchestrator.expand(request))
    if as_json:
        print_json(result.to_dict())
        return
    show_items(result.items, f"expanded from {', '.join(result.seeds)}")
    out.console.print(Text(f"trace {result.trace_id}"))
    show_warnings(result.warnings)


def explain(
    ctx: typer.Context,
    query: QueryOption,
    task: TaskOption = "",
    top_k: Annotated[int, typer.Option("--top-k", "-k")] = 10,
    expand: ExpandOption = True,
    now: NowOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a search and print its full trace: plan, candidates per stage, expansion, drops, timings."""
    request = guarded(
        lambda: SearchRequest(
            query=query, task=task, top_k=top_k, expand=expand, now=parse_time_option(now, "--now")
        )
    )
    document = with_runtime(ctx, lambda rt: rt.orchestrator.explain(request))
    if as_json:
        print_json(document)
    else:
        show_trace(document)


def write(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The memory text.")],
    category: Annotated[
        str, typer.Option(help="preference|decision|fact|insight|context|general")
    ] = "general",
    importance: Annotated[int, typer.Option(min=1, max=5)] = 3,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    entity: Annotated[list[str] | None, typer.Option("--entity", help="An entity (repeatable).")] = None,
    source: Annotated[str, typer.Option(help="Who or what said it.")] = "user",
    supersedes: Annotated[list[str] | None, typer.Option("--supersedes", help="Id it replaces.")] = None,
    caused_by: Annotated[
        list[str] | None, typer.Option("--caused-by", help="Id of a cause (causal edge).")
    ] = None,
    replace: Annotated[bool, typer.Option(help="Turn a near duplicate into an update.")] = False,
    auto_link: Annotated[
        bool | None,
        typer.Option(
            "--auto-link/--no-auto-link", help="Link to nearby memories (default: features.auto_link)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Store a memory through the write path: duplicate check, supersession, links."""
    memory = NewMemory(
        content=content,
        category=category,
        importance=importance,
        tags=tuple(tag or ()),
        entities=tuple(entity or ()),
        source=source,
    )
    # An edge whose source is "" starts at the new memory; a cause points at it instead.
    links = tuple(Edge(cause, "", EdgeType.CAUSAL) for cause in caused_by or ())
    request = WriteRequest(memory=memory, links=links, supersedes=tuple(supersedes or ()), replace=replace)

    def linked(runtime: Runtime) -> WriteRequest:
        chosen = runtime.settings.features.auto_link if auto_link is None else auto_link
        return dataclasses.replace(request, auto_link=chosen)

    outcome = with_runtime(ctx, lambda rt: rt.orchestrator.write(linked(rt)))
    if as_json:
        print_json(outcome.to_dict())
    else:
        show_write_outcome(outcome)


def show_write_outcome(outcome: WriteOutcome) -> None:
    """Print what a write did: action, duplicate, superseded memories, link candidates, warnings."""
    line = f"{outcome.action.value}: {outcome.id}"
    if outcome.duplicate_of:
        line += f" (duplicate of {outcome.duplicate_of})"
    out.console.print(Text(f"{line}  trace {outcome.trace_id}"))
    if outcome.superseded:
        out.console.print(Text(f"superseded: {', '.join(outcome.superseded)}"))
    if outcome.candidates:
        out.show_candidates(outcome.candidates)
    show_warnings(outcome.warnings)


@trace_app.command("show")
def trace_show(
    ctx: typer.Context,
    trace_id: Annotated[str, typer.Argument(help="The trace id printed by search/context/write.")],
    as_json: JsonOption = False,
) -> None:
    """Print a stored trace."""
    document = with_runtime(ctx, lambda rt: rt.orchestrator.trace(trace_id))
    if as_json:
        print_json(document)
    else:
        show_trace(document)


@trace_app.command("list")
def trace_list(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many of the newest traces.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The newest stored traces (ids and times), newest first."""

    async def newest(runtime: Runtime) -> list[tuple[str, Any]]:
        if runtime.traces is None:
            raise InvalidRequest(
                "traces are not stored (features.store_traces is off or traces.retention is 0)"
            )
        return await runtime.traces.recent(limit=limit)

    rows = with_runtime(ctx, newest)
    if as_json:
        print_json({"traces": [{"trace_id": tid, "created_at": format_timestamp(at)} for tid, at in rows]})
    else:
        out.console.print(
            out.table("traces", ("trace", "created"), [(t, format_timestamp(a)) for t, a in rows])
        )


@trace_app.command("replay")
def trace_replay(
    ctx: typer.Context,
    trace_id: Annotated[str, typer.Argument(help="The trace id of an earlier search.")],
    as_json: JsonOption = False,
) -> None:
    """Re-run a stored request and show what changed in the results."""
    replay = with_runtime(ctx, lambda rt: rt.orchestrator.replay(trace_id))
    if as_json:
        print_json(replay.to_dict())
        return
    out.console.print(Text(f"replay of {replay.trace_id} -> new trace {replay.result.trace_id}"))
    out.console.print(
        Text(f"added: {', '.join(replay.added) or '-'}; removed: {', '.join(replay.removed) or '-'}")
    )
    show_search(replay.result)


def show_search(result: SearchResult) -> None:
    """Print a SearchResult: plan line, ranked items with reasons, summary, trace id."""
    plan = result.plan
    entities = ", ".join(plan.entities) or "-"
    out.console.print(Text(f"intent {plan.intent.value}, strategy {plan.strategy}, entities: {entities}"))
    show_items(result.items, f"search: {result.query}")
    out.console.print(Text(f"{result.summary}\ntrace {result.trace_id}"))
    show_warnings(result.warnings)


def show_items(items: Sequence[ResultItem], title: str) -> None:
    """Print ranked result items with their top reasons."""
    rows = [
        (
            rank,
            item.memory_id,
            f"{item.score:.3f}",
            out.shorten(item.content, 70) + ("  [superseded]" if item.superseded else ""),
            "; ".join(item.reasons[:3]),
        )
        for rank, item in enumerate(items, start=1)
    ]
    out.console.print(out.table(title, ("#", "id", "score", "content", "why"), rows))


def show_warnings(warnings: Iterable[str]) -> None:
    """Print warnings, one per line."""
    for warning in warnings:
        out.console.print(Text(f"warning: {warning}"))


def register(app: typer.Typer) -> None:
    """Mount the pipeline commands on ``app``."""
    for command in (search, context, expand, explain, write):
        app.command()(command)
    app.add_typer(trace_app, name="trace")
