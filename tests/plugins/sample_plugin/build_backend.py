"""A minimal PEP 517 backend for the sample plugin: packs the package and the entry points in a wheel.

Standard library only. It reads name, version, dependencies and entry points from pyproject.toml.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PACKAGE = "orchestrator_sample_plugin"


def _project() -> dict[str, Any]:
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _dist_info(project: dict[str, Any]) -> str:
    return f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"


def _metadata_files(project: dict[str, Any]) -> dict[str, str]:
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        *(f"Requires-Dist: {dependency}" for dependency in project.get("dependencies", [])),
    ]
    entry_points = []
    for group, entries in project.get("entry-points", {}).items():
        entry_points.append(f"[{group}]")
        entry_points.extend(f"{name} = {target}" for name, target in entries.items())
    wheel = "Wheel-Version: 1.0\nGenerator: sample build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return {
        "METADATA": "\n".join(metadata) + "\n",
        "entry_points.txt": "\n".join(entry_points) + "\n",
        "WHEEL": wheel,
    }


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    """Nothing beyond the standard library."""
    return []


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    """Write ``<name>-<version>-py3-none-any.whl`` into ``wheel_directory``; return its file name."""
    project = _project()
    dist_info = _dist_info(project)
    filename = f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"
    files: dict[str, bytes] = {}
    for source in sorted((HERE / PACKAGE).rglob("*.py")):
        files[source.relative_to(HERE).as_posix()] = source.read_bytes()
    for name, text in _metadata_files(project).items():
        files[f"{dist_info}/{name}"] = text.encode("utf-8")
    record = [_record_line(name, data) for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode("utf-8")
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return filename
