"""local_runtime/relay.py reads a container's HTTP/1.1 answers as RFC 9112 frames them (Content-Length, chunked,
until close, no body on 204), keeps connections alive only when the container does, and retries once on a kept-alive
connection the container closed meanwhile. A real asyncio server on a loopback port plays the container, writing raw
bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from local_runtime.relay import Relay

Answer = Callable[[bytes], bytes]


async def _serve(answer: Answer, close_after: bool = False) -> tuple[asyncio.AbstractServer, list[int]]:
    """A server that reads each request (head and Content-Length body) and writes answer(body); the list counts the
    connections it accepted."""
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                writer.write(answer(await reader.readexactly(length)))
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, accepted


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def _port(server: asyncio.AbstractServer) -> int:
    return server.sockets[0].getsockname()[1]


def test_content_length_answers_reuse_one_connection() -> None:
    async def test() -> None:
        server, accepted = await _serve(
            lambda body: (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        )
        relay = Relay(_port(server))
        for i in range(3):
            reply = await relay.post("/invocations", b'{"n": %d}' % i, {"Content-Type": "application/json"}, 5)
            assert reply.status == 200 and reply.header("Content-Type") == "application/json"
            assert await reply.read(5) == b'{"n": %d}' % i
        assert len(accepted) == 1
        relay.close()
        server.close()

    _run(test)


def test_chunked_answers_arrive_chunk_by_chunk() -> None:
    async def test() -> None:
        chunks = [b"data: a\n\n", b"data: bb\n\n", b"data: [DONE]\n\n"]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        server, accepted = await _serve(
            lambda _: (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + framed
            )
        )
        relay = Relay(_port(server))
        for _ in range(2):
            reply = await relay.post("/v1/chat/completions", b"{}", {}, 5)
            assert [c async for c in reply.chunks(5)] == chunks
        assert len(accepted) == 1
        server.close()

    _run(test)


def test_an_http_1_0_answer_is_read_until_close_and_not_reused() -> None:
    async def test() -> None:
        server, accepted = await _serve(lambda _: b"HTTP/1.0 400 Bad Request\r\n\r\nno", close_after=True)
        relay = Relay(_port(server))
        for _ in range(2):
            reply = await relay.post("/invocations", b"{}", {}, 5)
            assert reply.status == 400 and await reply.read(5) == b"no"
        assert len(accepted) == 2
        server.close()

    _run(test)


def test_no_body_on_204_and_a_container_gone_is_a_connection_error() -> None:
    async def test() -> None:
        server, accepted = await _serve(lambda _: b"HTTP/1.1 204 No Content\r\n\r\n")
        relay = Relay(_port(server))
        reply = await relay.post("/ping", b"", {}, 5)
        assert reply.status == 204 and await reply.read(5) == b""
        server.close()
        await server.wait_closed()
        # The server is gone: a new connection fails with a ConnectionError naming why (no hang).
        for connection in relay._idle:
            connection.close()
        relay._idle.clear()
        with pytest.raises(ConnectionError):
            await relay.post("/ping", b"", {}, 5)

    _run(test)


def test_an_answer_cut_short_and_a_silent_container_are_errors() -> None:
    async def test() -> None:
        server, _ = await _serve(lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close_after=True)
        relay = Relay(_port(server))
        reply = await relay.post("/invocations", b"{}", {}, 5)
        with pytest.raises(ConnectionError, match="7 bytes early"):
            await reply.read(5)
        server.close()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(5)
            writer.close()

        quiet = await asyncio.start_server(silent, "127.0.0.1", 0)
        with pytest.raises(TimeoutError):
            await Relay(_port(quiet)).post("/invocations", b"{}", {}, 0.3)
        quiet.close()

    _run(test)


def test_a_header_value_with_a_line_break_is_refused() -> None:
    async def test() -> None:
        with pytest.raises(ValueError, match="line break"):
            await Relay(1).post("/invocations", b"", {"X-Amzn-SageMaker-Custom-Attributes": "a\r\nb"}, 1)

    _run(test)


def test_a_kept_alive_connection_the_container_closed_is_replaced() -> None:
    """The container answers HTTP/1.1 without Connection: close, then closes the connection anyway (an idle timeout):
    the next call goes through on a new connection."""

    async def test() -> None:
        server, accepted = await _serve(lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close_after=True)
        relay = Relay(_port(server))
        for _ in range(3):
            reply = await relay.post("/invocations", b"{}", {}, 5)
            assert await reply.read(5) == b"ok"
            await asyncio.sleep(0.05)  # the close reaches the idle connection (or not: the retry covers it)
        assert len(accepted) == 3
        server.close()

    _run(test)
