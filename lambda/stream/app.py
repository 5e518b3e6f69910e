"""Entry point of the streaming front door: a small stdlib HTTP server that the AWS Lambda Web Adapter forwards the
function URL's requests to, and whose chunked reply it streams back (stacks/streaming.py; handler `stream/run.sh`
starts this file).

Why a web server in a Lambda function: Lambda streams a response natively only from Node.js managed runtimes; for
Python it takes a custom runtime or the Lambda Web Adapter ("Lambda supports response streaming on Node.js managed
runtimes. For other languages, you can use a custom runtime with a custom Runtime API integration to stream
responses or use the Lambda Web Adapter", https://docs.aws.amazon.com/lambda/latest/dg/configuration-response-streaming.html).
With AWS_LWA_INVOKE_MODE=response_stream the adapter passes the body on as this server writes it
(awslabs/aws-lambda-web-adapter README, "AWS_LWA_INVOKE_MODE").

The request code (validation, SageMaker call, re-framing, error shapes) is endpoint_runtime/stream.py; this file only
speaks HTTP: it reads the body (at most MAX_REQUEST_BYTES + 1 bytes: more is refused with 413 by the shared body
check), answers GET on the adapter's readiness path, and writes a streamed reply with chunked transfer encoding,
flushing each line.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from endpoint_runtime import invoke, stream

READY_PATH = "/_ready"  # AWS_LWA_READINESS_CHECK_PATH (stacks/streaming.py)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked replies need 1.1
    server_version = "llm-endpoints-stream"

    def do_GET(self) -> None:  # noqa: N802
        if self.path == READY_PATH:
            self._reply(200, {"Content-Type": "text/plain"}, b"ready")
        else:
            self._reply(*stream.handle_request("GET", b"", self._request_id()))

    def do_POST(self) -> None:  # noqa: N802
        try:
            length = int(self.headers.get("Content-Length") or 0)
            cap = invoke.max_request_bytes()
        except ValueError:
            length, cap = 0, 0
        body = self.rfile.read(min(max(length, 0), cap + 1)) if length > 0 else b""
        if length > len(body):
            self.close_connection = True  # the unread rest of a refused body must not be read as the next request
        self._reply(*stream.handle_request("POST", body, self._request_id()))

    def _other(self) -> None:
        self.close_connection = True
        self._reply(*stream.handle_request(self.command, b"", self._request_id()))

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

    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass  # endpoint_runtime.stream writes one structured line per request


def serve(port: int | None = None, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The server, bound (not yet serving): AWS_LWA_PORT, else PORT, else 8080, the adapter's default."""
    port = port if port is not None else int(os.environ.get("AWS_LWA_PORT") or os.environ.get("PORT") or 8080)
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    serve().serve_forever()
