"""The asynchronous invoke path (endpoint_runtime/async_invoke.py, which the invoke function runs when INVOCATION_MODE
is async) against the moto server.

moto's sagemaker-runtime answers InvokeEndpointAsync without a model: it writes the next queued result (or a failure)
into a bucket of its own and returns that output and failure location (moto/sagemakerruntime/models.py
`invoke_endpoint_async`, results queued at /moto-api/static/sagemaker/async-endpoint-results). So the whole path runs
here: validation, the payload upload, the submit, and fetching pending, completed and failed results. That SageMaker
really writes the model's answer there only a real account shows.
"""

from __future__ import annotations

import json

import boto3
import pytest
from helpers import lambda_entry

from endpoint_runtime import async_invoke

BUCKET = "async-test-artifacts"
ENDPOINT = "prod-summarize-async"
INPUT = (BUCKET, f"async/{ENDPOINT}/input")
GOOD = {"inputs": "Summarize: the quick brown fox.", "parameters": {"max_new_tokens": 32}}
ANSWER = [{"generated_text": "A fox."}]


def queue_async_results(emulator, *results: tuple[bool, str]) -> None:
    """Queue what moto's next InvokeEndpointAsync calls produce: (is_failure, data) each."""
    emulator.set_async_results(list(results))


@pytest.fixture
def aws(moto_env):
    async_invoke.reset_clients()
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    yield moto_env
    async_invoke.reset_clients()


def test_submit_uploads_the_validated_request_and_fetch_reads_the_answer(aws):
    queue_async_results(aws, (False, json.dumps(ANSWER)))
    status, body = async_invoke.submit(
        ENDPOINT, GOOD, input_location=INPUT, inference_id="req-1", invocation_timeout_s=1800
    )
    assert status == 202, body
    assert body["inference_id"] == "req-1"
    assert body["input_location"] == f"s3://{BUCKET}/async/{ENDPOINT}/input/req-1.json"
    s3 = boto3.client("s3")
    uploaded = json.loads(s3.get_object(Bucket=BUCKET, Key=f"async/{ENDPOINT}/input/req-1.json")["Body"].read())
    # what the model reads: the contract's checked request, its return_full_text stated (bodies.generation_parameters)
    assert uploaded == {**GOOD, "parameters": {"return_full_text": False, **GOOD["parameters"]}}
    assert async_invoke.fetch_result(body["output_location"], body["failure_location"]) == {
        "status": "completed",
        "output": ANSWER,
        "output_location": body["output_location"],
    }


def test_a_failed_inference_is_reported_with_sagemakers_message(aws):
    queue_async_results(aws, (True, "ModelError: the container answered 500"))
    status, body = async_invoke.submit(ENDPOINT, GOOD, input_location=INPUT)
    assert status == 202
    result = async_invoke.fetch_result(body["output_location"], body["failure_location"])
    assert result["status"] == "failed" and result["error"] == "ModelError: the container answered 500"


def test_a_result_not_yet_written_is_pending(aws):
    missing = f"s3://{BUCKET}/async/{ENDPOINT}/output/not-yet.out"
    assert async_invoke.fetch_result(missing, f"s3://{BUCKET}/async/{ENDPOINT}/failures/not-yet-error.out") == {
        "status": "pending"
    }


def test_a_result_larger_than_the_cap_is_not_inlined(aws):
    queue_async_results(aws, (False, json.dumps({"generated_text": "x" * 2000})))
    _, body = async_invoke.submit(ENDPOINT, GOOD, input_location=INPUT)
    result = async_invoke.fetch_result(body["output_location"], max_bytes=100)
    assert result["status"] == "completed" and result["output"] is None and result["size_bytes"] > 2000


def test_an_invalid_request_is_refused_before_anything_is_uploaded(aws):
    status, body = async_invoke.submit(
        ENDPOINT, {"inputs": "x", "parameters": {"max_new_tokens": 0}}, input_location=INPUT
    )
    assert status == 400 and "max_new_tokens" in body["error"]
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=BUCKET)


# The function's entry, as the stack names it for an asynchronous endpoint (stacks/functions.py InvokeFunction).
async_handler = lambda_entry("invoke/handler.async_handler")


@pytest.fixture
def function_env(aws, monkeypatch):
    for key, value in {
        "ENDPOINT_NAME": ENDPOINT,
        "INVOCATION_MODE": "async",
        "INPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/input",
        "OUTPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/output",
        "FAILURE_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/failures",
        "REQUEST_TTL_S": "3600",
    }.items():
        monkeypatch.setenv(key, value)
    return aws


def test_handler_submits_then_reads_the_result_from_its_own_folders_only(function_env):
    queue_async_results(function_env, (False, json.dumps(ANSWER)))
    answer = async_handler({"body": json.dumps(GOOD), "requestContext": {"http": {"method": "POST"}}})
    assert answer["statusCode"] == 202, answer
    submitted = json.loads(answer["body"])
    # moto writes into a bucket of its own; SageMaker writes under the endpoint config's S3OutputPath. A location
    # outside this endpoint's folders is refused before any S3 call ...
    refused = async_handler({"output_location": submitted["output_location"]})
    assert refused["statusCode"] == 400 and json.loads(refused["body"])["error_type"] == "location_not_allowed"
    # ... one inside is read: put moto's answer where SageMaker would.
    s3 = boto3.client("s3")
    source_bucket, source_key = submitted["output_location"].removeprefix("s3://").split("/", 1)
    key = f"async/{ENDPOINT}/output/{submitted['inference_id']}.out"
    s3.copy_object(Bucket=BUCKET, Key=key, CopySource={"Bucket": source_bucket, "Key": source_key})
    request = {
        "output_location": f"s3://{BUCKET}/{key}",
        "failure_location": f"s3://{BUCKET}/async/{ENDPOINT}/failures/{submitted['inference_id']}-error.out",
    }
    done = async_handler(request)
    assert done["statusCode"] == 200 and json.loads(done["body"])["output"] == ANSWER
    pending = async_handler({"output_location": f"s3://{BUCKET}/async/{ENDPOINT}/output/other.out"})
    assert json.loads(pending["body"]) == {"status": "pending"}


def test_handler_errors(function_env, monkeypatch):
    bad = async_handler({"output_location": f"s3://{BUCKET}/async/{ENDPOINT}/output/x", "extra": 1})
    assert bad["statusCode"] == 400 and "unknown key(s) in a result request: extra" in json.loads(bad["body"])["error"]
    assert async_handler({"inputs": "x", "parameters": {"temperature": -1}})["statusCode"] == 400
    monkeypatch.delenv("INPUT_LOCATION")
    broken = async_handler(GOOD)
    assert broken["statusCode"] == 500 and "INPUT_LOCATION" in json.loads(broken["body"])["error"]
    monkeypatch.setenv("INPUT_LOCATION", "s3://no-such-bucket-here/in")
    missing_bucket = async_handler(GOOD)
    assert missing_bucket["statusCode"] == 500 and "NoSuchBucket" in json.loads(missing_bucket["body"])["error"]


def test_model_build_result_prints_the_result_and_exits_by_its_state(aws, capsys):
    from model_build.cli import RESULT_PENDING, main

    queue_async_results(aws, (False, json.dumps(ANSWER)), (True, "the model failed"))
    _, done = async_invoke.submit(ENDPOINT, GOOD, input_location=INPUT)
    _, failed = async_invoke.submit(ENDPOINT, GOOD, input_location=INPUT)
    assert main(["result", "--output-location", done["output_location"]]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == ANSWER
    assert (
        main(
            ["result", "--output-location", failed["output_location"], "--failure-location", failed["failure_location"]]
        )
        == 1
    )
    assert json.loads(capsys.readouterr().out)["error"] == "the model failed"
    assert main(["result", "--output-location", f"s3://{BUCKET}/async/{ENDPOINT}/output/later.out"]) == RESULT_PENDING
    assert main(["result", "--output-location", "https://example.com/x"]) == 2
    assert "output_location must be an s3://bucket/key URI" in capsys.readouterr().err
