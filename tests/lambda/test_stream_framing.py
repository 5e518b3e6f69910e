"""The stream function's HTTP server (lambda/stream/app.py) over a raw socket: every body framing a client may use
(Content-Length, chunked, none, Expect: 100-continue, keep-alive with two requests, both headers) is answered once
and correctly, and a body the server does not read is never taken for the next request.

SageMaker is a real HTTP server on loopback that answers InvokeEndpointWithResponseStream in AWS event-stream frames
(local_runtime/event_stream.py) and echoes the prompt it received, so each answer shows the body arrived whole.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import ROOT, serve_in_thread

from endpoint_runtime import stream
from local_runtime import event_stream

ENDPOINT = "framing-test"
CAP = 2048  # MAX_REQUEST_BYTES for these tests


class EchoRuntime(BaseHTTPRequestHandler):
    """InvokeEndpointWithResponseStream answering the prompt back as one token and the summary."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = request["inputs"]
        parts = [
            json.dumps({"token": {"text": prompt}}).encode() + b"\n",
            json.dumps({"generated_text": prompt, "details": {"finish_reason": "length"}}).encode() + b"\n",
        ]
        data = b"".join(event_stream.payload_part(part) for part in parts)
        self.send_response(200)
        self.send_header("Content-Type", event_stream.CONTENT_TYPE)
        self.send_header("X-Amzn-SageMaker-Content-Type", "application/jsonlines")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def _load_app_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("stream_app_framing", ROOT / "lambda" / "stream" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runtime_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoRuntime)
    server.daemon_threads = True
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def app_port(runtime_url, monkeypatch) -> Iterator[int]:
    for key, value in {
        "ENDPOINT_NAME": ENDPOINT,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": runtime_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MAX_REQUEST_BYTES": str(CAP),
    }.items():
        monkeypatch.setenv(key, value)
    stream.reset_client()
    server = _load_app_module().serve(port=0)
    serve_in_thread(server)
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        stream.reset_client()


# ---------------------------------------------------------------------------------------------------- the client


class Connection:
    """One TCP connection speaking HTTP/1.1 by hand: what is sent is exactly the bytes given."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        """The next response: (status, headers with lower-case names, body decoded from its framing)."""
        status_line = self.reader.readline()
        assert status_line.startswith(b"HTTP/1.1 "), f"no response, got {status_line!r}"
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, value = line.decode().split(":", 1)
            headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while (size := int(self.reader.readline().split(b";")[0], 16)) != 0:
                body += self.reader.read(size)
                assert self.reader.read(2) == b"\r\n"
            assert self.reader.readline() == b"\r\n"
            return status, headers, body
        return status, headers, self.reader.read(int(headers.get("content-length", "0")))

    def closed_by_server(self) -> bool:
        """True when the server closed the connection (EOF) with nothing more sent."""
        self.sock.settimeout(2)
        return self.reader.read(1) == b""

    def idle(self) -> bool:
        """True when the connection is open and the server sends nothing more (no second answer to one request):
        a second answer would follow the first at once on loopback, so 0.2 s of silence is enough."""
        self.sock.settimeout(0.2)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) != b""
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(10)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def request(body_headers: str, body: bytes = b"", *, path: str = "/", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{extra}{body_headers}\r\n".encode()
        + body
    )


def prompt_body(prompt: str) -> bytes:
    return json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 4}}).encode()


def chunked(data: bytes, sizes: tuple[int, ...] = (1, 7, 30), trailer: bytes = b"") -> bytes:
    """`data` cut into chunks of the given sizes (the last size repeats), with an extension on the first chunk."""
    out, i, n = b"", 0, 0
    while i < len(data):
        size = sizes[min(n, len(sizes) - 1)]
        piece = data[i : i + size]
        out += b"%x%s\r\n%s\r\n" % (len(piece), b";ext=1" if n == 0 else b"", piece)
        i, n = i + size, n + 1
    return out + b"0\r\n" + trailer + b"\r\n"


def streamed_prompt(body: bytes) -> str:
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert "generated_text" in lines[-1], lines
    return lines[-1]["generated_text"]


def error_of(body: bytes) -> dict:
    answer = json.loads(body)
    assert set(answer) == {"error", "error_type"} and answer["error"], answer
    return answer


# ---------------------------------------------------------------------------------------------------- chunked


def test_a_chunked_body_is_read_whole_and_the_connection_serves_the_next_request(app_port):
    prompt = "chunked bodies arrive whole: " + "é" * 20
    conn = Connection(app_port)
    try:
        conn.send(request("Transfer-Encoding: chunked\r\n", chunked(prompt_body(prompt), trailer=b"X-Trailer: 1\r\n")))
        status, headers, body = conn.response()
        assert status == 200 and headers["content-type"] == "application/jsonlines", body
        assert streamed_prompt(body) == prompt  # what SageMaker received is what was sent, reassembled
        conn.send(b"GET /_ready HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert conn.response()[::2] == (200, b"ready")
        assert conn.idle()  # no third answer: no part of the chunked body was read as a request
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("framing", "status", "needle"),
    [
        (b"zz\r\n{}\r\n0\r\n\r\n", 400, "chunk size b'zz' is not a hexadecimal number"),
        (b"2\r\n{}xx0\r\n\r\n", 400, "chunk data is not followed by CRLF"),
        (b"5\r\n{}", 400, "ends inside a chunk"),
        (b"2\r\n{}\r\n0\r\n" + b"X-T: 1\r\n" * 70 + b"\r\n", 400, "more than 64 trailer lines"),
        (b"%x\r\n" % (CAP + 1) + b"x" * (CAP + 1) + b"\r\n0\r\n\r\n", 413, f"at most {CAP} bytes, got more than {CAP}"),
        (
            b"400\r\n" + b"x" * 1024 + b"\r\n" * 1 + b"400\r\n" + b"x" * 1024 + b"\r\n1\r\nx\r\n0\r\n\r\n",
            413,
            f"at most {CAP} bytes",
        ),
    ],
)
def test_a_bad_or_oversized_chunked_body_is_refused_and_the_connection_closed(app_port, framing, status, needle):
    conn = Connection(app_port)
    try:
        conn.send(request("Transfer-Encoding: chunked\r\n", framing))
        if status == 400 and needle.startswith("ends inside"):
            conn.sock.shutdown(socket.SHUT_WR)  # the client stops sending mid-chunk
        got, headers, body = conn.response()
        assert got == status and needle in error_of(body)["error"], body
        assert headers["connection"] == "close" and conn.closed_by_server()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("encoding", "status", "needle"),
    [
        ("gzip, chunked", 501, "Transfer-Encoding gzip, chunked is not supported; allowed: chunked"),
        ("chunked, gzip", 400, "chunked must be the final coding"),
        ("identity", 400, "chunked must be the final coding"),
    ],
)
def test_transfer_codings_other_than_chunked_are_refused(app_port, encoding, status, needle):
    conn = Connection(app_port)
    try:
        conn.send(request(f"Transfer-Encoding: {encoding}\r\n", chunked(prompt_body("x"))))
        got, _, body = conn.response()
        assert got == status and needle in error_of(body)["error"]
        assert conn.closed_by_server()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------- the class


def _content_length(prompt: str) -> tuple[str, bytes]:
    body = prompt_body(prompt)
    return f"Content-Length: {len(body)}\r\n", body


FRAMINGS = {
    # name: the writes a client makes for prompt p (two requests: p, then p + "2", each answered 200 with its prompt)
    "content-length": lambda p: [request(*_content_length(p))],
    "chunked": lambda p: [request("Transfer-Encoding: chunked\r\n", chunked(prompt_body(p)))],
    "chunked, one chunk": lambda p: [
        request("Transfer-Encoding: chunked\r\n", chunked(prompt_body(p), sizes=(10**6,)))
    ],
    "keep-alive, two requests in one write": lambda p: [
        request(*_content_length(p)) + request(*_content_length(p + "2"))
    ],
    "keep-alive, content-length then chunked": lambda p: [
        request(*_content_length(p)),
        request("Transfer-Encoding: chunked\r\n", chunked(prompt_body(p + "2"))),
    ],
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_every_framing_is_answered_once_with_what_was_sent(app_port, name):
    prompt = f"framing {name}"
    conn = Connection(app_port)
    try:
        writes = FRAMINGS[name](prompt)
        for data in writes:
            conn.send(data)
        expected = [prompt, prompt + "2"] if "two" in name or "then" in name else [prompt]
        for want in expected:
            status, _, body = conn.response()
            assert status == 200 and streamed_prompt(body) == want, (name, body)
        assert conn.idle(), f"{name}: more answers than requests"
    finally:
        conn.close()


def test_expect_100_continue_gets_100_before_the_body_then_one_answer(app_port):
    body = prompt_body("expect")
    conn = Connection(app_port)
    try:
        conn.send(request(f"Content-Length: {len(body)}\r\n", extra="Expect: 100-continue\r\n"))
        assert conn.response()[0] == 100  # before any byte of the body was sent
        conn.send(body)
        status, _, answer = conn.response()
        assert status == 200 and streamed_prompt(answer) == "expect" and conn.idle()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("headers", "status", "needle"),
    [
        (f"Content-Length: {CAP + 1}\r\n", 413, f"request body must be at most {CAP} bytes, got {CAP + 1} bytes"),
        ("", 411, "needs Content-Length or Transfer-Encoding: chunked"),
        ("Transfer-Encoding: gzip\r\n", 400, "chunked must be the final coding"),
    ],
)
def test_expect_100_continue_with_a_refused_framing_gets_the_refusal_instead_of_100(app_port, headers, status, needle):
    conn = Connection(app_port)
    try:
        conn.send(request(headers, extra="Expect: 100-continue\r\n"))
        got, _, body = conn.response()
        assert got == status and needle in error_of(body)["error"]
        assert conn.closed_by_server()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("headers", "body", "status", "needle"),
    [
        ("", prompt_body("no framing"), 411, "a POST body needs Content-Length or Transfer-Encoding: chunked"),
        ("Content-Length: +5\r\n", b"{}", 400, "Content-Length must be one decimal number of bytes, got '+5'"),
        ("Content-Length: 1_0\r\n", b"{}", 400, "got '1_0'"),
        ("Content-Length: 2\r\nContent-Length: 3\r\n", b"{}", 400, "got '2, 3'"),
        (f"Content-Length: {CAP + 10}\r\n", b"x" * (CAP + 10), 413, f"at most {CAP} bytes, got {CAP + 10} bytes"),
    ],
)
def test_a_refused_framing_is_answered_once_and_the_unread_body_is_never_a_request(
    app_port, headers, body, status, needle
):
    conn = Connection(app_port)
    try:
        conn.send(request(headers, body))
        got, _, answer = conn.response()
        assert got == status and needle in error_of(answer)["error"]
        assert conn.closed_by_server()  # the body's bytes were not parsed as a second request
    finally:
        conn.close()


def test_both_headers_the_body_is_read_by_transfer_encoding_then_the_connection_closes(app_port):
    body = chunked(prompt_body("both headers"))
    conn = Connection(app_port)
    try:
        conn.send(request("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", body))
        status, _, answer = conn.response()
        assert status == 200 and streamed_prompt(answer) == "both headers"
        assert conn.closed_by_server()
    finally:
        conn.close()


def test_an_empty_body_and_an_invalid_one_get_the_shared_validation_answer(app_port):
    conn = Connection(app_port)
    try:
        conn.send(
            request("Content-Length: 0\r\n") + request("Transfer-Encoding: chunked\r\n", chunked(b'{"inputs": ""}'))
        )
        status, _, body = conn.response()
        assert status == 400 and "the body is empty" in error_of(body)["error"]
        status, _, body = conn.response()
        assert status == 400 and "inputs must be a non-empty string" in error_of(body)["error"]
        assert conn.idle()
    finally:
        conn.close()


def test_a_get_with_a_body_closes_the_connection_rather_than_read_the_body_as_a_request(app_port):
    conn = Connection(app_port)
    try:
        conn.send(
            b"GET /_ready HTTP/1.1\r\nHost: localhost\r\nContent-Length: 40\r\n\r\n"
            b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
        )
        assert conn.response()[::2] == (200, b"ready")
        assert conn.closed_by_server()
    finally:
        conn.close()


@pytest.mark.parametrize("chunked_body", [False, True])
def test_an_oversized_body_still_being_sent_gets_the_413_not_a_reset(app_port, chunked_body):
    """A client that sends a 5 MB body whole before reading (http.client, as the reliability review's client did)
    reads the 413: the server half-closes and drains the body it refused instead of resetting the connection."""
    import http.client

    big = b"x" * 5_000_000
    conn = http.client.HTTPConnection("127.0.0.1", app_port, timeout=30)
    try:
        if chunked_body:
            conn.request(
                "POST",
                "/",
                body=iter([big[i : i + 65536] for i in range(0, len(big), 65536)]),
                headers={"Content-Type": "application/json"},
                encode_chunked=True,
            )
        else:
            conn.request("POST", "/", body=big, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        answer = error_of(reply.read())
    finally:
        conn.close()
    size = f"more than {CAP}" if chunked_body else str(len(big))
    assert reply.status == 413 and answer["error"] == f"request body must be at most {CAP} bytes, got {size} bytes"
    assert reply.getheader("Connection") == "close"
