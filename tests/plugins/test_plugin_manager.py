"""The plugin manager: entry-point discovery, duplicate names, allow-list, hook docs, built-in scorer."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.plugins import hookimpl, hookspecs, scorers
from memory_orchestrator.plugins.manager import PluginManager, load_plugins
from memory_orchestrator.plugins.scorers import TagMatchScorer
from memory_orchestrator.ports import (
    Intent,
    InvalidRequest,
    MemoryBackend,
    MemoryRecord,
    PluginError,
    ScoringContext,
)

NOW = datetime(2026, 5, 1, tzinfo=UTC)


class ExtraBackendPlugin:
    """An in-process plugin registering a backend under a chosen name."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def register_backends(self, register: Any) -> None:
        register(self.name, lambda options: InMemoryBackend())


class ScorerPlugin:
    @hookimpl
    def register_scorers(self, register: Any) -> None:
        register("tag_match", lambda options: TagMatchScorer())


class MisspeltPlugin:
    @hookimpl
    def register_backend(self, register: Any) -> None:  # missing "s": not a hook of ours
        raise AssertionError("never called")


def record(tags: tuple[str, ...] = ()) -> MemoryRecord:
    return MemoryRecord(id="m1", content="text", created_at=NOW, updated_at=NOW, tags=tags)


def context(query: str, entities: tuple[str, ...] = ()) -> ScoringContext:
    return ScoringContext(query=query, intent=Intent.GENERAL, entities=entities, now=NOW)


def test_builtins_are_discovered_through_entry_points() -> None:
    manager = load_plugins()
    infos = {info.name: info for info in manager.plugins()}
    assert {"memory", "sqlite", "neo4j", "scorers"} <= set(infos)
    assert all(infos[name].builtin for name in ("memory", "sqlite", "neo4j", "scorers"))
    assert infos["scorers"].distribution == "mnemon-memory-orchestrator"
    owners = {name: reg.plugin for name, reg in manager.backends.items()}
    assert owners.items() >= {("memory", "memory"), ("sqlite", "sqlite"), ("neo4j", "neo4j")}
    assert manager.scorers["tag_match"].plugin == "scorers"


def test_registered_factory_builds_an_unopened_backend() -> None:
    backend = load_plugins().create_backend("memory", {})
    assert isinstance(backend, MemoryBackend)
    assert backend.name == "memory"


def test_unknown_backend_lists_the_available_ones() -> None:
    with pytest.raises(PluginError, match=r"backend 'couchdb' is not registered .*available: .*memory"):
        load_plugins().create_backend("couchdb", {})


def test_duplicate_backend_name_names_both_plugins() -> None:
    manager = load_plugins()
    manager.register(ExtraBackendPlugin("sqlite"), name="impostor")
    try:
        with pytest.raises(PluginError) as caught:
            _ = manager.backends
        message = str(caught.value)
        assert "'sqlite'" in message
        assert "'impostor'" in message
        assert "plugin 'sqlite'" in message
    finally:
        manager.unregister("impostor")
    assert manager.backends["sqlite"].plugin == "sqlite"


def test_duplicate_scorer_name_names_both_plugins() -> None:
    manager = load_plugins()
    manager.register(ScorerPlugin(), name="copycat")
    with pytest.raises(PluginError, match=r"'tag_match'.*'scorers'.*'copycat'"):
        _ = manager.scorers


def test_in_process_plugin_adds_a_backend_and_can_be_removed() -> None:
    manager = load_plugins()
    manager.register(ExtraBackendPlugin("scratch"), name="scratch-plugin")
    try:
        assert manager.backends["scratch"].plugin == "scratch-plugin"
        assert isinstance(manager.create_backend("scratch", {}), MemoryBackend)
    finally:
        manager.unregister("scratch-plugin")
    assert "scratch" not in manager.backends


def test_check_pending_catches_a_misspelt_hook() -> None:
    manager = PluginManager()
    manager.register(MisspeltPlugin(), name="typo")
    with pytest.raises(PluginError, match="register_backend"):
        manager.check_pending()


def test_allow_list_naming_a_missing_plugin_is_an_error() -> None:
    with pytest.raises(PluginError, match="not installed: ghost"):
        load_plugins(allow=["ghost"])


def test_allow_list_keeps_builtins() -> None:
    manager = load_plugins(allow=[])
    assert {"memory", "sqlite", "neo4j"} <= set(manager.backends)


def test_factory_error_becomes_a_plugin_error_naming_the_plugin() -> None:
    class Broken:
        @hookimpl
        def register_backends(self, register: Any) -> None:
            def explode(options: Mapping[str, Any]) -> MemoryBackend:
                raise RuntimeError("driver missing")

            register("broken", explode)

    manager = PluginManager()
    manager.register(Broken(), name="broken-plugin")
    with pytest.raises(
        PluginError, match=r"'broken-plugin' could not build backend 'broken': driver missing"
    ):
        manager.create_backend("broken", {})


def test_every_hookspec_documents_its_arguments() -> None:
    specs = [
        member
        for name, member in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("register_")
    ]
    assert {spec.__name__ for spec in specs} == {"register_backends", "register_scorers", "register_channels"}
    for spec in specs:
        doc = inspect.getdoc(spec) or ""
        assert doc, f"{spec.__name__} has no docstring"
        for argument in inspect.signature(spec).parameters:
            assert argument in doc, f"{spec.__name__} does not document {argument!r}"


def test_tag_match_rewards_tags_named_in_the_query() -> None:
    scorer = TagMatchScorer()
    tagged = record(tags=("vendor", "load-test", "infra"))
    assert scorer.score(context("who is the vendor contact?"), tagged, {}) == 0.5
    assert scorer.score(context("vendor infra costs"), tagged, {}) == 0.75
    assert scorer.score(context("results of the load test"), tagged, {}) == 0.0
    assert scorer.score(context("results of the load-test"), tagged, {}) == 0.5
    assert scorer.score(context("anything", entities=("INFRA",)), tagged, {}) == 0.5
    assert scorer.score(context("vendor"), record(), {}) == 0.0


def test_tag_match_counts_each_tag_once_and_keeps_its_verdicts_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scorers._Question, "MOST", 2)
    scorer, asked = TagMatchScorer(), context("vendor infra costs")
    for _ in range(3):  # verdicts remembered, then forgotten past the bound: the same answers
        assert scorer.score(asked, record(tags=("vendor", "vendor", "ops")), {}) == 0.5
        assert scorer.score(asked, record(tags=("infra", "cost", "vendor")), {}) == 0.75
    assert len(scorers._question(asked.query, asked.task, asked.entities).verdicts) <= 2


def test_tag_match_weight_is_validated() -> None:
    manager = load_plugins()
    assert manager.create_scorer("tag_match", {"weight": 0.4}).weight == 0.4
    with pytest.raises(InvalidRequest, match="weight must be a number between 0 and 5"):
        manager.create_scorer("tag_match", {"weight": "heavy"})
