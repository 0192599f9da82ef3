"""Finding the ``mnemon`` binary and probing what it can do.

Order: ``$MNEMON_BIN`` (a path; a missing or wrong binary there is an error, never skipped), the
configured name or path (``mnemon`` on ``PATH`` by default), then ``$(go env GOPATH)/bin/mnemon``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from memory_orchestrator.ports import BackendUnavailable, PluginError

ENV_VARIABLE = "MNEMON_BIN"
#: The release this adapter is tested with; README's install line names the same one.
PINNED_VERSION = "v0.1.14"
INSTALL_HINT = f"go install github.com/mnemon-dev/mnemon@{PINNED_VERSION}"
_COMMAND_LINE = re.compile(r"^\s{2}([a-z][a-z-]*)\s{2,}", re.MULTILINE)
_VERSION = re.compile(r"version\s+(\S+)")


@dataclass(frozen=True, slots=True)
class BinaryInfo:
    """A working Mnemon binary: its path, version string and top-level commands."""

    path: str
    version: str
    commands: frozenset[str]

    @property
    def has_mcp_server(self) -> bool:
        """True for releases with ``mnemon mcp serve`` (not tested here yet: no such binary)."""
        return "mcp" in self.commands


def _go_bin() -> Path | None:
    gopath = os.environ.get("GOPATH")
    if not gopath and shutil.which("go"):
        try:
            gopath = subprocess.run(
                ["go", "env", "GOPATH"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            gopath = ""
    gopath = gopath or str(Path.home() / "go")
    candidate = Path(gopath.split(os.pathsep)[0]) / "bin" / "mnemon"
    return candidate if candidate.is_file() else None


def locate(configured: str = "mnemon") -> str:
    """The path of the binary to use; ``PluginError`` with install instructions when there is none."""
    explicit = os.environ.get(ENV_VARIABLE, "").strip()
    if explicit:
        if not Path(explicit).is_file() or not os.access(explicit, os.X_OK):
            raise PluginError(f"{ENV_VARIABLE}={explicit} is not an executable file")
        return explicit
    found = shutil.which(configured) if configured else None
    if found:
        return found
    if configured and os.sep in configured and Path(configured).is_file():
        return configured
    go_bin = _go_bin()
    if go_bin is not None:
        return str(go_bin)
    raise PluginError(
        f"the mnemon binary was not found (set {ENV_VARIABLE}, put it on PATH, or run `{INSTALL_HINT}`)"
    )


def probe(path: str, timeout_s: float = 10.0) -> BinaryInfo:
    """Run ``--version`` and ``--help``; ``PluginError`` when the binary is not Mnemon."""
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        usage = subprocess.run(
            [path, "--help"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BackendUnavailable(
            f"{path} --version did not answer in {timeout_s:g} s", backend="mnemon"
        ) from exc
    except OSError as exc:
        raise PluginError(f"cannot run {path}: {exc}") from exc
    commands = frozenset(_COMMAND_LINE.findall(usage.stdout))
    if version.returncode != 0 or not {"remember", "recall", "link"} <= commands:
        raise PluginError(
            f"{path} is not a Mnemon binary (expected remember/recall/link commands; see `{INSTALL_HINT}`)"
        )
    match = _VERSION.search(version.stdout)
    return BinaryInfo(path=path, version=match.group(1) if match else "unknown", commands=commands)
