"""The CLI as a user types it: backend commands, plugins, config, import, errors and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from cli_harness import invoke, invoke_json, runner
from memory_orchestrator.entrypoints.cli import app as cli
from memory_orchestrator.entrypoints.cli.app import COMMANDS, app, build_app, command_named
from memory_orchestrator.evaluation.startup import settings_free_environment
from memory_orchestrator.examples import example_path

pytestmark = pytest.mark.usefixtures("isolated")


def test_remember_get_recall_link_forget_round_trip(tmp_path: Path) -> None:
    first = invoke_json("remember", "Atlas moved to Kubernetes in May", "--entity", "Atlas", "--tag", "infra")
    assert first["action"] == "added"
    second = invoke_json(
        "remember",
        "Hosting costs tripled in March",
        "--category",
        "fact",
        "--created-at",
        "2026-03-30T10:00:00Z",
    )
    got = invoke_json("get", first["id"], second["id"])
    assert [memory["id"] for memory in got["memories"]] == [first["id"], second["id"]]
    assert got["memories"][0]["entities"] == ["Atlas"]
    assert got["memories"][1]["created_at"] == "2026-03-30T10:00:00Z"

    hits = invoke_json("recall", "Kubernetes")["hits"]
    assert hits and hits[0]["id"] == first["id"]

    edge = invoke_json("link", second["id"], first["id"], "--type", "causal", "--weight", "0.8")
    assert (edge["type"], edge["weight"]) == ("causal", 0.8)

    assert invoke_json("forget", first["id"]) == {"forgotten": first["id"]}
    after = json.loads(invoke("get", first["id"], "--json", code=3).stdout)
    assert after == {"memories": [], "missing": [first["id"]]}
    assert (tmp_path / "data" / "memories.db").is_file()


def test_identical_content_is_skipped_with_the_existing_id() -> None:
    first = invoke_json("remember", "The on-call handover is Monday 10:00")
    again = invoke_json("remember", "The on-call handover is Monday 10:00")
    assert again["action"] == "skipped"
    assert again["duplicate_of"] == first["id"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("remember", "x", "--category", "bogus"), 2, "category 'bogus'"),
        (("remember", "x", "--created-at", "yesterday-ish"), 2, "--created-at: not an ISO 8601 timestamp"),
        (("recall", "x", "--since", "2026-05-01", "--until", "2026-04-01"), 2, "--since must be earlier"),
        (("forget", "mem-does-not-exist"), 3, "mem-does-not-exist"),
        (("--backend", "couchdb", "recall", "x"), 6, "backend 'couchdb' is not registered"),
        (("--config", "missing.toml", "recall", "x"), 2, "configuration file not found"),
        (("--store", "../escape", "recall", "x"), 2, "--store"),
    ],
)
def test_expected_errors_are_one_line_and_non_zero(args: tuple[str, ...], code: int, message: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output


def test_invalid_input_changes_nothing() -> None:
    runner.invoke(app, ["remember", "x" * 9000])
    assert invoke_json("recall", "x")["hits"] == []


def test_store_option_separates_namespaces() -> None:
    invoke_json("--store", "team-a", "remember", "Only team A knows about the Lisbon offsite")
    assert invoke_json("--store", "team-a", "recall", "Lisbon")["hits"]
    assert invoke_json("--store", "team-b", "recall", "Lisbon")["hits"] == []


def test_health_reports_checks() -> None:
    report = invoke_json("health", "--probe")
    assert report["backend"] == "sqlite"
    assert report["status"] == "ok"
    assert "probe" in {check["name"] for check in report["checks"]}


def test_plugins_lists_builtins_with_their_registrations() -> None:
    data = invoke_json("plugins")
    names = {plugin["name"] for plugin in data["plugins"]}
    assert {"memory", "sqlite", "neo4j", "scorers"} <= names
    assert data["backends"]["sqlite"] == "sqlite"
    assert data["scorers"]["tag_match"] == "scorers"
    table = invoke("plugins").stdout
    assert "tag_match" in table and "built-in" in table


def test_config_show_masks_secrets_and_reflects_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "orchestrator.toml").write_text('[backend]\nname = "neo4j"\n[pipeline]\nhops = 3\n')
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__PASSWORD", "hunter2")
    data = invoke_json("config", "show")
    assert data["backend"]["name"] == "neo4j"
    assert data["pipeline"]["hops"] == 3
    assert data["backend"]["neo4j"]["password"] == "**********"
    assert "hunter2" not in invoke("config", "show").stdout
    assert invoke_json("--backend", "memory", "config", "show")["backend"]["name"] == "memory"


def test_invalid_config_file_exits_with_the_problem(tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text("[pipeline]\nhops = 99\n")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert "pipeline.hops" in result.stderr


def test_hash_token_prints_the_digest() -> None:
    result = invoke("config", "hash-token", "abc")
    assert result.stdout.strip() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_import_loads_the_bundled_example_set() -> None:
    data = invoke_json("import", str(example_path("atlas")))
    (store,) = data["stores"]
    assert (store["written"], store["skipped"], store["links"]) == (52, 0, 18)
    assert store["warnings"] == []
    decision = store["ids"]["a26"]
    hits = invoke_json("recall", "Stratus Hosting", "--limit", "20", "--now", "2026-05-20T09:00:00Z")["hits"]
    assert decision in {hit["id"] for hit in hits}
    # "as of" the kick-off, the April decision did not exist yet.
    early = invoke_json("recall", "Stratus Hosting", "--limit", "20", "--now", "2026-01-25T00:00:00Z")["hits"]
    assert decision not in {hit["id"] for hit in early}


def test_import_of_a_missing_dataset_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "dataset not found" in result.stderr


def test_real_subprocess_as_a_user_types_it(tmp_path: Path) -> None:
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(tmp_path / "subprocess-data")
    script = Path(sys.executable).parent / "orchestrator"
    assert script.is_file(), "the console script is installed with the package"
    command = [str(script)]

    def orchestrator(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False
        )

    written = orchestrator("remember", "--json", "--", "-- dashes are content, not options")
    assert written.returncode == 0, written.stderr
    memory_id = json.loads(written.stdout)["id"]
    shown = orchestrator("get", memory_id, "--json")
    assert json.loads(shown.stdout)["memories"][0]["content"] == "-- dashes are content, not options"
    failed = orchestrator("--backend", "nope", "health")
    assert failed.returncode == 6
    assert failed.stderr.strip().startswith("error: backend 'nope' is not registered")
    assert "Traceback" not in failed.stderr


def test_health_of_an_unreachable_backend_is_a_report_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__URI", "bolt://127.0.0.1:9")
    monkeypatch.setenv("ORCHESTRATOR_RETRY__ATTEMPTS", "1")
    result = runner.invoke(app, ["--backend", "neo4j", "health", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["backend"], report["status"]) == ("neo4j", "error")
    assert report["checks"][0]["name"] == "open"


def test_commands_of_other_modules_are_mounted_when_present_and_skipped_when_missing() -> None:
    help_text = invoke("--help").stdout
    for command in ("serve", "eval", "bench", "search", "demo"):
        assert command in help_text
    whole = cli.build_app()
    before = len(whole.registered_commands)
    cli._mount_optional(whole, "cli_not_written_yet", "app", "ghost", group=True)
    cli._mount_optional(whole, "cli.evaluate", "no_such_attribute", "ghost", group=False)
    assert len(whole.registered_commands) == before
    assert "ghost" not in typer.main.get_command(whole).commands


def test_import_of_a_folder_of_stores_fills_one_store_each(tmp_path: Path) -> None:
    for store, text in (("conv-a", "Alice adopted a cat named Miso"), ("conv-b", "Bob sold his sailboat")):
        folder = tmp_path / "dataset" / store
        folder.mkdir(parents=True)
        row = {"id": "m1", "content": text, "created_at": "2026-01-01T10:00:00Z"}
        (folder / "memories.jsonl").write_text(json.dumps(row) + "\n")
    data = invoke_json("import", str(tmp_path / "dataset"))
    assert [store["store"] for store in data["stores"]] == ["conv-a", "conv-b"]

    def contents(store: str) -> list[str]:
        return [
            hit["memory"]["content"]
            for hit in invoke_json("--store", store, "recall", "Miso sailboat")["hits"]
        ]

    assert contents("conv-a") == ["Alice adopted a cat named Miso"]
    assert contents("conv-b") == ["Bob sold his sailboat"]


def test_escape_sequences_stored_in_a_memory_never_reach_the_terminal_raw(isolated: object) -> None:
    hostile = "release notes \x1b[2J\x1b]0;pwned\x07 end"
    assert runner.invoke(app, ["remember", hostile]).exit_code == 0
    shown = runner.invoke(app, ["recall", "release notes"])
    missing = runner.invoke(app, ["get", "mem-\x1b[2Jnope"])
    assert shown.exit_code == 0 and "pwned" in shown.output
    assert "\x1b" not in shown.output and "\x07" not in shown.output
    assert "\x1b" not in missing.output
    as_json = runner.invoke(app, ["recall", "release notes", "--json"])
    # scripts still get the exact text
    assert json.loads(as_json.output)["hits"][0]["memory"]["content"] == hostile


def test_an_empty_data_dir_variable_is_an_error_and_creates_nothing(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DATA_DIR", "")
    before = sorted(isolated.iterdir())
    result = runner.invoke(app, ["remember", "a note"])
    assert result.exit_code == 2
    assert "data_dir" in result.output and "empty" in result.output
    assert sorted(isolated.iterdir()) == before


def test_write_caused_by_links_the_cause_to_the_new_memory_or_names_the_unknown_id(isolated: Path) -> None:
    cause = invoke_json("write", "the rack fan failed overnight")["id"]
    effect = invoke_json("write", "the server shut down because the rack fan failed", "--caused-by", cause)
    [link] = effect["links_created"]
    assert (link["source"], link["target"], link["type"]) == (cause, effect["id"], "causal")
    result = runner.invoke(app, ["write", "another effect of heat", "--caused-by", "mem-nope"])
    assert result.exit_code == 2 and "unknown memory id" in result.output and "mem-nope" in result.output


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS",
            "{bad",
            "ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS is not valid JSON",
        ),
        ("ORCHESTRATOR_BOGUS", "1", "unknown setting in environment variable ORCHESTRATOR_BOGUS"),
        ("ORCHESTRATOR_PIPELINE__BOGUS", "1", "pipeline.bogus"),
    ],
)
def test_environment_mistakes_are_errors_naming_the_variable(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["recall", "x"])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["recall"], "Missing argument 'query'"),
        (["search", "--bogus"], "No such option: --bogus"),
        (["recall", "x", "--limit", "0"], "Invalid value for '--limit'"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_of_the_console_script_are_one_line_with_exit_2(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(sys, "argv", ["orchestrator", *argv])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    captured = capsys.readouterr()
    assert ended.value.code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "--help" in lines[0] and captured.out == ""


def test_the_console_script_answers_version_without_importing_the_cli() -> None:
    probe = (
        "import sys; sys.argv = ['orchestrator', '--version']; "
        "from memory_orchestrator.entrypoints.cli import console; console.main(); "
        "heavy = ('mcp', 'typer', 'memory_orchestrator.entrypoints.cli.app'); "
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("orchestrator ")
    assert lines[1] == "[]"


def test_the_command_table_names_every_command_the_cli_mounts() -> None:
    mounted = set(typer.main.get_command(build_app()).commands)
    assert mounted == {name for names in COMMANDS.values() for name in names}


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["serve", "--http"], "serve"),
        (["--store", "serve", "search", "x"], "search"),
        (["-c", "a.toml", "--log-level", "debug", "trace", "show"], "trace"),
        (["--version"], None),
        ([], None),
    ],
)
def test_the_command_word_is_found_after_global_options_and_their_values(
    args: list[str], command: str | None
) -> None:
    assert command_named(args) == command


def test_a_command_run_mounts_only_its_own_module_and_help_mounts_all() -> None:
    assert set(typer.main.get_command(build_app("serve")).commands) == {"serve"}
    assert set(typer.main.get_command(build_app("search")).commands) == set(COMMANDS["pipeline"])
    assert len(typer.main.get_command(build_app("no-such-command")).commands) == len(
        [name for names in COMMANDS.values() for name in names]
    )


def test_help_texts_show_the_config_sections_they_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """``[log] level`` in a help text is a config section, not Rich markup to swallow."""
    monkeypatch.setenv("COLUMNS", "400")
    named: list[tuple[list[str], str]] = []

    def walk(command: typer.main.click.Command, path: list[str]) -> None:
        texts = [command.help or "", *(getattr(param, "help", None) or "" for param in command.params)]
        for text in texts:
            named.extend((path, f"[{section}]") for section in re.findall(r"\\?\[(\w+)\]", text))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(build_app()), [])
    assert len(named) >= 2  # [log] of --log-level, [channels] of eval --channel
    for path, section in named:
        assert section in invoke(*path, "--help").stdout, (path, section)


def test_arguments_that_are_not_utf8_are_one_line_with_exit_2_and_store_nothing(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the bytes b"caf\xe9" (Latin-1) become in sys.argv on a UTF-8 system.
    monkeypatch.setattr(sys, "argv", ["orchestrator", "remember", "caf\udce9 latte"])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    captured = capsys.readouterr()
    assert ended.value.code == 2 and captured.out == ""
    assert captured.err == "error: argument 2 is not valid UTF-8 text (at character 4)\n"
    assert invoke_json("recall", "latte")["hits"] == []
