"""The invoke function's code: validates a text-generation request and invokes one SageMaker endpoint. Its Lambda
entry point is lambda/invoke/handler.py (handler ``invoke/handler.handler``); the smoke test and the demo import
this module.

Runtime: Python 3.14, stdlib + the boto3/botocore the runtime ships. Nothing else. (An asynchronous endpoint's
function runs endpoint_runtime/async_invoke.py's handler instead: stacks/functions.py InvokeFunction.)

Events accepted
  * direct invocation: ``{"inputs": ..., "parameters": {...}}``
  * API Gateway (REST or HTTP API) / Lambda Function URL proxy: ``{"body": "<json>", "isBase64Encoded": bool, ...}``
Every answer is proxy-style: ``{"statusCode", "headers", "body": "<json>"}``.

Environment
  ENDPOINT_NAME       (required) the SageMaker endpoint; never taken from the request
  INFERENCE_COMPONENT_NAME  the inference component to run, for an endpoint whose model is one (hosting.mode
                      inference-components); sent as InvokeEndpoint's InferenceComponentName. Unset: none is named
  ADAPTER_COMPONENTS  JSON {adapter name: inference component} of the endpoint's LoRA adapters: a request with
                      "adapter": "<name>" is sent to that adapter's component (`target_component`)
  MAX_REQUEST_BYTES   request body cap, default 65536
  MAX_NEW_TOKENS      upper bound for parameters.max_new_tokens, default 512
  MAX_BATCH_SIZE      upper bound for the length of a list ``inputs``, default 8
  MAX_INPUT_CHARS     characters per prompt, default 16384
  (the last three are request_contract.py's limits, the same names and defaults as the containers read)
  READ_TIMEOUT_S      socket read timeout towards SageMaker, default 55 (must stay below SageMaker's 60 s
                      InvokeEndpoint limit; the Lambda timeout must be above CONNECT + READ, e.g. 65 s)

Status codes (body ``{"error": message, "error_type": kind}``, like text-generation-inference)
  200  ``{"endpoint", "outputs", "latency_ms"}``
  400  invalid request (not JSON, bad keys/values; also JSON a request cannot carry: NaN/Infinity, numbers out
       of range, lone UTF-16 surrogates, nesting deeper than 32 levels), or the model rejected the input
       (SageMaker ModelError whose OriginalStatusCode is 4xx: the model's own message is passed on)
  405  a proxy event whose HTTP method is not POST
  413  body larger than MAX_REQUEST_BYTES
  429  SageMaker throttled the call (ThrottlingException)
  500  this function is misconfigured (ENDPOINT_NAME missing, bad limit values, no credentials,
       access denied) or failed unexpectedly
  502  SageMaker or the model failed (ModelError 5xx, other ValidationError, non-JSON model output, ...)
  503  the endpoint does not exist (SageMaker "Endpoint ... not found") or is not ready
       (ModelNotReadyException, ServiceUnavailable). Not 404: the caller's URL exists and the caller
       cannot name an endpoint; a missing endpoint is an operator-side outage (e.g. mid-redeploy).
  504  no answer in time (read/connect timeout, or SageMaker's own 60 s invocation timeout)

Retries: standard mode, at most 2 attempts, but a *read timeout is never retried*: the model may still be
generating for the first attempt, and a second 55 s wait would outlive both the caller and the Lambda.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

# ---------------------------------------------------------------------------------------------------------------
# Configuration. The request contract (parameter table, limits, JSON safety, error shape) is request_contract.py,
# the top-level module every entry point ships under the same name (the function's asset holds it at its root).
import request_contract as contract

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024
DEFAULT_READ_TIMEOUT_S = 55.0
CONNECT_TIMEOUT_S = 5.0
MAX_ATTEMPTS = 2
SAGEMAKER_INVOKE_LIMIT_S = 60.0

JSON_HEADERS = {"Content-Type": "application/json"}

SetupError = contract.SetupError  # the function's own environment is wrong: a 500, the operator must fix it
RequestError = contract.RequestError  # the caller's request is wrong: a 4xx


def endpoint_name_from_env() -> str:
    name = os.environ.get("ENDPOINT_NAME", "").strip()
    if not name:
        raise SetupError("environment variable ENDPOINT_NAME is not set: this function does not know which "
                          "SageMaker endpoint to invoke")
    return name


def inference_component_from_env() -> str | None:
    return os.environ.get("INFERENCE_COMPONENT_NAME", "").strip() or None


# A request may name one of the endpoint's LoRA adapters: {"inputs": ..., "parameters": ..., "adapter": "<name>"}. The
# function sends it to that adapter's inference component (InvokeEndpoint's InferenceComponentName, as SageMaker's
# adapter components are invoked: SageMaker Developer Guide, "Fine-tune models with adapter inference components");
# without the key, the base model's component answers.
ADAPTER_KEY = "adapter"


def adapter_components_from_env() -> dict[str, str]:
    """ADAPTER_COMPONENTS: adapter name -> inference component, as JSON (the stack sets it; unset: no adapters)."""
    raw = os.environ.get("ADAPTER_COMPONENTS", "").strip()
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in parsed.items()):
        raise SetupError("environment variable ADAPTER_COMPONENTS must be a JSON object of adapter name -> inference "
                         "component name")
    return parsed


def target_component(payload: Any) -> tuple[Any, str | None]:
    """(the request without its "adapter" key, the inference component to invoke): the named adapter's component, or
    INFERENCE_COMPONENT_NAME (the base model; None on an endpoint without components) when the request names none.
    RequestError for an adapter the endpoint does not have."""
    base = inference_component_from_env()
    if not isinstance(payload, dict) or ADAPTER_KEY not in payload:
        return payload, base
    adapters = adapter_components_from_env()
    name = payload[ADAPTER_KEY]
    if not isinstance(name, str) or name not in adapters:
        shown = repr(name)[:80] if isinstance(name, str) else contract.json_type(name)
        allowed = ", ".join(sorted(adapters)) or "none (this endpoint serves no adapters)"
        raise RequestError(f"adapter: value {shown} is not an adapter of this endpoint; allowed: {allowed} (or leave "
                           "the key out for the base model)")
    return {k: v for k, v in payload.items() if k != ADAPTER_KEY}, adapters[name]


def max_request_bytes() -> int:
    return contract.env_int("MAX_REQUEST_BYTES", DEFAULT_MAX_REQUEST_BYTES, 1, 6 * 1024 * 1024)


def read_timeout_s() -> float:
    # Strictly below SageMaker's own limit, so that we, not SageMaker, decide what a timeout looks like.
    return contract.env_number("READ_TIMEOUT_S", DEFAULT_READ_TIMEOUT_S, 1, SAGEMAKER_INVOKE_LIMIT_S - 1)


# ---------------------------------------------------------------------------------------------------------------
# Request validation (pure, no AWS): request_contract's, with this function's limits (MAX_NEW_TOKENS,
# MAX_BATCH_SIZE, MAX_INPUT_CHARS from the environment, which the stack sets from the endpoint's spec).


def validate_payload(payload: Any) -> dict:
    """Parse a decoded request into what is sent to the model: the prompts as given (one string, or a list), and the
    parameters as the contract checked them, with their defaults (max_new_tokens always), never the caller's raw
    values. Raises RequestError."""
    prompts, params = contract.validate_request(payload)
    batched = isinstance(payload.get("inputs", payload.get("input")), list)
    return {"inputs": prompts if batched else prompts[0], "parameters": params}


def parse_body(raw: bytes) -> Any:
    """Bytes -> JSON value, strict (request_contract.decode_body: no NaN/Infinity, no out-of-range numbers, no
    duplicate keys, no lone surrogates, at most MAX_JSON_DEPTH levels) within MAX_REQUEST_BYTES. Raises
    RequestError."""
    cap = max_request_bytes()
    if len(raw) > cap:
        raise RequestError(f"request body must be at most {cap} bytes, got {len(raw)} bytes", status=413,
                           error_type="payload_too_large")
    return contract.decode_body(raw)


def is_proxy_event(event: Any) -> bool:
    return isinstance(event, dict) and ("body" in event or "requestContext" in event or "httpMethod" in event)


def payload_from_event(event: Any) -> Any:
    """Decode a direct or proxy event into the request payload (not yet validated). Raises RequestError."""
    if not isinstance(event, dict):
        raise RequestError(f"event must be a JSON object, got {contract.json_type(event)}")
    if not is_proxy_event(event):
        # Direct invocation: the event is the payload (the runtime decoded it); hold it to the same rules and
        # byte cap as a body.
        contract.check_json_tree(event)
        size = len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        cap = max_request_bytes()
        if size > cap:
            raise RequestError(f"request body must be at most {cap} bytes, got {size} bytes", status=413,
                               error_type="payload_too_large")
        return event

    ctx = event.get("requestContext")
    http = ctx.get("http") if isinstance(ctx, dict) else None
    method = (http.get("method") if isinstance(http, dict) else None) or event.get("httpMethod")
    if method is not None and not isinstance(method, str):
        method = str(method)
    if method and method.upper() != "POST":
        raise RequestError(f"method must be POST, got {method}", status=405, error_type="method_not_allowed")
    body = event.get("body")
    if body is None:
        body = ""
    if not isinstance(body, str):
        raise RequestError(f"body must be a string, got {contract.json_type(body)}")
    if event.get("isBase64Encoded"):
        cap = max_request_bytes()
        # Cheap pre-check before decoding: base64 is 4/3 of the size.
        if len(body) > (cap + 2) // 3 * 4 + 4:
            raise RequestError(f"request body must be at most {cap} bytes, got about {len(body) * 3 // 4} bytes",
                               status=413, error_type="payload_too_large")
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RequestError(f"body is not valid base64 (isBase64Encoded is true): {e}") from None
    else:
        raw = body.encode("utf-8")
    return parse_body(raw)


# ---------------------------------------------------------------------------------------------------------------
# SageMaker client (created once, lazily, reused across invocations of a warm Lambda)

_client = None


def _no_retry_on_read_timeout(caught_exception=None, **_: Any):
    # Registered first on needs-retry: returning False stops the retry; None lets the standard handler decide.
    if isinstance(caught_exception, botocore.exceptions.ReadTimeoutError):
        return False
    return None


def make_client(read_timeout: float | None = None):
    """A sagemaker-runtime client with bounded retries that never retries a read timeout, for InvokeEndpoint and
    InvokeEndpointWithResponseStream (endpoint_runtime/stream.py passes its own, longer read timeout)."""
    client = boto3.client(
        "sagemaker-runtime",
        config=Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=read_timeout_s() if read_timeout is None else read_timeout,
            retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        ),
    )
    for operation in ("InvokeEndpoint", "InvokeEndpointWithResponseStream"):
        client.meta.events.register_first(f"needs-retry.sagemaker-runtime.{operation}", _no_retry_on_read_timeout)
    return client


def get_client():
    global _client
    if _client is None:
        _client = make_client()
    return _client


def reset_client() -> None:
    """Forget the cached client (tests; or after the environment changes)."""
    global _client
    _client = None


# ---------------------------------------------------------------------------------------------------------------
# Invocation

def _error(status: int, error_type: str, message: str, **extra: Any) -> tuple[int, dict]:
    return status, {"error": message, "error_type": error_type, **extra}


_NOT_FOUND = re.compile(r"\bEndpoint\b.*\bnot found\b", re.IGNORECASE | re.DOTALL)
_TIMED_OUT = re.compile(r"timed out", re.IGNORECASE)


def _model_message(original: Any) -> str:
    """A container's error body is often TGI-style JSON {"error": ...}; pass on just the message."""
    if not isinstance(original, str):
        return str(original) if original is not None else ""
    try:
        parsed = json.loads(original)
    except ValueError:
        return original
    if isinstance(parsed, dict):
        for key in ("error", "message", "detail"):
            if isinstance(parsed.get(key), str):
                return parsed[key]
    return original


def map_client_error(err: botocore.exceptions.ClientError, endpoint_name: str) -> tuple[int, dict]:
    resp = err.response or {}
    error = resp.get("Error", {}) or {}
    code = error.get("Code", "")
    message = error.get("Message", "") or ""
    if code == "ModelError":
        original_status = resp.get("OriginalStatusCode", error.get("OriginalStatusCode"))
        original_message = resp.get("OriginalMessage", error.get("OriginalMessage"))
        try:
            original_status = int(original_status) if original_status is not None else None
        except (TypeError, ValueError):
            original_status = None
        if original_status is not None and 400 <= original_status < 500:
            return _error(400, "model_rejected_input", _model_message(original_message) or message,
                          model_status=original_status)
        if _TIMED_OUT.search(message):
            return _error(504, "timeout", f"endpoint {endpoint_name!r} did not answer within SageMaker's "
                                          f"{SAGEMAKER_INVOKE_LIMIT_S:.0f} s invocation limit")
        return _error(502, "model_error", f"the model on endpoint {endpoint_name!r} failed"
                      + (f" (status {original_status})" if original_status else ""))
    if code == "ValidationError" and _NOT_FOUND.search(message):
        return _error(503, "endpoint_not_found", f"endpoint {endpoint_name!r} was not found in this region")
    if code in ("ModelNotReadyException", "ServiceUnavailable"):
        return _error(503, "endpoint_unavailable", f"endpoint {endpoint_name!r} is not ready ({code})")
    if code in ("ThrottlingException", "Throttling", "TooManyRequestsException"):
        return _error(429, "throttled", f"endpoint {endpoint_name!r} is throttling requests; retry later")
    if code.startswith("AccessDenied") or code in ("UnrecognizedClientException", "InvalidSignatureException",
                                                    "ExpiredTokenException"):
        return _error(500, "configuration", f"this function may not invoke endpoint {endpoint_name!r} ({code})")
    return _error(502, "upstream_error", f"SageMaker refused the call to endpoint {endpoint_name!r} ({code})")


def log_record(record: dict) -> None:
    """One structured JSON line per request. Never includes prompt text or model output."""
    sys.stdout.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


def invoke(
    endpoint_name: str, payload: dict, client=None, *, log: dict | None = None, inference_component: str | None = None
) -> tuple[int, dict]:
    """Validate `payload` and invoke `endpoint_name`. Returns (HTTP status, JSON-able body). Never raises for
    request, model or AWS errors. Reused by the handler, the CLI smoke test and the local demo.
    `log`, when given, receives details for the operator's log line (AWS error code and message)."""
    log = {} if log is None else log
    try:
        request = validate_payload(payload)
    except RequestError as e:
        return _error(e.status, e.error_type, e.message)
    except SetupError as e:
        return _error(500, "configuration", str(e))
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    started = time.monotonic()
    try:
        client = client or get_client()
        # InferenceComponentName: which component's model runs, on an endpoint that hosts inference components.
        component = {"InferenceComponentName": inference_component} if inference_component else {}
        response = client.invoke_endpoint(
            EndpointName=endpoint_name,
            **component,
            ContentType="application/json",
            Accept="application/json",
            Body=body,
        )
        raw = response["Body"].read()
    except SetupError as e:
        return _error(500, "configuration", str(e))
    except botocore.exceptions.ClientError as e:
        log["aws_error"] = str(e)[:500]
        return map_client_error(e, endpoint_name)
    except (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError) as e:
        elapsed = time.monotonic() - started
        log["aws_error"] = type(e).__name__
        return _error(504, "timeout", f"endpoint {endpoint_name!r} did not answer within {elapsed:.0f} s")
    except botocore.exceptions.NoCredentialsError as e:
        return _error(500, "configuration", f"no AWS credentials: {e}")
    except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionError,
            botocore.exceptions.HTTPClientError) as e:
        log["aws_error"] = str(e)[:500]
        return _error(502, "upstream_error", f"could not reach SageMaker: {type(e).__name__}")
    latency_ms = int(round((time.monotonic() - started) * 1000))

    try:
        outputs = json.loads(raw)
    except ValueError:
        return _error(502, "model_error", f"endpoint {endpoint_name!r} returned a non-JSON response "
                                          f"({response.get('ContentType', 'unknown content type')}, {len(raw)} bytes)")
    return 200, {"endpoint": endpoint_name, "outputs": outputs, "latency_ms": latency_ms}


def answered(record: dict, started: float, run: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
    """run() -> (status, body), with its errors answered as every function here answers them (a RequestError with
    its status, a misconfiguration as 500 "configuration", anything else as 500 "internal", its type logged only);
    the record gets the status and the latency."""
    try:
        status, body = run()
    except RequestError as e:
        status, body = _error(e.status, e.error_type, e.message)
    except SetupError as e:
        status, body = _error(500, "configuration", str(e))
    except Exception as e:
        status, body = _error(500, "internal", "internal error")
        record["exception"] = type(e).__name__
    record.update(status=status, latency_ms=int(round((time.monotonic() - started) * 1000)))
    return status, body


def _respond(status: int, body: dict) -> dict:
    return {"statusCode": status, "headers": dict(JSON_HEADERS), "body": json.dumps(body, ensure_ascii=False)}


def handler(event: Any, context: Any = None) -> dict:
    started = time.monotonic()
    record: dict[str, Any] = {
        "message": "invoke",
        "request_id": getattr(context, "aws_request_id", None),
        "event_kind": "proxy" if is_proxy_event(event) else "direct",
    }

    def run() -> tuple[int, dict]:
        endpoint_name = endpoint_name_from_env()
        record["endpoint"] = endpoint_name
        payload, component = target_component(payload_from_event(event))
        record["inference_component"] = component
        if isinstance(payload, dict):
            inputs = payload.get("inputs")
            record["inputs_count"] = len(inputs) if isinstance(inputs, list) else 1
            if isinstance(payload.get("parameters"), dict):
                record["parameter_keys"] = sorted(map(str, payload["parameters"]))[:20]
        return invoke(endpoint_name, payload, log=record, inference_component=component)

    status, body = answered(record, started, run)
    if status != 200:
        record["error_type"] = body.get("error_type")
        # 4xx messages describe the request without echoing prompt text; 5xx details come from AWS.
        record["error"] = body.get("error")
    else:
        record["model_latency_ms"] = body.get("latency_ms")
    log_record(record)
    return _respond(status, body)
