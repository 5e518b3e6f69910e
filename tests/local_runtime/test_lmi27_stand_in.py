"""The lmi-vllm stand-in answers as LMI 27's async vLLM service does (local_runtime/stand_in.py LMI27: each shape and
framing with its djl-serving source lines), and our clients read it: the smoke test's shape check, the invoke
function, the stream function's line reader and the load test's, through the local runtime in front of the stand-in
(a real process on the tiny Llama), signed with boto3 as the demo signs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from helpers import ROOT, running

from endpoint_runtime import bodies, invoke, smoke, stream

ENDPOINT = "local-tiny-lmi-vllm"
GENERATION = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 5, "min_new_tokens": 5}}
CHAT = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def stand_in_url(tiny_chat_models: dict[str, Path]) -> Iterator[str]:
    """The stand-in's own server (its container port), engine lmi-vllm, in this process."""
    from local_runtime.stand_in import StandIn, serving

    with serving(StandIn({"--model": str(tiny_chat_models["llama"])}, "lmi27")) as url:
        yield url


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/invocations", json=body, timeout=120)


def test_a_generation_request_is_answered_with_one_object_and_a_newline(stand_in_url: str) -> None:
    """request_response_utils.py:137-146 (lmi_response = {"generated_text": primary_choice.text}) written by
    create_non_stream_output (async_utils.py:23-34: application/json; :62-63: the newline)."""
    reply = _post(stand_in_url, GENERATION)
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    assert reply.content.endswith(b"}\n") and reply.content.count(b"\n") == 1
    document = json.loads(reply.content)
    assert isinstance(document, dict) and set(document) == {"generated_text"}
    assert isinstance(document["generated_text"], str) and document["generated_text"]
    # What the smoke test read before: a list only. LMI 27's object failed it (the finding this test holds).
    assert not isinstance(document, list) and smoke.check_response_shape(document) is None


def test_a_streamed_generation_is_lmi_27s_token_lines(stand_in_url: str) -> None:
    """convert_completion_chunk_response_to_lmi_schema (request_response_utils.py:195-255): one line per token with
    index, token {id, text, logprob}, generated_text null but on the last, details null; then the usage chunk and
    [DONE] as two bare newlines (:216-218, :206-209; async_utils.py:37-47 application/jsonlines, :62-63)."""
    whole = json.loads(_post(stand_in_url, GENERATION).content)["generated_text"]
    reply = _post(stand_in_url, {**GENERATION, "stream": True})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/jsonlines"
    assert reply.content.endswith(b"}\n\n\n")
    pieces = reply.content.decode().split("\n")
    lines = [json.loads(piece) for piece in pieces if piece]
    assert pieces[-3:] == ["", "", ""] and len(lines) == 5
    for position, line in enumerate(lines):
        assert set(line) == {"index", "token", "generated_text", "details"} and line["index"] == 0
        assert set(line["token"]) == {"id", "text", "logprob"} and line["token"]["logprob"] <= 0
        assert line["details"] is None
        assert (line["generated_text"] is None) == (position < len(lines) - 1)
    assert lines[-1]["generated_text"] == "".join(line["token"]["text"] for line in lines) == whole


def test_a_streamed_chat_is_json_lines_not_server_sent_events(stand_in_url: str) -> None:
    """vllm_stream_output_formatter (request_response_utils.py:180-192): vLLM's SSE chunk with `data: ` cut off,
    one per line; [DONE] becomes an empty piece, a bare newline."""
    reply = _post(stand_in_url, {**CHAT, "stream": True, "stream_options": {"include_usage": True}})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/jsonlines"
    text = reply.content.decode()
    assert "data:" not in text and text.endswith("}\n\n")
    chunks = [json.loads(line) for line in text.split("\n") if line]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 4


def test_a_whole_chat_is_vllms_completion_and_a_newline(stand_in_url: str) -> None:
    """vllm_non_stream_output_formatter (request_response_utils.py:166-177): the chat.completion as vLLM dumps it."""
    reply = _post(stand_in_url, CHAT)
    assert reply.status_code == 200 and reply.content.endswith(b"}\n")
    assert json.loads(reply.content)["object"] == "chat.completion"


# ---- our clients, through the local runtime in front of the stand-in's process ---------------------------------


@pytest.fixture(scope="module")
def runtime_url(tiny_chat_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from local_runtime.process import ContainerHost
    from local_runtime.serve import create_app
    from local_runtime.stand_in import StandInContainer

    model = tiny_chat_models["llama"]
    container = StandInContainer("lmi-vllm", {}, model, tmp_path_factory.mktemp("lmi27"), ready_timeout_s=300)
    app = create_app(model, endpoint_name=ENDPOINT, container_host=ContainerHost(container))
    with running(app, timeout=300) as url:
        yield url


@pytest.fixture
def client(runtime_url: str) -> Any:
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=runtime_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_the_smoke_tests_invoke_reads_lmi_27s_object(client: Any) -> None:
    """The smoke test's own call (smoke._answer_real_time: the invoke function's code) and shape check pass against
    the stand-in; InvokeEndpoint's raw body is the object, which the list-only check of before refused."""
    answer = smoke._answer_real_time(ENDPOINT, GENERATION, None, client, None)
    assert answer.submitted_ok and smoke.check_response_shape(answer.outputs) is None, answer
    raw = json.loads(
        client.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps(GENERATION))[
            "Body"
        ].read()
    )
    assert isinstance(raw, dict) and bodies.generation_outputs(bodies.GENERATION, raw) == [raw]
    status, body = invoke.invoke(ENDPOINT, GENERATION, client=client)
    assert status == 200 and body["outputs"] == [raw]


def test_the_stream_function_reads_lmi_27s_token_lines(client: Any) -> None:
    status, lines = stream.open_stream(ENDPOINT, GENERATION, client=client)
    assert status == 200, lines
    read = [json.loads(line) for line in lines]
    tokens = [line["token"]["text"] for line in read if "token" in line]
    assert len(tokens) == 5 and read[-1]["generated_text"] == "".join(tokens)


def test_the_load_tests_reader_counts_lmi_27s_tokens(runtime_url: str, monkeypatch, tmp_path) -> None:
    """The load test's sagemaker-runtime target, streamed (one token per line, the server's lines) and whole (the
    object read through bodies.generation_outputs)."""
    from deployment import load_config
    from load_testing import loadtest
    from load_testing.loadtest import parse_workload

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    # as the SLO gate asks an lmi-vllm endpoint: its body, and no fixed output lengths (LMI 27 reads no min_new_tokens)
    body = (
        load_config(ROOT / "config" / "examples" / "lmi-vllm.yaml", "dev", build_root=tmp_path).plans[0].endpoint_body
    )
    workload = loadtest.fit_workload_to_body(
        parse_workload({"input_tokens": {"mean": 8}, "output_tokens": {"mean": 5}, "concurrency": [1], "requests": 2}),
        body,
        lambda _: None,
    )
    assert not workload.exact_output_tokens
    for streamed in (True, False):
        target = loadtest.SageMakerRuntimeTarget(ENDPOINT, "us-east-1", runtime_url, stream=streamed, body=body)
        [level] = loadtest.run(target, workload, progress=False)["levels"]
        assert level["errors"] == 0, level
        assert level["output_tokens_per_request"]["mean"] > 0, level
        if streamed:
            # a line per token, not one blob: at least a gap between each two of a request's tokens (its length is
            # the model's own, min_new_tokens being unread)
            tokens = level["output_tokens_per_request"]["mean"] * level["succeeded"]
            assert level["itl_ms"]["n"] >= tokens - level["succeeded"] and tokens >= 2 * level["succeeded"], level


def test_a_djl_stand_in_refuses_a_stream_as_its_handler_does(tiny_chat_models: dict[str, Path]) -> None:
    """The DJL systems do not stream: their handler (systems/djl_common/handler/model.py) refuses the "stream" key,
    so the stand-in does too, and answers a body without it with the whole list."""
    from local_runtime.stand_in import StandIn, serving

    with serving(StandIn({"--model": str(tiny_chat_models["llama"])}, "djl")) as url:
        refused = _post(url, {**GENERATION, "stream": True})
        whole = _post(url, GENERATION)
    assert refused.status_code == 400 and "stream" in refused.json()["error"]
    assert whole.status_code == 200 and isinstance(whole.json(), list)


def test_lmi_27_ignores_min_new_tokens_as_its_completion_request_does(tiny_chat_models: dict[str, Path]) -> None:
    """LMI 27 passes min_new_tokens on to vLLM's CompletionRequest, which has no such field (request_response_utils.py
    `completion_dict.update(parameters)`): its generation is not held to a least length, while the older LMI
    handler's is. (Our front doors refuse it for lmi-vllm: systems/lmi_vllm's unread_parameters.)"""
    from local_runtime.stand_in import StandIn

    body = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 12, "min_new_tokens": 12}}
    held_to = {}
    for engine in ("lmi27", "lmi"):
        stand_in = StandIn({"--model": str(tiny_chat_models["llama"])}, engine)
        stand_in._generate = lambda ids, wanted, minimum, engine=engine: (held_to.update({engine: minimum}), ("x", 1))[
            1
        ]
        status, _ = stand_in.generation(body)
        assert status == 200
    assert held_to == {"lmi27": 0, "lmi": 12}
