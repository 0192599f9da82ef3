"""The bodies of the MCP tools and the descriptions a model reads to choose them.

Free of any ``mcp`` import: ``mcp_server`` turns each :class:`ToolSpec` into an SDK tool. A body gets
the validated input model and a :class:`ToolCall` (caller, store, opened backend and orchestrator)
and returns the output model; it raises the port errors, which the server turns into tool errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memory_orchestrator.entrypoints.mcp import outputs as o
from memory_orchestrator.entrypoints.mcp import schemas as s
from memory_orchestrator.entrypoints.mcp.auth import ALL_STORES
from memory_orchestrator.entrypoints.mcp.state import ToolCall, public_warning
from memory_orchestrator.entrypoints.mcp.store_listing import stores
from memory_orchestrator.ports import (
    AccessDenied,
    BackendUnavailable,
    HealthCheck,
    NotFound,
)

LOG = logging.getLogger("memory_orchestrator.mcp")

# The domain modules of the bodies (sessions, provenance, result conversion) are imported in the
# bodies: the server answers its first message before it needs them (``launch.warm_up`` imports
# them soon after the start).


ToolBody = Callable[[Any, ToolCall], Awaitable[BaseModel]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of the surface."""

    name: str
    title: str
    description: str
    input_model: type[s.StrictInput]
    output_model: type[BaseModel]
    body: ToolBody
    read_only: bool = True
    destructive: bool = False
    #: An anonymous caller may use it on the default store (health).
    anonymous: bool = False
    #: Calling it again with the same arguments changes nothing more (reads; a write that dedups; a
    #: link that replaces the same edge; a forget of a forgotten memory).
    idempotent: bool = True
    #: Acts on one store the caller must have rights on (``memory_stores`` lists them instead).
    per_store: bool = True


async def search(inp: s.SearchInput, call: ToolCall) -> o.SearchOutput:
    """memory_search."""
    call.log["query"] = inp.query
    handle = await call.handle()
    result = await handle.orchestrator.search(inp.to_domain())
    data = await call.answer(handle.orchestrator, result.to_dict(), results=len(result.items))
    return o.SearchOutput.model_validate(data)


async def context(inp: s.ContextInput, call: ToolCall) -> o.ContextOutput:
    """memory_context."""
    call.log["query"] = inp.query or inp.scope
    handle = await call.handle()
    result = await handle.orchestrator.context(inp.to_domain())
    call.log["cut"] = len(result.cut)
    data = await call.answer(handle.orchestrator, result.to_dict(), results=len(result.items))
    return o.ContextOutput.model_validate(data)


async def expand(inp: s.ExpandInput, call: ToolCall) -> o.ExpandOutput:
    """memory_expand: seeds that are no known memory id are taken as entity names."""
    handle = await call.handle()
    seeds = list(dict.fromkeys(inp.seeds))
    known = {record.id for record in await handle.backend.get(seeds)}
    ids = tuple(seed for seed in seeds if seed in known)
    entities = tuple(seed for seed in seeds if seed not in known)
    result = await handle.orchestrator.expand(inp.to_domain(ids, entities))
    data = await call.answer(handle.orchestrator, result.to_dict(), results=len(result.items))
    data["seed_entities"] = list(entities)
    return o.ExpandOutput.model_validate(data)


async def write(inp: s.WriteInput, call: ToolCall) -> o.WriteOutput:
    """memory_write."""
    call.log["content"] = inp.content
    handle = await call.handle()
    outcome = await handle.orchestrator.write(inp.to_domain())
    call.log["action"] = outcome.action.value
    return o.WriteOutput.model_validate(await call.answer(handle.orchestrator, outcome.to_dict(), results=1))


async def explain(inp: s.ExplainInput, call: ToolCall) -> o.ExplainOutput:
    """memory_explain: a stored trace by id, or a fresh query's trace."""
    handle = await call.handle()
    if inp.trace_id is not None:
        origin = call.state.trace_origins.get(inp.trace_id)
        if origin is None and not call.caller.may_read(ALL_STORES):
            raise AccessDenied("not authorised: this trace was not made through this server for your stores")
        if origin is not None and not call.caller.may_read(origin):
            raise AccessDenied(f"not authorised: the trace belongs to store {origin!r}")
        document = await handle.orchestrator.trace(inp.trace_id)
        call.log["trace_id"] = inp.trace_id
        return o.ExplainOutput(trace_id=inp.trace_id, trace=dict(document))
    call.log["query"] = inp.query
    document = dict(await handle.orchestrator.explain(inp.to_domain()))
    trace_id = str(document.get("trace_id", ""))
    call.traced(trace_id, 1)
    return o.ExplainOutput(trace_id=trace_id, trace=document)


async def health(inp: s.HealthInput, call: ToolCall) -> o.HealthOutput:
    """memory_health: never raises for a broken store; it reports it."""
    if call.caller.anonymous and (inp.probe or call.store != call.state.options.default_store):
        raise AccessDenied(
            "not authorised: without a token only the default store can be checked, without probe"
        )
    started = time.perf_counter()
    try:
        handle = await call.handle()
        report = await handle.backend.health(probe=inp.probe)
    except Exception:  # health reports a store that cannot even be opened; the cause goes to the log
        LOG.warning("health check of store %s failed", call.store, exc_info=True)
        elapsed = _ms(started)
        check = o.CheckOutput(
            name="backend_reachable", status="error", detail="cannot reach the store", duration_ms=elapsed
        )
        return o.HealthOutput(store=call.store, status="error", backend="unknown", checks=[check])
    reachable = HealthCheck("backend_reachable", "ok", "answered", _ms(started))
    capabilities = handle.backend.capabilities
    vector = HealthCheck(
        "vector_search",
        "ok" if capabilities.vector_search else "degraded",
        "vector channel available"
        if capabilities.vector_search
        else "not available: keyword, recall and graph only",
    )
    anonymous = call.caller.anonymous
    checks = [_check(check, detailed=not anonymous) for check in (reachable, *report.checks, vector)]
    call.log["status_reported"] = report.status
    if report.status != "ok":
        # Anonymous callers see statuses only; the operator finds the details here.
        details = "; ".join(
            f"{check.name}={check.status}: {_one_line(check.detail)}" for check in report.checks
        )
        LOG.warning("health of store %s is %s: %s", call.store, report.status, details)
    return o.HealthOutput(
        store=call.store,
        status=_status(report.status),
        backend=report.backend,
        version="" if anonymous else report.version,
        memory_count=None if anonymous else report.memory_count,
        checks=checks,
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _status(status: str) -> Any:
    return status if status in {"ok", "degraded", "error"} else "degraded"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _check(check: HealthCheck, *, detailed: bool) -> o.CheckOutput:
    """A check as shown to the caller: without its detail (paths, hosts, driver text) for anonymous ones."""
    return o.CheckOutput(
        name=check.name,
        status=_status(check.status),
        detail=_one_line(check.detail) if detailed else "",
        duration_ms=round(check.duration_ms, 2),
    )


async def get(inp: s.GetInput, call: ToolCall) -> o.GetOutput:
    """memory_get."""
    from memory_orchestrator.domain.results import record_to_dict

    ids = list(dict.fromkeys(inp.ids))
    records = await (await call.handle()).backend.get(ids)
    if not records:
        raise NotFound("none of these ids is a stored memory (unknown or forgotten)")
    found = {record.id for record in records}
    call.log["results"] = len(records)
    memories = [o.MemoryOutput.model_validate(record_to_dict(record)) for record in records]
    return o.GetOutput(store=call.store, memories=memories, missing=[i for i in ids if i not in found])


async def link(inp: s.LinkInput, call: ToolCall) -> o.LinkOutput:
    """memory_link."""
    from memory_orchestrator.domain.results import edge_to_dict

    edge = await (await call.handle()).backend.link(inp.to_port())
    return o.LinkOutput(store=call.store, edge=o.EdgeOutput.model_validate(edge_to_dict(edge)))


async def forget(inp: s.ForgetInput, call: ToolCall) -> o.ForgetOutput:
    """memory_forget (soft delete)."""
    await (await call.handle()).backend.forget(inp.id)
    return o.ForgetOutput(store=call.store, id=inp.id, forgotten=True)


async def changes(inp: s.ChangesInput, call: ToolCall) -> o.ChangesOutput:
    """memory_changes."""
    from memory_orchestrator.domain import sessions

    backend = (await call.handle()).backend
    now = call.now()
    last = await sessions.last_session_time(backend, now) if "session" in inp.since.lower() else None
    since = sessions.parse_since(inp.since, now, last_session=last)
    report = await sessions.collect_changes(backend, since, now, entity=inp.entity, limit=inp.limit)
    if report.method == "unavailable":
        # nothing could be listed: an error, never an empty list that reads as "nothing changed"
        raise BackendUnavailable("changes could not be listed", backend="mcp")
    call.log["results"] = len(report.events)
    return o.ChangesOutput.model_validate({**report.to_dict(), "store": call.store})


async def why(inp: s.WhyInput, call: ToolCall) -> o.WhyOutput:
    """memory_why."""
    from memory_orchestrator.domain import provenance

    call.log["query"] = inp.question
    handle = await call.handle()
    report = await provenance.explain_why(handle.orchestrator, handle.backend, inp.question, depth=inp.depth)
    call.traced(report.trace_id, len(report.chain))
    data = report.to_dict()
    data["notes"] = [public_warning(note) for note in data["notes"]]
    return o.WhyOutput.model_validate({**data, "store": call.store})


async def session_summary(inp: s.SessionSummaryInput, call: ToolCall) -> o.SessionSummaryOutput:
    """memory_session_summary."""
    from memory_orchestrator.domain import sessions

    handle = await call.handle()
    session_id = inp.session_id or call.now().strftime("%Y-%m-%dT%H%M%SZ")
    summary = sessions.SessionSummary(
        session_id=session_id,
        decisions=tuple(inp.decisions),
        key_points=tuple(inp.key_points),
        context=tuple(inp.context),
        entities=tuple(inp.entities),
    )
    report = await sessions.summarise_session(handle.orchestrator, handle.backend, summary)
    call.log["results"] = len(report.written)
    return o.SessionSummaryOutput.model_validate({**report.to_dict(), "store": call.store})


#: Hints of the tools that change a store.
_WRITES = {"read_only": False}


def tool_specs(*, include_session_tools: bool = True) -> list[ToolSpec]:
    """Every tool of the surface, in the order clients list them."""
    from memory_orchestrator.entrypoints.mcp.descriptions import DESCRIPTIONS

    rows: list[tuple[str, str, type[s.StrictInput], type[BaseModel], ToolBody, dict[str, bool]]] = [
        ("memory_context", "Context for a task", s.ContextInput, o.ContextOutput, context, {}),
        ("memory_search", "Search memories", s.SearchInput, o.SearchOutput, search, {}),
        ("memory_expand", "Follow memory links", s.ExpandInput, o.ExpandOutput, expand, {}),
        ("memory_write", "Remember", s.WriteInput, o.WriteOutput, write, _WRITES),
        ("memory_explain", "Explain a result", s.ExplainInput, o.ExplainOutput, explain, {}),
        ("memory_health", "Health", s.HealthInput, o.HealthOutput, health, {"anonymous": True}),
        ("memory_stores", "My stores", s.StoresInput, o.StoresOutput, stores, {"per_store": False}),
        ("memory_get", "Get memories", s.GetInput, o.GetOutput, get, {}),
        ("memory_link", "Link memories", s.LinkInput, o.LinkOutput, link, _WRITES),
        (
            "memory_forget",
            "Forget a memory",
            s.ForgetInput,
            o.ForgetOutput,
            forget,
            {**_WRITES, "destructive": True},
        ),
    ]
    if include_session_tools:
        rows += [
            ("memory_changes", "What changed", s.ChangesInput, o.ChangesOutput, changes, {}),
            ("memory_why", "Why", s.WhyInput, o.WhyOutput, why, {}),
            (
                "memory_session_summary",
                "Save a session",
                s.SessionSummaryInput,
                o.SessionSummaryOutput,
                session_summary,
                {**_WRITES, "idempotent": False},
            ),
        ]
    return [
        ToolSpec(name, title, DESCRIPTIONS[name], inp, out, body, **hints)
        for name, title, inp, out, body, hints in rows
    ]
