"""Asynchronous inference: submit a generation request to an endpoint with invocation.mode async, and fetch its result.

Run by the invoke function when INVOCATION_MODE is "async" (endpoint_runtime/invoke.py `handler`); `python -m
model_build result` uses `fetch_result`. Stdlib + the Lambda runtime's boto3; reuses invoke.py's validation.
Events, answers, environment, IAM and sources: docs/design/front-doors.md.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

from endpoint_runtime import clients
from endpoint_runtime import invoke as realtime

RequestError = realtime.RequestError
SetupError = realtime.SetupError
DEFAULT_MAX_RESULT_BYTES = 5 * 1024 * 1024
RESULT_KEYS = {"output_location", "failure_location"}
JSON_HEADERS = {"Content-Type": "application/json"}
_S3_URI = re.compile(r"s3://([^/]+)/(.+)")


def split_s3_uri(uri: Any, what: str) -> tuple[str, str]:
    """s3://bucket/key -> (bucket, key); RequestError for anything else."""
    match = _S3_URI.fullmatch(uri) if isinstance(uri, str) else None
    if match is None:
        raise RequestError(f"{what} must be an s3://bucket/key URI, got {uri!r}"[:300])
    return match.group(1), match.group(2)


def _env_location(name: str) -> tuple[str, str]:
    raw = os.environ.get(name, "").strip()
    match = _S3_URI.fullmatch(raw)
    if match is None:
        raise SetupError(f"environment variable {name} must be an s3://bucket/prefix location, got {raw!r}")
    return match.group(1), match.group(2).rstrip("/")


def _env_optional_int(name: str, low: int, high: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    return None if not raw else realtime.contract.env_int(name, low, low, high)


def max_result_bytes() -> int:
    return realtime.contract.env_int("MAX_RESULT_BYTES", DEFAULT_MAX_RESULT_BYTES, 1, 6 * 1024 * 1024)


def get_client(service: str) -> Any:
    """One client per service, created lazily and reused by a warm Lambda (standard retries: every call here is
    idempotent or keyed by a fresh inference id)."""
    return clients.cached(
        f"async_invoke:{service}",
        lambda: boto3.client(service, config=Config(retries={"mode": "standard", "total_max_attempts": 3})),
    )


def reset_clients() -> None:
    """Forget the cached clients (tests; or after the environment changes)."""
    clients.forget("async_invoke:")


def _error(status: int, error_type: str, message: str, **extra: Any) -> tuple[int, dict]:
    return status, {"error": message, "error_type": error_type, **extra}


# botocore's exception families and the status each gets here (botocore/exceptions.py):
#   ClientError                            the service answered with an error: by its code (_s3_error,
#                                          invoke.map_client_error)
#   ConnectionError (EndpointConnectionError, ConnectTimeoutError, SSLError, ProxyConnectionError),
#   HTTPClientError (ReadTimeoutError, ConnectionClosedError, ResponseStreamingError), IncompleteReadError
#                                          the service could not be reached or broke off: 502 upstream_error
#   NoCredentialsError, PartialCredentialsError, CredentialRetrievalError, NoRegionError
#                                          this function's setup: 500 configuration
#   any other BotoCoreError (ParamValidationError, ...): a bug here, 500 internal (invoke.answered)
TRANSPORT_ERRORS = (
    botocore.exceptions.ConnectionError,
    botocore.exceptions.HTTPClientError,
    botocore.exceptions.IncompleteReadError,
)
SETUP_ERRORS = (
    botocore.exceptions.NoCredentialsError,
    botocore.exceptions.PartialCredentialsError,
    botocore.exceptions.CredentialRetrievalError,
    botocore.exceptions.NoRegionError,
)


def _botocore_error(err: Exception, service: str, what: str) -> tuple[int, dict]:
    """The answer for an exception of TRANSPORT_ERRORS or SETUP_ERRORS raised while trying to `what`."""
    if isinstance(err, SETUP_ERRORS):
        return _error(500, "configuration", f"this function cannot {what}: {type(err).__name__}")
    return _error(502, "upstream_error", f"could not reach {service} to {what} ({type(err).__name__})")


def _s3_error(err: botocore.exceptions.ClientError, what: str) -> tuple[int, dict]:
    code = (err.response or {}).get("Error", {}).get("Code", "")
    if code.startswith("AccessDenied") or code in ("NoSuchBucket", "InvalidAccessKeyId", "ExpiredToken"):
        return _error(500, "configuration", f"this function cannot {what} ({code})")
    if code in ("SlowDown", "ThrottlingException", "Throttling"):
        return _error(429, "throttled", f"S3 is throttling requests to {what}; retry later")
    return _error(502, "upstream_error", f"S3 refused to {what} ({code})")


# ---------------------------------------------------------------------------------------------------------------
# Submit


def submit(
    endpoint_name: str,
    payload: Any,
    *,
    input_location: tuple[str, str],
    s3: Any = None,
    runtime: Any = None,
    inference_id: str | None = None,
    invocation_timeout_s: int | None = None,
    request_ttl_s: int | None = None,
    log: dict | None = None,
    body: realtime.bodies.EndpointBody | None = None,
) -> tuple[int, dict]:
    """Validate `payload` (the real-time contract), upload it to the input folder in the body the container
    takes (bodies.EndpointBody; None: from the environment), submit it with
    InvokeEndpointAsync. Returns (HTTP status, JSON-able body); never raises for request or AWS errors. The
    answer in S3 is the container's own reply (bodies.generation_outputs reads its text)."""
    log = {} if log is None else log
    try:
        body = realtime.bodies.EndpointBody.from_env() if body is None else body
        request = body.request(realtime.validate_payload(payload))
    except RequestError as e:
        return _error(e.status, e.error_type, e.message)
    except SetupError as e:
        return _error(500, "configuration", str(e))
    inference_id = inference_id or str(uuid.uuid4())
    bucket, prefix = input_location
    key = f"{prefix}/{inference_id}.json"
    encoded = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    try:
        (s3 or get_client("s3")).put_object(Bucket=bucket, Key=key, Body=encoded, ContentType="application/json")
    except botocore.exceptions.ClientError as e:
        log["aws_error"] = str(e)[:500]
        return _s3_error(e, "upload the request payload")
    except TRANSPORT_ERRORS + SETUP_ERRORS as e:
        log["aws_error"] = str(e)[:500]
        return _botocore_error(e, "S3", "upload the request payload")
    extra: dict[str, Any] = {}
    if invocation_timeout_s is not None:
        extra["InvocationTimeoutSeconds"] = invocation_timeout_s
    if request_ttl_s is not None:
        extra["RequestTTLSeconds"] = request_ttl_s
    try:
        answer = (runtime or get_client("sagemaker-runtime")).invoke_endpoint_async(
            EndpointName=endpoint_name,
            InputLocation=f"s3://{bucket}/{key}",
            InferenceId=inference_id,
            ContentType="application/json",
            Accept="application/json",
            **extra,
        )
    except botocore.exceptions.ClientError as e:
        log["aws_error"] = str(e)[:500]
        return realtime.map_client_error(e, endpoint_name)
    except TRANSPORT_ERRORS + SETUP_ERRORS as e:
        log["aws_error"] = str(e)[:500]
        return _botocore_error(e, "SageMaker", "submit the request")
    return 202, {
        "endpoint": endpoint_name,
        "inference_id": answer.get("InferenceId", inference_id),
        "input_location": f"s3://{bucket}/{key}",
        "output_location": answer.get("OutputLocation"),
        "failure_location": answer.get("FailureLocation"),
    }


# ---------------------------------------------------------------------------------------------------------------
# Fetch


def _decode(raw: bytes) -> Any:
    """The object's JSON value, else its text (a failure is usually a plain message)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _read_if_present(s3: Any, uri: str, what: str, cap: int) -> tuple[bool, Any, int]:
    """(exists, decoded value or None when larger than cap, size). Found by listing with the key as prefix."""
    bucket, key = split_s3_uri(uri, what)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    found = [o for o in listed if o.get("Key") == key]
    if not found:
        return False, None, 0
    size = int(found[0].get("Size", 0))
    if size > cap:
        return True, None, size
    return True, _decode(s3.get_object(Bucket=bucket, Key=key)["Body"].read()), size


def fetch_result(
    output_location: str, failure_location: str | None = None, *, s3: Any = None, max_bytes: int | None = None
) -> dict:
    """The state of one asynchronous request: {"status": "pending"}, {"status": "completed", "output": ...} or
    {"status": "failed", "error": ...}. A result larger than `max_bytes` (default MAX_RESULT_BYTES) is not read:
    "output" is None and "size_bytes" says why. Raises RequestError for a malformed location and botocore's
    ClientError for S3's refusals."""
    s3 = s3 or get_client("s3")
    cap = max_result_bytes() if max_bytes is None else max_bytes
    present, value, size = _read_if_present(s3, output_location, "output_location", cap)
    if present:
        answer = {"status": "completed", "output": value, "output_location": output_location}
        return answer if size <= cap else {**answer, "size_bytes": size}
    if failure_location is not None:
        present, value, size = _read_if_present(s3, failure_location, "failure_location", cap)
        if present:
            answer = {"status": "failed", "error": value, "failure_location": failure_location}
            return answer if size <= cap else {**answer, "size_bytes": size}
    return {"status": "pending"}


def generation_result(state: dict) -> dict:
    """A completed answer as the generation contract's [{"generated_text"}], whatever body kind the container took
    (bodies.EndpointBody from the environment: an engine's OpenAI reply is read with endpoint_runtime/bodies.py); an
    answer of another shape is passed on as it is, with a note."""
    body = realtime.bodies.EndpointBody.from_env()
    if state.get("status") != "completed" or state.get("output") is None or body.kind == realtime.bodies.GENERATION:
        return state
    try:
        outputs = body.outputs(state["output"])
    except ValueError as err:
        return {**state, "note": f"the answer is not a {body.kind} reply: {err}"}
    return {**state, "output": outputs}


def _inside(uri: str, folder: tuple[str, str]) -> bool:
    bucket, key = split_s3_uri(uri, "location")
    return bucket == folder[0] and key.startswith(folder[1] + "/")


def result(request: dict, *, s3: Any = None, log: dict | None = None) -> tuple[int, dict]:
    """A result request of the handler: both locations must lie in this endpoint's output / failure folders."""
    log = {} if log is None else log
    unknown = sorted(set(request) - RESULT_KEYS)
    if unknown:
        return _error(
            400,
            "validation",
            f"unknown key(s) in a result request: {', '.join(map(str, unknown))[:200]}; "
            f"allowed: {', '.join(sorted(RESULT_KEYS))}",
        )
    output, failure = request.get("output_location"), request.get("failure_location")
    try:
        output_folder = _env_location("OUTPUT_LOCATION")
        failure_folder = _env_location("FAILURE_LOCATION")
        if output is None:
            raise RequestError("output_location: required key is missing")
        if not _inside(output, output_folder):
            return _error(
                400,
                "location_not_allowed",
                f"output_location must lie in s3://{output_folder[0]}/{output_folder[1]}/, got {str(output)[:200]!r}",
            )
        if failure is not None and not _inside(failure, failure_folder):
            return _error(
                400,
                "location_not_allowed",
                f"failure_location must lie in s3://{failure_folder[0]}/"
                f"{failure_folder[1]}/, got {str(failure)[:200]!r}",
            )
        state = fetch_result(output, failure, s3=s3)
        return 200, generation_result(state)
    except RequestError as e:
        return _error(e.status, e.error_type, e.message)
    except SetupError as e:
        return _error(500, "configuration", str(e))
    except botocore.exceptions.ClientError as e:
        log["aws_error"] = str(e)[:500]
        return _s3_error(e, "read the result")
    except TRANSPORT_ERRORS + SETUP_ERRORS as e:
        log["aws_error"] = str(e)[:500]
        return _botocore_error(e, "S3", "read the result")


# ---------------------------------------------------------------------------------------------------------------
# Handler


def handler(event: Any, context: Any = None) -> dict:
    started = time.monotonic()
    record: dict[str, Any] = {
        "message": "async_invoke",
        "request_id": getattr(context, "aws_request_id", None),
        "event_kind": "proxy" if realtime.is_proxy_event(event) else "direct",
    }

    def run() -> tuple[int, dict]:
        endpoint_name = realtime.endpoint_name_from_env()
        record["endpoint"] = endpoint_name
        payload = realtime.payload_from_event(event)
        if isinstance(payload, dict) and RESULT_KEYS & set(payload):
            record["action"] = "result"
            status, body = result(payload, log=record)
            if status == 200:
                record["result_status"] = body.get("status")
            return status, body
        else:
            record["action"] = "submit"
            status, body = submit(
                endpoint_name,
                payload,
                input_location=_env_location("INPUT_LOCATION"),
                invocation_timeout_s=_env_optional_int("INVOCATION_TIMEOUT_S", 1, 3600),
                request_ttl_s=_env_optional_int("REQUEST_TTL_S", 60, 21600),
                log=record,
            )
            if status == 202:
                record["inference_id"] = body["inference_id"]
            return status, body

    status, body = realtime.answered(record, started, run)
    if status >= 400:
        record["error_type"], record["error"] = body.get("error_type"), body.get("error")
    realtime.log_record(record)
    # Retry-After on SageMaker's retryable errors, as every front door answers them (invoke.RETRYABLE_ERRORS).
    return {
        "statusCode": status,
        "headers": realtime.response_headers(body),
        "body": json.dumps(body, ensure_ascii=False),
    }


__all__ = ["fetch_result", "handler", "reset_clients", "result", "submit"]
