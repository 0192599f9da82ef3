"""Packaging basics a newcomer's tools look for: licence, classifiers, type information in the wheel."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def project() -> dict[str, object]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"])


def test_the_licence_is_stated_and_shipped() -> None:
    meta = project()
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0" in text


def test_classifiers_say_python_versions_and_typed() -> None:
    classifiers = project()["classifiers"]
    assert isinstance(classifiers, list)
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    # PEP 639: a licence expression replaces licence classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]


def test_the_package_carries_py_typed() -> None:
    assert (ROOT / "src" / "memory_orchestrator" / "py.typed").is_file()


@pytest.mark.slow
def test_the_wheel_holds_py_typed_the_stored_schemas_and_the_licence(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "memory_orchestrator/py.typed" in names
    assert "memory_orchestrator/entrypoints/mcp/published_inputs.json" in names  # read by every serve
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
