"""Lambda function that validates a text-generation request and invokes one SageMaker endpoint.

Runtime: Python 3.12, stdlib + the boto3/botocore the runtime ships. Nothing else.

Events accepted
  * direct invocation: ``{"inputs": ..., "parameters": {...}}``
  * API Gateway (REST or HTTP API) / Lambda Function URL proxy: ``{"body": "<json>", "isBase64Encoded": bool, ...}``
Every answer is proxy-style: ``{"statusCode", "headers", "body": "<json>"}``.

Environment
  ENDPOINT_NAME       (required) the SageMaker endpoint; never taken from the request
  MAX_REQUEST_BYTES   request body cap, default 65536
  MAX_NEW_TOKENS      upper bound for parameters.max_new_tokens, default 512
  MAX_BATCH_SIZE      upper bound for the length of a list ``inputs``, default 8
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
import math
import os
import re
import sys
import time
from collections import deque
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

# ---------------------------------------------------------------------------------------------------------------
# Configuration

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024
DEFAULT_MAX_NEW_TOKENS = 512
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_READ_TIMEOUT_S = 55.0
CONNECT_TIMEOUT_S = 5.0
MAX_ATTEMPTS = 2
SAGEMAKER_INVOKE_LIMIT_S = 60.0
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 256
MAX_SEED = 2**64 - 1

JSON_HEADERS = {"Content-Type": "application/json"}


class ConfigError(Exception):
    """The function's own environment is wrong: a 500, the operator must fix it."""


class RequestError(Exception):
    """The caller's request is wrong: a 4xx."""

    def __init__(self, message: str, status: int = 400, error_type: str = "validation"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


def _env_number(name: str, default: float, lo: float, hi: float, integer: bool) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"environment variable {name} must be {kind} between {lo} and {hi}, got {raw!r}") from None
    if not (lo <= value <= hi) or (not integer and not math.isfinite(value)):
        raise ConfigError(f"environment variable {name} must be between {lo} and {hi}, got {raw!r}")
    return value


def endpoint_name_from_env() -> str:
    name = os.environ.get("ENDPOINT_NAME", "").strip()
    if not name:
        raise ConfigError("environment variable ENDPOINT_NAME is not set: this function does not know which "
                          "SageMaker endpoint to invoke")
    return name


def max_request_bytes() -> int:
    return int(_env_number("MAX_REQUEST_BYTES", DEFAULT_MAX_REQUEST_BYTES, 1, 6 * 1024 * 1024, integer=True))


def max_new_tokens_limit() -> int:
    return int(_env_number("MAX_NEW_TOKENS", DEFAULT_MAX_NEW_TOKENS, 1, 1_000_000, integer=True))


def max_batch_size() -> int:
    return int(_env_number("MAX_BATCH_SIZE", DEFAULT_MAX_BATCH_SIZE, 1, 1024, integer=True))


def read_timeout_s() -> float:
    # Strictly below SageMaker's own limit, so that we, not SageMaker, decide what a timeout looks like.
    return _env_number("READ_TIMEOUT_S", DEFAULT_READ_TIMEOUT_S, 1, SAGEMAKER_INVOKE_LIMIT_S - 1, integer=False)


# ---------------------------------------------------------------------------------------------------------------
# Request validation (pure, no AWS)

def _show(value: Any, limit: int = 60) -> str:
    """A value as the caller wrote it (JSON), shortened; used in every 4xx message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _int_range(key: str, lo: int, hi: int):
    def check(v: Any) -> None:
        if not _is_int(v):
            raise RequestError(f"parameters.{key} must be an integer between {lo} and {hi}, "
                               f"got {_show(v)} ({_json_type(v)})")
        if not lo <= v <= hi:
            raise RequestError(f"parameters.{key} must be between {lo} and {hi}, got {_show(v)}")
    return check


def _open_closed(key: str, hi: float):
    """(0, hi]: strictly positive, at most hi."""
    def check(v: Any) -> None:
        if not _is_number(v):
            raise RequestError(f"parameters.{key} must be a number greater than 0 and at most {hi}, "
                               f"got {_show(v)} ({_json_type(v)})")
        if not 0 < v <= hi:
            raise RequestError(f"parameters.{key} must be greater than 0 and at most {hi}, got {_show(v)}")
    return check


def _boolean(key: str):
    def check(v: Any) -> None:
        if not isinstance(v, bool):
            raise RequestError(f"parameters.{key} must be true or false, got {_show(v)} ({_json_type(v)})")
    return check


def _stop(v: Any) -> None:
    if not isinstance(v, list):
        raise RequestError(f"parameters.stop must be a list of at most {MAX_STOP_SEQUENCES} strings, "
                           f"got {_show(v)} ({_json_type(v)})")
    if len(v) > MAX_STOP_SEQUENCES:
        raise RequestError(f"parameters.stop must have at most {MAX_STOP_SEQUENCES} entries, got {len(v)}")
    for i, s in enumerate(v):
        if not isinstance(s, str) or not s:
            raise RequestError(f"parameters.stop[{i}] must be a non-empty string, got {_show(s)} ({_json_type(s)})")
        if len(s) > MAX_STOP_CHARS:
            raise RequestError(f"parameters.stop[{i}] must be at most {MAX_STOP_CHARS} characters, got {len(s)}")


def _parameter_checks() -> dict[str, Any]:
    return {
        "max_new_tokens": _int_range("max_new_tokens", 1, max_new_tokens_limit()),
        "temperature": _open_closed("temperature", 5),
        "top_p": _open_closed("top_p", 1),
        "typical_p": _open_closed("typical_p", 1),
        "top_k": _int_range("top_k", 0, 1000),
        "repetition_penalty": _open_closed("repetition_penalty", 10),
        "do_sample": _boolean("do_sample"),
        "return_full_text": _boolean("return_full_text"),
        "stop": _stop,
        "seed": _int_range("seed", 0, MAX_SEED),
    }


ALLOWED_TOP_LEVEL = ("inputs", "parameters")


def validate_payload(payload: Any) -> dict:
    """Check a decoded request; return the payload to send to the model (only known keys). Raises RequestError."""
    if not isinstance(payload, dict):
        raise RequestError(f"request must be a JSON object with keys {list(ALLOWED_TOP_LEVEL)}, "
                           f"got {_json_type(payload)}")
    unknown = sorted(k for k in payload if k not in ALLOWED_TOP_LEVEL)
    if unknown:
        raise RequestError(f"unknown request keys {unknown}; allowed keys are {list(ALLOWED_TOP_LEVEL)} "
                           f"(the endpoint is fixed by this function's configuration)")
    if "inputs" not in payload:
        raise RequestError("inputs is required: a non-empty string or a list of non-empty strings")

    inputs = payload["inputs"]
    batch = max_batch_size()
    # Messages describe the prompt (type, length) but never echo it.
    if isinstance(inputs, str):
        if not inputs.strip():
            raise RequestError(f"inputs must be a non-empty string, got {_show(inputs)}")
    elif isinstance(inputs, list):
        if not 1 <= len(inputs) <= batch:
            raise RequestError(f"inputs must be a list of 1 to {batch} strings, got a list of {len(inputs)}")
        for i, item in enumerate(inputs):
            if not isinstance(item, str):
                raise RequestError(f"inputs[{i}] must be a non-empty string, got {_json_type(item)}")
            if not item.strip():
                raise RequestError(f"inputs[{i}] must be a non-empty string, got an empty or whitespace-only string")
    else:
        raise RequestError(f"inputs must be a non-empty string or a list of 1 to {batch} non-empty strings, "
                           f"got {_json_type(inputs)}")

    out: dict[str, Any] = {"inputs": inputs}
    if "parameters" in payload and payload["parameters"] is not None:
        params = payload["parameters"]
        if not isinstance(params, dict):
            raise RequestError(f"parameters must be an object, got {_show(params)} ({_json_type(params)})")
        checks = _parameter_checks()
        unknown = sorted(k for k in params if k not in checks)
        if unknown:
            raise RequestError(f"unknown parameters {unknown}; allowed parameters are {sorted(checks)}")
        for key, value in params.items():
            checks[key](value)
        out["parameters"] = dict(params)
    return out


# Strict JSON. Python's json accepts more than a request may carry. Two of those extras made this function answer
# 500: lone UTF-16 surrogates ("\ud800" decodes to a str that cannot be encoded as UTF-8 again, for SageMaker)
# and nesting deep enough to exhaust the interpreter's recursion limit (RecursionError); numbers out of range
# (1e999 becomes inf; int() refuses more than 4300 digits) got messages about Python's internals. RFC 8259
# section 6 leaves NaN/Infinity out of the grammar, section 9 lets a parser limit nesting depth and the range of
# numbers, and section 8.2 says unpaired surrogates make the receiver's behaviour unpredictable.
# https://www.rfc-editor.org/rfc/rfc8259
# The 4300 digits: https://docs.python.org/3/library/stdtypes.html#int-max-str-digits

MAX_JSON_DEPTH = 32  # a request needs 3 levels (body -> parameters -> stop)
MAX_INT_DIGITS = 40  # the largest integer a request needs is a seed <= 2**64 - 1 (20 digits)
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # json.loads joins escaped pairs; what is left is unpaired
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate can come from in the JSON text


class _Refused(ValueError):
    """Raised by the json.loads hooks below: its message is complete (no "not valid JSON" prefix)."""


def _clip(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite, RFC 8259 section 6)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"body has the number {_clip(text)}, which is out of range: numbers must fit a 64-bit float")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"body has an integer of {digits} digits; the limit is {MAX_INT_DIGITS} digits")
    return int(text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key {k!r}")
        seen[k] = v
    return seen


def _where(chain: Any) -> str:
    """The path of a value from its (parent chain, key) links, e.g. parameters.stop[1]; built only for a message."""
    keys: list[Any] = []
    while chain is not None:
        chain, key = chain
        keys.append(key)
    path = ""
    for key in reversed(keys):
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def _refuse_lone_surrogate(text: str, chain: Any, is_key: bool = False) -> None:
    match = _LONE_SURROGATE.search(text)
    if match:
        where = f"a key of {_where(chain) or 'the body'}" if is_key else (_where(chain) or "body")
        raise RequestError(
            f"{where} contains a lone UTF-16 surrogate \\u{ord(match.group()):04x} at character {match.start()}, "
            "which is not a Unicode character; send UTF-8 text (a \\u escape above U+FFFF must be a high + low "
            "surrogate pair)"
        )


def check_json_tree(value: Any, text: str | None = None) -> None:
    """Refuse a decoded request nested deeper than MAX_JSON_DEPTH or holding a lone surrogate (in a value or a
    key), naming where. Breadth-first without recursion, so the check cannot run out of stack itself. With the
    JSON `text`, bodies that can hold neither (the usual case) are not walked at all: a lone surrogate can only
    come from a \\uD800-\\uDFFF escape (the UTF-8 decoder refuses encoded surrogates), and more than
    MAX_JSON_DEPTH levels need more than that many brackets."""
    brackets = None if text is None else text.count("[") + text.count("{")
    if brackets is not None and brackets <= MAX_JSON_DEPTH and not _SURROGATE_ESCAPE.search(text):
        return
    queue: deque[tuple[Any, Any, int]] = deque([(value, None, 1)])
    while queue:
        node, chain, depth = queue.popleft()
        if isinstance(node, str):
            _refuse_lone_surrogate(node, chain)
            continue
        if not isinstance(node, (dict, list)):  # a number, true, false or null at the top
            continue
        if depth > MAX_JSON_DEPTH:
            raise RequestError(
                f"{_where(chain) or 'body'}: arrays and objects are nested more than {MAX_JSON_DEPTH} "
                f"levels deep; the limit is {MAX_JSON_DEPTH}"
            )
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(key, str):
                _refuse_lone_surrogate(key, chain, is_key=True)
            if isinstance(item, (str, dict, list)):
                queue.append((item, (chain, key), depth + 1))


def parse_body(raw: bytes) -> Any:
    """Bytes -> JSON value, strict: no NaN/Infinity, no out-of-range numbers, no duplicate keys, no lone
    surrogates, at most MAX_JSON_DEPTH levels. Raises RequestError."""
    cap = max_request_bytes()
    if len(raw) > cap:
        raise RequestError(f"request body must be at most {cap} bytes, got {len(raw)} bytes", status=413,
                           error_type="payload_too_large")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"body is not valid UTF-8: {e}") from None
    if not text.strip():
        raise RequestError("body is not valid JSON: the body is empty; expected an object with \"inputs\"")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                           parse_int=_bounded_int, object_pairs_hook=_no_duplicates)
    except _Refused as e:
        raise RequestError(str(e)) from None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise RequestError(f"body is not valid JSON: {e}") from None
    except RecursionError:  # the C decoder's depth guard, far above MAX_JSON_DEPTH
        raise RequestError(f"body: arrays and objects are nested more than {MAX_JSON_DEPTH} levels deep; "
                           f"the limit is {MAX_JSON_DEPTH}") from None
    check_json_tree(value, text)
    return value


def is_proxy_event(event: Any) -> bool:
    return isinstance(event, dict) and ("body" in event or "requestContext" in event or "httpMethod" in event)


def payload_from_event(event: Any) -> Any:
    """Decode a direct or proxy event into the request payload (not yet validated). Raises RequestError."""
    if not isinstance(event, dict):
        raise RequestError(f"event must be a JSON object, got {_json_type(event)}")
    if not is_proxy_event(event):
        # Direct invocation: the event is the payload (the runtime decoded it); hold it to the same rules and
        # byte cap as a body.
        check_json_tree(event)
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
        raise RequestError(f"body must be a string, got {_json_type(body)}")
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


def make_client():
    client = boto3.client(
        "sagemaker-runtime",
        config=Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=read_timeout_s(),
            retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        ),
    )
    client.meta.events.register_first("needs-retry.sagemaker-runtime.InvokeEndpoint", _no_retry_on_read_timeout)
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


def _log(record: dict) -> None:
    """One structured JSON line per request. Never includes prompt text or model output."""
    sys.stdout.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


def invoke(endpoint_name: str, payload: dict, client=None, *, log: dict | None = None) -> tuple[int, dict]:
    """Validate `payload` and invoke `endpoint_name`. Returns (HTTP status, JSON-able body). Never raises for
    request, model or AWS errors. Reused by the handler, the CLI smoke test and the local demo.
    `log`, when given, receives details for the operator's log line (AWS error code and message)."""
    log = {} if log is None else log
    try:
        request = validate_payload(payload)
    except RequestError as e:
        return _error(e.status, e.error_type, e.message)
    except ConfigError as e:
        return _error(500, "configuration", str(e))
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    started = time.monotonic()
    try:
        client = client or get_client()
        response = client.invoke_endpoint(
            EndpointName=endpoint_name,
            ContentType="application/json",
            Accept="application/json",
            Body=body,
        )
        raw = response["Body"].read()
    except ConfigError as e:
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


def _respond(status: int, body: dict) -> dict:
    return {"statusCode": status, "headers": dict(JSON_HEADERS), "body": json.dumps(body, ensure_ascii=False)}


def handler(event: Any, context: Any = None) -> dict:
    started = time.monotonic()
    record: dict[str, Any] = {
        "message": "invoke",
        "request_id": getattr(context, "aws_request_id", None),
        "event_kind": "proxy" if is_proxy_event(event) else "direct",
    }
    endpoint_name = None
    try:
        endpoint_name = endpoint_name_from_env()
        record["endpoint"] = endpoint_name
        payload = payload_from_event(event)
        if isinstance(payload, dict):
            inputs = payload.get("inputs")
            record["inputs_count"] = len(inputs) if isinstance(inputs, list) else 1
            if isinstance(payload.get("parameters"), dict):
                record["parameter_keys"] = sorted(map(str, payload["parameters"]))[:20]
        status, body = invoke(endpoint_name, payload, log=record)
    except RequestError as e:
        status, body = _error(e.status, e.error_type, e.message)
    except ConfigError as e:
        status, body = _error(500, "configuration", str(e))
    except Exception as e:  # noqa: BLE001 - the caller gets a JSON 500, the log gets the type
        status, body = _error(500, "internal", "internal error")
        record["exception"] = type(e).__name__
    record.update(status=status, latency_ms=int(round((time.monotonic() - started) * 1000)))
    if status != 200:
        record["error_type"] = body.get("error_type")
        # 4xx messages describe the request without echoing prompt text; 5xx details come from AWS.
        record["error"] = body.get("error")
    else:
        record["model_latency_ms"] = body.get("latency_ms")
    _log(record)
    return _respond(status, body)
