"""The operator's CLI: import names the store it wrote and shows progress, stats, --log-level."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_harness import invoke, invoke_json, runner
from memory_orchestrator.entrypoints.cli.app import app
from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment

pytestmark = pytest.mark.usefixtures("isolated")
ORCHESTRATOR = orchestrator_command()


def test_import_into_a_named_store_says_that_store_and_shows_progress(isolated: Path) -> None:
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(isolated / "data")
    done = subprocess.run(
        [ORCHESTRATOR, "--store", "team-a", "import", "--example", "atlas"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "team-a" in done.stdout and "│ atlas" not in done.stdout  # the table names the store written
    progress = done.stderr.splitlines()
    assert progress[0] == "importing atlas into store team-a: 0/52"
    assert progress[-1].startswith("importing atlas into store team-a: 52/52 in ")
    assert progress[-1].endswith(" memories/s")
    assert (isolated / "data" / "memories.team-a.db").is_file()


def test_import_json_names_the_store_and_keeps_stdout_clean() -> None:
    result = invoke("--store", "team-b", "import", "--example", "atlas", "--json")
    (store,) = json.loads(result.stdout)["stores"]
    assert (store["store"], store["written"]) == ("team-b", 52)
    assert "memories/s" in result.stderr
    assert "memories/s" not in invoke("import", "--example", "atlas", "--no-progress").stderr


def test_stats_of_a_store_after_searches() -> None:
    invoke("--store", "team-c", "import", "--example", "atlas", "--no-progress")
    for _ in range(2):
        invoke("--store", "team-c", "search", "-q", "why did we stop using Stratus?")
    invoke("search", "-q", "why did we stop using Stratus?")  # the default store: another store's trace
    report = invoke_json("--store", "team-c", "stats")
    assert (report["store"], report["memories"]) == ("team-c", 52)
    assert report["operations"]["search"]["count"] == 2 and report["other_stores"] == 1
    assert report["channels"]["keyword"]["reads"] == 2 and report["recall_depth"]["mean"] > 0
    shown = invoke("--store", "team-c", "stats").stdout
    assert "store team-c (sqlite): 52 memories" in shown and "cache hit rate" in shown


def test_log_level_option_and_setting(isolated: Path) -> None:
    bad = runner.invoke(app, ["--log-level", "loud", "health"])
    assert bad.exit_code == 2 and "loud" in bad.output
    (isolated / "orchestrator.toml").write_text('[log]\nlevel = "chatty"\n')
    wrong = runner.invoke(app, ["health"])
    assert wrong.exit_code == 2 and "log.level" in wrong.output
    (isolated / "orchestrator.toml").write_text('[log]\nlevel = "error"\n')
    assert invoke_json("config", "show")["log"] == {"level": "error"}
    assert invoke_json("--log-level", "debug", "config", "show")["log"] == {"level": "debug"}
