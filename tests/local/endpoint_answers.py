"""A loopback server that answers SageMaker runtime calls for any endpoint, in the body each container kind takes, for
tests that deploy many example endpoints on the emulator: their stacks' smoke checks (stacks/smoke_check.py) run
there and must be answered. The emulator's functions reach it through AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME
(moto_server.start lambda_env). Answers: a generation body ({"inputs"}) -> [{"generated_text"}]; an OpenAI completion
body ({"prompt"}) -> a text_completion; an OpenAI chat body ({"messages"}), on InvokeEndpoint or the OpenAI route ->
a chat.completion, with a get_weather tool call when the request names that tool; InvokeEndpointAsync -> the
generation answer written into the emulator's S3 and its location (what SageMaker does with its output)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
from helpers import serve_in_thread

ASYNC_BUCKET = "endpoint-answers-async"


def _chat(body: dict) -> dict:
    message: dict = {"role": "assistant", "content": "Paris."}
    if body.get("tools"):
        call = {
            "id": "call-1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chat-1",
        "object": "chat.completion",
        "model": body.get("model") or "model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if body.get("tools") else "stop"}],
        "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10},
    }


def answer(body: dict) -> object:
    if "messages" in body:
        return _chat(body)
    if "prompt" in body:
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "choices": [{"index": 0, "text": " Paris.", "finish_reason": "stop"}],
        }
    return [{"generated_text": " Paris."}]


def serve(s3_client_env: dict[str, str], answer_for: Callable[[dict], object] = answer) -> ThreadingHTTPServer:
    """Start the server (stop it with .shutdown()); `s3_client_env`: the emulator's client environment, for the
    asynchronous answers' bucket; `answer_for`: the answer to a request body (default: a right one of its kind)."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: object, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/async-invocations"):
                s3 = boto3.client(
                    "s3",
                    endpoint_url=s3_client_env["AWS_ENDPOINT_URL"],
                    region_name=s3_client_env["AWS_REGION"],
                    aws_access_key_id="testing",
                    aws_secret_access_key="testing",
                )
                try:
                    s3.create_bucket(Bucket=ASYNC_BUCKET)
                except s3.exceptions.BucketAlreadyOwnedByYou:
                    pass
                key = f"output/{uuid.uuid4()}.out"
                s3.put_object(Bucket=ASYNC_BUCKET, Key=key, Body=json.dumps(answer({})).encode())
                location = f"s3://{ASYNC_BUCKET}/{key}"
                return self._send(202, {"InferenceId": key}, {"X-Amzn-SageMaker-OutputLocation": location})
            body = json.loads(raw or b"{}")
            self._send(200, answer_for(body if isinstance(body, dict) else {}))

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    return server


def remove_bucket(session: boto3.Session) -> None:
    """Delete the asynchronous answers' bucket (the server's own, not the app's) when it exists."""
    s3 = session.resource("s3")
    bucket = s3.Bucket(ASYNC_BUCKET)
    if bucket.creation_date is None:
        return
    bucket.objects.all().delete()
    bucket.delete()
