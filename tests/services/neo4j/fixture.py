"""Session fixture ``neo4j_service``: a real Neo4j 5.26 for the contract and integration tests.

Where the server comes from, first match wins:

1. ``NEO4J_URI`` (with optional ``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``): an existing server.
2. A Docker engine that answers: testcontainers' Neo4j module (``neo4j:5.26``).
3. Java 17 + Maven: our small embedded launcher in this folder (``pom.xml`` + ``Neo4jLauncher.java``),
   built once into ``target/`` and started on a free port with auth off and data in a temp dir.

When none is possible the tests using it are skipped (or fail when ``CI=true``) with a reason that says
how to enable them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.processes import free_port

logger = logging.getLogger(__name__)

LAUNCHER_DIR = Path(__file__).resolve().parent
LAUNCHER_CLASS = "memory_orchestrator.testing.Neo4jLauncher"
LAUNCHER_SOURCE = LAUNCHER_DIR / "src/main/java/memory_orchestrator/testing/Neo4jLauncher.java"
COMPILED_CLASS = LAUNCHER_DIR / "target/classes/memory_orchestrator/testing/Neo4jLauncher.class"
CLASSPATH_FILE = LAUNCHER_DIR / "target/classpath.txt"
READY_TIMEOUT_S = 180.0
HOW_TO_ENABLE = (
    "install Java 17 + Maven 3.8 (the launcher in tests/services/neo4j builds itself), "
    "or set NEO4J_URI (and NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE) to a running Neo4j 5.26"
)


@dataclass(frozen=True)
class Neo4jService:
    """Where the test Neo4j listens and how it was obtained."""

    uri: str
    user: str = "neo4j"
    password: str = ""
    database: str = "neo4j"
    origin: str = "env"
    startup_seconds: float = 0.0

    def backend_options(self, store: str) -> dict[str, object]:
        """Options for ``adapters.neo4j.create_backend`` pointing at this server and ``store``."""
        return {
            "uri": self.uri,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "store": store,
        }


class LauncherUnavailable(Exception):
    """The embedded launcher cannot be built or started here."""


def wait_for_bolt(uri: str, user: str, password: str, timeout_s: float) -> None:
    """Poll until the driver can talk to ``uri`` (or raise the last error after ``timeout_s``)."""
    from neo4j import GraphDatabase

    deadline = time.monotonic() + timeout_s
    auth = (user, password) if password else None
    while True:
        try:
            with GraphDatabase.driver(uri, auth=auth) as driver:
                driver.verify_connectivity()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def launcher_is_built() -> bool:
    """True when the compiled launcher and its classpath are newer than the sources."""
    if not (COMPILED_CLASS.exists() and CLASSPATH_FILE.exists()):
        return False
    # Maven leaves an unchanged classpath file alone, so each output is compared with its own input.
    pom = (LAUNCHER_DIR / "pom.xml").stat().st_mtime
    return (
        COMPILED_CLASS.stat().st_mtime >= max(LAUNCHER_SOURCE.stat().st_mtime, pom)
        and CLASSPATH_FILE.stat().st_mtime >= pom
    )


def build_launcher(mvn: str) -> None:
    """Compile the launcher and write its classpath, offline first (cached ~/.m2), then online."""
    goals = ["-B", "-q", "compile", "dependency:build-classpath"]
    for extra in (["-o"], []):
        done = subprocess.run(
            [mvn, *extra, *goals], cwd=LAUNCHER_DIR, capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode == 0 and launcher_is_built():
            return
    raise LauncherUnavailable(f"maven build failed: {(done.stdout + done.stderr)[-2000:]}")


class LauncherProcess:
    """The running embedded Neo4j; it stops when its stdin closes."""

    def __init__(self, java: str, port: int) -> None:
        classpath = f"{LAUNCHER_DIR / 'target/classes'}{os.pathsep}{CLASSPATH_FILE.read_text().strip()}"
        self.output: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [java, "-Xmx1g", "-XX:+UseSerialGC", "-cp", classpath, LAUNCHER_CLASS, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read_output, daemon=True).start()

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip())
            if line.startswith("NEO4J READY"):
                self.ready.set()

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the launcher printed its ready line; raise with its output otherwise."""
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.output[-30:])
                self.stop()
                raise LauncherUnavailable(f"Neo4j launcher did not become ready:\n{tail}")

    def stop(self) -> None:
        """Close stdin (clean shutdown), then escalate if it lingers."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def service_from_env() -> Neo4jService | None:
    """The server named by ``NEO4J_URI``, if set."""
    uri = os.environ.get("NEO4J_URI")
    if not uri:
        return None
    return Neo4jService(
        uri=uri,
        user=os.environ.get("NEO4J_USER", "neo4j"),
        password=os.environ.get("NEO4J_PASSWORD", ""),
        database=os.environ.get("NEO4J_DATABASE", "neo4j"),
        origin="env",
    )


def docker_answers() -> bool:
    """True when a Docker engine responds to a ping."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextlib.contextmanager
def container_service() -> Iterator[Neo4jService]:
    """A ``neo4j:5.26`` container via testcontainers."""
    from testcontainers.community.neo4j import Neo4jContainer

    started = time.monotonic()
    with Neo4jContainer("neo4j:5.26") as container:
        yield Neo4jService(
            uri=container.get_connection_url(),
            user=container.username,
            password=container.password,
            origin="testcontainers",
            startup_seconds=time.monotonic() - started,
        )


@contextlib.contextmanager
def launcher_service() -> Iterator[Neo4jService]:
    """Our embedded launcher: build if needed, start on a free port, wait for Bolt."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if java is None:
        raise LauncherUnavailable("no `java` on PATH")
    if not launcher_is_built():
        if mvn is None:
            raise LauncherUnavailable("the launcher is not built and there is no `mvn` on PATH")
        build_launcher(mvn)
    port = free_port()
    started = time.monotonic()
    launcher = LauncherProcess(java, port)
    try:
        launcher.wait_ready(READY_TIMEOUT_S)
        uri = f"bolt://127.0.0.1:{port}"
        wait_for_bolt(uri, "neo4j", "", timeout_s=60)
        yield Neo4jService(uri=uri, origin="launcher", startup_seconds=time.monotonic() - started)
    finally:
        launcher.stop()


def unavailable(reason: str) -> None:
    """Fail on CI, skip elsewhere, always saying how to get a Neo4j."""
    message = f"Neo4j is not available: {reason}; to enable these tests {HOW_TO_ENABLE}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def neo4j_service() -> Iterator[Neo4jService]:
    """A reachable Neo4j 5.26 for the whole session (see the module docstring for the order)."""
    from_env = service_from_env()
    if from_env is not None:
        yield from_env
        return
    source = container_service if docker_answers() else launcher_service
    try:
        with source() as service:
            logger.warning(
                "test Neo4j (%s) ready at %s in %.1f s", service.origin, service.uri, service.startup_seconds
            )
            yield service
    except LauncherUnavailable as exc:
        unavailable(str(exc))
