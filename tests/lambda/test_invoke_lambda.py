"""Tests for lambda/invoke/handler.py: request validation, event shapes, the byte cap, error mapping and a
real round trip through the moto server.

Three kinds of SageMaker stand-in are used:
  * a recording fake client object (validation / event-shape tests: proves what is, or is not, sent);
  * a tiny local HTTP server that answers InvokeEndpoint the way SageMaker does on the wire (errors that moto
    cannot produce: endpoint not found, ModelError with OriginalStatusCode, throttling, slow answers);
  * the moto server (local_emulator.moto_server): SageMaker resources created with boto3 + canned results.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import time
from pathlib import Path

import boto3
import pytest
from helpers import BAD_BODIES, EMOJI_BODY

ROOT = Path(__file__).resolve().parents[2]
HANDLER_PATH = ROOT / "endpoint_runtime" / "invoke.py"  # lambda/invoke/handler.py imports it


ENV_KEYS = (
    "ENDPOINT_NAME",
    "MAX_REQUEST_BYTES",
    "MAX_NEW_TOKENS",
    "MAX_BATCH_SIZE",
    "READ_TIMEOUT_S",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
)


def _load_handler():
    # A fresh module per test session, configured by the environment the tests set.
    spec = importlib.util.spec_from_file_location("invoke_lambda_handler", HANDLER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


h = _load_handler()


class FakeClient:
    """Stands in for the sagemaker-runtime client; records calls, answers with a JSON body (by default one
    {"generated_text": "ok"} a prompt sent, as the generation contract's containers answer)."""

    def __init__(self, outputs=None, raw: bytes | None = None):
        self.calls: list[dict] = []
        self.outputs = outputs
        self.raw = raw

    def invoke_endpoint(self, **kwargs):
        self.calls.append(kwargs)
        inputs = json.loads(kwargs["Body"]).get("inputs")
        outputs = self.outputs or [{"generated_text": "ok"}] * (len(inputs) if isinstance(inputs, list) else 1)
        raw = self.raw if self.raw is not None else json.dumps(outputs).encode()
        return {"Body": io.BytesIO(raw), "ContentType": "application/json"}


class ExplodingClient:
    def invoke_endpoint(self, **kwargs):
        raise AssertionError("an invalid request must not reach SageMaker")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ENDPOINT_NAME", "llm-endpoint")
    h.reset_client()
    yield
    h.reset_client()


@pytest.fixture
def fake(monkeypatch):
    client = FakeClient()
    monkeypatch.setattr(h, "_client", client)
    return client


@pytest.fixture
def exploding(monkeypatch):
    monkeypatch.setattr(h, "_client", ExplodingClient())


def proxy(body: str | bytes, b64: bool = False, method: str | None = None) -> dict:
    if b64:
        body = base64.b64encode(body if isinstance(body, bytes) else body.encode()).decode()
    event = {"version": "2.0", "body": body, "isBase64Encoded": b64, "headers": {"content-type": "application/json"}}
    if method:
        event["requestContext"] = {"http": {"method": method}}
    return event


def call(event) -> tuple[int, dict]:
    resp = h.handler(event, None)
    assert set(resp) == {"statusCode", "headers", "body"}
    assert resp["headers"]["Content-Type"] == "application/json"
    return resp["statusCode"], json.loads(resp["body"])


# ----------------------------------------------------------------------------------------------------------------
# Validation: every bad request gets a 4xx naming the key, the value and the limit, and SageMaker is never called.

P = lambda params: {"inputs": "hello", "parameters": params}

BAD_REQUESTS = [
    # (id, event, status, substrings that must be in the message)
    ("not-json", proxy("{inputs: hi"), 400, ["body is not valid JSON:"]),
    ("empty-body", proxy(""), 400, ["body is not valid JSON:", "empty"]),
    ("nan", proxy('{"inputs": "x", "parameters": {"temperature": NaN}}'), 400, ["body is not valid JSON", "NaN"]),
    (
        "duplicate-key",
        proxy('{"inputs": "x", "inputs": "y"}'),
        400,
        ["body is not valid JSON", "duplicate key 'inputs'"],
    ),
    ("array-body", proxy('["hi"]'), 400, ["request must be a JSON object", "got array"]),
    ("bad-base64", {"body": "%%%not base64", "isBase64Encoded": True}, 400, ["body is not valid base64"]),
    ("bad-utf8", proxy(b"\xff\xfe{}", b64=True), 400, ["body is not valid UTF-8"]),
    ("missing-inputs", {"parameters": {}}, 400, ["inputs is required"]),
    ("empty-inputs", {"inputs": ""}, 400, ['inputs must be a non-empty string, got ""']),
    ("blank-inputs", {"inputs": "   "}, 400, ['inputs must be a non-empty string, got "   "']),
    ("inputs-number", {"inputs": 42}, 400, ["inputs must be a non-empty string or a list of 1 to 8", "got integer"]),
    ("inputs-empty-list", {"inputs": []}, 400, ["inputs must be a list of 1 to 8 strings, got a list of 0"]),
    ("inputs-too-many", {"inputs": ["a"] * 9}, 400, ["inputs must be a list of 1 to 8 strings, got a list of 9"]),
    ("inputs-item-type", {"inputs": ["a", 3]}, 400, ["inputs[1] must be a non-empty string, got integer"]),
    (
        "unknown-top-key",
        {"inputs": "x", "endpoint_name": "other"},
        400,
        ["unknown request keys ['endpoint_name']", "allowed keys are ['inputs', 'parameters']"],
    ),
    ("params-not-object", {"inputs": "x", "parameters": [1]}, 400, ["parameters must be an object, got [1] (array)"]),
    (
        "unknown-params",
        P({"max_tokens": 5, "temprature": 1}),
        400,
        ["unknown parameters ['max_tokens', 'temprature']", "allowed parameters are [", "'max_new_tokens'", "'top_p'"],
    ),
    (
        "max-new-tokens-high",
        P({"max_new_tokens": 4096}),
        400,
        ["parameters.max_new_tokens must be between 1 and 512, got 4096"],
    ),
    (
        "max-new-tokens-zero",
        P({"max_new_tokens": 0}),
        400,
        ["parameters.max_new_tokens must be between 1 and 512, got 0"],
    ),
    (
        "max-new-tokens-string",
        P({"max_new_tokens": "10"}),
        400,
        ['parameters.max_new_tokens must be an integer between 1 and 512, got "10" (string)'],
    ),
    (
        "max-new-tokens-float",
        P({"max_new_tokens": 10.5}),
        400,
        ["parameters.max_new_tokens must be an integer between 1 and 512, got 10.5 (number)"],
    ),
    (
        "max-new-tokens-bool",
        P({"max_new_tokens": True}),
        400,
        ["parameters.max_new_tokens must be an integer between 1 and 512, got true (boolean)"],
    ),
    (
        "temperature-zero",
        P({"temperature": 0}),
        400,
        [
            "parameters.temperature must be between 0.01 and 2, got 0 (for greedy decoding leave it out and set do_sample false)"
        ],
    ),
    ("temperature-high", P({"temperature": 7.5}), 400, ["parameters.temperature must be between 0.01 and 2, got 7.5"]),
    ("top-p-high", P({"top_p": 1.5}), 400, ["parameters.top_p must be greater than 0 and at most 1, got 1.5"]),
    ("top-k-high", P({"top_k": 1001}), 400, ["parameters.top_k must be between 0 and 1000, got 1001"]),
    ("top-k-negative", P({"top_k": -1}), 400, ["parameters.top_k must be between 0 and 1000, got -1"]),
    (
        "do-sample-string",
        P({"do_sample": "yes"}),
        400,
        ['parameters.do_sample must be true or false, got "yes" (string)'],
    ),
    (
        "repetition-penalty",
        P({"repetition_penalty": 11}),
        400,
        ["parameters.repetition_penalty must be between 0.1 and 10, got 11"],
    ),
    # stop and typical_p: no container behind this function honours them (request_contract.PARAMETERS)
    ("stop-refused", P({"stop": ["###"]}), 400, ["unknown parameters ['stop']"]),
    ("typical-p-refused", P({"typical_p": 0.9}), 400, ["unknown parameters ['typical_p']"]),
    ("seed-negative", P({"seed": -1}), 400, ["parameters.seed must be between 0 and 4294967295, got -1"]),
    (
        "seed-above-32-bits",
        P({"seed": 2**32}),
        400,
        ["parameters.seed must be between 0 and 4294967295, got 4294967296"],
    ),
    ("get-method", proxy('{"inputs": "x"}', method="GET"), 405, ["method must be POST, got GET"]),
    ("odd-request-context", {"body": "nope", "requestContext": {"http": None}}, 400, ["body is not valid JSON"]),
    # a direct event was decoded by the Lambda runtime: the same strict rules apply to it as to a body
    ("direct-lone-surrogate", {"inputs": "a\ud800"}, 400, ["inputs contains a lone UTF-16 surrogate \\ud800"]),
    ("direct-lone-surrogate-param", P({"top_k": ["\udc00"]}), 400, ["parameters.top_k[0] contains a lone UTF-16"]),
    (
        "direct-too-deep",
        P({"top_k": json.loads("[" * 31 + '"a"' + "]" * 31)}),
        400,
        ["parameters.top_k" + "[0]" * 30 + ":", "nested more than 32 levels deep"],
    ),
]


@pytest.mark.parametrize("event,status,needles", [c[1:] for c in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS])
def test_bad_requests_are_rejected_with_precise_messages(exploding, event, status, needles):
    got_status, body = call(event)
    assert got_status == status, body
    for needle in needles:
        assert needle in body["error"], (needle, body["error"])
    assert body["error_type"]


@pytest.mark.parametrize("body,needles", [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES])
def test_bad_bodies_are_4xx_with_a_message_never_500(exploding, monkeypatch, body, needles):
    # 6 MiB (the most MAX_REQUEST_BYTES allows) so that the 200 KB of nesting reaches the parser, not the cap.
    monkeypatch.setenv("MAX_REQUEST_BYTES", str(6 * 1024 * 1024))
    status, reply = call(proxy(body, b64=True))  # base64: the only way a proxy event carries non-UTF-8 bytes
    assert status == 400, reply
    for needle in needles:
        assert needle in reply["error"], (needle, reply["error"])
    assert reply["error_type"] == "validation"


def test_a_surrogate_pair_is_one_character_and_passes(fake):
    status, _ = call(proxy(EMOJI_BODY, b64=True))
    assert status == 200
    assert json.loads(fake.calls[0]["Body"])["inputs"] == "smile \N{GRINNING FACE}"


def test_max_new_tokens_limit_comes_from_env(monkeypatch, fake):
    monkeypatch.setenv("MAX_NEW_TOKENS", "1024")
    status, body = call(P({"max_new_tokens": 4096}))
    assert status == 400 and "must be between 1 and 1024, got 4096" in body["error"]
    status, _ = call(P({"max_new_tokens": 1000}))
    assert status == 200


def test_valid_parameters_are_forwarded_unchanged(fake):
    params = {
        "max_new_tokens": 512,
        "temperature": 2,
        "top_p": 0.5,
        "top_k": 40,
        "do_sample": True,
        "repetition_penalty": 1.2,
        "seed": 2**32 - 1,
        "return_full_text": True,
        "min_new_tokens": 2,
        "num_beams": 1,
    }
    status, body = call({"inputs": ["a", "b"], "parameters": params})
    assert status == 200, body
    sent = json.loads(fake.calls[0]["Body"])
    assert sent == {"inputs": ["a", "b"], "parameters": params}


@pytest.mark.parametrize(
    "given, sent",
    [
        ({}, {"return_full_text": False}),  # the contract's default, stated: TGI's own is true
        ({"do_sample": False, "temperature": 0.5, "top_p": 0.5, "top_k": 5}, {"do_sample": False}),  # greedy
        ({"top_p": 1, "top_k": 0, "temperature": 0.7}, {"temperature": 0.7}),  # no-filter values left out
    ],
    ids=["return-full-text", "greedy-drops-the-knobs", "no-filter-values"],
)
def test_parameters_are_sent_as_every_generation_container_reads_them_alike(fake, given, sent):
    """endpoint_runtime/bodies.py generation_parameters: what TGI would read otherwise (local_runtime/tgi_router.py)."""
    status, body = call({"inputs": "a", "parameters": given})
    assert status == 200, body
    assert json.loads(fake.calls[0]["Body"])["parameters"] == {"return_full_text": False, "max_new_tokens": 64, **sent}


def test_a_parameter_the_container_does_not_read_is_refused_unless_it_is_the_no_op(fake, monkeypatch):
    """UNREAD_PARAMETERS (ContainerBodies.unread_parameters: TGI has no min_new_tokens or num_beams field): a value
    that would change the answer is refused naming it; the no-op value is left out of the body."""
    monkeypatch.setenv("UNREAD_PARAMETERS", "min_new_tokens,num_beams")
    status, body = call({"inputs": "a", "parameters": {"num_beams": 2}})
    assert status == 400 and not fake.calls, body
    assert body["error"] == (
        "parameters.num_beams: value 2 is not served by this endpoint's container (its generation body has no such "
        "field and would ignore it); allowed: 1 (or leave it out)"
    )
    status, body = call({"inputs": "a", "parameters": {"num_beams": 1, "min_new_tokens": 0}})
    assert status == 200 and json.loads(fake.calls[0]["Body"])["parameters"] == {
        "return_full_text": False,
        "max_new_tokens": 64,
    }
    monkeypatch.setenv("UNREAD_PARAMETERS", "top_p")
    status, body = call({"inputs": "a"})
    assert status == 500 and "UNREAD_PARAMETERS names ['top_p']; allowed: min_new_tokens, num_beams" in body["error"]


def test_the_unread_parameters_a_system_may_declare_are_those_with_a_no_op_value():
    from typing import get_args

    import request_contract
    from endpoint_runtime import bodies
    from systems.base import UnreadParameter

    assert set(get_args(UnreadParameter)) == set(bodies.PARAMETER_NO_OP)
    for name, value in bodies.PARAMETER_NO_OP.items():  # the no-op value is one the contract accepts
        request_contract.validate_request({"inputs": "x", "parameters": {name: value}})


def test_fewer_outputs_than_prompts_is_the_models_error_not_an_answer(monkeypatch):
    """LMI 27 answers a list's first prompt only; such an answer must not pass for the whole batch."""
    monkeypatch.setattr(h, "_client", FakeClient(outputs=[{"generated_text": "ok"}]))
    status, body = call({"inputs": ["a", "b"]})
    assert status == 502 and body["error"].endswith(
        "answered 1 outputs for 2 prompts; its container may read fewer prompts a request than it was sent"
    ), body


def test_a_one_prompt_container_gets_a_string_and_a_list_of_more_is_refused(fake, monkeypatch):
    """MAX_BATCH_SIZE 1 (ContainerBodies.prompts_per_body: tgi, lmi-vllm): a one-item list travels as its string
    (TGI's `inputs` is a string); more items are refused before SageMaker is called."""
    monkeypatch.setenv("MAX_BATCH_SIZE", "1")
    status, body = call({"inputs": ["a"]})
    assert status == 200 and json.loads(fake.calls[0]["Body"])["inputs"] == "a" and len(body["outputs"]) == 1
    status, body = call({"inputs": ["a", "b"]})
    assert status == 400 and len(fake.calls) == 1, body
    assert "takes one prompt per request, got a list of 2; send one string per request" in body["error"]


# ----------------------------------------------------------------------------------------------------------------
# Event shapes, the byte cap, configuration


def test_direct_proxy_and_base64_events_are_equivalent(fake):
    payload = {"inputs": "Tell me a story", "parameters": {"max_new_tokens": 16}}
    text = json.dumps(payload)
    events = [
        payload,
        proxy(text),
        proxy(text, b64=True),
        proxy(text, method="POST"),
        {"body": text, "httpMethod": "POST", "requestContext": {}},
    ]  # API Gateway REST (v1) shape
    results = [call(e) for e in events]
    assert all(status == 200 for status, _ in results), results
    assert {json.dumps(body["outputs"]) for _, body in results} == {json.dumps([{"generated_text": "ok"}])}
    assert all(body["endpoint"] == "llm-endpoint" and isinstance(body["latency_ms"], int) for _, body in results)
    assert len(fake.calls) == len(events)
    for c in fake.calls:
        assert c["EndpointName"] == "llm-endpoint"
        assert c["ContentType"] == "application/json" and c["Accept"] == "application/json"
        assert json.loads(c["Body"]) == {**payload, "parameters": {**payload["parameters"], "return_full_text": False}}


def test_byte_cap_is_enforced_on_decoded_body(monkeypatch, fake):
    monkeypatch.setenv("MAX_REQUEST_BYTES", "200")

    def body_of(size):
        skeleton = json.dumps({"inputs": ""})
        return json.dumps({"inputs": "x" * (size - len(skeleton))})

    at_cap, over = body_of(200), body_of(201)
    assert len(at_cap.encode()) == 200 and len(over.encode()) == 201
    assert call(proxy(at_cap))[0] == 200
    assert call(proxy(at_cap, b64=True))[0] == 200  # the base64 text is longer than 200, the body is not
    status, body = call(proxy(over))
    assert status == 413 and body["error"] == "request body must be at most 200 bytes, got 201 bytes"
    status, body = call(proxy(over, b64=True))
    assert status == 413 and "at most 200 bytes, got 201 bytes" in body["error"]
    status, body = call(proxy("x" * 10_000, b64=True))  # rejected before decoding
    assert status == 413 and "at most 200 bytes" in body["error"]
    status, body = call({"inputs": "y" * 300})  # direct events count their JSON size
    assert status == 413 and "at most 200 bytes, got" in body["error"]
    assert len(fake.calls) == 2


def test_default_byte_cap_is_64_kib(fake):
    status, body = call(proxy(json.dumps({"inputs": "z" * (64 * 1024)})))
    assert status == 413 and "at most 65536 bytes, got 65550 bytes" in body["error"]


@pytest.mark.parametrize(
    "env,value,needle",
    [
        ("ENDPOINT_NAME", None, "ENDPOINT_NAME is not set"),
        ("ENDPOINT_NAME", "  ", "ENDPOINT_NAME is not set"),
        ("MAX_REQUEST_BYTES", "lots", "MAX_REQUEST_BYTES must be an integer"),
        ("MAX_NEW_TOKENS", "0", "MAX_NEW_TOKENS must be between 1 and"),
        ("READ_TIMEOUT_S", "120", "READ_TIMEOUT_S must be between 1 and 59"),
    ],
)
def test_misconfiguration_is_a_500_with_a_clear_message(monkeypatch, env, value, needle):
    if value is None:
        monkeypatch.delenv(env, raising=False)
    else:
        monkeypatch.setenv(env, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    status, body = call({"inputs": "x", "parameters": {"max_new_tokens": 1}})
    assert status == 500 and body["error_type"] == "configuration" and needle in body["error"], body


def test_client_is_created_once_with_timeouts_and_bounded_retries(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = h.get_client()
    assert h.get_client() is client
    cfg = client.meta.config
    assert cfg.connect_timeout == 5 and cfg.read_timeout == 55
    assert cfg.retries == {"mode": "standard", "total_max_attempts": 2}
    h.reset_client()
    monkeypatch.setenv("READ_TIMEOUT_S", "30")
    assert h.get_client().meta.config.read_timeout == 30


def test_one_json_log_line_without_the_prompt(fake, capsys):
    secret = "my very private prompt"
    call(proxy(json.dumps({"inputs": secret, "parameters": {"top_k": 5}})))
    call({"inputs": [secret], "parameters": {"max_new_tokens": 9999}})
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(lines) == 2
    ok, bad = lines
    assert ok["endpoint"] == "llm-endpoint" and ok["status"] == 200 and isinstance(ok["latency_ms"], int)
    assert ok["event_kind"] == "proxy" and ok["parameter_keys"] == ["top_k"]
    assert bad["status"] == 400 and "max_new_tokens" in bad["error"]
    assert secret not in json.dumps(lines) and "generated_text" not in json.dumps(lines)


def test_invoke_function_is_usable_without_the_handler():
    status, body = h.invoke("some-endpoint", {"inputs": "hi"}, client=FakeClient(outputs={"a": 1}))
    assert status == 200 and body["endpoint"] == "some-endpoint" and body["outputs"] == {"a": 1}
    status, body = h.invoke("some-endpoint", {"inputs": ""}, client=ExplodingClient())
    assert status == 400
    status, body = h.invoke("some-endpoint", {"inputs": "hi"}, client=FakeClient(raw=b"<html>oops"))
    assert status == 502 and body["error_type"] == "model_error" and "non-JSON" in body["error"]


# ----------------------------------------------------------------------------------------------------------------
# Error mapping over the wire: a local HTTP server that answers InvokeEndpoint as SageMaker does.

WIRE_ERRORS = [
    (
        "endpoint-not-found",
        400,
        "ValidationError",
        {"message": "Endpoint llm-endpoint of account 123456789012 not found."},
        503,
        "endpoint_not_found",
    ),
    (
        "model-rejects-input",
        424,
        "ModelError",
        {
            "Message": "Received client error (422) from primary with message ...",
            "OriginalStatusCode": 422,
            "OriginalMessage": json.dumps(
                {
                    "error": "Input validation error: `inputs` must have less than 2048 tokens. Given: 3000",
                    "error_type": "validation",
                }
            ),
            "LogStreamArn": "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/llm-endpoint",
        },
        400,
        "model_rejected_input",
    ),
    (
        "model-crashes",
        424,
        "ModelError",
        {
            "Message": "Received server error (500) from primary with message Traceback ...",
            "OriginalStatusCode": 500,
            "OriginalMessage": "Traceback (most recent call last): ...",
        },
        502,
        "model_error",
    ),
    (
        "sagemaker-timeout",
        424,
        "ModelError",
        {
            "Message": 'Received server error (0) from primary with message "Your invocation timed out while waiting '
            'for a response from container primary."'
        },
        504,
        "timeout",
    ),
    (
        "other-validation-error",
        400,
        "ValidationError",
        {"message": "1 validation error detected"},
        502,
        "upstream_error",
    ),
    ("throttled", 400, "ThrottlingException", {"message": "Rate exceeded"}, 429, "throttled"),
    ("not-ready", 429, "ModelNotReadyException", {"message": "Model not ready"}, 503, "endpoint_unavailable"),
    (
        "access-denied",
        400,
        "AccessDeniedException",
        {"message": "not authorized to perform sagemaker:InvokeEndpoint on arn:aws:sagemaker:..."},
        500,
        "configuration",
    ),
]


@pytest.mark.parametrize(
    "http,code,body,status,error_type", [c[1:] for c in WIRE_ERRORS], ids=[c[0] for c in WIRE_ERRORS]
)
def test_sagemaker_errors_map_to_statuses(wire, http, code, body, status, error_type):
    wire.answers.append((http, code, body, 0))
    got_status, got = call({"inputs": "hi"})
    assert (got_status, got["error_type"]) == (status, error_type), got
    assert "123456789012" not in got["error"]  # no account ids / log ARNs to the caller
    if error_type == "model_rejected_input":
        assert got["error"].startswith("Input validation error: `inputs` must have less than 2048 tokens")
        assert got["model_status"] == 422
    if error_type == "endpoint_not_found":
        assert got["error"] == "endpoint 'llm-endpoint' was not found in this region"
        assert wire.requests == ["/endpoints/llm-endpoint/invocations"]  # not retried


def test_transient_errors_are_retried_once(wire):
    wire.answers.extend([(503, "ServiceUnavailable", {"message": "busy"}, 0), (200, None, {"generated": 1}, 0)])
    status, body = call({"inputs": "hi"})
    assert status == 200 and body["outputs"] == {"generated": 1} and len(wire.requests) == 2
    wire.requests.clear()
    wire.answers[:] = [(503, "ServiceUnavailable", {"message": "busy"}, 0)]
    status, body = call({"inputs": "hi"})
    assert status == 503 and len(wire.requests) == 2  # bounded: 2 attempts in all


def test_read_timeout_is_a_504_and_is_not_retried(wire, monkeypatch):
    monkeypatch.setenv("READ_TIMEOUT_S", "1")
    wire.answers.append((200, None, {"late": True}, 1.6))
    started = time.monotonic()
    status, body = call({"inputs": "hi"})
    assert status == 504 and body["error_type"] == "timeout", body
    assert len(wire.requests) == 1 and time.monotonic() - started < 1.5


# ----------------------------------------------------------------------------------------------------------------
# Round trip through the moto server


def _create_endpoint(name: str) -> None:
    sm = boto3.client("sagemaker")
    sm.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker-exec",
        PrimaryContainer={"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/tgi:latest"},
    )
    sm.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{name}-model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")
    assert sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService"


def test_moto_round_trip_returns_canned_outputs(moto_env, monkeypatch):
    _create_endpoint("llm-endpoint")
    first = [{"generated_text": "Once upon a time"}]
    second = [{"generated_text": "a"}, {"generated_text": "b"}]
    moto_env.set_invoke_results([first, second])
    status, body = call(proxy(json.dumps({"inputs": "Tell me a story", "parameters": {"max_new_tokens": 8}})))
    assert status == 200, body
    assert body["endpoint"] == "llm-endpoint" and body["outputs"] == first
    status, body = call({"inputs": ["x", "y"]})
    assert status == 200 and body["outputs"] == second
    status, body = h.invoke("llm-endpoint", {"inputs": "Tell me a story", "parameters": {"max_new_tokens": 8}})
    assert status == 200 and body["outputs"] == first  # moto replays the result for an identical request


def test_moto_nonexistent_endpoint(moto_env, monkeypatch):
    """moto's InvokeEndpoint does not check that the endpoint exists: it answers any name with its static
    default body ("body", not JSON). Real SageMaker answers ValidationError "Endpoint ... not found", mapped to
    503 (see test_sagemaker_errors_map_to_statuses[endpoint-not-found]). Pin moto's behaviour here so that a
    moto that starts checking shows up, and check that the handler still fails closed (no 200)."""
    monkeypatch.setenv("ENDPOINT_NAME", "no-such-endpoint")
    assert not boto3.client("sagemaker").list_endpoints()["Endpoints"]
    status, body = call({"inputs": "hi"})
    if status == 503:  # a moto that checks existence
        assert body["error_type"] == "endpoint_not_found"
    else:
        assert (status, body["error_type"]) == (502, "model_error") and "non-JSON" in body["error"]
