"""Tool input models: bounds, unknown fields, one-line errors, conversion to domain requests."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory_orchestrator.entrypoints.mcp.published import (
    STORED_INPUTS,
    generated_input_schemas,
    input_schemas,
    output_schema,
)
from memory_orchestrator.entrypoints.mcp.schemas import (
    ContextInput,
    ExpandInput,
    ExplainInput,
    LinkInput,
    SearchInput,
    WriteInput,
    validate_input,
)
from memory_orchestrator.entrypoints.mcp.tools import tool_specs
from memory_orchestrator.ports import MAX_CONTENT_BYTES, EdgeType, Filters, Intent, TimeRange


def test_search_input_converts_to_a_search_request() -> None:
    payload = validate_input(
        SearchInput,
        {
            "query": "  why SQLite?  ",
            "filters": {
                "entities": ["SQLite"],
                "categories": ["decision"],
                "time_range": {"start": "2026-01-01T00:00:00", "end": "2026-02-01T00:00:00Z"},
            },
            "top_k": 5,
        },
    )
    request = payload.to_domain()
    assert request.query == "why SQLite?"
    assert request.top_k == 5
    assert request.filters == Filters(
        categories=("decision",),
        entities=("SQLite",),
        time_range=TimeRange(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)),
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": "x", "colour": "red"}, "colour: unknown field"),
        ({"query": ""}, "query: String should have at least 1 character"),
        ({"query": "x", "top_k": 1000}, "top_k: Input should be less than or equal to 100"),
        ({"query": "x" * 2001}, "query: String should have at most 2000 characters"),
        ({"query": "x", "filters": {"categories": ["rumour"]}}, "filters.categories.0"),
        ({"query": "x", "store": "../etc"}, "store: String should match pattern"),
        (
            {"query": "x", "filters": {"time_range": {"start": "2026-02-01", "end": "2026-01-01"}}},
            "end must be after",
        ),
    ],
)
def test_bad_search_input_gives_a_one_line_message_naming_the_field(arguments: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_input(SearchInput, arguments)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
    assert "red" not in text  # rejected values are not echoed


def test_lists_sent_as_json_text_are_decoded() -> None:
    payload = validate_input(ExpandInput, {"seeds": '["mem-1", "SQLite"]', "edge_types": '["causal"]'})
    request = payload.to_domain(("mem-1",), ("SQLite",))
    assert request.seeds == ("mem-1",)
    assert request.seed_entities == ("SQLite",)
    assert request.edge_types == (EdgeType.CAUSAL,)
    assert request.intent is Intent.GENERAL


def test_expand_needs_a_seed_and_bounds_hops() -> None:
    with pytest.raises(ValueError, match="at least one seed"):
        validate_input(ExpandInput, {"seeds": []})
    with pytest.raises(ValueError, match="hops"):
        validate_input(ExpandInput, {"seeds": ["a"], "hops": 9})


def test_context_scope_becomes_the_subject_and_an_entity_filter() -> None:
    payload = validate_input(ContextInput, {"scope": "Billing", "response_budget": {"max_chars": 500}})
    request = payload.to_domain()
    assert request.query == "everything about Billing"
    assert request.filters.entities == ("Billing",)
    assert request.budget.max_chars == 500
    with pytest.raises(ValueError, match="give a query, a scope"):
        validate_input(ContextInput, {})
    with pytest.raises(ValueError, match="max_chars"):
        validate_input(ContextInput, {"query": "x", "response_budget": {"max_chars": 10}})


def test_write_input_builds_the_memory_and_links_from_the_new_memory() -> None:
    payload = validate_input(
        WriteInput,
        {
            "content": "We use SQLite",
            "category": "decision",
            "entities": ["SQLite"],
            "links": [{"target": "mem-1", "type": "causal", "weight": 0.8}],
            "supersedes": ["mem-0"],
        },
    )
    request = payload.to_domain()
    assert request.memory.category == "decision"
    assert request.memory.entities == ("SQLite",)
    assert request.links[0].source == ""
    assert (request.links[0].target, request.links[0].type, request.links[0].weight) == (
        "mem-1",
        EdgeType.CAUSAL,
        0.8,
    )
    assert request.supersedes == ("mem-0",)


def test_write_input_bounds_content_bytes_and_ids() -> None:
    with pytest.raises(ValueError, match="split it"):
        validate_input(WriteInput, {"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)})
    with pytest.raises(ValueError, match=r"supersedes\.0"):
        validate_input(WriteInput, {"content": "x", "supersedes": ["no spaces allowed"]})


def test_explain_needs_exactly_one_of_trace_id_and_query() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        validate_input(ExplainInput, {})
    with pytest.raises(ValueError, match="exactly one"):
        validate_input(ExplainInput, {"trace_id": "t1", "query": "q"})
    assert validate_input(ExplainInput, {"query": "q"}).to_domain().query == "q"


def test_a_link_needs_two_different_memories() -> None:
    with pytest.raises(ValueError, match="must be different"):
        validate_input(LinkInput, {"source": "a", "target": "a", "type": "causal"})
    edge = validate_input(
        LinkInput, {"source": "a", "target": "b", "type": "causal", "evidence": "x"}
    ).to_port()
    assert edge.metadata == {"evidence": "x"}


def test_filters_accept_entity_ids_and_memory_types_as_aliases() -> None:
    payload = validate_input(
        SearchInput, {"query": "x", "filters": {"entity_ids": ["Atlas"], "memory_types": ["decision"]}}
    )
    assert payload.to_domain().filters == Filters(categories=("decision",), entities=("Atlas",))
    properties = SearchInput.model_json_schema()["$defs"]["FiltersInput"]["properties"]
    assert {"entities", "categories"} <= set(properties)


def test_each_published_output_schema_names_exactly_the_fields_of_its_generated_schema() -> None:
    for spec in tool_specs(include_session_tools=True):
        generated = spec.output_model.model_json_schema()["properties"]
        published = output_schema(spec.output_model)
        assert list(published["properties"]) == list(generated), spec.name
        assert all(value == {} for value in published["properties"].values())


def test_the_stored_input_schemas_are_what_the_tool_models_generate() -> None:
    stored = json.loads(STORED_INPUTS.read_text(encoding="utf-8"))
    assert stored == generated_input_schemas(), (
        "the tool input models changed: run `python -m memory_orchestrator.entrypoints.mcp.published`"
    )


def test_a_model_the_stored_schemas_do_not_hold_gets_its_schema_generated() -> None:
    class ProbeInput(SearchInput):
        """A model of no tool."""

    [schema] = input_schemas([ProbeInput])
    assert schema["properties"].keys() == SearchInput.model_json_schema()["properties"].keys()
    assert "title" not in schema["properties"]["query"]
