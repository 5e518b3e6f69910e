"""The local runtime's relay to a container process, on the server's own event loop: HTTP/1.1 over kept-alive
loopback connections, so that a request costs no thread hop, no new TCP connection, and no thread per streamed chunk.
The framing is read by hand (RFC 9112: a status line and headers, then Content-Length, chunked, or until the
container closes): with h11's state machine instead, a relayed InvokeEndpoint cost more CPU than the threaded
http.client relay this replaced (bench/front_door.py, 0.58 against 0.51 ms per request), and the containers here are
loopback processes we start. Figures before and after: bench/results/front_door_before_after.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
READ_BYTES = 65536
# Idle connections kept per container; more concurrent calls open more, and the extra ones close when done.
POOL_SIZE = 64
MAX_HEAD_BYTES = 1024 * 1024  # a container's status line and headers (the runtime's own request limit: serve.py)


async def _within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """`awaitable`'s result, TimeoutError past `timeout_s`. asyncio.timeout, not wait_for: Python 3.11's wait_for
    wraps each await in a new Task, one more trip through the event loop for every read of every relayed answer."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


@dataclass
class Reply:
    """A container's answer: its status and headers (names lower-case), and the open connection its body is read
    from (chunks(): the body's bytes as they arrive; read(): all of it)."""

    status: int
    headers: dict[str, str]
    _relay: Relay
    _connection: _Connection
    _keep: bool = field(default=False)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    async def chunks(self, timeout_s: float) -> AsyncIterator[bytes]:
        """The body as it arrives; each wait for more is held to `timeout_s` (TimeoutError past it)."""
        reader = self._connection.reader
        done = False
        try:
            if self.status in (204, 304):  # no body, whatever the headers say (RFC 9112 section 6.3)
                pass
            elif "chunked" in self.headers.get("transfer-encoding", "").lower():
                while True:
                    line = await _within(reader.readuntil(b"\r\n"), timeout_s)
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        while (await _within(reader.readuntil(b"\r\n"), timeout_s)) != b"\r\n":
                            pass  # trailer fields, none expected
                        break
                    data = await _within(reader.readexactly(size + 2), timeout_s)
                    yield data[:-2]
            elif "content-length" in self.headers:
                left = int(self.headers["content-length"])
                while left > 0:
                    data = await _within(reader.read(min(left, READ_BYTES)), timeout_s)
                    if not data:
                        raise ConnectionError(f"the container closed its answer {left} bytes early")
                    left -= len(data)
                    yield data
            else:  # until the container closes the connection (an HTTP/1.0 server)
                self._keep = False
                while data := await _within(reader.read(READ_BYTES), timeout_s):
                    yield data
            done = True
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
            raise ConnectionError(f"the container's answer ended early or is not HTTP/1.1 ({err})") from err
        finally:
            self._relay._release(self._connection, reusable=done and self._keep)

    async def read(self, timeout_s: float) -> bytes:
        return b"".join([chunk async for chunk in self.chunks(timeout_s)])


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()


class Relay:
    """Kept-alive connections to one container port, for the event loop that uses them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._idle: list[_Connection] = []

    async def _connection(self) -> tuple[_Connection, bool]:
        while self._idle:
            connection = self._idle.pop()
            if not connection.reader.at_eof():
                return connection, True
            connection.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=MAX_HEAD_BYTES)
        return _Connection(reader, writer), False

    def _release(self, connection: _Connection, reusable: bool) -> None:
        if reusable and len(self._idle) < POOL_SIZE:
            self._idle.append(connection)
        else:
            connection.close()

    async def post(self, path: str, body: bytes, headers: Mapping[str, str | None], timeout_s: float) -> Reply:
        """POST `body` to `path`; the reply once its status and headers are in (the body is read from it). A kept-alive
        connection the container closed meanwhile is retried once on a new one (nothing of the answer was read)."""
        head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", f"Content-Length: {len(body)}"]
        for name, value in headers.items():
            if value:
                if "\r" in value or "\n" in value:  # the runtime's own server refused such headers already
                    raise ValueError(f"header {name}: a value with a line break cannot be sent")
                head.append(f"{name}: {value}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (0, 1):
            connection, reused = await self._connection()
            try:
                return await _within(self._send(connection, request), timeout_s)
            except (ConnectionError, asyncio.IncompleteReadError) as err:
                connection.close()
                if not reused or attempt == 1:
                    raise ConnectionError(f"{type(err).__name__}: {err}") from err
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")

    async def _send(self, connection: _Connection, request: bytes) -> Reply:
        connection.writer.write(request)
        await connection.writer.drain()
        while True:
            head = await connection.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            try:
                status = int(rest[:3])
            except ValueError:
                raise ConnectionError(f"the container answered no HTTP status line: {lines[0][:100]!r}") from None
            if 100 <= status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            fields: dict[str, str] = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    fields[name.strip().lower()] = value.strip()
            keep = version == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
            return Reply(status, fields, self, connection, keep)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
