"""The invoke function's code: validates a text-generation request and invokes one SageMaker endpoint.

Lambda entry point lambda/invoke/handler.py; the smoke test and the demo import it. Stdlib + the runtime's boto3.
Environment: ENDPOINT_NAME (required), INFERENCE_COMPONENT_NAME, ADAPTER_COMPONENTS, MAX_REQUEST_BYTES, the
request_contract limits, CHAT_*, READ_TIMEOUT_S (default 55, below SageMaker's 60 s; a read timeout is not retried).
Events, status codes, retries and each variable in full: docs/design/front-doors.md.
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
from typing import Any, NamedTuple

import boto3
import botocore.exceptions
from botocore.config import Config

# ---------------------------------------------------------------------------------------------------------------
# Configuration. The request contract (parameter table, limits, JSON safety, error shape) is request_contract.py,
# the top-level module every entry point ships under the same name (the function's asset holds it at its root).
import chat_contract
import request_contract as contract
from endpoint_runtime import bodies, clients

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
        raise SetupError(
            "environment variable ENDPOINT_NAME is not set: this function does not know which "
            "SageMaker endpoint to invoke"
        )
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
    if not isinstance(parsed, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in parsed.items()
    ):
        raise SetupError(
            "environment variable ADAPTER_COMPONENTS must be a JSON object of adapter name -> inference component name"
        )
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
        raise RequestError(
            f"adapter: value {shown} is not an adapter of this endpoint; allowed: {allowed} (or leave "
            "the key out for the base model)"
        )
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
    # A list stays a list, except where the container reads one prompt a body (MAX_BATCH_SIZE 1: TGI's `inputs` is
    # a string), which gets the one prompt as a string.
    batched = isinstance(payload.get("inputs", payload.get("input")), list) and contract.limits().max_batch_size > 1
    return {"inputs": prompts if batched else prompts[0], "parameters": params}


def parse_body(raw: bytes) -> Any:
    """Bytes -> JSON value, strict (request_contract.decode_body: no NaN/Infinity, no out-of-range numbers, no
    duplicate keys, no lone surrogates, at most MAX_JSON_DEPTH levels) within MAX_REQUEST_BYTES. Raises
    RequestError."""
    cap = max_request_bytes()
    if len(raw) > cap:
        raise RequestError(
            f"request body must be at most {cap} bytes, got {len(raw)} bytes",
            status=413,
            error_type="payload_too_large",
        )
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
            raise RequestError(
                f"request body must be at most {cap} bytes, got {size} bytes",
                status=413,
                error_type="payload_too_large",
            )
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
            raise RequestError(
                f"request body must be at most {cap} bytes, got about {len(body) * 3 // 4} bytes",
                status=413,
                error_type="payload_too_large",
            )
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RequestError(f"body is not valid base64 (isBase64Encoded is true): {e}") from None
    else:
        raw = body.encode("utf-8")
    return parse_body(raw)


# ---------------------------------------------------------------------------------------------------------------
# SageMaker client (created once, lazily, reused across invocations of a warm Lambda: endpoint_runtime/clients.py)

_client = None  # a client set here (tests) is used instead of the cached one


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
    return _client if _client is not None else clients.cached("invoke:sagemaker-runtime", make_client)


def reset_client() -> None:
    """Forget the cached client (tests; or after the environment changes)."""
    global _client
    _client = None
    clients.forget("invoke:")


# ---------------------------------------------------------------------------------------------------------------
# Invocation


def _error(status: int, error_type: str, message: str, **extra: Any) -> tuple[int, dict]:
    return status, {"error": message, "error_type": error_type, **extra}


_NOT_FOUND = re.compile(r"\bEndpoint\b.*\bnot found\b", re.IGNORECASE | re.DOTALL)
_TIMED_OUT = re.compile(r"timed out", re.IGNORECASE)


class Retryable(NamedTuple):
    """A SageMaker error a caller should retry: the status and error_type every front door answers it with (the
    invoke, stream and asynchronous submit functions, through this table), and the Retry-After it suggests."""

    code: str
    status: int
    error_type: str
    retry_after_s: int
    what: str
    message: re.Pattern[str] | None = None  # for a code that also means other things (ValidationError)

    def matches(self, code: str, message: str) -> bool:
        return code == self.code and (self.message is None or bool(self.message.search(message)))


# SageMaker's retryable errors. Codes: botocore 1.44.8's sagemaker-runtime service model (InvokeEndpoint errors:
# ServiceUnavailable, HTTP 503, "Try your call again"; ModelNotReadyException, HTTP 429, "Wait and try your request
# again"); the scaled-to-zero component's ValidationError, "Inference Component has no capacity to process this
# request. ApplicationAutoScaling may be in-progress (if configured) ..." (aws-samples/sagemaker-genai-hosting-examples,
# scale-to-zero notebook; the SageMaker DG, "Scale an endpoint to zero instances": "any attempts to invoke the endpoint
# will produce an error" while an instance is provisioned, which "takes several minutes"); throttling: the codes
# botocore's standard retry mode treats as throttling (botocore/retries/standard.py, _THROTTLED_ERROR_CODES).
# Retry-After: a choice, not a SageMaker figure: a minute for a copy to start, seconds otherwise.
THROTTLING_CODES = (
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
)
RETRYABLE_ERRORS: tuple[Retryable, ...] = (
    Retryable(
        "ValidationError",
        503,
        "no_capacity",
        60,
        "has no model copy running (its inference component is scaled to zero) and SageMaker is starting one",
        re.compile(r"no capacity", re.IGNORECASE),
    ),
    Retryable("ModelNotReadyException", 503, "endpoint_unavailable", 10, "is not ready (ModelNotReadyException)"),
    Retryable("ServiceUnavailable", 503, "endpoint_unavailable", 5, "is not ready (ServiceUnavailable)"),
    *(Retryable(code, 429, "throttled", 1, f"is throttling requests ({code})") for code in THROTTLING_CODES),
)


def retryable_error(code: str, message: str) -> Retryable | None:
    return next((r for r in RETRYABLE_ERRORS if r.matches(code, message)), None)


def response_headers(body: dict) -> dict[str, str]:
    """The JSON reply's headers: Retry-After when the error is retryable (its body carries retry_after_s)."""
    headers = dict(JSON_HEADERS)
    retry_after = body.get("retry_after_s") if isinstance(body, dict) else None
    if isinstance(retry_after, int):
        headers["Retry-After"] = str(retry_after)
    return headers


def _model_message(original: Any) -> str:
    """A container's error body is often TGI-style JSON {"error": ...}; pass on just the message."""
    if not isinstance(original, str):
        return str(original) if original is not None else ""
    try:
        parsed = json.loads(original)
    except ValueError:
        return original
    if isinstance(parsed, dict):
        if isinstance(parsed.get("error"), dict) and isinstance(parsed["error"].get("message"), str):
            return parsed["error"]["message"]  # OpenAI's error object (vLLM, SGLang)
        for key in ("error", "message", "detail"):
            if isinstance(parsed.get(key), str):
                return parsed[key]
    return original


def _original(original_message: Any) -> dict:
    """The container's own error body, kept for a chat reply (model_chat_error) and dropped from other replies."""
    return {"model_message": original_message} if isinstance(original_message, str) else {}


def map_client_error(
    err: botocore.exceptions.ClientError, endpoint_name: str, *, keep_model_message: bool = False
) -> tuple[int, dict]:
    """A SageMaker error as (status, body). keep_model_message: a model's 4xx keeps the container's own error body
    as model_message (a chat reply passes the container's OpenAI error object on: model_chat_error)."""
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
            return _error(
                400,
                "model_rejected_input",
                _model_message(original_message) or message,
                model_status=original_status,
                **(_original(original_message) if keep_model_message else {}),
            )
        if _TIMED_OUT.search(message):
            return _error(
                504,
                "timeout",
                f"endpoint {endpoint_name!r} did not answer within SageMaker's "
                f"{SAGEMAKER_INVOKE_LIMIT_S:.0f} s invocation limit",
            )
        return _error(
            502,
            "model_error",
            f"the model on endpoint {endpoint_name!r} failed"
            + (f" (status {original_status})" if original_status else ""),
        )
    if code == "ValidationError" and _NOT_FOUND.search(message):
        return _error(503, "endpoint_not_found", f"endpoint {endpoint_name!r} was not found in this region")
    retry = retryable_error(code, message)
    if retry is not None:
        return _error(
            retry.status,
            retry.error_type,
            f"endpoint {endpoint_name!r} {retry.what}; retry after {retry.retry_after_s} s",
            retry_after_s=retry.retry_after_s,
        )
    if code.startswith("AccessDenied") or code in (
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
    ):
        return _error(500, "configuration", f"this function may not invoke endpoint {endpoint_name!r} ({code})")
    return _error(502, "upstream_error", f"SageMaker refused the call to endpoint {endpoint_name!r} ({code})")


def log_record(record: dict) -> None:
    """One structured JSON line per request. Never includes prompt text or model output: a refusal's message (4xx)
    may quote the refused value (`got "my password is hunter2" (string)`), so its quoted parts are logged as "..."
    (the caller's reply keeps them: it is their own request). Every front door logs through here."""
    status = record.get("status")
    if isinstance(record.get("error"), str) and isinstance(status, int) and 400 <= status < 500:
        record = {**record, "error": without_quoted_values(record["error"])}
    sys.stdout.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


# A double-quoted string (JSON's escapes), or a single-quoted one (Python's repr) not opened by a word's apostrophe.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![A-Za-z])\'(?:[^\'\\\n]|\\.)*\'')


def without_quoted_values(message: str) -> str:
    """`message` with every quoted value replaced by "..." (its key names, bounds and kinds stay)."""
    return _QUOTED.sub(lambda m: m.group(0)[0] + "..." + m.group(0)[0], message)


def invoke(
    endpoint_name: str,
    payload: dict,
    client=None,
    *,
    log: dict | None = None,
    inference_component: str | None = None,
    body: bodies.EndpointBody | None = None,
) -> tuple[int, dict]:
    """Validate `payload` and invoke `endpoint_name`. Returns (HTTP status, JSON-able body). Never raises for
    request, model or AWS errors. Reused by the handler, the CLI smoke test and the local demo.
    `log`, when given, receives details for the operator's log line (AWS error code and message).
    `body`: how the container takes a prompt and answers (bodies.EndpointBody; None: from the environment, which
    the stack sets from the plan). The reply is always the generation contract's: {"outputs": [{"generated_text"}]}."""
    log = {} if log is None else log
    try:
        request = validate_payload(payload)
        body = bodies.EndpointBody.from_env() if body is None else body
        sent = body.request(request)
    except RequestError as e:
        return _error(e.status, e.error_type, e.message)
    except SetupError as e:
        return _error(500, "configuration", str(e))
    status, answer = call_endpoint(endpoint_name, sent, client, log=log, inference_component=inference_component)
    if status != 200:
        return status, answer
    try:
        outputs = body.outputs(answer["json"])
    except ValueError as e:
        return _error(
            502, "model_error", f"endpoint {endpoint_name!r} answered a {body.kind} request in another shape: {e}"
        )
    # One output a prompt, or the answer is not the contract's: a container that reads fewer prompts than it was
    # sent (LMI 27 answers a list's first only) must not pass for a whole answer.
    # (An answer of another shape is passed on for the caller's own shape check: smoke.check_response_shape.)
    sent_prompts = len(request["inputs"]) if isinstance(request["inputs"], list) else 1
    if isinstance(outputs, list) and len(outputs) != sent_prompts:
        return _error(
            502,
            "model_error",
            f"endpoint {endpoint_name!r} answered {len(outputs)} outputs for {sent_prompts} prompts; its container "
            "may read fewer prompts a request than it was sent",
        )
    return 200, {"endpoint": endpoint_name, "outputs": outputs, "latency_ms": answer["latency_ms"]}


def sagemaker_call(
    endpoint_name: str, call: Callable[[], Any], *, started: float, log: dict, keep_model_message: bool, waiting: str
) -> tuple[int, Any]:
    """`call()` (a SageMaker Runtime request begun at `started`): (200, what it returns), or the error (status, body)
    every front door answers: map_client_error for SageMaker's refusals, 504 when the endpoint did not `waiting` in
    time, 500 for no credentials or a setup error, 502 when SageMaker could not be reached. `log` gets the AWS error."""
    try:
        return 200, call()
    except SetupError as e:
        return _error(500, "configuration", str(e))
    except botocore.exceptions.ClientError as e:
        log["aws_error"] = str(e)[:500]
        return map_client_error(e, endpoint_name, keep_model_message=keep_model_message)
    except (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError) as e:
        elapsed = time.monotonic() - started
        log["aws_error"] = type(e).__name__
        return _error(504, "timeout", f"endpoint {endpoint_name!r} did not {waiting} within {elapsed:.0f} s")
    except botocore.exceptions.NoCredentialsError as e:
        return _error(500, "configuration", f"no AWS credentials: {e}")
    except (
        botocore.exceptions.EndpointConnectionError,
        botocore.exceptions.ConnectionError,
        botocore.exceptions.HTTPClientError,
    ) as e:
        log["aws_error"] = str(e)[:500]
        return _error(502, "upstream_error", f"could not reach SageMaker: {type(e).__name__}")


def call_endpoint(
    endpoint_name: str,
    request: dict,
    client=None,
    *,
    log: dict,
    inference_component: str | None = None,
    keep_model_message: bool = False,
) -> tuple[int, dict]:
    """InvokeEndpoint with `request` (already checked): (200, {"json": the decoded answer, "latency_ms"}), or the
    error (status, body) every front door answers (map_client_error, timeouts, connection failures)."""
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # InferenceComponentName: which component's model runs, on an endpoint that hosts inference components.
    component = {"InferenceComponentName": inference_component} if inference_component else {}

    def call() -> tuple[dict, bytes]:
        response = (client or get_client()).invoke_endpoint(
            EndpointName=endpoint_name,
            **component,
            ContentType="application/json",
            Accept="application/json",
            Body=body,
        )
        return response, response["Body"].read()

    started = time.monotonic()
    status, result = sagemaker_call(
        endpoint_name, call, started=started, log=log, keep_model_message=keep_model_message, waiting="answer"
    )
    if status != 200:
        return status, result
    response, raw = result
    latency_ms = int(round((time.monotonic() - started) * 1000))

    try:
        outputs = json.loads(raw)
    except ValueError:
        return _error(
            502,
            "model_error",
            f"endpoint {endpoint_name!r} returned a non-JSON response "
            f"({response.get('ContentType', 'unknown content type')}, {len(raw)} bytes)",
        )
    return 200, {"json": outputs, "latency_ms": latency_ms}


# ---------------------------------------------------------------------------------------------------------------
# Chat: OpenAI Chat Completions (chat_contract.py) for endpoints whose config has a `chat:` block (the stack sets
# chat_contract.CHAT_ENV from the serving system). A request is chat when its path ends in /chat/completions (so a
# body that is not even JSON is refused in OpenAI's shape there) or its body is an object with "messages".
# Replies: the container's chat.completion as it is; refusals and failures as OpenAI's error object with the
# status the generation contract gives them.

CHAT_PATH_SUFFIX = "/chat/completions"


def event_path(event: Any) -> str:
    """The HTTP path of a proxy event (function URL / HTTP API: rawPath; REST API: path), "" for a direct one."""
    if not isinstance(event, dict):
        return ""
    ctx = event.get("requestContext")
    http = ctx.get("http") if isinstance(ctx, dict) else None
    for value in (event.get("rawPath"), event.get("path"), http.get("path") if isinstance(http, dict) else None):
        if isinstance(value, str) and value:
            return value
    return ""


def is_chat_path(path: str) -> bool:
    return path.rstrip("/").endswith(CHAT_PATH_SUFFIX)


def as_chat_error(status: int, body: dict) -> dict:
    """A front door's error body in OpenAI's shape ({"error": {"message", "type", "param", "code"}}); one already
    in that shape is returned as it is. retry_after_s stays beside it, for the Retry-After header."""
    if isinstance(body.get("error"), dict):
        return body
    err = chat_contract.from_error(status, str(body.get("error", "")), body.get("error_type"))
    out: dict[str, Any] = chat_contract.error_body(err)
    if "retry_after_s" in body:
        out["retry_after_s"] = body["retry_after_s"]
    return out


def model_chat_error(status: int, body: dict) -> dict:
    """A model's own refusal of a chat request (ModelError with a 4xx OriginalStatusCode) in OpenAI's shape: the
    container's error object when it sent one ({"error": {...}}, or vLLM's flat {"object": "error", "message", ...}),
    else the message."""
    try:
        sent = json.loads(body.get("model_message") or "")
    except ValueError:
        sent = None
    if isinstance(sent, dict) and isinstance(sent.get("error"), dict) and isinstance(sent["error"].get("message"), str):
        inner = sent["error"]
        return {
            "error": {
                "message": inner["message"],
                "type": inner.get("type") or "invalid_request_error",
                "param": inner.get("param"),
                "code": inner.get("code"),
            }
        }
    if isinstance(sent, dict) and sent.get("object") == "error" and isinstance(sent.get("message"), str):
        return {
            "error": {
                "message": sent["message"],
                "type": sent.get("type") or "invalid_request_error",
                "param": sent.get("param"),
                "code": sent.get("code"),
            }
        }
    return as_chat_error(status, {k: v for k, v in body.items() if k != "model_message"})


def prepare_chat(payload: Any, *, stream: bool, feats: chat_contract.ChatFeatures | None = None) -> dict:
    """The chat request to forward, exactly as chat_contract parsed it (ChatRequest.to_json), for this endpoint's
    features and limits. stream: the front door streams (the request must say stream true) or answers whole replies
    (stream false). feats: the endpoint's chat features (default: this function's environment, CHAT_ENV). Raises
    ChatError, or SetupError for the function's own bad environment."""
    feats = chat_contract.features() if feats is None else feats
    request = chat_contract.parse_for_endpoint(payload, feats, contract.limits())
    if request.stream != stream:
        door = (
            "the streaming front door sends server-sent events: send stream true"
            if stream
            else "the invoke function answers whole replies: send stream false, or use the streaming front door "
            "(streaming.enabled)"
        )
        raise chat_contract.ChatError(f"stream: {door}", param="stream", code="unsupported_value")
    return request.to_json()


def invoke_chat(
    endpoint_name: str,
    payload: Any,
    client=None,
    *,
    log: dict | None = None,
    inference_component: str | None = None,
    feats: chat_contract.ChatFeatures | None = None,
) -> tuple[int, dict]:
    """Parse a chat request and invoke `endpoint_name` with it: (200, the container's chat.completion), or (status,
    OpenAI's error object). Never raises for request, model or AWS errors."""
    log = {} if log is None else log
    try:
        request = prepare_chat(payload, stream=False, feats=feats)
    except chat_contract.ChatError as e:
        return e.status, chat_contract.error_body(e)
    except SetupError as e:
        return 500, as_chat_error(500, {"error": str(e), "error_type": "configuration"})
    log["chat"] = True
    status, answer = call_endpoint(
        endpoint_name, request, client, log=log, inference_component=inference_component, keep_model_message=True
    )
    if status != 200:
        return status, model_chat_error(status, answer) if answer.get(
            "error_type"
        ) == "model_rejected_input" else as_chat_error(status, answer)
    reply = answer["json"]
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        return 502, as_chat_error(
            502,
            {
                "error": f"endpoint {endpoint_name!r} answered a chat request with JSON that is not a chat.completion",
                "error_type": "model_error",
            },
        )
    log["latency_ms_model"] = answer["latency_ms"]
    return 200, reply


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
    return {"statusCode": status, "headers": response_headers(body), "body": json.dumps(body, ensure_ascii=False)}


def handler(event: Any, context: Any = None) -> dict:
    started = time.monotonic()
    record: dict[str, Any] = {
        "message": "invoke",
        "request_id": getattr(context, "aws_request_id", None),
        "event_kind": "proxy" if is_proxy_event(event) else "direct",
    }
    chat = is_chat_path(event_path(event))  # the path says chat before the body is read

    def run() -> tuple[int, dict]:
        nonlocal chat
        endpoint_name = endpoint_name_from_env()
        record["endpoint"] = endpoint_name
        payload, component = target_component(payload_from_event(event))  # "adapter": one of the endpoint's
        record["inference_component"] = component
        if chat or chat_contract.is_chat_request(payload):
            chat = True
            if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
                record["messages_count"] = len(payload["messages"])
            return invoke_chat(endpoint_name, payload, log=record, inference_component=component)
        if isinstance(payload, dict):
            inputs = payload.get("inputs")
            record["inputs_count"] = len(inputs) if isinstance(inputs, list) else 1
            if isinstance(payload.get("parameters"), dict):
                record["parameter_keys"] = sorted(map(str, payload["parameters"]))[:20]
        return invoke(endpoint_name, payload, log=record, inference_component=component)

    status, body = answered(record, started, run)
    if chat and status != 200:
        body = as_chat_error(status, body)  # the door's own refusals (body cap, method, JSON) in OpenAI's shape too
    if status != 200:
        error = body.get("error")
        record["error_type"] = error.get("code") if isinstance(error, dict) else body.get("error_type")
        # 4xx messages describe the request without echoing prompt text; 5xx details come from AWS.
        record["error"] = error.get("message") if isinstance(error, dict) else error
    else:
        record["model_latency_ms"] = body.get("latency_ms", record.pop("latency_ms_model", None))
    log_record(record)
    return _respond(status, body)
