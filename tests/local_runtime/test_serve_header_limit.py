"""R2 of the 2026-11-27 reliability probe: the local server answered a 200 KB Authorization header on the OpenAI
route with a connection reset (uvicorn's h11 read 16 KiB of headers, answered 400 and closed the socket while the
client was still sending, so the client saw no status). The server `python -m model_build serve` runs
(local_runtime.serve.server_config) reads up to 1 MiB of headers, and the route answers such a token 403 itself.
The request goes over a real socket with http.client; the server is the one `serve` configures."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import free_port, wait_for_ping

ENDPOINT = "tiny-chat"


@pytest.fixture(scope="module")
def server(chat_artifact: Path) -> Iterator[tuple[str, int]]:
    import uvicorn

    from local_runtime.serve import create_app, server_config

    port = free_port()
    app = create_app(chat_artifact, endpoint_name=ENDPOINT, region="us-east-1")
    uvicorn_server = uvicorn.Server(server_config(app, "127.0.0.1", port, log_level="warning"))
    thread = threading.Thread(target=uvicorn_server.run, daemon=True)
    thread.start()
    try:
        wait_for_ping(f"http://127.0.0.1:{port}", 200, timeout=60)
        yield "127.0.0.1", port
    finally:
        uvicorn_server.should_exit = True
        thread.join(timeout=10)


def post_chat(server: tuple[str, int], authorization: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(*server, timeout=30)
    try:
        connection.request(
            "POST",
            f"/endpoints/{ENDPOINT}/openai/v1/chat/completions",
            body=b'{"messages": [{"role": "user", "content": "hi"}]}',
            headers={"Authorization": authorization, "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_200_kb_authorization_header_gets_a_4xx_not_a_reset(server) -> None:
    status, body = post_chat(server, "Bearer " + "A" * 200_000)
    assert status == 403, body[:500]
    assert b"token" in body.lower()


def test_headers_up_to_the_limit_are_read(server) -> None:
    from local_runtime.serve import MAX_HEADER_BYTES

    status, _ = post_chat(server, "Bearer " + "A" * (MAX_HEADER_BYTES - 4096))
    assert status == 403
