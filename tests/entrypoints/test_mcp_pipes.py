"""stdio on the event loop's pipes (``entrypoints/mcp/pipes.py``): line splitting, the descriptors
taken and given back, and the SDK's threaded files where stdin is no pipe."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

from memory_orchestrator import __version__
from memory_orchestrator.entrypoints.mcp.pipes import READ_CHUNK, PipeLines
from memory_orchestrator.evaluation.startup import INITIALIZE, INITIALIZED, orchestrator_command

ORCHESTRATOR = orchestrator_command()


async def _lines(*chunks: bytes) -> list[str]:
    reader = asyncio.StreamReader(limit=READ_CHUNK)
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    return [line async for line in PipeLines(reader)]


@pytest.mark.anyio
async def test_lines_are_split_at_newlines_whatever_the_chunks() -> None:
    long = "x" * (3 * READ_CHUNK + 5)
    assert await _lines(b'{"a": 1}\n{"b"', b": 2}\r\n", long.encode() + b"\n", b"last") == [
        '{"a": 1}\n',
        '{"b": 2}\r\n',
        long + "\n",
        "last",
    ]
    assert await _lines() == []
    assert await _lines(b"\n\n") == ["\n", "\n"]


@pytest.mark.anyio
async def test_bytes_that_are_no_utf8_are_replaced_as_the_sdk_reads_them() -> None:
    assert await _lines("é".encode() + b"\xff\n") == ["é\ufffd\n"]


_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from memory_orchestrator.entrypoints.mcp.pipes import event_loop_stdio

    async def main():
        async with event_loop_stdio() as pipes:
            assert pipes is not None
            lines, writer = pipes
            print("stray print", flush=True)  # fd 1 is stderr while the pipes are taken
            os.write(1, b"stray write\\n")
            async for line in lines:
                await writer.write(str(len(line)) + "\\n")
                await writer.flush()
        assert os.get_blocking(0) and os.get_blocking(1)
        print("after", flush=True)

    asyncio.run(main())
    """
)


def test_the_pipes_are_taken_while_serving_and_given_back_blocking() -> None:
    big = "y" * (5 * READ_CHUNK)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input=f"one\n{big}\nlast".encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["4", str(len(big) + 1), "4", "after"]
    assert done.stderr.decode().splitlines() == ["stray print", "stray write"]


def test_a_file_on_stdin_is_not_taken(tmp_path: Path) -> None:
    script = "import asyncio\nfrom memory_orchestrator.entrypoints.mcp.pipes import event_loop_stdio\n"
    script += "async def main():\n    async with event_loop_stdio() as pipes:\n        print(pipes)\n"
    script += "asyncio.run(main())\n"
    (tmp_path / "in.txt").write_text("hello\n")
    with (tmp_path / "in.txt").open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-c", script], stdin=stdin, capture_output=True, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "None\n"


_CALL = {"jsonrpc": "2.0", "method": "tools/call"}
_WRITE = {**_CALL, "id": 1, "params": {"name": "memory_write", "arguments": {"content": "Pipes carry it"}}}
_SEARCH = {**_CALL, "id": 2, "params": {"name": "memory_search", "arguments": {"query": "pipes carry"}}}
_OPENING = [INITIALIZE, INITIALIZED]


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _environment(tmp_path: Path) -> dict[str, str]:
    return {
        "ORCHESTRATOR_DATA_DIR": str(tmp_path),
        "ORCHESTRATOR_BACKEND__NAME": "sqlite",
        "PATH": "/usr/bin:/bin",
    }


@pytest.mark.slow
def test_serve_answers_over_pipes_one_call_after_the_other(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [ORCHESTRATOR, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_environment(tmp_path),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        answers = []
        for message in [*_OPENING, _WRITE, _SEARCH]:
            process.stdin.write(_line(message))
            process.stdin.flush()
            if "id" in message:
                answers.append(json.loads(process.stdout.readline()))
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert [answer["id"] for answer in answers] == [INITIALIZE["id"], 1, 2]
    written, found = (answer["result"]["structuredContent"] for answer in answers[1:])
    assert [item["memory_id"] for item in found["items"]] == [written["id"]]


@pytest.mark.slow
def test_serve_reads_a_file_on_stdin_through_the_sdks_files(tmp_path: Path) -> None:
    # (a call still running when stdin ends is answered "Connection closed" by the SDK: none here)
    (tmp_path / "requests.jsonl").write_bytes(b"".join(_line(message) for message in _OPENING))
    with (tmp_path / "requests.jsonl").open("rb") as stdin:
        done = subprocess.run(
            [ORCHESTRATOR, "serve"], stdin=stdin, capture_output=True, env=_environment(tmp_path), timeout=60
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [answer["id"] for answer in answers] == [INITIALIZE["id"]]
    assert answers[0]["result"]["serverInfo"]["name"]
    # the version the server reports is the package's, which is also what the installed metadata says
    reported = answers[0]["result"]["serverInfo"]["version"]
    assert reported == __version__ == version("mnemon-memory-orchestrator")
