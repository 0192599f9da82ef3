"""Property-based test of every MCP tool: generated arguments, valid and hostile, never an internal error.

For each generated batch of calls, over the in-process SDK client on the memory backend and on SQLite:
no call answers "internal error", no tool logs a traceback, and a call that answered with an error
changed no data. The normal suite runs a fixed-seed few thousand calls; a long run is

    ORCHESTRATOR_PROPERTY_EXAMPLES=1000 pytest tests/entrypoints/test_mcp_properties.py -q -s

(1,000 examples x 2 backends x 10 calls = 20,000 calls; the figures are printed with -s).
"""

from __future__ import annotations

import logging
import os
import string
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.sqlite import SqliteBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.mcp.server import build_server
from memory_orchestrator.entrypoints.mcp.state import ServerOptions
from memory_orchestrator.entrypoints.mcp.tools import tool_specs
from memory_orchestrator.ports import FixedClock, MemoryBackend

EXAMPLES = int(os.environ.get("ORCHESTRATOR_PROPERTY_EXAMPLES", "150"))
CALLS_PER_EXAMPLE = 10
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

SPECS = {spec.name: spec for spec in tool_specs()}
SCHEMAS = {name: spec.input_model.model_json_schema() for name, spec in SPECS.items()}

# -- hostile values ----------------------------------------------------------------------------------

_EDGE_MOMENTS = [
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01",
    "2026-02-30T00:00:00Z",
    "yesterday",
    "last 3000 years",
    "99999999 days",
    "last session",
]
_PLAIN = st.from_regex(r"[A-Za-z][A-Za-z ?]{2,30}", fullmatch=True) | st.sampled_from(
    ["why did we stop using Stratus?", "what changed last week?", "Atlas", "Stratus Hosting invoices"]
)
_HOSTILE = st.one_of(
    st.text(min_size=1, max_size=40),
    st.text(alphabet=string.printable + "\x00\x1b\u202e\ud7ff\u3000", max_size=60),
    st.sampled_from(_EDGE_MOMENTS),
    st.just("x" * 9000),
    st.just('redis" OR NEAR(cache* AND -lunch) ^eviction:'),
    # Lone surrogates: what undecodable bytes in argv become, and what JSON "\\ud800" escapes decode to.
    st.just("caf\udce9 latte"),
    st.just("\ud800"),
)
#: Mostly plain words (so calls get past validation and exercise the pipeline), one in eight hostile.
_TEXTS = st.one_of(*([_PLAIN] * 7), _HOSTILE)
_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | _TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        return _resolve(root["$defs"][ref.rsplit("/", 1)[1]], root)
    return schema


def _value(schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Mostly values of the declared shape, sometimes anything at all."""
    schema = _resolve(schema, root)
    if depth > 3:
        return _JUNK
    if "anyOf" in schema:
        return st.one_of([_value(option, root, depth + 1) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.one_of(*([st.sampled_from(schema["enum"])] * 4), _TEXTS)
    kind = schema.get("type")
    shaped: st.SearchStrategy[Any]
    if kind == "null":
        return st.none()
    if kind == "string" and "pattern" in schema:
        # Python's "$" also matches before a final newline; the validator's does not.
        pattern = schema["pattern"].removesuffix("$") + r"\Z"
        shaped = st.one_of(*([st.from_regex(pattern, fullmatch=True)] * 4), _TEXTS)
    elif kind == "string" and schema.get("format") == "date-time":
        shaped = st.datetimes(timezones=st.just(UTC)).map(datetime.isoformat) | st.sampled_from(_EDGE_MOMENTS)
    elif kind == "string":
        shaped = _TEXTS
    elif kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 200)
        shaped = st.integers(low - 2, high + 2)
    elif kind == "number":
        shaped = st.floats(-2.0, 2.0) | st.sampled_from([float("inf"), -1e300])
    elif kind == "boolean":
        shaped = st.booleans()
    elif kind == "array":
        item = _value(schema.get("items", {}), root, depth + 1)
        shaped = st.lists(item, max_size=min(int(schema.get("maxItems", 4)) + 1, 6))
    elif kind == "object" or "properties" in schema:
        shaped = _object(schema, root, depth + 1)
    else:
        shaped = _JUNK
    return st.one_of(*([shaped] * 19), _JUNK)  # about one value in twenty is of the wrong shape


def _object(schema: dict[str, Any], root: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fields = {
        name: _value(sub, root, depth)
        if name in required
        else st.one_of(st.none(), st.none(), _value(sub, root, depth))
        for name, sub in properties.items()
    }
    base = st.fixed_dictionaries(fields).map(lambda found: {k: v for k, v in found.items() if v is not None})
    extra = st.dictionaries(st.sampled_from(["bogus", "store", "__proto__"]), _JUNK, max_size=1)
    return st.builds(lambda values, more: {**values, **more}, base, st.one_of(*([st.just({})] * 9), extra))


CALLS = st.lists(
    st.sampled_from(sorted(SPECS)).flatmap(
        lambda name: st.tuples(st.just(name), _object(SCHEMAS[name], SCHEMAS[name], 0))
    ),
    min_size=CALLS_PER_EXAMPLE,
    max_size=CALLS_PER_EXAMPLE,
)

# -- the servers under test ---------------------------------------------------------------------------


@dataclass
class Opened:
    backends: dict[str, MemoryBackend] = field(default_factory=dict)


@dataclass
class Handle:
    backend: MemoryBackend
    orchestrator: Orchestrator


def _opener(make: Callable[[str], MemoryBackend], opened: Opened, clock: FixedClock) -> Any:
    @asynccontextmanager
    async def open_store(store: str) -> AsyncIterator[Handle]:
        backend = make(store)
        opened.backends[store] = backend
        async with backend:
            yield Handle(backend, Orchestrator(backend, config=PipelineConfig(), clock=clock))

    return open_store


async def _fingerprint(backend: MemoryBackend) -> tuple[Any, ...]:
    """What a failed call must leave unchanged: memories (with their content) and edges."""
    if isinstance(backend, InMemoryBackend):
        memories = sorted(
            (k, v.record.content, v.deleted_at is None) for k, v in backend.state.memories.items()
        )
        return (tuple(memories), tuple(sorted(map(str, backend.state.edges))))
    assert isinstance(backend, SqliteBackend)
    rows = await backend.db.execute_fetchall(
        "SELECT id, content, deleted_at IS NULL FROM memories ORDER BY id"
    )
    edges = await backend.db.execute_fetchall("SELECT count(*), coalesce(sum(weight), 0) FROM edges")
    return (tuple(map(tuple, rows)), tuple(map(tuple, edges)))


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@dataclass
class Tally:
    calls: int = 0
    errors: int = 0
    internal: list[str] = field(default_factory=list)
    changed_on_error: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)


async def _run(calls: list[tuple[str, dict[str, Any]]], kind: str, folder: Path, tally: Tally) -> None:
    clock = FixedClock(NOW)
    opened = Opened()

    def make(store: str) -> MemoryBackend:
        if kind == "memory":
            return InMemoryBackend(clock=clock)
        return SqliteBackend(folder / f"{store}.db", store=store, clock=clock)

    server = build_server(_opener(make, opened, clock), ServerOptions(), clock=clock)
    async with Client(server) as client:
        await client.call_tool("memory_write", {"content": "Stratus Hosting invoices tripled in March"})
        for name, arguments in calls:
            before = {store: await _fingerprint(backend) for store, backend in opened.backends.items()}
            result = await client.call_tool(name, arguments)
            tally.calls += 1
            if not result.is_error:
                continue
            tally.errors += 1
            text = str(getattr(result.content[0], "text", ""))
            tally.reasons[text.split(":", 2)[-1][:70]] += 1
            if "internal error" in text:
                tally.internal.append(f"{name} {arguments!r:.300}: {text}")
            for store, print_before in before.items():
                if await _fingerprint(opened.backends[store]) != print_before:
                    tally.changed_on_error.append(f"{name} {arguments!r:.300}: {text}")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_no_generated_call_gives_an_internal_error_or_changes_data_when_refused(
    kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tally = Tally()
    tracebacks = _Tracebacks()
    logger = logging.getLogger("memory_orchestrator")
    logger.addHandler(tracebacks)

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(calls=CALLS)
    def check(calls: list[tuple[str, dict[str, Any]]]) -> None:
        folder = tmp_path_factory.mktemp(kind)
        anyio.run(_run, calls, kind, folder, tally)

    try:
        check()
    finally:
        logger.removeHandler(tracebacks)
    print(
        f"\n{kind}: {tally.calls} generated calls, {tally.errors} refused, {len(tally.internal)} internal "
        f"errors, {len(tracebacks.records)} tracebacks, "
        f"{len(tally.changed_on_error)} refused calls changed data"
    )
    print("most common refusals:", tally.reasons.most_common(3))
    assert tally.calls == EXAMPLES * CALLS_PER_EXAMPLE
    assert tally.internal == []
    assert [record.getMessage() for record in tracebacks.records] == []
    assert tally.changed_on_error == []
