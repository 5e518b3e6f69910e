"""Entry point of the streaming front door: a small stdlib HTTP server behind the AWS Lambda Web Adapter, which streams
its chunked reply back (stacks/streaming.py; `stream/run.sh` starts this file). It only speaks HTTP: body framing
per RFC 9112 section 6 (chunked or Content-Length; 411/501/400/413, every refusal closes the connection), the
adapter's readiness GET, a streamed reply. The request code is endpoint_runtime/stream.py.
Why a web server in a Lambda function, and the RFC citations: docs/design/front-doors.md.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase

from endpoint_runtime import invoke, stream

READY_PATH = "/_ready"  # AWS_LWA_READINESS_CHECK_PATH (stacks/streaming.py)
MAX_LINE_BYTES = 4096  # a chunk-size line (size and extensions) or one trailer field line
MAX_TRAILER_LINES = 64
_DECIMAL = re.compile(r"[0-9]{1,18}")  # Content-Length = 1*DIGIT (RFC 9110 8.6); int() would also take "+1", "1_0"
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")  # chunk-size = 1*HEXDIG (RFC 9112 7.1)
# After a refusal the server closes in stages (RFC 9112 section 9.6, "Tear-down": an immediate close with unread
# request bytes makes the TCP stack send a reset, which can reach the client before it reads the response): it
# half-closes, then reads and drops what the client is still sending, for at most these bytes and seconds. The bytes
# cover a body up to the Lambda function URL's 6 MB request payload with room (the adapter forwards the whole body).
LINGER_MAX_BYTES = 16 * 1024 * 1024
LINGER_S = 5.0


class FramingError(Exception):
    """The request's body framing is refused: answered with `status` and the connection closed."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def body_framing(headers) -> int | None:
    """The request body's framing from its headers: None for chunked, else the Content-Length. FramingError when
    neither is given (411), a coding other than chunked is used (501), or a header is malformed (400)."""
    encodings = headers.get_all("Transfer-Encoding") or []
    if encodings:
        codings = [c.strip().lower() for value in encodings for c in value.split(",") if c.strip()]
        if not codings or codings[-1] != "chunked":
            raise FramingError(
                400,
                "bad_framing",
                f"Transfer-Encoding {', '.join(codings) or '(empty)'}: chunked must "
                "be the final coding of a request body",
            )
        if codings != ["chunked"]:
            raise FramingError(
                501, "not_implemented", f"Transfer-Encoding {', '.join(codings)} is not supported; allowed: chunked"
            )
        return None
    lengths = {v.strip() for value in headers.get_all("Content-Length") or [] for v in value.split(",")}
    if not lengths:
        raise FramingError(411, "length_required", "a POST body needs Content-Length or Transfer-Encoding: chunked")
    if len(lengths) != 1 or not _DECIMAL.fullmatch(next(iter(lengths))):
        shown = ", ".join(sorted(lengths))[:60]
        raise FramingError(400, "bad_framing", f"Content-Length must be one decimal number of bytes, got {shown!r}")
    return int(lengths.pop())


def too_large(cap: int, size: str) -> FramingError:
    """The body cap's refusal, in the words of the shared body check (invoke.parse_body)."""
    return FramingError(413, "payload_too_large", f"request body must be at most {cap} bytes, got {size} bytes")


def read_chunked(rfile: BufferedIOBase, cap: int) -> bytes:
    """A chunked body (RFC 9112 section 7.1), decoded: at most `cap` bytes, else FramingError 413 as soon as the
    chunk sizes pass it (the rest is left unread). Extensions and trailer fields are read and dropped."""
    body = bytearray()

    def line(what: str) -> bytes:
        raw = rfile.readline(MAX_LINE_BYTES + 1)
        if not raw.endswith(b"\n"):
            cut = "is longer than %d bytes" % MAX_LINE_BYTES if len(raw) > MAX_LINE_BYTES else "ends before its CRLF"
            raise FramingError(400, "bad_framing", f"chunked body: a {what} line {cut}")
        return raw

    while True:
        size_text = line("chunk-size").split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            raise FramingError(
                400, "bad_framing", f"chunked body: chunk size {size_text[:20]!r} is not a hexadecimal number"
            )
        size = int(size_text, 16)
        if size == 0:
            break
        if len(body) + size > cap:
            raise too_large(cap, f"more than {cap}")
        data = rfile.read(size)
        if len(data) < size:
            raise FramingError(400, "bad_framing", f"chunked body ends inside a chunk ({len(data)} of {size} bytes)")
        body += data
        if rfile.readline(3) not in (b"\r\n", b"\n"):
            raise FramingError(400, "bad_framing", "chunked body: chunk data is not followed by CRLF")
    for _ in range(MAX_TRAILER_LINES + 1):
        if line("trailer") in (b"\r\n", b"\n"):
            return bytes(body)
    raise FramingError(400, "bad_framing", f"chunked body: more than {MAX_TRAILER_LINES} trailer lines")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked replies need 1.1
    server_version = "llm-endpoints-stream"

    def do_GET(self) -> None:
        self._close_if_body()
        if self.path == READY_PATH:
            self._reply(200, {"Content-Type": "text/plain"}, b"ready")
        else:
            self._reply(*stream.handle_request("GET", b"", self._request_id(), self.path))

    def do_POST(self) -> None:
        try:
            body = self._read_body()
        except FramingError as e:
            self._refuse(e)
            return
        if "Transfer-Encoding" in self.headers and "Content-Length" in self.headers:
            self.close_connection = True  # RFC 9112 6.1: read by Transfer-Encoding, then close
        self._reply(*stream.handle_request("POST", body, self._request_id(), self.path))

    def handle_expect_100(self) -> bool:
        """100 Continue only for a body this server will read; otherwise the refusal now, before the body."""
        if self.command == "POST":
            try:
                self._checked_length()
            except FramingError as e:
                self._refuse(e)
                return False
            except invoke.SetupError:
                pass  # do_POST answers the misconfiguration (500)
        return super().handle_expect_100()

    def _checked_length(self) -> int | None:
        """body_framing, with a Content-Length above MAX_REQUEST_BYTES refused (413) before any byte is read."""
        length = body_framing(self.headers)
        cap = invoke.max_request_bytes()
        if length is not None and length > cap:
            raise too_large(cap, str(length))
        return length

    def _read_body(self) -> bytes:
        try:
            length = self._checked_length()
        except invoke.SetupError:  # MAX_REQUEST_BYTES is malformed: the shared code answers the 500
            self.close_connection = True
            return b""
        if length is None:
            return read_chunked(self.rfile, invoke.max_request_bytes())
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise FramingError(400, "bad_framing", f"request body ended after {len(body)} of {length} bytes")
        return body

    def _close_if_body(self) -> None:
        # A body this method does not read must not be taken for the next request.
        if "Transfer-Encoding" in self.headers or (self.headers.get("Content-Length") or "0").strip() != "0":
            self.close_connection = True

    def _refuse(self, error: FramingError) -> None:
        self.close_connection = True
        record = {
            "message": "stream",
            "request_id": self._request_id(),
            "status": error.status,
            "error_type": error.error_type,
            "error": error.message,
        }
        invoke.log_record(record)
        answer = {"error": error.message, "error_type": error.error_type}
        if invoke.is_chat_path(self.path):  # a chat client reads OpenAI's error object
            answer = invoke.as_chat_error(error.status, answer)
        body = json.dumps(answer).encode("utf-8")
        self._reply(error.status, {**invoke.JSON_HEADERS, "Connection": "close"}, body)
        self._linger()

    def _linger(self) -> None:
        """Half-close, then drain the unread request body (LINGER_MAX_BYTES, LINGER_S), so the client, still
        sending a body we refused, gets to read our answer instead of a connection reset."""
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_S
            drained = 0
            while drained < LINGER_MAX_BYTES and (left := deadline - time.monotonic()) > 0:
                self.connection.settimeout(left)
                data = self.connection.recv(65536)
                if not data:  # the client read the answer and closed
                    return
                drained += len(data)
        except OSError:  # the client went away or the time is up: close as before
            return

    def _other(self) -> None:
        self.close_connection = True
        self._reply(*stream.handle_request(self.command, b"", self._request_id(), self.path))

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other

    def _request_id(self) -> str | None:
        # The adapter forwards the function URL's request context as JSON in x-amzn-request-context
        # (awslabs/aws-lambda-web-adapter docs/guide/src/features/request-context.md); its requestId names the call.
        try:
            context = json.loads(self.headers.get("x-amzn-request-context") or "{}")
        except ValueError:
            return None
        request_id = context.get("requestId") if isinstance(context, dict) else None
        return request_id if isinstance(request_id, str) else None

    def _reply(self, status: int, headers: dict[str, str], body) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if isinstance(body, bytes):
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in body:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away: stop reading from SageMaker
            self.close_connection = True
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()

    def log_message(self, format: str, *args) -> None:
        pass  # endpoint_runtime.stream writes one structured line per request


def serve(port: int | None = None, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The server, bound (not yet serving): AWS_LWA_PORT, else PORT, else 8080, the adapter's default."""
    port = port if port is not None else int(os.environ.get("AWS_LWA_PORT") or os.environ.get("PORT") or 8080)
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    serve().serve_forever()
