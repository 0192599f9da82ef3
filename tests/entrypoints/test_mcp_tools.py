"""Every MCP tool through the SDK's in-process client, over the in-memory backend and the real pipeline."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.entrypoints.mcp.server import build_server
from memory_orchestrator.entrypoints.mcp.state import ServerOptions
from memory_orchestrator.ports import BackendUnavailable, FixedClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass
class Handle:
    backend: InMemoryBackend
    orchestrator: Orchestrator


class Stores:
    """Opens one in-memory backend per store; keeps them for inspection."""

    def __init__(self, clock: FixedClock, config: PipelineConfig) -> None:
        self.clock = clock
        self.config = config
        self.backends: dict[str, InMemoryBackend] = {}

    @asynccontextmanager
    async def open(self, store: str) -> AsyncIterator[Handle]:
        backend = InMemoryBackend(clock=self.clock)
        self.backends[store] = backend
        async with backend:
            yield Handle(backend, Orchestrator(backend, config=self.config, clock=self.clock))


@asynccontextmanager
async def connected(config: PipelineConfig | None = None) -> AsyncIterator[tuple[Client, Stores]]:
    clock = FixedClock(START)
    stores = Stores(clock, config or PipelineConfig())
    server = build_server(stores.open, ServerOptions(), clock=clock)
    async with Client(server) as client:
        yield client, stores


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text
    return text


async def remember(client: Client, stores: Stores, content: str, **fields: Any) -> str:
    stores.clock.set(stores.clock.now() + timedelta(minutes=10))
    written = await ok(client, "memory_write", {"content": content, **fields})
    return str(written["id"])


@pytest.mark.anyio
async def test_every_tool_is_listed_with_a_strict_input_and_an_output_schema() -> None:
    async with connected() as (client, _stores):
        listing = await client.list_tools()
    names = [tool.name for tool in listing.tools]
    assert names == [
        "memory_context",
        "memory_search",
        "memory_expand",
        "memory_write",
        "memory_explain",
        "memory_health",
        "memory_stores",
        "memory_get",
        "memory_link",
        "memory_forget",
        "memory_changes",
        "memory_why",
        "memory_session_summary",
    ]
    for tool in listing.tools:
        assert tool.input_schema["additionalProperties"] is False, tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert len(tool.description or "") > 60, tool.name
    by_name = {tool.name: tool for tool in listing.tools}
    assert by_name["memory_forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert by_name["memory_search"].annotations.read_only_hint is True  # type: ignore[union-attr]
    # reads, a deduplicating write, a link that replaces the same edge and forget are idempotent;
    # a session summary stores a new summary each time
    idempotent = {name for name, tool in by_name.items() if tool.annotations.idempotent_hint}  # type: ignore[union-attr]
    assert idempotent == set(by_name) - {"memory_session_summary"}


@pytest.mark.anyio
async def test_the_tool_list_costs_a_model_under_4k_tokens_and_describes_every_field() -> None:
    async with connected() as (client, _stores):
        listing = await client.list_tools()
    dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listing.tools]
    characters = sum(len(json.dumps(tool, separators=(",", ":"))) for tool in dumped)
    assert characters / 4 < 4000, f"tools/list is ~{characters // 4} tokens"
    undescribed = []
    for tool in listing.tools:
        schema = tool.input_schema
        objects = [(tool.name, schema), *((name, d) for name, d in schema.get("$defs", {}).items())]
        for owner, node in objects:
            undescribed += [
                f"{owner}.{key}" for key, field in node["properties"].items() if not field.get("description")
            ]
    assert undescribed == []


@pytest.mark.anyio
async def test_write_then_search_and_get_return_the_memory_with_reasons() -> None:
    async with connected() as (client, stores):
        sqlite = await remember(
            client, stores, "We chose SQLite as the default store", category="decision", entities=["SQLite"]
        )
        await remember(client, stores, "The office plants need water on Mondays", category="fact")
        found = await ok(client, "memory_search", {"query": "which default store did we choose?", "top_k": 3})
        got = await ok(client, "memory_get", {"ids": [sqlite, "mem-999999"]})
    assert found["items"][0]["memory_id"] == sqlite
    assert found["items"][0]["reasons"]
    assert found["trace_id"]
    assert found["store"] == "default"
    assert [memory["id"] for memory in got["memories"]] == [sqlite]
    assert got["memories"][0]["category"] == "decision"
    assert got["missing"] == ["mem-999999"]


@pytest.mark.anyio
async def test_writing_the_same_content_twice_is_skipped_as_a_duplicate() -> None:
    async with connected() as (client, stores):
        first = await remember(client, stores, "Releases are cut on Thursdays")
        second = await ok(client, "memory_write", {"content": "Releases are cut on Thursdays"})
    assert second["action"] == "skipped"
    assert second["duplicate_of"] == first
    assert len(stores.backends["default"].records) == 1


@pytest.mark.anyio
async def test_context_fits_the_budget_and_keeps_memory_ids() -> None:
    async with connected() as (client, stores):
        for index in range(8):
            await remember(
                client,
                stores,
                f"Billing API note {index}: invoices are retried {index + 1} times",
                entities=["Billing"],
            )
        packed = await ok(
            client,
            "memory_context",
            {
                "query": "how does Billing retry invoices?",
                "response_budget": {"max_items": 5, "max_chars": 400},
            },
        )
        scoped = await ok(client, "memory_context", {"scope": "Billing", "response_budget": {"max_items": 3}})
    assert packed["chars"] <= 400
    assert len(packed["items"]) <= 5
    assert packed["items"]
    assert all(item["memory_id"] in packed["context_block"] for item in packed["items"])
    assert len(scoped["items"]) == 3
    assert all("Billing" in item["entities"] for item in scoped["items"])


@pytest.mark.anyio
async def test_the_text_a_model_reads_is_the_context_block_or_a_compact_listing() -> None:
    async with connected() as (client, stores):
        ids = [
            await remember(
                client, stores, f"Billing note {i}: invoices retried {i + 1} times", entities=["Billing"]
            )
            for i in range(12)
        ]
        budget = {"max_items": 10, "max_tokens": 60}
        context = await client.call_tool(
            "memory_context", {"query": "how are Billing invoices retried?", "response_budget": budget}
        )
        search = await client.call_tool("memory_search", {"query": "Billing invoices", "top_k": 5})
        written = await client.call_tool("memory_write", {"content": "Billing moved to Stripe"})
    text = context.content[0].text  # type: ignore[union-attr]
    structured = context.structured_content or {}
    assert text == structured["context_block"]
    # within the token budget at the pipeline's own estimate (4 characters a token)
    assert len(text) <= 60 * 4 and structured["est_tokens"] <= 60
    assert all(item["memory_id"] in text for item in structured["items"])
    listing = search.content[0].text  # type: ignore[union-attr]
    assert listing.count("\n") == len((search.structured_content or {})["items"])
    assert any(memory_id in listing for memory_id in ids)
    assert len(listing) < len(json.dumps(search.structured_content)) / 2
    assert "\n" not in written.content[0].text  # compact JSON, not pretty-printed  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_expand_follows_links_from_ids_and_from_entity_names() -> None:
    async with connected() as (client, stores):
        cause = await remember(client, stores, "The nightly job kept timing out", entities=["Scheduler"])
        effect = await remember(client, stores, "We moved the nightly job to a queue", entities=["Queue"])
        await ok(client, "memory_link", {"source": cause, "target": effect, "type": "causal"})
        by_id = await ok(client, "memory_expand", {"seeds": [cause], "edge_types": ["causal"]})
        by_name = await ok(client, "memory_expand", {"seeds": ["Scheduler"], "hops": 2})
    assert [item["memory_id"] for item in by_id["items"]] == [effect]
    assert by_id["items"][0]["path"][0]["edge_type"] == "causal"
    assert by_name["seed_entities"] == ["Scheduler"]
    assert effect in [item["memory_id"] for item in by_name["items"]]


@pytest.mark.anyio
async def test_entity_filters_and_seeds_match_a_first_word_or_say_what_is_close() -> None:
    async with connected() as (client, stores):
        about = await remember(client, stores, "Stratus Hosting raised prices", entities=["Stratus Hosting"])
        await remember(client, stores, "Nimbus Cloud lowered prices", entities=["Nimbus Cloud"])
        found = await ok(client, "memory_search", {"query": "prices", "filters": {"entities": ["Stratus"]}})
        nothing = await ok(client, "memory_search", {"query": "prices", "filters": {"entities": ["Strat"]}})
        lower = {"query": "prices", "filters": {"entity_ids": ["stratus"]}}
        block = await ok(client, "memory_context", lower)
        walked = await ok(client, "memory_expand", {"seeds": ["stratus"]})
        unknown = await refused(client, "memory_expand", {"seeds": ["Strat"]})
    assert [item["memory_id"] for item in found["items"]] == [about] and found["warnings"] == []
    assert nothing["items"] == []
    assert nothing["warnings"] == [
        'filters.entities: "Strat" matches no known entity; closest known: Stratus Hosting'
    ]
    assert [item["memory_id"] for item in block["items"]] == [about]
    assert walked["seeds"] == [about]
    assert "closest known: Stratus Hosting" in unknown


@pytest.mark.anyio
async def test_explain_returns_the_stored_trace_or_a_fresh_one() -> None:
    async with connected() as (client, stores):
        await remember(client, stores, "Traces are kept for a thousand requests")
        found = await ok(client, "memory_search", {"query": "how long are traces kept?"})
        stored = await ok(client, "memory_explain", {"trace_id": found["trace_id"]})
        fresh = await ok(client, "memory_explain", {"query": "how long are traces kept?"})
        unknown = await refused(client, "memory_explain", {"trace_id": "no-such-trace"})
    assert stored["trace_id"] == found["trace_id"]
    assert stored["trace"]["trace_id"] == found["trace_id"]
    assert fresh["trace_id"] and fresh["trace_id"] != found["trace_id"]
    assert "not found" in unknown


@pytest.mark.anyio
async def test_forget_hides_a_memory_and_a_second_forget_is_a_clear_error() -> None:
    async with connected() as (client, stores):
        memory = await remember(client, stores, "Temporary note to forget")
        forgotten = await ok(client, "memory_forget", {"id": memory})
        again = await refused(client, "memory_forget", {"id": memory})
        gone = await refused(client, "memory_get", {"ids": [memory]})
    assert forgotten == {"store": "default", "id": memory, "forgotten": True}
    assert again.endswith(f"not found: memory {memory} not found")
    assert "none of these ids" in gone


@pytest.mark.anyio
async def test_input_errors_are_one_line_and_change_nothing() -> None:
    async with connected() as (client, stores):
        unknown_field = await refused(client, "memory_write", {"content": "x", "colour": "red"})
        bad_category = await refused(client, "memory_write", {"content": "x", "category": "rumour"})
        tiny_budget = await refused(
            client, "memory_context", {"query": "x", "response_budget": {"max_tokens": 1}}
        )
        bad_link = await refused(
            client, "memory_link", {"source": "mem-1", "target": "mem-2", "type": "causal"}
        )
    assert "colour: unknown field" in unknown_field
    assert "category" in bad_category
    assert "max_tokens" in tiny_budget
    assert "not found" in bad_link
    assert stores.backends["default"].records == {}


@pytest.mark.anyio
async def test_text_with_a_lone_surrogate_is_refused_as_invalid_and_changes_nothing() -> None:
    # JSON's "\\ud800" escapes decode to lone surrogates, which no store or encoder can take; the
    # input models refuse them as strings that are not Unicode.
    async with connected() as (client, stores):
        answers = [
            await refused(client, "memory_write", {"content": "caf\udce9 latte"}),
            await refused(client, "memory_write", {"content": "ok", "entities": ["Ana\ud800"]}),
            await refused(client, "memory_search", {"query": "caf\udce9"}),
            await refused(client, "memory_context", {"query": "x", "task": "\ud800"}),
            await refused(
                client, "memory_link", {"source": "mem-\ud800", "target": "mem-2", "type": "causal"}
            ),
        ]
        found = await ok(client, "memory_search", {"query": "latte"})
    for answer in answers:
        assert "invalid arguments" in answer and "unicode string" in answer, answer
    assert found["items"] == [] and stores.backends["default"].records == {}


@pytest.mark.anyio
async def test_changes_list_what_happened_since_a_relative_time() -> None:
    async with connected() as (client, stores):
        await remember(client, stores, "Old fact about the build")
        stores.clock.set(stores.clock.now() + timedelta(days=3))
        recent = await remember(client, stores, "The build now uses uv")
        changed = await ok(client, "memory_changes", {"since": "1 day"})
        unreadable = await refused(client, "memory_changes", {"since": "whenever"})
    assert changed["added"] == [recent]
    assert changed["method"] == "change_log"
    assert "cannot read" in unreadable


@pytest.mark.anyio
async def test_why_orders_cause_decision_consequence() -> None:
    async with connected() as (client, stores):
        cause = await remember(
            client, stores, "Neo4j needs a JVM and Docker on every laptop", entities=["Neo4j"]
        )
        decision = await remember(
            client,
            stores,
            "We decided to make SQLite the default backend",
            category="decision",
            entities=["SQLite"],
        )
        consequence = await remember(
            client, stores, "The SQLite adapter got FTS5 search", entities=["SQLite"]
        )
        await ok(
            client,
            "memory_link",
            {"source": cause, "target": decision, "type": "causal", "evidence": "setup cost"},
        )
        await ok(client, "memory_link", {"source": decision, "target": consequence, "type": "causal"})
        answer = await ok(
            client, "memory_why", {"question": "why did we decide to make SQLite the default backend?"}
        )
    assert answer["focus_id"] == decision
    assert [(link["role"], link["memory_id"]) for link in answer["chain"]] == [
        ("cause", cause),
        ("decision", decision),
        ("consequence", consequence),
    ]
    assert answer["chain"][0]["evidence"] == "setup cost"
    assert answer["trace_id"]


@pytest.mark.anyio
async def test_a_session_summary_is_stored_chained_and_found_by_the_next_context() -> None:
    async with connected() as (client, stores):
        saved = await ok(
            client,
            "memory_session_summary",
            {
                "session_id": "s-42",
                "decisions": ["Adopt Ruff for linting in Atlas", "adopt ruff for linting in atlas"],
                "key_points": ["Atlas CI takes nine minutes"],
                "entities": ["Atlas"],
            },
        )
        stores.clock.set(stores.clock.now() + timedelta(hours=1))
        later = await remember(client, stores, "Atlas CI now takes four minutes", entities=["Atlas"])
        context = await ok(client, "memory_context", {"query": "what did we decide about Atlas linting?"})
        changes = await ok(client, "memory_changes", {"since": "last session"})
    written = saved["written"]
    assert [point["category"] for point in written] == ["fact", "decision"]
    assert saved["dropped_duplicates"] == ["adopt ruff for linting in atlas"]
    assert saved["links_created"] == 1
    backend = stores.backends["default"]
    decision = backend.records[written[1]["id"]]
    assert decision.category == "decision"
    assert "session s-42" in decision.entities and "Atlas" in decision.entities
    assert any(key[:3] == (written[0]["id"], written[1]["id"], "temporal") for key in backend.edges)
    assert written[1]["id"] in [item["memory_id"] for item in context["items"]]
    assert changes["added"] == [later]


@pytest.mark.anyio
async def test_stores_are_separate_namespaces() -> None:
    async with connected() as (client, stores):
        await ok(client, "memory_write", {"content": "Team A uses Postgres", "store": "team-a"})
        in_a = await ok(client, "memory_search", {"query": "Postgres", "store": "team-a"})
        in_b = await ok(client, "memory_search", {"query": "Postgres", "store": "team-b"})
    assert len(in_a["items"]) == 1 and in_a["store"] == "team-a"
    assert in_b["items"] == []
    assert set(stores.backends) == {"team-a", "team-b"}


@pytest.mark.anyio
async def test_health_reports_checks_and_a_broken_backend_without_failing() -> None:
    async with connected() as (client, stores):
        healthy = await ok(client, "memory_health", {"probe": True})
        stores.backends["default"].fail_always("health")
        broken = await ok(client, "memory_health", {})
    assert healthy["status"] == "ok"
    names = [check["name"] for check in healthy["checks"]]
    assert names[0] == "backend_reachable" and "vector_search" in names
    assert all(check["duration_ms"] >= 0 for check in healthy["checks"])
    assert broken["status"] == "error"
    assert "injected" not in str(broken)


@pytest.mark.anyio
async def test_passthrough_sends_the_same_tools_straight_to_the_backend() -> None:
    async with connected(PipelineConfig(passthrough=True)) as (client, stores):
        written = await ok(client, "memory_write", {"content": "Passthrough keeps the backend's own ranking"})
        found = await ok(client, "memory_search", {"query": "backend's own ranking"})
        packed = await ok(client, "memory_context", {"query": "backend's own ranking"})
    assert found["items"][0]["memory_id"] == written["id"]
    assert "passthrough: backend recall" in found["items"][0]["reasons"]
    assert packed["items"][0]["memory_id"] == written["id"]
    assert stores.backends["default"].called("recall") >= 2


@pytest.mark.anyio
async def test_a_failing_channel_gives_partial_results_with_a_warning_free_of_backend_details() -> None:
    async with connected() as (client, stores):
        memory = await remember(client, stores, "Partial results beat no results", entities=["Resilience"])
        stores.backends["default"].fail_always("search")
        found = await ok(client, "memory_search", {"query": "partial results"})
    assert found["items"][0]["memory_id"] == memory
    assert any("failed (BackendUnavailable)" in warning for warning in found["warnings"])
    assert not any("injected" in warning for warning in found["warnings"])


@pytest.mark.anyio
async def test_each_call_logs_one_json_line_without_the_query(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memory_orchestrator.mcp")
    async with connected() as (client, stores):
        await remember(client, stores, "Logging keeps contents private")
        caplog.clear()
        await ok(client, "memory_search", {"query": "secret question about logging"})
        await refused(client, "memory_get", {"ids": ["mem-404"]})
    lines = [json.loads(record.getMessage()) for record in caplog.records]
    assert [(line["tool"], line["status"]) for line in lines] == [
        ("memory_search", "ok"),
        ("memory_get", "NotFound"),
    ]
    search = lines[0]
    assert search["caller"] == "local" and search["store"] == "default"
    assert search["results"] == 1 and search["candidates"]["retrieved"] >= 1
    assert search["trace_id"].startswith("tr-") and search["latency_ms"] >= 0
    assert "secret question" not in caplog.text


@pytest.mark.anyio
async def test_session_tools_can_be_switched_off() -> None:
    stores = Stores(FixedClock(START), PipelineConfig())
    server = build_server(stores.open, ServerOptions(session_tools=False))
    async with Client(server) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert len(names) == 10  # the nine core tools and memory_stores
    assert not names & {"memory_changes", "memory_why", "memory_session_summary"}


@pytest.mark.anyio
async def test_raised_trace_verbosity_logs_the_query(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memory_orchestrator.mcp")
    stores = Stores(FixedClock(START), PipelineConfig())
    server = build_server(stores.open, ServerOptions(log_contents=True))
    async with Client(server) as client:
        await ok(client, "memory_search", {"query": "verbose question"})
    assert json.loads(caplog.records[-1].getMessage())["query"] == "verbose question"


@pytest.mark.anyio
async def test_a_call_failing_validation_is_logged_with_the_store_it_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="memory_orchestrator.mcp")
    async with connected() as (client, _):
        caplog.clear()
        await refused(client, "memory_search", {"query": "x", "top_k": -3, "store": "ops"})
    [line] = [
        json.loads(record.getMessage()) for record in caplog.records if "tool_call" in record.getMessage()
    ]
    assert (line["tool"], line["store"], line["status"]) == ("memory_search", "ops", "InvalidRequest")


@pytest.mark.anyio
async def test_a_full_disk_is_named_and_a_summary_that_stored_nothing_is_an_error() -> None:
    full = BackendUnavailable("remember: database or disk is full", backend="memory")
    async with connected() as (client, stores):
        await ok(client, "memory_health", {})
        stores.backends["default"].fail_always("remember", full)
        write = await refused(client, "memory_write", {"content": "a note that cannot be stored"})
        summary = await refused(
            client, "memory_session_summary", {"session_id": "s-1", "decisions": ["keep the cache"]}
        )
        stores.backends["default"].heal()
        saved = await ok(client, "memory_session_summary", {"session_id": "s-2", "decisions": ["keep it"]})
    assert "out of disk space" in write and "nothing was written" in write
    assert "out of disk space" in summary
    assert len(saved["written"]) == 1


@pytest.mark.anyio
async def test_store_limit_evicts_least_recently_used_and_unknown_reads_create_nothing() -> None:
    clock = FixedClock(START)
    stores = Stores(clock, PipelineConfig())
    created: set[str] = {"default"}
    server = build_server(
        stores.open, ServerOptions(), clock=clock, exists=created.__contains__, max_open_stores=3
    )
    async with Client(server) as client:
        unknown = await refused(client, "memory_search", {"query": "x", "store": "typo"})
        assert "unknown store 'typo'" in unknown and "typo" not in stores.backends
        for index in range(6):  # twice the limit: older stores are closed, never a permanent refusal
            name = f"team-{index}"
            await ok(client, "memory_write", {"content": f"note for {name}", "store": name})
            created.add(name)
        assert len(stores.backends) == 6
        found = await ok(client, "memory_search", {"query": "note", "store": "team-5"})
        default = await ok(client, "memory_search", {"query": "anything"})
        still_open = sorted(name for name, backend in stores.backends.items() if not backend.closed)
    assert [item["content"] for item in found["items"]] == ["note for team-5"]
    assert default["store"] == "default"
    assert len(still_open) == 3 and "team-0" not in still_open and "default" in still_open


@pytest.mark.anyio
async def test_search_items_come_in_the_order_the_answer_names() -> None:
    async with connected() as (client, stores):
        for index in range(12):
            await remember(
                client,
                stores,
                f"Atlas launch moved to week {index} after vendor review {index}",
                entities=["Atlas"],
            )
        found = await ok(client, "memory_search", {"query": "when is the Atlas launch?", "top_k": 10})
    assert found["order"] == "score"
    current = [item["score"] for item in found["items"] if not item["superseded"]]
    assert current == sorted(current, reverse=True)
    flags = [item["superseded"] for item in found["items"]]
    assert flags == sorted(flags)  # every superseded memory after every current one
