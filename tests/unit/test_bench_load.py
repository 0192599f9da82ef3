"""The bench's HTTP load generator against a stub server on loopback: whole answers read from one
kept-alive connection (a sized body or chunks), a call counted as failed for an HTTP error, a JSON-RPC
error or a failed tool call, and a closed or garbled connection counted and reopened."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from memory_orchestrator.evaluation.interleave import interleaved
from memory_orchestrator.evaluation.transports import bare_http, load
from memory_orchestrator.ports import BackendUnavailable

OK = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}'
TOOL_ERROR = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}'
RPC_ERROR = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no \\"result\\" here"}}'


def _sized(body: bytes, status: str = "200 OK", *, close: bool = False) -> bytes:
    extra = "Connection: close\r\n" if close else ""
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _chunked(body: bytes) -> bytes:
    middle = len(body) // 2
    parts = [body[:middle], body[middle:]]
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in parts)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


@asynccontextmanager
async def stub(answers: list[bytes | None]) -> AsyncIterator[tuple[str, list[dict[str, object]], list[int]]]:
    """A server answering each request with the next of ``answers`` (``None``: close at once); yields
    its address, the requests it read and how many connections it accepted."""
    requests: list[dict[str, object]] = []
    connections = [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        try:
            while answers:
                head = await reader.readuntil(b"\r\n\r\n")
                sized = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length")]
                length = int(sized[0].split(b":")[1])
                requests.append(json.loads(await reader.readexactly(length)))
                answer = answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer or not answer.startswith(b"HTTP/1.1"):
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", requests, connections


@pytest.mark.anyio
async def test_answers_sized_or_chunked_on_one_connection_and_every_kind_of_failure_counted() -> None:
    answers: list[bytes | None] = [
        _sized(OK), _chunked(OK), _sized(TOOL_ERROR), _sized(RPC_ERROR), _sized(OK, "503 Busy"),
        _sized(OK, close=True), _sized(OK), None, _sized(OK), b"SSH-2.0-not-http\r\n\r\n", _sized(OK),
    ]  # fmt: skip
    async with stub(answers) as (base, requests, connections):
        calls = [{"query": "q"}]
        result = await load(base, calls, clients=1, seconds=1.0)
    # 11 answers, then the stub stops answering and the loop's next call fails: at least 11 calls
    assert result["calls"] >= 11
    # failed: the tool error, the JSON-RPC error, the 503, the early close, the garbled answer (and
    # whatever the loop sent after the stub ran out of answers)
    assert result["errors"] == 5 + (result["calls"] - 11)
    assert [request["params"]["name"] for request in requests] == ["memory_search"] * len(requests)  # type: ignore[index]
    assert requests[0]["params"]["arguments"] == {"query": "q"}  # type: ignore[index]
    # a new connection after "Connection: close", after the early close and after the garbled answer
    assert connections[0] >= 4


@pytest.mark.anyio
@pytest.mark.parametrize("failure", [TOOL_ERROR, RPC_ERROR])
async def test_the_bare_sequential_calls_time_answers_and_stop_at_a_failed_one(failure: bytes) -> None:
    calls = [{"query": "a"}, {"query": "b"}, {"query": "c"}]
    async with (
        stub([_sized(OK), _chunked(OK), _sized(OK)]) as (base, requests, connections),
        bare_http(base) as call,
    ):
        times = (await interleaved({"bare": call}, calls, warmup=1))["bare"]
    assert len(times) == 2 and all(ms > 0 for ms in times)  # the first call was the warm-up
    assert [request["params"]["arguments"] for request in requests] == calls  # type: ignore[index]
    assert connections == [1]
    async with stub([_sized(OK), _sized(failure)]) as (base, _, _), bare_http(base) as call:
        with pytest.raises(BackendUnavailable, match="memory_search over HTTP failed"):
            await interleaved({"bare": call}, calls, warmup=0)


@pytest.mark.anyio
async def test_interleaved_calls_make_each_call_on_every_path_the_first_path_moving_on() -> None:
    made: list[tuple[str, int]] = []

    def path(name: str) -> Callable[[int, dict[str, object]], Awaitable[None]]:
        async def call(position: int, _arguments: dict[str, object]) -> None:
            made.append((name, position))

        return call

    times = await interleaved({"a": path("a"), "b": path("b"), "c": path("c")}, [{}] * 4, warmup=1)
    assert made == [
        ("a", 0), ("b", 0), ("c", 0), ("b", 1), ("c", 1), ("a", 1),
        ("c", 2), ("a", 2), ("b", 2), ("a", 3), ("b", 3), ("c", 3),
    ]  # fmt: skip
    assert {name: len(values) for name, values in times.items()} == {"a": 3, "b": 3, "c": 3}
