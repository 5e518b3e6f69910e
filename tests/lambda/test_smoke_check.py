"""The endpoint stack's smoke check custom resource (endpoint_runtime/smoke_check.py, lambda/smoke_check) against a
loopback server that answers as SageMaker does: DescribeEndpoint and DescribeInferenceComponent (JSON 1.1), InvokeEndpoint
(rest-json, with SageMaker's "no capacity" ValidationError for a component at zero copies, E1), and the ResponseURL
CloudFormation gives. A failed check answers FAILED (the stack fails and CloudFormation rolls it back); a component
asleep at zero copies is never failed for it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from endpoint_runtime import bodies, smoke, smoke_check
from local_runtime.serve import NO_CAPACITY_MESSAGE

ENDPOINT, CONFIG, MODEL, COMPONENT = "dev-chat", "dev-chat-config-1", "dev-chat-model-1", "dev-chat-ic"


class FakeSageMaker:
    """What the loopback server answers: its state, and every request it saw."""

    def __init__(self) -> None:
        self.copies = 1
        self.answer: object = [{"generated_text": "Paris"}]
        self.wake_after_describes: int | None = None
        self.describes = 0
        self.invocations = 0
        self.responses: list[dict] = []


def _server(state: FakeSageMaker) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: object, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            state.responses.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._send(200, {})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            target = self.headers.get("X-Amz-Target", "")
            if target == "SageMaker.DescribeEndpoint":
                return self._send(
                    200,
                    {
                        "EndpointName": ENDPOINT,
                        "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}",
                        "EndpointConfigName": CONFIG,
                        "EndpointStatus": "InService",
                        "CreationTime": 0,
                        "LastModifiedTime": 0,
                    },
                )
            if target == "SageMaker.DescribeInferenceComponent":
                state.describes += 1
                if state.wake_after_describes is not None and state.describes > state.wake_after_describes:
                    state.copies = 1
                return self._send(
                    200,
                    {
                        "InferenceComponentName": COMPONENT,
                        "InferenceComponentArn": f"arn:aws:sagemaker:us-east-1:123456789012:inference-component/{COMPONENT}",
                        "EndpointName": ENDPOINT,
                        "EndpointArn": "arn",
                        "InferenceComponentStatus": "InService",
                        "Specification": {"ModelName": MODEL},
                        "RuntimeConfig": {"DesiredCopyCount": state.copies, "CurrentCopyCount": state.copies},
                        "CreationTime": 0,
                        "LastModifiedTime": 0,
                    },
                )
            if self.path == f"/endpoints/{ENDPOINT}/invocations":
                state.invocations += 1
                if state.copies == 0:  # SageMaker's answer for a component scaled to zero (local_runtime/serve.py)
                    return self._send(
                        400,
                        {"__type": "ValidationError", "message": NO_CAPACITY_MESSAGE},
                        {"x-amzn-ErrorType": "ValidationError"},
                    )
                return self._send(200, state.answer)
            self._send(400, {"__type": "UnknownOperationException", "message": target or self.path})

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


class _ClockMovedBySleeps:
    """The time module, but sleep() returns at once and moves monotonic() on by what it would have slept."""

    def __init__(self) -> None:
        self.slept = 0.0

    def __getattr__(self, name: str):
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.slept

    def sleep(self, seconds: float) -> None:
        self.slept += seconds


@pytest.fixture
def sagemaker(monkeypatch: pytest.MonkeyPatch):
    state = FakeSageMaker()
    server = _server(state)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for key, value in {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "STACK_NAME": "llm-dev-chat",
        "ENDPOINT_NAME": ENDPOINT,
        "INFERENCE_COMPONENT_NAME": COMPONENT,
        "PROMPT": "The capital of France is",
        "MAX_NEW_TOKENS": "8",
        "LATENCY_BUDGET_MS": "30000",
        "WAKE_BUDGET_MS": "60000",
        **bodies.EndpointBody("generation").environment(),
    }.items():
        monkeypatch.setenv(key, value)
    # The wake wait's polls, without the wall-clock wait between them: each sleep moves the clock smoke reads on by
    # its length. (A sleep that did nothing left the loop polling as fast as it could for the whole wake budget,
    # 60 s of wall time and ~10 s of CPU: docs/design/dev-loop.md.)
    monkeypatch.setattr(smoke, "time", _ClockMovedBySleeps())
    monkeypatch.setattr(smoke, "_sleep", smoke.time.sleep)
    yield state, url
    server.shutdown()


def _event(url: str, request_type: str = "Create") -> dict:
    return {
        "RequestType": request_type,
        "ResponseURL": f"{url}/cfn-response",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/llm-dev-chat/1",
        "RequestId": "r-1",
        "LogicalResourceId": "SmokeCheck",
        "ResourceType": "AWS::CloudFormation::CustomResource",
        "ResourceProperties": {"EndpointName": ENDPOINT, "EndpointConfigName": CONFIG, "ModelNames": [MODEL]},
    }


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def test_a_healthy_endpoint_answers_success(sagemaker):
    state, url = sagemaker
    smoke_check.handler(_event(url), _Context())
    (answer,) = state.responses
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Reason"].startswith(f"smoke test of endpoint {ENDPOINT} passed")
    assert "PASS response" in answer["Reason"] and answer["PhysicalResourceId"] == f"smoke-check-{ENDPOINT}"


def test_a_wrong_answer_fails_the_resource_with_the_check_that_failed(sagemaker):
    state, url = sagemaker
    state.answer = {"oops": "not a list of generated_text"}
    smoke_check.handler(_event(url), _Context())
    (answer,) = state.responses
    assert answer["Status"] == "FAILED"
    assert "failed: FAIL response: endpoint" in answer["Reason"] and "wrong shape" in answer["Reason"]


def test_a_component_asleep_at_zero_copies_is_not_failed_and_says_what_was_checked(sagemaker):
    """E1: SageMaker's "no capacity" answer for a component scaled to zero: the check passes, saying what it checked
    and that the model's own answer was not."""
    state, url = sagemaker
    state.copies = 0
    smoke_check.handler(_event(url), _Context())
    (answer,) = state.responses
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    reason = answer["Reason"]
    assert "PASS capacity" in reason and "no capacity" in reason and "SKIP response: not judged" in reason
    assert "the model's own answer was not checked" in reason
    assert state.invocations == 1 and state.describes > 1  # asked once, then watched the copy count


def test_a_component_that_wakes_within_the_budget_is_judged_on_its_answer(sagemaker):
    state, url = sagemaker
    state.copies, state.wake_after_describes = 0, 2  # the component check's describe, then one poll
    smoke_check.handler(_event(url), _Context())
    (answer,) = state.responses
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert "PASS response: 1 generated_text item(s)" in answer["Reason"] and state.invocations == 2


def test_a_woken_component_that_answers_wrong_fails(sagemaker):
    state, url = sagemaker
    state.copies, state.wake_after_describes, state.answer = 0, 2, []
    smoke_check.handler(_event(url), _Context())
    assert state.responses[0]["Status"] == "FAILED"


def test_delete_answers_success_without_checking(sagemaker):
    state, url = sagemaker
    smoke_check.handler(_event(url, "Delete") | {"PhysicalResourceId": "smoke-check-x"}, _Context())
    assert state.responses == [
        {
            "Status": "SUCCESS",
            "Reason": "nothing to delete",
            "PhysicalResourceId": "smoke-check-x",
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/llm-dev-chat/1",
            "RequestId": "r-1",
            "LogicalResourceId": "SmokeCheck",
        }
    ]
    assert state.invocations == 0 and state.describes == 0


def test_a_broken_environment_answers_failed(sagemaker, monkeypatch):
    state, url = sagemaker
    monkeypatch.delenv("PROMPT")
    smoke_check.handler(_event(url), _Context())
    (answer,) = state.responses
    assert answer["Status"] == "FAILED" and "misconfigured" in answer["Reason"] and "PROMPT" in answer["Reason"]
