"""The asynchronous invoke path (endpoint_runtime/async_invoke.py) when S3 or SageMaker cannot be reached: a refused
connection, a connect timeout and a read timeout are 502 upstream_error (the function is a gateway to them), missing
credentials are 500 configuration, never 500 internal. Real sockets on loopback: a closed port (refused), a
listening socket that never answers (read timeout), a listening socket whose accept queue is full (connect timeout:
Linux drops the SYN)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

from endpoint_runtime import async_invoke

BUCKET = "async-transport"
ENDPOINT = "prod-async"
GOOD = {"inputs": "Summarize: the quick brown fox.", "parameters": {"max_new_tokens": 8}}
FAST_FAIL = Config(connect_timeout=0.5, read_timeout=0.5, retries={"total_max_attempts": 1})
FAKE_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@pytest.fixture
def unreachable() -> Iterator[dict[str, tuple[str, str]]]:
    """{kind: (endpoint URL, botocore exception it raises)} for the three ways a service is unreachable."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens: connection refused
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    filler = socket.create_connection(full.getsockname(), timeout=2)  # fills the accept queue: later SYNs are dropped
    try:
        yield {
            "refused": (f"http://127.0.0.1:{closed_port}", "EndpointConnectionError"),
            "read timeout": (f"http://127.0.0.1:{silent.getsockname()[1]}", "ReadTimeoutError"),
            "connect timeout": (f"http://127.0.0.1:{full.getsockname()[1]}", "ConnectTimeoutError"),
        }
    finally:
        for sock in (filler, full, silent):
            sock.close()


KINDS = ("refused", "read timeout", "connect timeout")


@pytest.mark.parametrize("kind", KINDS)
def test_submit_with_s3_unreachable_is_502(unreachable, kind):
    url, exception = unreachable[kind]
    s3 = boto3.client("s3", endpoint_url=url, config=FAST_FAIL, **FAKE_KEYS)
    log: dict = {}
    status, body = async_invoke.submit(ENDPOINT, GOOD, input_location=(BUCKET, "in"), s3=s3, log=log)
    assert (status, body["error_type"]) == (502, "upstream_error"), body
    assert body["error"] == f"could not reach S3 to upload the request payload ({exception})"
    assert log["aws_error"]


@pytest.mark.parametrize("kind", KINDS)
def test_submit_with_sagemaker_unreachable_is_502(moto_env, unreachable, kind):
    url, exception = unreachable[kind]
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    runtime = boto3.client("sagemaker-runtime", endpoint_url=url, config=FAST_FAIL, **FAKE_KEYS)
    status, body = async_invoke.submit(ENDPOINT, GOOD, input_location=(BUCKET, "in"), runtime=runtime)
    assert (status, body["error_type"]) == (502, "upstream_error"), body
    assert body["error"] == f"could not reach SageMaker to submit the request ({exception})"


@pytest.mark.parametrize("kind", KINDS)
def test_result_with_s3_unreachable_is_502(unreachable, kind, monkeypatch):
    url, exception = unreachable[kind]
    monkeypatch.setenv("OUTPUT_LOCATION", f"s3://{BUCKET}/async/{ENDPOINT}/output")
    monkeypatch.setenv("FAILURE_LOCATION", f"s3://{BUCKET}/async/{ENDPOINT}/failures")
    s3 = boto3.client("s3", endpoint_url=url, config=FAST_FAIL, **FAKE_KEYS)
    status, body = async_invoke.result({"output_location": f"s3://{BUCKET}/async/{ENDPOINT}/output/x.out"}, s3=s3)
    assert (status, body["error_type"]) == (502, "upstream_error"), body
    assert body["error"] == f"could not reach S3 to read the result ({exception})"


def test_the_function_answers_502_for_both_actions_when_s3_is_a_closed_port(unreachable, monkeypatch):
    """Through the invoke function's handler with its own clients (standard retries), S3 at a closed port."""
    url, _ = unreachable["refused"]
    for key, value in {
        "ENDPOINT_NAME": ENDPOINT,
        "INVOCATION_MODE": "async",
        "AWS_ENDPOINT_URL_S3": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "INPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/input",
        "OUTPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/output",
        "FAILURE_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/failures",
    }.items():
        monkeypatch.setenv(key, value)
    async_invoke.reset_clients()
    try:
        submitted = async_invoke.handler({"body": json.dumps(GOOD), "requestContext": {"http": {"method": "POST"}}})
        fetched = async_invoke.handler({"output_location": f"s3://{BUCKET}/async/{ENDPOINT}/output/x.out"})
    finally:
        async_invoke.reset_clients()
    for answer in (submitted, fetched):
        body = json.loads(answer["body"])
        assert (answer["statusCode"], body["error_type"]) == (502, "upstream_error"), body
        assert "EndpointConnectionError" in body["error"]


def test_no_credentials_is_the_functions_configuration_500(monkeypatch):
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in {
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)
    s3 = boto3.session.Session().client(
        "s3", region_name="us-east-1", config=FAST_FAIL
    )  # not the default session: it caches credentials
    status, body = async_invoke.submit(ENDPOINT, GOOD, input_location=(BUCKET, "in"), s3=s3)
    assert (status, body) == (
        500,
        {"error": "this function cannot upload the request payload: NoCredentialsError", "error_type": "configuration"},
    )
