"""A real third-party plugin package, pip-installed into a temporary folder (never into the project
venv), discovered through its entry point by `orchestrator` subprocesses; its backend and scorer are used.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.evaluation.startup import orchestrator_command, settings_free_environment

SAMPLE = Path(__file__).parent / "sample_plugin"
ORCHESTRATOR = orchestrator_command()


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(SAMPLE),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def run(plugin_dir: Path | None, cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> Any:
    env = settings_free_environment()
    env.pop("PYTHONPATH", None)
    if plugin_dir is not None:
        env["PYTHONPATH"] = str(plugin_dir)
    env["ORCHESTRATOR_DATA_DIR"] = str(cwd / "data")
    env["ORCHESTRATOR_BACKEND__EXTRA__NOTEBOOK__PATH"] = str(cwd / "notebook.json")
    env.update(extra_env or {})
    return subprocess.run(
        [ORCHESTRATOR, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )


def run_json(plugin_dir: Path | None, cwd: Path, *args: str, **kwargs: Any) -> Any:
    done = run(plugin_dir, cwd, *args, "--json", **kwargs)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_project_environment_is_untouched(plugin_dir: Path) -> None:
    assert importlib.util.find_spec("orchestrator_sample_plugin") is None
    assert (plugin_dir / "orchestrator_sample_plugin-0.0.1.dist-info" / "entry_points.txt").is_file()


def test_discovered_through_its_entry_point(plugin_dir: Path, tmp_path: Path) -> None:
    data = run_json(plugin_dir, tmp_path, "plugins")
    sample = next(plugin for plugin in data["plugins"] if plugin["name"] == "sample")
    assert sample == {
        "name": "sample",
        "distribution": "orchestrator-sample-plugin",
        "version": "0.0.1",
        "builtin": False,
        "backends": ["notebook"],
        "scorers": ["pinned"],
        "channels": [],
    }
    assert data["backends"]["notebook"] == "sample"
    without = run_json(None, tmp_path, "plugins")
    assert "notebook" not in without["backends"]


def test_its_backend_is_used(plugin_dir: Path, tmp_path: Path) -> None:
    written = run_json(
        plugin_dir, tmp_path, "--backend", "notebook", "remember", "Notebook keeps the Lisbon plan"
    )
    assert written["id"].startswith("nb-")
    stored = json.loads((tmp_path / "notebook.json").read_text())
    assert written["id"] in stored["memories"]
    hits = run_json(plugin_dir, tmp_path, "--backend", "notebook", "recall", "Lisbon")["hits"]
    assert [hit["id"] for hit in hits] == [written["id"]]
    assert run_json(plugin_dir, tmp_path, "--backend", "notebook", "health")["backend"] == "notebook"


def test_allow_list_can_leave_it_out(plugin_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text("[plugins]\nallow = []\n")
    done = run(plugin_dir, tmp_path, "--backend", "notebook", "health")
    assert done.returncode == 6
    assert "backend 'notebook' is not registered" in done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("memory_orchestrator.domain.orchestrator") is None,
    reason="the Orchestrator has not landed yet",
)
def test_its_scorer_is_used_in_ranking(plugin_dir: Path, tmp_path: Path) -> None:
    relevant = run_json(
        plugin_dir, tmp_path, "remember", "Lisbon offsite agenda: Lisbon talks, Lisbon dinner"
    )
    pinned = run_json(plugin_dir, tmp_path, "remember", "Book the Lisbon hotel early", "--tag", "pinned")
    query = ("search", "--query", "Lisbon offsite agenda", "--no-expand")

    ranked = run_json(plugin_dir, tmp_path, *query)["items"]
    assert [item["memory_id"] for item in ranked[:2]] == [pinned["id"], relevant["id"]]
    assert ranked[0]["signals"]["pinned"] == 1.0

    (tmp_path / "orchestrator.toml").write_text('[scorers]\nenabled = ["tag_match"]\n')
    plain = run_json(plugin_dir, tmp_path, *query)["items"]
    assert plain[0]["memory_id"] == relevant["id"]
    assert "pinned" not in plain[0]["signals"]


def fake_distribution(site: Path, name: str, entry_points: str, module: str = "") -> Path:
    """A minimal installed distribution (dist-info only, plus an optional module) on ``site``."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[memory_orchestrator]\n{entry_points}\n")
    if module:
        (site / f"{name.replace('-', '_')}.py").write_text(module)
    return site


def test_a_plugin_that_cannot_load_is_named(tmp_path: Path) -> None:
    site = fake_distribution(tmp_path / "site", "broken-plugin", "broken = no_such_module:plugin")
    done = run(site, tmp_path, "plugins")
    assert done.returncode == 6
    assert done.stderr.startswith("error: plugin 'broken' (no_such_module:plugin) failed to load")


def test_a_backend_name_taken_by_another_distribution_names_both_plugins(tmp_path: Path) -> None:
    module = (
        "from memory_orchestrator.plugins import hookimpl\n"
        "class Plugin:\n"
        "    @hookimpl\n"
        "    def register_backends(self, register):\n"
        "        register('sqlite', lambda options: None)\n"
        "plugin = Plugin()\n"
    )
    site = fake_distribution(tmp_path / "site", "squatter", "squatter = squatter:plugin", module)
    done = run(site, tmp_path, "plugins")
    assert done.returncode == 6
    assert "backend name 'sqlite' is registered twice" in done.stderr
    assert "'sqlite'" in done.stderr and "'squatter'" in done.stderr


def test_the_sample_plugin_imports_only_what_a_plugin_may() -> None:
    allowed = {"memory_orchestrator.ports", "memory_orchestrator.plugins"}
    for source in (SAMPLE / "orchestrator_sample_plugin").glob("*.py"):
        tree = ast.parse(source.read_text())
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        modules |= {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        ours = {module for module in modules if module.startswith("memory_orchestrator")}
        assert ours <= allowed, (source.name, ours - allowed)


def test_a_misspelt_hook_names_the_distribution_and_the_hook_and_plugins_still_lists(tmp_path: Path) -> None:
    module = (
        "from memory_orchestrator.plugins import hookimpl\n"
        "class Plugin:\n"
        "    @hookimpl\n"
        "    def register_backend(self, register):\n"
        "        register('typo', lambda options: None)\n"
        "plugin = Plugin()\n"
    )
    site = fake_distribution(tmp_path / "site", "typo-plugin", "typo = typo_plugin:plugin", module)
    listed = run(site, tmp_path, "plugins", "--json")
    assert listed.returncode == 6
    names = {plugin["name"]: plugin for plugin in json.loads(listed.stdout)["plugins"]}
    assert {"sqlite", "memory", "typo"} <= set(names)
    assert names["typo"]["distribution"] == "typo-plugin"
    for done in (listed, run(site, tmp_path, "recall", "anything")):
        assert done.returncode == 6
        assert "distribution 'typo-plugin'" in done.stderr
        assert "'register_backend', which is not a hook" in done.stderr
        assert "did you mean 'register_backends'" in done.stderr
        assert " at 0x" not in done.stderr


@pytest.mark.slow
def test_the_readme_plugin_example_builds_from_a_src_layout_and_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    code = next(b for b in re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M) if "MyPlugin" in b)
    toml = next(b for b in re.findall(r"^```toml\n(.*?)^```", readme, re.S | re.M) if "my_plugin:plugin" in b)
    project = tmp_path / "my-plugin"
    (project / "src" / "my_plugin").mkdir(parents=True)
    (project / "src" / "my_plugin" / "__init__.py").write_text(code)
    (project / "pyproject.toml").write_text(toml)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(project)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    listed = {plugin["name"]: plugin for plugin in run_json(site, tmp_path, "plugins")["plugins"]}
    assert listed["mine"]["distribution"] == "my-plugin"
    assert listed["mine"]["backends"] == ["mine"]
    assert listed["mine"]["scorers"] == ["pinned"]
