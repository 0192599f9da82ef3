"""The ``neo4j_service`` fixture's decisions (no server needed): where a Neo4j comes from, and what
happens when there is none."""

from __future__ import annotations

import pytest

from services.neo4j import fixture


def test_neo4j_uri_from_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", "neo4j+s://graph.example:7687")
    monkeypatch.setenv("NEO4J_USER", "agent")
    monkeypatch.setenv("NEO4J_PASSWORD", "s3cret")
    monkeypatch.delenv("NEO4J_DATABASE", raising=False)

    service = fixture.service_from_env()

    assert service is not None
    assert (service.uri, service.user, service.password, service.database) == (
        "neo4j+s://graph.example:7687",
        "agent",
        "s3cret",
        "neo4j",
    )
    assert service.backend_options("alpha")["store"] == "alpha"


def test_without_neo4j_uri_the_environment_names_no_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEO4J_URI", raising=False)

    assert fixture.service_from_env() is None


def test_no_neo4j_skips_locally_with_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)

    with pytest.raises(pytest.skip.Exception, match="NEO4J_URI") as skipped:
        fixture.unavailable("no `java` on PATH")
    assert "Java 17" in str(skipped.value)


def test_no_neo4j_fails_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")

    with pytest.raises(pytest.fail.Exception, match="no `java` on PATH"):
        fixture.unavailable("no `java` on PATH")


def test_free_port_is_bindable() -> None:
    import socket

    port = fixture.free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", port))
    assert 1024 <= port <= 65535
