"""The local runtime's relay to a container process, on the server's own event loop: HTTP/1.1 over kept-alive
loopback connections (h11, the HTTP/1.1 state machine uvicorn itself serves with here: serve.server_config), so that
a request costs no thread hop, no new TCP connection, and no thread per streamed chunk.

Measured before it (bench/front_door.py, `python -m bench --only front_door`): at concurrency 32 the front door
carried about a quarter of what the engine's own port carried, every request opening a connection from a worker
thread and every streamed chunk crossing a thread (Starlette's iterate_in_threadpool). bench/results/ has the figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import h11

READ_BYTES = 65536
# Idle connections kept per container; more concurrent calls open more, and the extra ones close when done.
POOL_SIZE = 64


@dataclass
class Reply:
    """A container's answer: its status and headers (names lower-case), and the open connection its body is read
    from (chunks(): the body's bytes as they arrive; read(): all of it)."""

    status: int
    headers: dict[str, str]
    _relay: Relay
    _connection: _Connection
    _done: bool = field(default=False)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    async def chunks(self, timeout_s: float) -> AsyncIterator[bytes]:
        """The body as it arrives; each wait for more is held to `timeout_s` (TimeoutError past it)."""
        connection = self._connection
        try:
            while True:
                event = connection.state.next_event()
                if event is h11.NEED_DATA:
                    data = await asyncio.wait_for(connection.reader.read(READ_BYTES), timeout_s)
                    connection.state.receive_data(data)
                    continue
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._done = True
                    return
                else:  # ConnectionClosed before the end, or anything unexpected
                    raise ConnectionError(f"the container ended its answer early ({type(event).__name__})")
        finally:
            self._relay._release(connection, reusable=self._done)

    async def read(self, timeout_s: float) -> bytes:
        return b"".join([chunk async for chunk in self.chunks(timeout_s)])


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.state = h11.Connection(h11.CLIENT)

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
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        return _Connection(reader, writer), False

    def _release(self, connection: _Connection, reusable: bool) -> None:
        state = connection.state
        if reusable and state.our_state is h11.DONE and state.their_state is h11.DONE and len(self._idle) < POOL_SIZE:
            state.start_next_cycle()
            self._idle.append(connection)
        else:
            connection.close()

    async def post(self, path: str, body: bytes, headers: Mapping[str, str | None], timeout_s: float) -> Reply:
        """POST `body` to `path`; the reply once its status and headers are in (the body is read from it). A kept-alive
        connection the container closed meanwhile is retried once on a new one (nothing of the answer was read)."""
        for attempt in (0, 1):
            connection, reused = await self._connection()
            try:
                return await asyncio.wait_for(self._send(connection, path, body, headers), timeout_s)
            except (ConnectionError, h11.RemoteProtocolError, asyncio.IncompleteReadError) as err:
                connection.close()
                if not reused or attempt == 1:
                    raise ConnectionError(f"{type(err).__name__}: {err}") from err
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")

    async def _send(self, connection: _Connection, path: str, body: bytes, headers: Mapping[str, str | None]) -> Reply:
        state = connection.state
        sent = [("Host", f"127.0.0.1:{self.port}"), ("Content-Length", str(len(body)))]
        sent += [(name, value) for name, value in headers.items() if value]
        connection.writer.write(
            state.send(h11.Request(method="POST", target=path, headers=sent))
            + state.send(h11.Data(data=body))
            + state.send(h11.EndOfMessage())
        )
        await connection.writer.drain()
        while True:
            event = state.next_event()
            if event is h11.NEED_DATA:
                data = await connection.reader.read(READ_BYTES)
                state.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                headers_in = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
                return Reply(event.status_code, headers_in, self, connection)
            raise ConnectionError(f"the container closed the connection before answering ({type(event).__name__})")

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
