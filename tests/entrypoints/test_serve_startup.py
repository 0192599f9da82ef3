"""What `orchestrator serve` does before its first answer: the modules and tool models it leaves to the
first tool call (imported and built by the warm-up), the collector kept off during the start-up and
turned back on after, and the interpreter's switch interval it sets (``[server] switch_interval_ms``)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_orchestrator.entrypoints.cli import app as cli
from memory_orchestrator.entrypoints.cli.console import end_of_startup
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.evaluation.startup import settings_free_environment


def _python(code: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_server_is_built_without_the_pipeline_and_the_warm_up_imports_it(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        from memory_orchestrator.entrypoints.cli import app, serve
        from memory_orchestrator.entrypoints.config.settings import load_settings
        from memory_orchestrator.entrypoints.mcp import launch

        settings = load_settings(None)
        options = launch.server_options(settings, default_store=None, http=False)
        from memory_orchestrator.entrypoints.mcp.tools import tool_specs

        launch.build_server(launch.store_opener(settings), options)
        models = [model for spec in tool_specs() for model in (spec.input_model, spec.output_model)]
        print("before", sorted(name for name in launch.FIRST_CALL_MODULES if name in sys.modules))
        print("backend", "memory_orchestrator.adapters.sqlite.backend" in sys.modules)
        print("models built", sum(model.__pydantic_complete__ for model in models))
        launch.warm_up(settings)
        print("after", sorted(name for name in launch.FIRST_CALL_MODULES if name not in sys.modules))
        print("backend", "memory_orchestrator.adapters.sqlite.backend" in sys.modules)
        print("models not built", [model.__name__ for model in models if not model.__pydantic_complete__])
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "before []",
        "backend False",
        "models built 0",  # the server lists the stored schemas; the models are built at first use
        "after []",
        "backend True",
        "models not built []",
    ]
    assert not (tmp_path / "memories.db").exists()  # neither the start nor the warm-up opens a store


def test_a_warm_up_for_a_backend_of_a_plugin_skips_what_it_cannot_import(tmp_path: Path) -> None:
    done = _python(
        """
        from memory_orchestrator.entrypoints.config.settings import load_settings
        from memory_orchestrator.entrypoints.mcp import launch

        settings = load_settings(None)
        settings.backend.name = "someone_elses"
        launch.warm_up(settings)
        print("ok")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_end_of_startup_puts_what_the_start_made_in_the_oldest_generation(tmp_path: Path) -> None:
    done = _python(
        """
        import gc
        from memory_orchestrator.entrypoints.cli.console import end_of_startup

        gc.disable()
        made = [[index] for index in range(50_000)]
        end_of_startup()
        oldest = {id(obj) for obj in gc.get_objects(generation=2)}
        print(gc.isenabled(), gc.get_count()[0] < 1_000, all(id(item) in oldest for item in made))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True True True\n"


def test_end_of_startup_leaves_a_running_collector_alone() -> None:
    assert gc.isenabled()
    before = len(gc.get_objects(generation=2))
    end_of_startup()
    assert gc.isenabled()
    assert len(gc.get_objects(generation=2)) <= before + 1_000  # nothing was moved there


def test_a_command_other_than_serve_runs_with_the_collector_on(
    monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    seen: list[bool] = []
    original = cli.build_app

    def build_and_watch(command: str | None = None) -> object:
        built = original(command)
        built.command("probe-collector")(lambda: seen.append(gc.isenabled()))
        return built

    monkeypatch.setattr(cli, "build_app", build_and_watch)
    monkeypatch.setattr(sys, "argv", ["orchestrator", "probe-collector"])
    gc.disable()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.main()
    finally:
        gc.enable()
    assert exited.value.code == 0
    assert seen == [True]


def test_serve_sets_the_interpreters_switch_interval_from_the_settings(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        from memory_orchestrator.entrypoints.config.settings import Settings
        from memory_orchestrator.entrypoints.mcp import launch

        async def serving(*args, **kwargs):
            print(round(sys.getswitchinterval() * 1000, 3))

        launch.serve_stdio = serving
        print(round(sys.getswitchinterval() * 1000, 3))
        chosen = Settings.model_validate({"server": {"switch_interval_ms": 0.25}})
        launch.run(chosen, store=None, http=False, host="127.0.0.1", port=0)
        launch.run(Settings.model_validate({}), store=None, http=False, host="127.0.0.1", port=0)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5.0", "0.25", "0.5"]  # Python's default, then the setting's


@pytest.mark.parametrize("milliseconds", [0, 0.01, 101])
def test_a_switch_interval_out_of_bounds_is_refused(milliseconds: float) -> None:
    with pytest.raises(ValueError, match="switch_interval_ms"):
        Settings.model_validate({"server": {"switch_interval_ms": milliseconds}})
