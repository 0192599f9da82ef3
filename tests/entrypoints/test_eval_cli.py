"""``orchestrator eval`` and ``orchestrator bench`` as a user types them, end to end on tiny data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.entrypoints.cli.app import app
from memory_orchestrator.evaluation.datasets import load_dataset
from memory_orchestrator.evaluation.runner import EvalConfig, run_evaluation
from memory_orchestrator.evaluation.summary import summarise

FIXTURES = Path(__file__).parent.parent / "fixtures"
TINY = FIXTURES / "eval_tiny"
LOCOMO = FIXTURES / "locomo_tiny.json"

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_eval_writes_reports_with_every_mode_and_bm25(isolated: Path, backend: str) -> None:
    out = isolated / "report"
    code, stdout, stderr = _invoke(
        "eval",
        "--dataset",
        str(TINY),
        "--backend",
        backend,
        "--k",
        "1,5",
        "--out",
        str(out),
        "--no-progress",
        "--json",
    )

    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["meta"]["queries"] == 4 and summary["meta"]["backend"] == backend
    modes = summary["overall"]["modes"]
    assert list(modes) == ["raw", "keyword", "orchestrated", "expanded", "context", "bm25"]
    # BM25 (deterministic): q1 and q3 found, half of q2's gold, q4 asks before t7 existed
    assert modes["bm25"]["recall@5"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    # q1 lists the superseded t4 as must-not: BM25 ranks it first
    assert modes["bm25"]["must_not_rate@1"] == 1.0
    per_query = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    as_of = next(row for row in per_query if row["id"] == "q4")
    # "as of now": the memory written after the question was asked is invisible in every mode
    assert all("t7" not in mode["top"] for mode in as_of["modes"].values())
    lookup = next(row for row in per_query if row["id"] == "q3")
    assert all(mode["top"][:5].count("t6") == 1 for mode in lookup["modes"].values())
    assert set(summary["latency_ms"]) == set(modes)
    for name in ("report.json", "report.md", "recall_at_k.png", "latency.png", "queries.jsonl"):
        assert (out / name).stat().st_size > 0
    markdown = (out / "report.md").read_text()
    assert "## Headline: all queries (4 queries)" in markdown and "## By kind" in markdown


def test_eval_on_a_locomo_file_converts_it_and_reports_categories(isolated: Path) -> None:
    out = isolated / "locomo"
    code, stdout, stderr = _invoke(
        "eval", "--dataset", str(LOCOMO), "--backend", "memory", "--mode", "raw,expanded", "--out", str(out),
        "--no-progress", "--json",
    )  # fmt: skip

    assert code == 0, stderr
    summary = json.loads(stdout)
    assert list(summary["overall"]["modes"]) == ["raw", "expanded", "bm25"]
    assert summary["headline"]["set"].startswith("categories 1-4")
    assert summary["headline"]["queries"] == 3
    assert set(summary["slices"]["category"]) == {"1", "2", "4", "5"}
    assert set(summary["slices"]["conversation"]) == {"conv-x"}
    assert "3 evidence ids repaired" in stderr


def test_import_locomo_writes_one_store_per_conversation(isolated: Path) -> None:
    code, stdout, _ = _invoke("eval", "import-locomo", str(LOCOMO), "--out", str(isolated / "conv"), "--json")

    assert code == 0
    counts = json.loads(stdout)
    assert (counts["memories"], counts["queries"], counts["dropped_ids"]) == (5, 4, 2)
    assert (isolated / "conv" / "conv-x" / "memories.jsonl").is_file()
    assert (isolated / "conv" / "conv-x" / "queries.jsonl").is_file()


def test_unavailable_backend_and_bad_options_fail_with_one_line(isolated: Path) -> None:
    code, _, stderr = _invoke("eval", "--dataset", str(TINY), "--backend", "couchdb", "--no-progress")
    assert code == 2
    assert "backend 'couchdb' is not available" in stderr and "no installed plugin" in stderr

    code, _, stderr = _invoke("eval", "--dataset", str(TINY), "--k", "5,ten", "--no-progress")
    assert code == 2 and "--k" in stderr

    code, _, stderr = _invoke("eval", "--dataset", str(TINY), "--mode", "psychic", "--no-progress")
    assert code == 2 and "unknown psychic" in stderr

    code, _, stderr = _invoke("bench", "--sizes", "0", "--no-progress")
    assert code == 2 and "--sizes" in stderr


def test_bench_measures_every_operation_per_size(isolated: Path) -> None:
    out = isolated / "bench"
    code, stdout, stderr = _invoke(
        "bench", "--backend", "memory", "--sizes", "40,20", "--queries", "4", "--writes", "2",
        "--start-runs", "0", "--out", str(out), "--no-progress", "--json",
    )  # fmt: skip

    assert code == 0, stderr
    document = json.loads(stdout)
    assert document["start"] is None  # --start-runs 0: no process started
    assert [row["size"] for row in document["sizes"]] == [20, 40]
    for row in document["sizes"]:
        assert row["memories"] == row["size"]
        latency = row["latency_ms"]
        assert {name: latency[name]["n"] for name in latency} == {
            "raw_recall": 4, "memory_search": 4, "memory_search_expanded": 4, "memory_context": 4,
            "memory_context_repeat": 4, "memory_context_repeat_cached": 4, "memory_write": 2,
        }  # fmt: skip
        assert 0 < latency["memory_search"]["p50"] <= latency["memory_search"]["max"]
        # a repeated query answered from the read cache skips the whole pipeline
        assert latency["memory_context_repeat_cached"]["p50"] < latency["memory_context_repeat"]["p50"]
        # the overhead excludes time inside the backend, so it never exceeds the wall time
        assert row["overhead_ms"]["memory_search"]["p50"] <= latency["memory_search"]["max"]
        assert row["peak_rss_mb"] > 0 and row["ingest"]["memories_per_s"] > 0
    # memory_context once more on both stores, interleaved, with queries neither had answered
    growth = document["growth"]
    cells = growth["memory_context_ms"]
    assert {size: cell["n"] for size, cell in cells.items()} == {"20": 4, "40": 4}
    assert growth["p50_over_smallest"] == {"20": 1.0, "40": round(cells["40"]["p50"] / cells["20"]["p50"], 3)}
    assert growth["errors"]["count"] == 0
    for name in ("bench.json", "bench.md", "latency_vs_size.png", "latency_distribution.png"):
        assert (out / name).stat().st_size > 0
    assert "## memory_context growth, the sizes interleaved" in (out / "bench.md").read_text()


def test_bench_times_mcp_stdio_and_http_and_loads_http_on_sqlite(isolated: Path) -> None:
    code, stdout, stderr = _invoke(
        "bench", "--backend", "sqlite", "--sizes", "60", "--queries", "5", "--writes", "1",
        "--transport-size", "60", "--load-clients", "1,3", "--load-seconds", "1", "--start-runs", "2",
        "--out", str(isolated / "bench"), "--no-progress", "--json",
    )  # fmt: skip
    assert code == 0, stderr
    document = json.loads(stdout)
    # start-up: --version, serve and the SDK's floor server, each started twice
    start = document["start"]
    cells = start["seconds"]
    assert start["runs"] == 2 and set(cells) == {
        "version", "serve_initialize", "serve_tools_list", "floor_initialize", "floor_tools_list"
    }  # fmt: skip
    assert all(0 < cell["best"] <= cell["median"] for cell in cells.values())
    assert cells["serve_initialize"]["median"] <= cells["serve_tools_list"]["median"]
    assert start["serve_over_floor_s"] == round(
        cells["serve_initialize"]["median"] - cells["floor_initialize"]["median"], 4
    )
    assert document["growth"] is None  # one size: nothing to compare
    measured = document["sizes"][0]["transports"]
    paths = measured["memory_search_ms"]
    assert {path: paths[path]["n"] for path in paths} == dict.fromkeys(
        ("in_process", "stdio", "http", "stdio_bare", "http_bare"), 5
    )
    assert measured["added_p50_ms"] == {
        path: round(paths[path]["p50"] - paths["in_process"]["p50"], 3)
        for path in ("stdio", "http", "stdio_bare", "http_bare")
    }
    assert [level["clients"] for level in measured["http_load"]] == [1, 3]
    assert all(level["calls"] > 0 and level["errors"] == 0 for level in measured["http_load"])
    report = (isolated / "bench" / "bench.md").read_text()
    assert "through MCP" in report and "| http_bare |" in report
    assert "## Start-up (seconds, 2 starts each)" in report and "floor server" in report


def test_eval_runs_as_a_real_subprocess(isolated: Path) -> None:
    script = Path(sys.executable).with_name("orchestrator")
    completed = subprocess.run(
        [str(script), "eval", "import-locomo", str(LOCOMO), "--out", str(isolated / "sub")],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip

    assert completed.returncode == 0, completed.stderr
    assert "1 conversations" in completed.stdout and "dropped 2" in completed.stdout


@pytest.mark.integration
def test_eval_on_neo4j_uses_a_fresh_store(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, neo4j_service: Any
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__URI", neo4j_service.uri)
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__USER", neo4j_service.user)
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__PASSWORD", neo4j_service.password)
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__DATABASE", neo4j_service.database)

    runs = []
    for _ in range(2):
        code, stdout, stderr = _invoke(
            "eval", "--dataset", str(TINY), "--backend", "neo4j", "--mode", "raw,keyword",
            "--out", str(isolated / "neo4j"), "--no-progress", "--json",
        )  # fmt: skip
        assert code == 0, stderr
        runs.append(json.loads(stdout))

    # a second run sees exactly the same corpus: each run writes into a store of its own
    assert [run["ingest"][0]["written"] for run in runs] == [7, 7]
    assert (
        runs[0]["overall"]["modes"]["keyword"]["recall@5"]
        == runs[1]["overall"]["modes"]["keyword"]["recall@5"]
    )
    assert runs[0]["overall"]["modes"]["keyword"]["recall@5"] >= 0.5


@pytest.mark.anyio
async def test_a_failing_backend_call_is_counted_not_fatal() -> None:
    def make(_store: str) -> InMemoryBackend:
        backend = InMemoryBackend()
        backend.fail_always("recall")
        return backend

    run = await run_evaluation(load_dataset(TINY), make, EvalConfig(modes=("raw", "keyword"), ks=(5,)))
    summary = summarise(run)

    assert summary["errors"]["raw"]["count"] == 4
    assert "BackendUnavailable" in summary["errors"]["raw"]["examples"][0]
    assert summary["overall"]["modes"]["raw"]["recall@5"] == 0.0
    # the other channel still answers
    assert summary["overall"]["modes"]["keyword"]["recall@5"] > 0.5


def test_the_cli_lists_the_runners_modes_without_importing_the_evaluation_stack() -> None:
    import subprocess
    import sys

    from memory_orchestrator.entrypoints.cli import evaluate
    from memory_orchestrator.evaluation import runner

    assert evaluate.MODES == runner.MODES
    code = (
        "import sys; import memory_orchestrator.entrypoints.cli.app; "
        "print(sorted(m for m in ('mcp', 'matplotlib', 'bm25s', 'memory_orchestrator.evaluation.runner') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_evaluation_without_the_eval_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from memory_orchestrator.entrypoints.cli import evaluate
    from memory_orchestrator.ports import InvalidRequest

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: None if name == "bm25s" else real(name, *args)
    )
    with pytest.raises(InvalidRequest, match=r"\[eval\] extra \(bm25s missing\)"):
        evaluate.require_eval_extra()


def test_eval_of_the_bundled_example_writes_under_the_data_folder_not_the_cwd(isolated: Path) -> None:
    code, stdout, stderr = _invoke(
        "eval", "--example", "atlas", "--backend", "memory", "--mode", "raw", "--no-progress", "--json"
    )
    assert code == 0, stderr
    report = Path(json.loads(stdout)["files"]["markdown"])
    assert report.is_file()
    assert report.parent == isolated / "data" / "reports" / "atlas-memory"
    assert not (isolated / "eval").exists()
    code, _, stderr = _invoke("eval", "--example", "atlas", "--dataset", str(TINY), "--no-progress")
    assert code == 2
    assert "not both" in stderr
