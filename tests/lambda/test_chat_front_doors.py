"""Our front doors speak chat: the invoke function (endpoint_runtime/invoke.py) and the stream function
(lambda/stream/app.py, a real HTTP server here) take OpenAI chat requests, forward exactly the parsed request, and
answer OpenAI's error object; the stream function sends OpenAI server-sent events that the `openai` SDK (3.57.0) reads.
Every bad request of tests/chat_cases.py gets the same status and error at both doors, before SageMaker is called.
SageMaker's retryable errors (invoke.RETRYABLE_ERRORS) get one status and a Retry-After at every door."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chat_cases import CASES, GOOD, OK, WEATHER, ChatCase, body
from helpers import serve_in_thread

import chat_contract
from endpoint_runtime import async_invoke, invoke, stream

ROOT = Path(__file__).resolve().parents[2]
FEATURES = {"CHAT_ROUTE": "handler", "CHAT_TOOL_CALLS": "true", "CHAT_CONSTRAINED_DECODING": "false"}


class NeverCalled:
    def invoke_endpoint(self, **_: Any) -> Any:
        raise AssertionError("a refused chat request must not reach SageMaker")

    invoke_endpoint_with_response_stream = invoke_endpoint


class Recording:
    """Records what a door sends; answers a chat.completion, or a stream of chunk lines (LMI's JSON-lines framing,
    cut across parts)."""

    def __init__(self, chunks: list[dict] | None = None) -> None:
        self.sent: list[dict] = []
        self.chunks = chunks or []

    def invoke_endpoint(self, **kwargs: Any) -> Any:
        self.sent.append(json.loads(kwargs["Body"]))
        reply = chat_contract.completion_body("tiny", "Paris.", [], "stop", 9, 2)
        return {"Body": io.BytesIO(json.dumps(reply).encode()), "ContentType": "application/json"}

    def invoke_endpoint_with_response_stream(self, **kwargs: Any) -> Any:
        self.sent.append(json.loads(kwargs["Body"]))
        data = b"".join(json.dumps(c).encode() + b"\n" for c in self.chunks)
        parts = [data[i : i + 7] for i in range(0, len(data), 7)]  # lines and characters cut across parts
        return {"Body": iter([{"PayloadPart": {"Bytes": p}} for p in parts])}


@pytest.fixture(autouse=True)
def door_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (
        "MAX_REQUEST_BYTES",
        "MAX_NEW_TOKENS",
        "MAX_BATCH_SIZE",
        "MAX_INPUT_CHARS",
        "INFERENCE_COMPONENT_NAME",
        "STREAM_DEADLINE_S",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ENDPOINT_NAME", "chat-ep")
    for key, value in FEATURES.items():
        monkeypatch.setenv(key, value)


def use_client(monkeypatch: pytest.MonkeyPatch, client: Any) -> Any:
    monkeypatch.setattr(invoke, "_client", client)
    monkeypatch.setattr(stream, "_client", client)
    return client


def proxy(content: bytes | dict | list, path: str = "/v1/chat/completions") -> dict:
    raw = content if isinstance(content, bytes) else json.dumps(content).encode()
    return {
        "version": "2.0",
        "rawPath": path,
        "isBase64Encoded": True,
        "body": base64.b64encode(raw).decode(),
        "requestContext": {"http": {"method": "POST", "path": path}},
    }


def invoke_door(content: bytes | dict | list, path: str = "/v1/chat/completions") -> tuple[int, dict, dict]:
    reply = invoke.handler(proxy(content, path))
    return reply["statusCode"], reply["headers"], json.loads(reply["body"])


@pytest.fixture(scope="module")
def stream_url() -> Iterator[str]:
    """lambda/stream/app.py's server, as the Lambda Web Adapter runs it (one per module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stream_app_chat", ROOT / "lambda" / "stream" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    server = app.serve(port=0)
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def stream_door(url: str, content: bytes | dict | list, path: str = "/v1/chat/completions") -> httpx.Response:
    raw = content if isinstance(content, bytes) else json.dumps(content).encode()
    return httpx.post(url + path, content=raw, headers={"content-type": "application/json"}, timeout=30)


def assert_openai_error(status: int, error: dict, case: ChatCase) -> None:
    assert status == case.status, (case.id, status, error)
    assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}, (case.id, error)
    assert (error["error"]["type"], error["error"]["param"]) == (case.type, case.param), (case.id, error)
    assert case.fragment in error["error"]["message"], (case.id, error["error"]["message"])


# ---- the table: every bad chat request, both doors, nothing sent to SageMaker -----------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_both_doors_refuse_each_bad_chat_request_alike(case: ChatCase, stream_url: str, monkeypatch) -> None:
    use_client(monkeypatch, NeverCalled())
    status, _, error = invoke_door(case.body)
    assert_openai_error(status, error, case)
    reply = stream_door(stream_url, case.body)  # the same body: every case is refused before the door's stream rule
    assert_openai_error(reply.status_code, reply.json(), case)
    assert reply.json()["error"]["message"] == error["error"]["message"]  # the same words at both doors


def test_the_body_decides_chat_at_any_path_and_a_chat_path_decides_before_the_body(stream_url, monkeypatch) -> None:
    """A direct invocation (no path) with "messages" is chat; a body that is not JSON is refused in OpenAI's shape
    on a chat path and in the generation contract's shape elsewhere, with the same status."""
    use_client(monkeypatch, NeverCalled())
    direct = invoke.handler({**OK, "n": 2})
    assert direct["statusCode"] == 400 and json.loads(direct["body"])["error"]["param"] == "n"
    status, _, error = invoke_door(b"{not json", path="/")
    assert status == 400 and isinstance(error["error"], str) and error["error_type"] == "validation"
    assert stream_door(stream_url, b"{not json", path="/").json()["error_type"] == "validation"


def test_a_door_of_an_endpoint_without_chat_refuses_chat(stream_url, monkeypatch) -> None:
    use_client(monkeypatch, NeverCalled())
    monkeypatch.delenv("CHAT_ROUTE")
    status, _, error = invoke_door(OK)
    assert (
        status == 400 and error["error"]["code"] == "chat_not_enabled" and "no chat: block" in error["error"]["message"]
    )
    assert stream_door(stream_url, {**OK, "stream": True}).json()["error"]["code"] == "chat_not_enabled"


def test_tools_are_refused_where_no_tool_calls_are_read(monkeypatch) -> None:
    """An engine without a tool-call parser (CHAT_TOOL_CALLS false): tools only with tool_choice "none", as vLLM 0.23
    refuses them; constrained decoding allows a forced tool call where a parser reads it."""
    use_client(monkeypatch, NeverCalled())
    monkeypatch.setenv("CHAT_TOOL_CALLS", "false")
    status, _, error = invoke_door(body(tools=[WEATHER]))
    assert (
        status == 400 and error["error"]["param"] == "tools" and "engine.tool_call_parser" in error["error"]["message"]
    )
    recording = use_client(monkeypatch, Recording())
    assert invoke_door(body(tools=[WEATHER], tool_choice="none"))[0] == 200
    monkeypatch.setenv("CHAT_TOOL_CALLS", "true")
    monkeypatch.setenv("CHAT_CONSTRAINED_DECODING", "true")
    forced = body(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert invoke_door(forced)[0] == 200
    assert recording.sent[-1]["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize(("stream_flag", "door"), [(True, "invoke"), (False, "stream")])
def test_each_door_says_which_stream_setting_it_serves(stream_flag: bool, door: str, stream_url, monkeypatch) -> None:
    use_client(monkeypatch, NeverCalled())
    request = {**OK, "stream": stream_flag}
    status, error = (
        invoke_door(request)[::2]
        if door == "invoke"
        else (lambda r: (r.status_code, r.json()))(stream_door(stream_url, request))
    )
    assert status == 400 and error["error"]["param"] == "stream" and error["error"]["code"] == "unsupported_value"


# ---- good requests: forwarded exactly as parsed, answered as the container answers ------------------------------


@pytest.mark.parametrize(("name", "request_body"), GOOD, ids=[g[0] for g in GOOD])
def test_the_invoke_door_forwards_exactly_the_parsed_request(name: str, request_body: dict, monkeypatch) -> None:
    recording = use_client(monkeypatch, Recording())
    request_body = {k: v for k, v in request_body.items() if k not in ("stream", "stream_options")}
    status, headers, reply = invoke_door(request_body)
    assert status == 200, reply
    assert recording.sent == [chat_contract.parse_chat_request(request_body).to_json()]
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["content"] == "Paris."
    assert headers["Content-Type"] == "application/json"


def chunk_lines(usage: bool) -> list[dict]:
    out = [chat_contract.chunk("c1", 1, "tiny", {"role": "assistant", "content": ""}, include_usage=usage)]
    out += [chat_contract.chunk("c1", 1, "tiny", {"content": t}, include_usage=usage) for t in ("Pa", "ris", ".")]
    out.append(chat_contract.chunk("c1", 1, "tiny", {}, "stop", include_usage=usage))
    if usage:
        out.append(chat_contract.chunk("c1", 1, "tiny", None, usage_counts=chat_contract.usage(9, 3)))
    return out


def test_the_openai_sdk_streams_through_the_stream_door(stream_url: str, monkeypatch) -> None:
    """The container's chunks as LMI frames them (JSON lines, cut anywhere across PayloadParts) reach the openai SDK
    as server-sent events: the text, the finish reason, the usage chunk last; the request forwarded as parsed."""
    from openai import OpenAI

    recording = use_client(monkeypatch, Recording(chunk_lines(usage=True)))
    client = OpenAI(base_url=f"{stream_url}/v1", api_key="function-url-auth-none", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Capital?"}],
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=8,
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Paris."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 12
    sent = chat_contract.parse_chat_request(
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "Capital?"}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 8,
        }
    ).to_json()
    assert recording.sent == [sent]


def test_a_stream_that_breaks_ends_with_an_error_event_the_sdk_raises(stream_url: str, monkeypatch) -> None:
    import openai

    lines = chunk_lines(usage=False)[:2] + [{"error": {"message": "CUDA out of memory", "type": "server_error"}}]
    use_client(monkeypatch, Recording(lines))
    reply = stream_door(stream_url, {**OK, "stream": True})
    assert reply.headers["content-type"] == "text/event-stream" and reply.text.endswith("data: [DONE]\n\n")
    client = openai.OpenAI(base_url=f"{stream_url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIError, match="CUDA out of memory"):
        list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], stream=True))


def test_a_models_own_refusal_is_passed_on_as_its_openai_error(wire) -> None:
    """SageMaker's ModelError 424 with the container's 4xx: the container's OpenAI error object reaches the caller
    (vLLM's flat {"object": "error", ...} too); the invoke door's status is 400."""
    invoke.reset_client()
    sent = {
        "error": {
            "message": "max_tokens is too large for this model",
            "type": "BadRequestError",
            "param": "max_tokens",
            "code": 400,
        }
    }
    wire.answers[:] = [
        (
            424,
            "ModelError",
            {"message": "Received client error (400)", "OriginalStatusCode": 400, "OriginalMessage": json.dumps(sent)},
            0,
        )
    ]
    status, _, error = invoke_door(OK)
    assert status == 400 and error == {"error": {**sent["error"]}}
    flat = {"object": "error", "message": "bad", "type": "BadRequestError", "param": None, "code": 400}
    wire.answers[:] = [
        (424, "ModelError", {"message": "x", "OriginalStatusCode": 400, "OriginalMessage": json.dumps(flat)}, 0)
    ]
    assert invoke_door(OK)[2]["error"]["message"] == "bad"
    invoke.reset_client()


# ---- SageMaker's retryable errors: one status and a Retry-After at every door ------------------------------------

NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
RETRYABLE = [  # (id, wire status, code, message, status every door answers, error_type, Retry-After)
    ("no-capacity", 400, "ValidationError", NO_CAPACITY, 503, "no_capacity", "60"),
    ("model-not-ready", 429, "ModelNotReadyException", "still loading", 503, "endpoint_unavailable", "10"),
    ("service-unavailable", 503, "ServiceUnavailable", "try again", 503, "endpoint_unavailable", "5"),
    ("throttled", 400, "ThrottlingException", "Rate exceeded", 429, "throttled", "1"),
]


class NoS3:
    def put_object(self, **_: Any) -> dict:
        return {}


@pytest.mark.parametrize(
    ("wire_status", "code", "message", "status", "kind", "retry_after"),
    [r[1:] for r in RETRYABLE],
    ids=[r[0] for r in RETRYABLE],
)
def test_a_retryable_sagemaker_error_is_one_status_with_retry_after_at_every_door(
    wire, stream_url, monkeypatch, wire_status, code, message, status, kind, retry_after
) -> None:
    """The invoke function (generation and chat), the stream function (generation and chat) and the asynchronous
    submit function, each against a stand-in of SageMaker's runtime API on the wire (tests/lambda/conftest.py).
    One attempt per call: botocore's retries of a throttle would only repeat the same answer, slower."""
    monkeypatch.setattr(invoke, "MAX_ATTEMPTS", 1)
    invoke.reset_client()
    stream.reset_client()
    wire.answers[:] = [(wire_status, code, {"message": message}, 0)]
    doors = {
        "invoke": lambda: invoke.handler(proxy({"inputs": "hi"}, path="/")),
        "invoke-chat": lambda: invoke.handler(proxy(OK)),
        "async": lambda: _async_submit(),
    }
    for door, call in doors.items():
        reply = call()
        answer = json.loads(reply["body"])
        kind_seen = answer["error"]["code"] if isinstance(answer["error"], dict) else answer["error_type"]
        assert (reply["statusCode"], kind_seen, reply["headers"].get("Retry-After")) == (status, kind, retry_after), (
            door
        )
    for path, request in (("/", {"inputs": "hi"}), ("/v1/chat/completions", {**OK, "stream": True})):
        reply = stream_door(stream_url, request, path)
        answer = reply.json()
        kind_seen = answer["error"]["code"] if isinstance(answer["error"], dict) else answer["error_type"]
        assert (reply.status_code, kind_seen, reply.headers.get("retry-after")) == (status, kind, retry_after), path
    invoke.reset_client()
    stream.reset_client()


def _async_submit() -> dict:
    import boto3

    runtime = boto3.client("sagemaker-runtime", config=invoke.Config(retries={"total_max_attempts": 1}))
    status, answer = async_invoke.submit(
        "chat-ep", {"inputs": "hi"}, input_location=("bucket", "in"), s3=NoS3(), runtime=runtime
    )
    return {"statusCode": status, "headers": invoke.response_headers(answer), "body": json.dumps(answer)}
