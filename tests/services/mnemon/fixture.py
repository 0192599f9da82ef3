"""Real Mnemon for the tests: the binary is found, never built, and every test gets its own data folder.

Where the binary comes from (the same order as the adapter): ``$MNEMON_BIN``, then ``mnemon`` on PATH,
then ``$(go env GOPATH)/bin``. None: the Mnemon tests skip with instructions. ``$MNEMON_BIN`` naming a
missing or wrong binary fails them. The summary of a run prints one line saying how many real-Mnemon
tests ran.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_orchestrator.adapters.mnemon import ENV_VARIABLE, INSTALL_HINT, BinaryInfo, locate, probe
from memory_orchestrator.ports import PluginError

#: Mnemon's embeddings are turned off in tests: recall is then deterministic and needs no model server.
NO_EMBEDDINGS = "http://127.0.0.1:1"

_outcomes: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}
_skip_reasons: set[str] = set()
_users: set[str] = set()


def find_binary() -> BinaryInfo:
    """The binary to test, or a skip/failure as documented above."""
    explicit = os.environ.get(ENV_VARIABLE, "").strip()
    try:
        return probe(locate())
    except PluginError as exc:
        if explicit:
            pytest.fail(f"{ENV_VARIABLE} is set but unusable: {exc}", pytrace=False)
        reason = f"no Mnemon binary ({exc}); install one with `{INSTALL_HINT}` or set {ENV_VARIABLE}"
        _skip_reasons.add(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def mnemon_binary() -> BinaryInfo:
    """The probed real binary (session-wide)."""
    return find_binary()


@pytest.fixture
def mnemon_env(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """A fresh ``MNEMON_DATA_DIR`` for this test and embeddings off; returns the variables."""
    _users.add(request.node.nodeid)
    mnemon_binary: BinaryInfo = request.getfixturevalue("mnemon_binary")
    data_dir = tmp_path / "mnemon-data"
    data_dir.mkdir()
    variables = {"MNEMON_DATA_DIR": str(data_dir), "MNEMON_EMBED_ENDPOINT": NO_EMBEDDINGS}
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MNEMON_STORE", raising=False)
    yield {**variables, ENV_VARIABLE: mnemon_binary.path}


def mnemon_options(env: dict[str, str], store: str = "default", **extra: object) -> dict[str, object]:
    """Backend options for a test store in the test's data folder."""
    return {
        "binary": env[ENV_VARIABLE],
        "data_dir": env["MNEMON_DATA_DIR"],
        "store": store,
        "create": True,
        "environment": {"MNEMON_EMBED_ENDPOINT": NO_EMBEDDINGS},
        **extra,
    }


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count the outcome of every test that needed the real binary (it asked for ``mnemon_env``)."""
    if report.nodeid not in _users:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One visible line: how many real-Mnemon tests ran, and why any were skipped."""
    ran = _outcomes["passed"] + _outcomes["failed"]
    line = (
        f"real Mnemon: {ran} tests ran ({_outcomes['passed']} passed, {_outcomes['failed']} failed), "
        f"{_outcomes['skipped']} skipped"
    )
    if _skip_reasons:
        line += f" -- {sorted(_skip_reasons)[0]}"
    terminalreporter.write_line(line, bold=True)
