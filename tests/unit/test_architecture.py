"""The dependency rule of DESIGN.md, checked on every import statement of every module (via ast).

ports/domain: standard library only (domain may use ports); adapters: their own package, ports and
third-party drivers, never domain, plugins, entrypoints, evaluation or another adapter; nothing
outside entrypoints imports entrypoints.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memory_orchestrator

PACKAGE = "memory_orchestrator"
ROOT = Path(memory_orchestrator.__file__).parent
STDLIB = frozenset(sys.stdlib_module_names)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """Every module an import statement in ``path`` names, absolute, with its line number."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    yield from imports_in(path.read_text(encoding="utf-8"), package)


def imports_in(text: str, package: str) -> Iterator[tuple[int, str]]:
    """Imports of module source ``text`` living in ``package`` (relative ones made absolute)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            # `from memory_orchestrator import domain` names a layer through the imported name.
            if target == PACKAGE:
                for alias in node.names:
                    yield node.lineno, f"{PACKAGE}.{alias.name}"


def layer_of(module: str) -> tuple[str, str]:
    """(layer, sub-package) of a module of ours, e.g. ("adapters", "sqlite")."""
    parts = module.split(".")
    layer = parts[1] if len(parts) > 1 else ""
    sub = parts[2] if len(parts) > 2 else ""
    return layer, sub


def violation(source: str, target: str) -> str | None:
    """Why importing ``target`` from module ``source`` breaks the rule, or None."""
    top = target.split(".")[0]
    ours = top == PACKAGE
    layer, sub = layer_of(source)
    target_layer, target_sub = layer_of(target) if ours else ("", "")
    if ours and target_layer == "entrypoints" and layer != "entrypoints":
        return "nothing outside entrypoints may import entrypoints"
    if layer == "ports" and not (top in STDLIB or (ours and target_layer == "ports")):
        return "ports may import only the standard library and ports"
    if layer == "domain" and not (top in STDLIB or (ours and target_layer in {"ports", "domain"})):
        return "domain may import only the standard library and ports"
    if layer == "adapters" and ours:
        if target_layer in {"domain", "plugins", "entrypoints", "evaluation"}:
            return f"adapters must not import {target_layer}"
        if target_layer == "adapters" and target_sub and sub and target_sub != sub:
            return "an adapter must not import another adapter"
    if layer == "plugins" and ours and target_layer in {"entrypoints", "evaluation"}:
        return f"plugins must not import {target_layer}"
    return None


def all_modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_the_walk_sees_every_layer() -> None:
    layers = {layer_of(module_name(path))[0] for path in all_modules()}
    assert {"ports", "domain", "adapters", "plugins", "entrypoints"} <= layers


@pytest.mark.parametrize("path", all_modules(), ids=lambda path: module_name(path))
def test_module_respects_the_dependency_rule(path: Path) -> None:
    source = module_name(path)
    problems = [
        f"{path.relative_to(ROOT.parent)}:{line}: imports {target}: {reason}"
        for line, target in imports_of(path)
        if (reason := violation(source, target))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "target", "broken"),
    [
        ("memory_orchestrator.ports.records", "pydantic", True),
        ("memory_orchestrator.ports.records", "dataclasses", False),
        ("memory_orchestrator.domain.ranking", "memory_orchestrator.ports", False),
        ("memory_orchestrator.domain.ranking", "memory_orchestrator.adapters.memory", True),
        ("memory_orchestrator.domain.ranking", "numpy", True),
        ("memory_orchestrator.adapters.sqlite.backend", "aiosqlite", False),
        ("memory_orchestrator.adapters.sqlite.backend", "memory_orchestrator.adapters.sqlite.schema", False),
        ("memory_orchestrator.adapters.sqlite.backend", "memory_orchestrator.adapters.memory", True),
        ("memory_orchestrator.adapters.neo4j.backend", "memory_orchestrator.domain.config", True),
        ("memory_orchestrator.plugins.builtin", "memory_orchestrator.entrypoints.cli.app", True),
        ("memory_orchestrator.evaluation.runner", "memory_orchestrator.entrypoints.config.bootstrap", True),
        ("memory_orchestrator.entrypoints.cli.app", "memory_orchestrator.evaluation.datasets", False),
    ],
)
def test_rule_judges_known_cases(source: str, target: str, broken: bool) -> None:
    assert (violation(source, target) is not None) is broken


def test_relative_and_nested_imports_are_resolved() -> None:
    # A relative or function-level import must be judged like the absolute one it stands for.
    text = "from ..adapters import memory\nfrom . import planner\ndef f():\n    import neo4j\n"
    names = [target for _, target in imports_in(text, "memory_orchestrator.domain")]
    assert names == ["memory_orchestrator.adapters", "memory_orchestrator.domain", "neo4j"]
    assert violation("memory_orchestrator.domain.x", names[0]) is not None
