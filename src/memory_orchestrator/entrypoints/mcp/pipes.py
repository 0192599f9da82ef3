"""stdio on the event loop: the JSON-RPC lines read and written without a thread hop.

The SDK's ``stdio_server`` reads and writes its standard streams as anyio ``AsyncFile`` objects: each
line read, each write and each flush is a blocking call run in a worker thread, whose result then
comes back to the event loop through its self-pipe, so every answered request costs three thread
round trips (and, on a busy two-core machine, three waits to be scheduled). When stdin and stdout
are pipes or sockets (how an MCP client starts a server), :func:`event_loop_stdio` hands the SDK's
transport streams the loop's own pipe transports instead: a line is split out of what the loop read
when its data arrived, and a write goes straight into the pipe (buffered, with the SDK's flush
waiting until the pipe took all of it). Anything else (a terminal, a file) keeps the SDK's
threaded files, and so does Windows.

As the SDK does, the transport takes the two descriptors for itself: while it serves, descriptor 0
reads the null device and descriptor 1 writes to stderr, so a stray ``print`` or a child process
cannot write into the protocol; both come back (blocking again) when it stops. A line ends at
``\\n`` (the MCP stdio framing; a ``\\r`` before it is JSON whitespace) and may be of any length,
as with the SDK; while lines wait for the server, the pipe is read no further than a few
``READ_CHUNK`` beyond them.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO

#: Bytes read from stdin at a time (the reader's buffer limit: reading pauses above twice this).
READ_CHUNK = 1 << 16

_Transport = asyncio.ReadTransport | asyncio.WriteTransport


def is_pipe(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (what the event loop's pipe transports serve)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """The lines of a pipe as the SDK's reader iterates a text file: ``str``, ``\\n`` included."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._pending = bytearray()
        self._searched = 0

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._pending.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._pending[: end + 1])
                del self._pending[: end + 1]
                self._searched = 0
                return line.decode("utf-8", errors="replace")
            self._searched = len(self._pending)
            chunk = await self._reader.read(READ_CHUNK)
            if not chunk:
                if not self._pending:
                    raise StopAsyncIteration
                line = bytes(self._pending)  # the last line, without its newline
                self._pending.clear()
                self._searched = 0
                return line.decode("utf-8", errors="replace")
            self._pending += chunk


class PipeWriter:
    """What the SDK's writer calls on a text file: ``write`` into the pipe's buffer, ``flush``
    waiting until the pipe took all of it (raises when the reader has gone)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """Stdin's lines and a writer to stdout on the running loop's pipe transports, while the two
    descriptors are diverted (see the module); ``None`` when either is not a pipe or a socket, or
    cannot be taken (the SDK's own stdio then serves)."""
    if sys.platform == "win32" or not (is_pipe(0) and is_pipe(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    claimed: list[tuple[int, int]] = []  # (standard descriptor, its private duplicate)
    files: list[IO[bytes]] = []
    transports: list[_Transport] = []
    try:
        streams = await _take_pipes(loop, claimed, files, transports)
    except BaseException:
        _give_back(claimed, files, transports)
        raise
    if streams is None:  # given back before the SDK claims the descriptors itself
        _give_back(claimed, files, transports)
        yield None
        return
    try:
        yield streams
    finally:
        _give_back(claimed, files, transports)


def _give_back(claimed: list[tuple[int, int]], files: list[IO[bytes]], transports: list[_Transport]) -> None:
    """Close the transports and point the standard descriptors at their pipes again, blocking."""
    for transport in transports:
        # at once (a reader's close is): a writer left to flush would write after the descriptor closed
        if isinstance(transport, asyncio.WriteTransport):
            transport.abort()
        else:
            transport.close()
    for file in files:
        file.close()
    for fd, private in reversed(claimed):
        with suppress(OSError):
            os.set_blocking(private, True)
            os.dup2(private, fd)
        with suppress(OSError):
            os.close(private)


async def _take_pipes(
    loop: asyncio.AbstractEventLoop,
    claimed: list[tuple[int, int]],
    files: list[IO[bytes]],
    transports: list[_Transport],
) -> tuple[PipeLines, PipeWriter] | None:
    """Divert descriptors 0 and 1 and serve their private duplicates on ``loop`` (everything taken
    is added to the three lists, for the caller to give back); ``None`` when the system refuses."""
    import fcntl  # POSIX only, as the event loop's pipe transports are

    try:
        for fd in (0, 1):
            diversion = os.open(os.devnull, os.O_RDONLY) if fd == 0 else os.dup(2)
            try:
                private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
                claimed.append((fd, private))
                os.dup2(diversion, fd)
            finally:
                os.close(diversion)
        reader = asyncio.StreamReader(limit=READ_CHUNK, loop=loop)
        files.append(os.fdopen(claimed[0][1], "rb", buffering=0, closefd=False))
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), files[-1]
        )
        transports.append(read_transport)
        files.append(os.fdopen(claimed[1][1], "wb", buffering=0, closefd=False))
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), files[-1]
        )
        transports.append(write_transport)
        # flush waits until the pipe took every byte, as the SDK's flush of a file does
        write_transport.set_write_buffer_limits(high=0)
    except OSError:
        return None
    return PipeLines(reader), PipeWriter(asyncio.StreamWriter(write_transport, protocol, None, loop))
