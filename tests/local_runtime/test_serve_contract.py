"""The local server speaks the SageMaker container contract on a built artifact, over real HTTP, and a boto3
sagemaker-runtime client reaches it the way it reaches a deployed endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import BAD_BODIES, EMOJI_BODY, running

from local_runtime.sigv4 import sign

ENDPOINT = "tiny-gpt2"


@pytest.fixture(scope="module")
def server_url(gpt2_artifact: Path) -> Iterator[str]:
    """uvicorn on a free localhost port in a thread; ready once GET /ping answers 200."""
    from local_runtime.serve import create_app

    with running(create_app(gpt2_artifact, endpoint_name=ENDPOINT), timeout=60) as url:
        yield url


@pytest.fixture(scope="module")
def runtime(server_url: str):
    import boto3

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_ping(server_url: str) -> None:
    assert httpx.get(f"{server_url}/ping").status_code == 200


def test_invocations(server_url: str) -> None:
    body = {"inputs": ["Hello", "The quick brown fox"], "parameters": {"max_new_tokens": 4, "return_full_text": True}}
    reply = httpx.post(f"{server_url}/invocations", json=body, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    texts = [r["generated_text"] for r in reply.json()]
    assert texts[0].startswith("Hello") and texts[1].startswith("The quick brown fox")


def test_invocations_bad_parameter_is_400(server_url: str) -> None:
    body = {"inputs": "Hello", "parameters": {"temperature": 9}}
    reply = httpx.post(f"{server_url}/invocations", json=body, timeout=30)
    assert reply.status_code == 400
    assert "temperature" in reply.json()["error"] and "between 0.01 and 2, got 9" in reply.json()["error"]


def test_invocations_bad_json_is_400(server_url: str) -> None:
    reply = httpx.post(
        f"{server_url}/invocations", content=b"{not json", headers={"content-type": "application/json"}, timeout=30
    )
    assert reply.status_code == 400 and "not valid JSON" in reply.json()["error"]


@pytest.mark.parametrize(("body", "needles"), [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES])
def test_bad_bodies_are_4xx_with_a_message_never_500(server_url: str, body: bytes, needles: list[str]) -> None:
    """Both paths, through the artifact's own input_fn: /invocations answers 400 {"error"}, the InvokeEndpoint
    path SageMaker's 424 ModelError carrying the container's 400 and message."""
    json_header = {"content-type": "application/json"}
    reply = httpx.post(f"{server_url}/invocations", content=body, headers=json_header, timeout=30)
    assert reply.status_code == 400, reply.text
    for needle in needles:
        assert needle in reply.json()["error"], (needle, reply.json()["error"])
    invoke_endpoint = f"{server_url}/endpoints/{ENDPOINT}/invocations"
    signed = sign("POST", invoke_endpoint, body, json_header)  # SigV4, as boto3 signs (local_runtime/sigv4.py)
    reply = httpx.post(invoke_endpoint, content=body, headers=signed, timeout=30)
    assert reply.status_code == 424 and reply.headers["x-amzn-errortype"] == "ModelError", reply.text
    assert reply.json()["OriginalStatusCode"] == 400
    for needle in needles:
        assert needle in reply.json()["OriginalMessage"]


def test_a_surrogate_pair_is_one_character_and_passes(server_url: str) -> None:
    reply = httpx.post(
        f"{server_url}/invocations", content=EMOJI_BODY, headers={"content-type": "application/json"}, timeout=30
    )
    assert reply.status_code == 200 and len(reply.json()) == 1


def test_handler_refuses_nan_parameters_given_as_python_values(gpt2_artifact: Path) -> None:
    """NaN passes every < and > bound; input_fn already refuses the NaN literal, validate_request also refuses
    the value (a caller that builds the request in Python, such as the toolkit's predict_fn path)."""
    from local_runtime.serve import load_handler

    handler = load_handler(gpt2_artifact)
    with pytest.raises(ValueError, match=r"parameters.temperature must be a number between 0.01 and 2, got NaN"):
        handler.validate_request({"inputs": "x", "parameters": {"temperature": float("nan")}})


def test_loading_the_handler_leaves_the_artifact_as_built(gpt2_artifact: Path, tmp_path: Path, monkeypatch) -> None:
    """Even where Python writes bytecode, serving an artifact writes nothing into it (its manifest lists its files)."""
    import shutil
    import sys

    from artifact.manifest import Manifest
    from local_runtime.serve import load_handler

    copy = tmp_path / "artifact"
    shutil.copytree(gpt2_artifact, copy)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    load_handler(copy)
    assert sys.dont_write_bytecode is False  # put back as it was
    assert Manifest.load(copy).verify(copy, unlisted=True) == []


# A handler that quotes the request in its message, as an artifact built before input_fn refused lone
# surrogates did: the InvokeEndpoint path must still encode its error (it answered 500 before).
QUOTING_HANDLER = """
import json

def model_fn(model_dir):
    return {}

def input_fn(body, content_type):
    raise ValueError("unknown key " + next(iter(json.loads(body)["parameters"])))
"""


def test_invoke_endpoint_error_quoting_a_lone_surrogate_is_still_424(tmp_path: Path) -> None:
    from local_runtime.serve import create_app

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "inference.py").write_text(QUOTING_HANDLER)
    body = b'{"inputs": "hi", "parameters": {"\\ud800": 1}}'
    with running(create_app(tmp_path)) as url:
        invoke = f"{url}/endpoints/any/invocations"
        reply = httpx.post(invoke, content=body, headers=sign("POST", invoke, body), timeout=10)
    assert reply.status_code == 424, reply.text
    assert reply.json()["OriginalStatusCode"] == 400 and reply.json()["OriginalMessage"] == "unknown key \ud800"


def test_boto3_invoke_endpoint(runtime) -> None:
    body = json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 3}})
    reply = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, Body=body, ContentType="application/json", Accept="application/json"
    )
    assert reply["ContentType"] == "application/json"
    payload = json.loads(reply["Body"].read())
    assert isinstance(payload, list) and isinstance(payload[0]["generated_text"], str)


def test_boto3_model_error(runtime) -> None:
    body = json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 0}})
    with pytest.raises(runtime.exceptions.ModelError) as err:
        runtime.invoke_endpoint(EndpointName=ENDPOINT, Body=body, ContentType="application/json")
    assert err.value.response["OriginalStatusCode"] == 400
    assert "max_new_tokens" in err.value.response["OriginalMessage"]


def test_boto3_unknown_endpoint(runtime) -> None:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as err:
        runtime.invoke_endpoint(EndpointName="other", Body=b"{}", ContentType="application/json")
    assert err.value.response["Error"]["Code"] == "ValidationError"


def test_ping_reports_load_failure(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from local_runtime.serve import create_app

    with TestClient(create_app(tmp_path)) as client:  # no code/inference.py: loading fails
        deadline = time.monotonic() + 10
        while (reply := client.get("/ping")).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reply.status_code == 500 and "code/inference.py" in reply.json()["error"]
        assert client.post("/invocations", json={"inputs": "x"}).status_code == 503
