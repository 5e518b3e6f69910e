"""The streaming front door (endpoint_runtime/stream.py, lambda/stream/app.py): the request contract and error shapes
it shares with the invoke function, re-framing PayloadPart bytes into lines, and tokens streamed end to end from the
local server (local_runtime/serve.py's InvokeEndpointWithResponseStream path, AWS event-stream framing) through boto3
and the function's HTTP server, one by one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import botocore.exceptions
import httpx
import pytest
from helpers import ROOT, running, serve_in_thread

from endpoint_runtime import invoke, stream
from local_runtime import event_stream

ENDPOINT = "tiny-gpt2"


def _load_app_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("stream_app", ROOT / "lambda" / "stream" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------------- re-framing


def test_lines_split_across_payload_parts_at_every_byte_come_out_whole():
    """SageMaker cuts the model's bytes anywhere: inside a line, inside a UTF-8 character."""
    data = ('{"token": {"text": "é"}}\n{"token": {"text": " 猫"}}\n\n{"generated_text": "é 猫"}').encode()
    for size in (1, 2, 3, 7, len(data)):
        splitter = stream.LineSplitter()
        lines = [line for i in range(0, len(data), size) for line in splitter.feed(data[i : i + size])]
        lines += splitter.flush()
        assert [json.loads(line) for line in lines] == [
            {"token": {"text": "é"}},
            {"token": {"text": " 猫"}},
            {"generated_text": "é 猫"},
        ], size


def test_both_framings_lmi_jsonlines_and_sse_data_lines():
    assert stream.parse_line(b'{"token": {"id": 3, "text": " Paris"}}') == {"token": {"id": 3, "text": " Paris"}}
    assert stream.parse_line(b'data: {"token": {"text": " Paris"}}') == {"token": {"text": " Paris"}}
    assert stream.parse_line(b"data: [DONE]") is None and stream.parse_line(b": keep-alive") is None
    assert stream.token_text({"token": {"text": " Paris"}}) == " Paris"
    assert stream.token_text({"token": {"id": 2, "text": "</s>", "special": True}}) is None
    with pytest.raises(stream.ModelStreamFailed):  # LMI's error line during inference
        stream.token_text(
            {"token": {"id": -1, "text": "", "special_token": True}, "details": {"finish_reason": "error"}}
        )
    with pytest.raises(stream.ModelStreamFailed, match="CUDA out of memory"):
        stream.token_text({"error": "CUDA out of memory", "code": 424})


def _events(*parts: bytes, fail: Exception | None = None) -> Iterator[dict]:
    for part in parts:
        yield {"PayloadPart": {"Bytes": part}}
    if fail is not None:
        raise fail


def test_client_lines_from_parts_end_with_the_summary():
    events = _events(
        b'{"token": {"text": "Hel',
        b'lo"}}\n{"tok',
        b'en": {"text": " world"}}\n',
        b'{"generated_text": "Hello world", "details": {"finish_reason": "length"}}\n',
    )
    log: dict = {}
    lines = [json.loads(x) for x in stream._client_lines(events, "ep", time.monotonic(), log)]
    assert lines[:2] == [{"token": {"text": "Hello"}}, {"token": {"text": " world"}}]
    assert lines[2]["generated_text"] == "Hello world" and lines[2]["details"] == {"finish_reason": "length"}
    assert lines[2]["time_to_first_token_ms"] is not None and log["stream_tokens"] == 2


@pytest.mark.parametrize(
    ("code", "message", "error_type"),
    [
        (
            "ModelStreamError",
            "Your model primary did not complete sending the inference response in the allotted time.",
            "timeout",
        ),
        ("ModelStreamError", "connection reset", "model_error"),
        ("InternalStreamFailure", "internal", "upstream_error"),
    ],
)
def test_a_stream_that_fails_midway_ends_with_an_error_line(code, message, error_type):
    failure = botocore.exceptions.EventStreamError(
        {"Error": {"Code": code, "Message": message}}, "InvokeEndpointWithResponseStream"
    )
    lines = list(stream._client_lines(_events(b'{"token": {"text": "a"}}\n', fail=failure), "ep", time.monotonic(), {}))
    assert json.loads(lines[0]) == {"token": {"text": "a"}}
    assert json.loads(lines[-1])["error_type"] == error_type and len(lines) == 2


def test_a_stream_past_its_deadline_ends_with_a_timeout_line_not_a_cut():
    def slow() -> Iterator[dict]:
        yield {"PayloadPart": {"Bytes": b'{"token": {"text": "a"}}\n'}}
        time.sleep(0.05)
        yield {"PayloadPart": {"Bytes": b'{"token": {"text": "b"}}\n'}}

    lines = [json.loads(x) for x in stream._client_lines(slow(), "ep", time.monotonic(), {}, deadline_s=0.02)]
    assert lines[0] == {"token": {"text": "a"}} and lines[-1]["error_type"] == "timeout" and len(lines) == 2


# ---------------------------------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"inputs": "hi", "parameters": {"temperature": 9}}', 400, "between 0.01 and 2, got 9"),
        (b'{"inputs": "hi", "stream": true}', 400, "unknown request keys ['stream']"),
        (b'{"inputs": "x" , "parameters": {"max_new_tokens": 100000}}', 400, "parameters.max_new_tokens"),
        (b'{"inputs": "' + b"x" * 70_000 + b'"}', 413, "at most 65536 bytes"),
    ],
)
def test_bad_requests_get_the_invoke_functions_status_and_body(body, status, needle, monkeypatch):
    monkeypatch.setenv("ENDPOINT_NAME", ENDPOINT)
    got_status, headers, got = stream.handle_request("POST", body)
    invoked = invoke.handler({"body": body.decode("utf-8", "replace"), "requestContext": {"http": {"method": "POST"}}})
    assert got_status == status == invoked["statusCode"]
    assert json.loads(got) == json.loads(invoked["body"]) and needle in json.loads(got)["error"]
    assert headers["Content-Type"] == "application/json"


def test_streaming_rules_one_prompt_no_beams_and_the_stream_flag():
    with pytest.raises(stream.RequestError, match="takes one prompt .* got a list of 2"):
        stream.prepare({"inputs": ["a", "b"]})
    with pytest.raises(
        stream.RequestError, match=r"num_beams must be 1 when streaming \(beam search returns whole sequences\), got 2"
    ):
        stream.prepare({"inputs": "a", "parameters": {"num_beams": 2}})
    assert json.loads(stream.prepare({"inputs": ["a"], "parameters": {"max_new_tokens": 4}})) == {
        "inputs": "a",
        "parameters": {"return_full_text": False, "max_new_tokens": 4},
        "stream": True,
    }


def test_only_post(monkeypatch):
    monkeypatch.setenv("ENDPOINT_NAME", ENDPOINT)
    status, _, body = stream.handle_request("GET", b"")
    assert status == 405 and json.loads(body) == {
        "error": "method must be POST, got GET",
        "error_type": "method_not_allowed",
    }


def test_event_stream_messages_are_what_botocore_decodes():
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(
        event_stream.payload_part(b'{"token": {"text": "a"}}\n') + event_stream.model_stream_error("x", "StreamBroken")
    )
    first, second = list(buffer)
    assert first.headers[":event-type"] == "PayloadPart" and first.payload == b'{"token": {"text": "a"}}\n'
    assert (
        second.headers[":exception-type"] == "ModelStreamError"
        and json.loads(second.payload)["ErrorCode"] == "StreamBroken"
    )


# ---------------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def model_server(gpt2_artifact: Path) -> Iterator[tuple[str, object]]:
    """The local server on the tiny GPT-2 artifact, with its ModelHost (to watch the artifact's stream_fn). The
    ModelHost streams with the handler's stream_fn (stream_with_handler): these tests need a container that
    streams token by token in this process, to watch the stream function relay each token as it is made; hf-fastload
    as served (and on AWS) answers whole replies (tests/local_runtime/test_strict_runtime.py)."""
    from local_runtime.serve import create_app

    app = create_app(gpt2_artifact, endpoint_name=ENDPOINT)
    app.state.host.stream_with_handler = True
    with running(app, timeout=60) as url:
        yield url, app.state.host


@pytest.fixture
def watched(model_server):
    """The artifact's stream_fn, recording when each chunk is produced and pausing 40 ms before the next (so that
    "the first token arrived before the last was produced" holds by a margin even on a busy machine)."""
    url, host = model_server
    original, produced = host.handler.stream_fn, []

    def stream_fn(data, model):
        for chunk in original(data, model):
            produced.append(time.monotonic())
            yield chunk
            time.sleep(0.04)

    host.handler.stream_fn = stream_fn
    try:
        yield url, produced
    finally:
        host.handler.stream_fn = original


def _runtime(url: str):
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_tokens_arrive_one_by_one_through_boto3(watched):
    url, produced = watched
    payload = {"inputs": "The weather today is", "parameters": {"max_new_tokens": 10, "min_new_tokens": 10}}
    status, lines = stream.open_stream(ENDPOINT, payload, client=_runtime(url))
    assert status == 200, lines
    arrived = []
    for line in lines:
        arrived.append((time.monotonic(), json.loads(line)))
    tokens = [obj["token"]["text"] for _, obj in arrived if "token" in obj]
    summary = arrived[-1][1]
    assert len(tokens) >= 5, arrived  # several chunks, not one reply
    assert summary["generated_text"] == "".join(tokens) and summary["details"]["generated_tokens"] == 10
    assert arrived[0][0] < produced[-1], "the first token reached the client before the model produced the last"


def test_a_request_the_model_refuses_is_the_invoke_functions_model_rejected_input(model_server):
    url, _ = model_server
    status, body = stream.open_stream(
        ENDPOINT, {"inputs": "hi", "parameters": {"max_new_tokens": 512}}, client=_runtime(url)
    )
    assert status == 400 and body["error_type"] == "model_rejected_input" and "max_new_tokens" in body["error"]
    status, body = stream.open_stream("other", {"inputs": "hi"}, client=_runtime(url))
    assert status == 503 and body["error_type"] == "endpoint_not_found"


def test_a_model_failing_midway_reaches_the_client_as_an_error_line(model_server):
    """The local server ends the stream with a ModelStreamError message; boto3 raises it while iterating."""
    url, host = model_server
    original = host.handler.stream_fn

    def failing(data, model):
        chunks = original(data, model)
        yield next(chunks)
        raise RuntimeError("CUDA error: device-side assert triggered")

    host.handler.stream_fn = failing
    try:
        status, lines = stream.open_stream(
            ENDPOINT, {"inputs": "hi", "parameters": {"min_new_tokens": 4}}, client=_runtime(url)
        )
        got = [json.loads(line) for line in lines]
    finally:
        host.handler.stream_fn = original
    assert status == 200 and "token" in got[0]
    assert got[-1]["error_type"] == "model_error" and "broke off its stream" in got[-1]["error"], got


def test_the_functions_http_server_streams_chunked_lines(watched, monkeypatch):
    url, produced = watched
    for key, value in {
        "ENDPOINT_NAME": ENDPOINT,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    stream.reset_client()
    server = _load_app_module().serve(port=0)
    serve_in_thread(server)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert httpx.get(f"{base}/_ready").status_code == 200
        body = {"inputs": "Infrastructure as code means", "parameters": {"max_new_tokens": 8, "min_new_tokens": 8}}
        arrived = []
        with httpx.stream("POST", base, json=body, timeout=30) as reply:
            assert reply.status_code == 200 and reply.headers["content-type"] == "application/jsonlines"
            assert reply.headers["transfer-encoding"] == "chunked"
            for line in reply.iter_lines():
                arrived.append((time.monotonic(), json.loads(line)))
        assert sum("token" in obj for _, obj in arrived) >= 4 and "generated_text" in arrived[-1][1]
        assert arrived[0][0] < produced[-1]
        refused = httpx.post(base, content=b'{"inputs": ""}', timeout=30)
        assert refused.status_code == 400 and refused.json()["error_type"] == "validation"
    finally:
        server.shutdown()
        server.server_close()
        stream.reset_client()
