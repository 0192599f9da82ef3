"""The composition root behind the CLI: settings -> plugins -> backend -> scorers -> traces -> Orchestrator,
and the retry policy wrapped around the backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.entrypoints.config.bootstrap import (
    build_backend,
    build_plugins,
    build_scorers,
    open_runtime,
)
from memory_orchestrator.entrypoints.config.settings import load_settings
from memory_orchestrator.ports import BackendRejected, BackendUnavailable, NewMemory, PluginError, RecallQuery
from memory_orchestrator.ports.retrying import RetryingBackend, RetryPolicy

pytestmark = pytest.mark.usefixtures("isolated")


@pytest.mark.anyio
async def test_open_runtime_wires_a_working_pipeline_with_persistent_traces(tmp_path: Path) -> None:
    settings = load_settings()
    async with open_runtime(settings) as runtime:
        assert runtime.backend.name == "sqlite"
        assert [scorer.name for scorer in runtime.scorers] == ["tag_match"]
        await runtime.backend.remember(NewMemory("Atlas moved to Kubernetes", entities=("Atlas",)))
        result = await runtime.orchestrator.search(SearchRequest(query="Kubernetes"))
        assert [item.content for item in result.items] == ["Atlas moved to Kubernetes"]
        assert "tag_match" in result.items[0].signals
    assert (tmp_path / "data" / "memories.db").is_file()
    assert (tmp_path / "data" / "traces.db").is_file()
    async with open_runtime(load_settings()) as again:
        document = await again.orchestrator.trace(result.trace_id)
    assert document["trace_id"] == result.trace_id


@pytest.mark.anyio
async def test_a_cached_read_sees_a_write_made_by_another_runtime_on_the_same_store() -> None:
    # two runtimes on one SQLite file stand for two server processes (HTTP workers) or a server and
    # the CLI: a write through one must reach the next identical read through the other
    settings = load_settings()
    async with open_runtime(settings) as server, open_runtime(settings) as other:
        await server.backend.remember(NewMemory("Atlas moved to Kubernetes"))
        first = await server.orchestrator.search(SearchRequest(query="Atlas"))
        again = await server.orchestrator.search(SearchRequest(query="Atlas"))
        assert "cache" in (await server.orchestrator.trace(again.trace_id))["stages"]
        await other.backend.remember(NewMemory("Atlas moved back to Nomad"))
        after = await server.orchestrator.search(SearchRequest(query="Atlas"))
    assert len(first.items) == 1
    assert sorted(item.content for item in after.items) == [
        "Atlas moved back to Nomad",
        "Atlas moved to Kubernetes",
    ]


@pytest.mark.anyio
async def test_store_option_opens_another_namespace() -> None:
    settings = load_settings()
    async with open_runtime(settings, store="team-a") as runtime:
        await runtime.backend.remember(NewMemory("only in team-a"))
    async with open_runtime(settings) as runtime:
        assert await runtime.backend.recall(RecallQuery("team")) == []


def test_scorers_can_be_chosen_and_configured(tmp_path: Path) -> None:
    config = tmp_path / "scorers.toml"
    config.write_text("[scorers]\nenabled = []\n")
    settings = load_settings(config)
    assert build_scorers(settings, build_plugins(settings)) == ()
    config.write_text("[scorers.options.tag_match]\nweight = 0.5\n")
    settings = load_settings(config)
    (scorer,) = build_scorers(settings, build_plugins(settings))
    assert scorer.weight == 0.5
    config.write_text("[scorers.options.typo_scorer]\nweight = 0.5\n")
    settings = load_settings(config)
    with pytest.raises(PluginError, match=r"unregistered scorer.*typo_scorer"):
        build_scorers(settings, build_plugins(settings))


def test_retry_policy_wraps_the_backend_only_when_asked(tmp_path: Path) -> None:
    settings = load_settings()
    assert isinstance(build_backend(settings, build_plugins(settings)), RetryingBackend)
    config = tmp_path / "noretry.toml"
    config.write_text("[retry]\nattempts = 1\n")
    settings = load_settings(config)
    assert not isinstance(build_backend(settings, build_plugins(settings)), RetryingBackend)


class RecordedSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.mark.anyio
async def test_reads_are_retried_with_backoff_then_succeed() -> None:
    inner, sleep = InMemoryBackend(), RecordedSleep()
    backend = RetryingBackend(inner, RetryPolicy(attempts=3, backoff_s=0.1, max_backoff_s=1.0), sleep=sleep)
    async with backend:
        written = await backend.remember(NewMemory("the ledger export is slow"))
        inner.fail_next("search")
        inner.fail_next("search")
        hits = await backend.search("ledger")
    assert [hit.record.id for hit in hits] == [written.id]
    assert sleep.delays == [0.1, 0.2]


@pytest.mark.anyio
async def test_retries_give_up_after_the_attempts_and_never_retry_rejections() -> None:
    inner, sleep = InMemoryBackend(), RecordedSleep()
    backend = RetryingBackend(inner, RetryPolicy(attempts=2, backoff_s=0.1), sleep=sleep)
    async with backend:
        inner.fail_always("get")
        with pytest.raises(BackendUnavailable):
            await backend.get(["x"])
        assert sleep.delays == [0.1]
        assert inner.called("get") == 2
        inner.heal()
        inner.fail_next("recall", BackendRejected("bad query", backend="memory"))
        with pytest.raises(BackendRejected):
            await backend.recall(RecallQuery("x"))
    assert sleep.delays == [0.1]


@pytest.mark.anyio
async def test_writes_are_not_retried() -> None:
    inner, sleep = InMemoryBackend(), RecordedSleep()
    backend = RetryingBackend(inner, RetryPolicy(attempts=5), sleep=sleep)
    async with backend:
        inner.fail_next("remember")
        with pytest.raises(BackendUnavailable):
            await backend.remember(NewMemory("written once or not at all"))
        assert await backend.recent() == []
    assert inner.called("remember") == 1
    assert sleep.delays == []


@pytest.mark.parametrize("name", ["memory", "sqlite", "neo4j"])
def test_default_options_of_every_builtin_backend_are_accepted(name: str) -> None:
    # Settings and adapters agree on option names: building (no I/O) must not raise.
    settings = load_settings()
    backend = build_backend(settings, build_plugins(settings), name=name)
    assert backend.name == name
