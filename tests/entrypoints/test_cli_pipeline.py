"""The pipeline commands as a user types them, over the Atlas example set in a SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_harness import invoke, invoke_json, runner
from memory_orchestrator.entrypoints.cli.app import app
from memory_orchestrator.examples import example_path

NOW = "2026-05-20T09:00:00Z"
WHY = "why did we stop using Stratus?"


pytestmark = pytest.mark.usefixtures("isolated")


@pytest.fixture
def atlas() -> dict[str, str]:
    """Dataset id -> backend id of the imported Atlas set."""
    (store,) = invoke_json("import", str(example_path("atlas")))["stores"]
    return dict(store["ids"])


def ids_of(result: dict[str, Any]) -> list[str]:
    return [item["memory_id"] for item in result["items"]]


def test_search_finds_the_decision_and_its_wordless_cause(atlas: dict[str, str]) -> None:
    result = invoke_json("search", "--query", WHY, "--now", NOW, "--top-k", "8")
    assert result["plan"]["intent"] == "WHY"
    found = ids_of(result)
    assert atlas["a26"] in found
    assert atlas["a24"] in found  # shares no word with the question: reached over the causal edge
    cause = next(item for item in result["items"] if item["memory_id"] == atlas["a24"])
    assert [step["edge_type"] for step in cause["path"]] == ["causal"]
    assert result["trace_id"]


def test_search_without_expansion_misses_the_cause(atlas: dict[str, str]) -> None:
    result = invoke_json("search", "--query", WHY, "--now", NOW, "--top-k", "8", "--no-expand")
    assert atlas["a24"] not in ids_of(result)


def test_context_respects_the_budget_and_keeps_ids(atlas: dict[str, str]) -> None:
    result = invoke_json("context", "--query", WHY, "--now", NOW, "--max-items", "3", "--max-chars", "600")
    assert 1 <= len(result["items"]) <= 3
    assert result["chars"] <= 600
    for memory_id in ids_of(result):
        assert memory_id in result["context_block"]
    text = invoke("context", "--query", WHY, "--now", NOW, "--max-items", "3").stdout
    assert atlas["a26"] in text and "tokens" in text


def test_expand_walks_causal_edges_from_a_seed(atlas: dict[str, str]) -> None:
    result = invoke_json(
        "expand", "--seed", atlas["a26"], "--intent", "WHY", "--edge-type", "causal", "--hops", "1"
    )
    reached = ids_of(result)
    assert {atlas["a24"], atlas["a25"]} <= set(reached)
    assert all(step["edge_type"] == "causal" for item in result["items"] for step in item["path"])


def test_explain_then_trace_show_in_another_process(atlas: dict[str, str]) -> None:
    document = invoke_json("explain", "--query", WHY, "--now", NOW)
    assert document["plan"]["intent"] == "WHY"
    assert {"retrieval", "ranking"} <= set(document["stages"])
    search = invoke_json("search", "--query", WHY, "--now", NOW)
    # Each CliRunner call opens its own runtime: the trace comes back from the persistent store.
    stored = invoke_json("trace", "show", search["trace_id"])
    assert stored["trace_id"] == search["trace_id"]
    assert stored["result_ids"] == ids_of(search)
    human = invoke("explain", "--query", WHY, "--now", NOW).stdout
    assert "score breakdown" in human and "intent WHY" in human


def test_trace_replay_reports_what_changed(atlas: dict[str, str]) -> None:
    search = invoke_json("search", "--query", "who is our contact at Stratus Hosting?", "--now", NOW)
    same = invoke_json("trace", "replay", search["trace_id"])
    assert same["original_ids"] == same["current_ids"]
    assert same["added"] == [] and same["removed"] == []
    invoke("forget", atlas["a08"])
    changed = invoke_json("trace", "replay", search["trace_id"])
    assert atlas["a08"] in changed["removed"]


def test_unknown_trace_is_not_found() -> None:
    result = runner.invoke(app, ["trace", "show", "tr-nope"])
    assert result.exit_code == 3
    assert result.stderr.startswith("error: ")


def test_write_checks_duplicates_and_supersedes(atlas: dict[str, str]) -> None:
    duplicate = invoke_json(
        "write", "Priya wants every Atlas design change written up as an RFC before coding starts."
    )
    assert duplicate["duplicate_of"] in {atlas["a10"], atlas["a23"]}
    new = invoke_json(
        "write",
        "Decision: Atlas releases go out on Wednesday mornings from June.",
        "--category",
        "decision",
        "--supersedes",
        atlas["a36"],
    )
    assert new["action"] == "added"
    assert atlas["a36"] in new["superseded"]
    old = invoke_json("get", atlas["a36"])["memories"][0]
    assert new["id"] in old["superseded_by"]


def test_invalid_pipeline_input_is_a_clear_error(atlas: dict[str, str]) -> None:
    result = runner.invoke(app, ["search", "--query", "x", "--top-k", "0"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: top_k") and len(result.stderr.strip().splitlines()) == 1


def test_passthrough_configuration_skips_orchestration(atlas: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text("[pipeline]\npassthrough = true\n")
    result = invoke_json("search", "--query", WHY, "--now", NOW)
    assert result["items"]
    assert all("passthrough: backend recall" in item["reasons"] for item in result["items"])


def test_demo_loads_once_and_shows_the_three_outputs() -> None:
    first = invoke_json("demo")
    assert first["store"]["loaded"] is True and first["store"]["memories"] == 52
    assert first["search"]["plan"]["intent"] == "WHY"
    assert first["context"]["context_block"]
    assert first["explain"]["stages"]
    second = invoke("demo").stdout
    assert "not loaded again" in second
    assert "1. search" in second and "2. context" in second and "3. explain" in second


def test_demo_keeps_to_its_own_store_and_cleans_up_in_one_line() -> None:
    shown = invoke("demo").stdout
    assert "own store 'demo'" in shown
    assert "Clean up with: orchestrator demo --clean" in " ".join(shown.split())
    assert invoke_json("recall", "Stratus")["hits"] == []  # the default store agents are served stays empty
    assert invoke_json("--store", "demo", "recall", "Stratus")["hits"]
    assert invoke_json("demo", "--clean")["forgotten"] == 52
    assert invoke_json("--store", "demo", "recall", "Stratus")["hits"] == []
    assert invoke_json("demo")["store"]["loaded"] is True  # a clean demo store loads afresh


def test_trace_list_shows_the_newest_first(atlas: dict[str, str], tmp_path: Path) -> None:
    first = invoke_json("search", "--query", "Kubernetes", "--now", NOW)["trace_id"]
    second = invoke_json("search", "--query", "PgBouncer", "--now", NOW)["trace_id"]
    listed = [row["trace_id"] for row in invoke_json("trace", "list", "--limit", "2")["traces"]]
    assert listed == [second, first]
    (tmp_path / "orchestrator.toml").write_text("[features]\nstore_traces = false\n")
    result = runner.invoke(app, ["trace", "list"])
    assert result.exit_code == 2
    assert "traces are not stored" in result.stderr


def test_version() -> None:
    assert invoke("--version").stdout.startswith("orchestrator 0.1.0")


def test_context_honours_filters(atlas: dict[str, str]) -> None:
    result = invoke_json(
        "context",
        "--query",
        "Atlas",
        "--now",
        NOW,
        "--category",
        "decision",
        "--since",
        "2026-04-01T00:00:00Z",
    )
    assert result["items"]
    assert {item["category"] for item in result["items"]} == {"decision"}
    assert all(item["created_at"] >= "2026-04-01" for item in result["items"])


def test_since_reads_the_phrases_mcp_reads(atlas: dict[str, str]) -> None:
    """One parser for --since and memory_changes: '30 days' and 'yesterday' count back from --now."""
    month = invoke_json("search", "--query", "Atlas", "--now", NOW, "--since", "30 days", "--no-expand")
    assert month["items"]
    assert all(item["created_at"] >= "2026-04-20T09:00:00" for item in month["items"])
    everything = invoke_json("search", "--query", "Atlas", "--now", NOW, "--no-expand")
    assert len(everything["items"]) > len(month["items"])
    yesterday = invoke_json("search", "--query", "Atlas", "--now", NOW, "--since", "yesterday", "--no-expand")
    assert all(item["created_at"] >= "2026-05-19" for item in yesterday["items"])
    assert len(yesterday["items"]) < len(month["items"])
    unreadable = runner.invoke(app, ["search", "--query", "Atlas", "--since", "whenever"])
    assert unreadable.exit_code == 2
    assert "--since: cannot read 'whenever'" in unreadable.stderr


def test_import_takes_the_bundled_example_by_name(tmp_path: Path) -> None:
    (store,) = invoke_json("import", "--example", "atlas")["stores"]
    assert store["written"] == 52
    assert invoke_json("search", "--query", WHY, "--now", NOW)["items"]
    for args in (("import",), ("import", str(tmp_path), "--example", "atlas")):
        refused = runner.invoke(app, list(args))
        assert refused.exit_code == 2
        assert "--example atlas" in refused.stderr
    unknown = runner.invoke(app, ["import", "--example", "zeppelin"])
    assert unknown.exit_code == 2
    assert "unknown example set 'zeppelin'" in unknown.stderr


def test_entity_filters_and_seeds_take_a_first_word_and_warn_about_unknown_names(
    atlas: dict[str, str],
) -> None:
    found = invoke_json("search", "--query", "pricing", "--entity", "stratus", "--now", NOW)
    assert found["items"] and all("Stratus Hosting" in item["entities"] for item in found["items"])
    assert not [warning for warning in found["warnings"] if "no known entity" in warning]
    nothing = invoke_json("search", "--query", "pricing", "--entity", "Strat", "--now", NOW)
    assert nothing["items"] == []
    assert any("closest known: Stratus Hosting" in warning for warning in nothing["warnings"])
    walked = invoke_json("expand", "--seed-entity", "Stratus", "--hops", "1", "--now", NOW)
    assert walked["seeds"]
    refused = runner.invoke(app, ["expand", "--seed-entity", "Strat", "--now", NOW])
    assert refused.exit_code != 0 and "closest known: Stratus Hosting" in refused.output


def test_dropped_candidates_count_what_a_basic_trace_left_out() -> None:
    from memory_orchestrator.entrypoints.cli import output
    from memory_orchestrator.entrypoints.cli.trace_view import show_drops

    drops = [{"id": "m1", "stage": "expansion", "reason": "below threshold: 0.01"}, {"omitted": 34}]
    with output.console.capture() as captured:
        show_drops(drops)
    text = captured.get()
    assert "more, not listed in a basic trace" in text and "34" in text
    assert "below threshold" in text
    assert "│ ?" not in text  # the omission marker is no drop of an unknown stage
