"""The streaming front door's code: validates a generation request, calls SageMaker's InvokeEndpointWithResponseStream
and re-frames the reply for the client as it arrives: JSON lines, one token per line (OpenAI server-sent events for
a chat request). Lambda entry point lambda/stream/app.py; the local demo drives it too.
Environment as invoke.py, plus READ_TIMEOUT_S (wait for the next part, default 60, 1-900) and STREAM_DEADLINE_S.
Request rules, answer framing, `LineSplitter` and sources: docs/design/front-doors.md.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import botocore.exceptions

from endpoint_runtime import clients, invoke

contract = invoke.contract
RequestError = invoke.RequestError
SetupError = invoke.SetupError

CONTENT_TYPE = "application/jsonlines"
DEFAULT_READ_TIMEOUT_S = 60.0
MAX_READ_TIMEOUT_S = 900.0  # the longest a Lambda function runs
STREAM_HEADERS = {"Content-Type": CONTENT_TYPE, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

# SageMaker's ModelStreamError codes (API reference, ResponseStream): ModelInvocationTimeExceeded ("did not complete
# sending the inference response in the allotted time") and StreamBroken. botocore keeps only the message of an
# event-stream exception (parsers.py BaseEventStreamParser._do_error_parse), so the timeout is told by its words.
_STREAM_TIMED_OUT = re.compile(r"allotted time|timed? ?out|InvocationTimeExceeded", re.IGNORECASE)


def read_timeout_s() -> float:
    return contract.env_number("READ_TIMEOUT_S", DEFAULT_READ_TIMEOUT_S, 1, MAX_READ_TIMEOUT_S)


def stream_deadline_s() -> float | None:
    value = contract.env_number("STREAM_DEADLINE_S", 0, 0, MAX_READ_TIMEOUT_S)
    return value or None


# ---------------------------------------------------------------------------------------------------------------
# Request: the invoke function's validation, then streaming's own two rules


def prepare(payload: Any, body: invoke.bodies.EndpointBody | None = None) -> bytes:
    """The body to send to SageMaker for a decoded request: checked by the contract (invoke.validate_payload), one
    prompt, num_beams 1, "stream": true, in the body the container takes (endpoint_runtime/bodies.py; None: from
    the environment). Raises RequestError (a 4xx) or SetupError (a 500)."""
    body = invoke.bodies.EndpointBody.from_env() if body is None else body
    request = invoke.validate_payload(payload)
    inputs = request["inputs"]
    if isinstance(inputs, list):
        if len(inputs) != 1:
            raise RequestError(f"inputs: a streamed request takes one prompt (a string), got a list of {len(inputs)}")
        request["inputs"] = inputs[0]
    beams = request.get("parameters", {}).get("num_beams", 1)
    if beams != 1:
        raise RequestError(
            f"parameters.num_beams must be 1 when streaming (beam search returns whole sequences), got {beams}"
        )
    return json.dumps(body.request(request, stream=True), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# The model's bytes -> lines -> tokens


class LineSplitter:
    """Joins PayloadPart bytes into complete lines (without the newline; blank lines dropped)."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        *lines, self._rest = (self._rest + data).split(b"\n")
        return [line for line in lines if line.strip()]

    def flush(self) -> list[bytes]:
        """What is left when the stream ends (a last line without its newline)."""
        rest, self._rest = self._rest, b""
        return [rest] if rest.strip() else []


class ModelStreamFailed(Exception):
    """The model reported an error inside its stream (LMI's error line)."""


def parse_line(line: bytes) -> dict | None:
    """One line of the model's reply as a JSON object; None for lines that carry nothing (SSE comments and
    fields other than data, `data: [DONE]`). Raises ValueError for a line that is not JSON."""
    text = line.decode("utf-8").strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    elif text.startswith((":", "event:", "id:", "retry:")):
        return None
    if not text or text == "[DONE]":
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"a line of the model's reply is JSON {contract.json_type(value)}, not an object")
    return value


def token_text(obj: dict, reasoning_field: str | None = None) -> str | None:
    """The text of the token a line carries (None: no token, or a special token such as LMI's error marker): LMI's
    {"token": {"text"}} lines, or an OpenAI completion or chat chunk (an engine's OpenAI server streaming a prompt:
    endpoint_runtime/bodies.py chunk_text, with the reasoning field the engine streams reasoning in).
    Raises ModelStreamFailed for an error line: {"error": ...} (LMI before inference, vLLM's error chunk) or
    details.finish_reason "error" (LMI during inference; lmi_input_output_schema.md, "Error Responses")."""
    if "error" in obj:
        raise ModelStreamFailed(invoke._model_message(json.dumps(obj)) or "the model reported an error")
    if "choices" in obj:
        return invoke.bodies.chunk_text(obj, reasoning_field)
    details = obj.get("details")
    if isinstance(details, dict) and details.get("finish_reason") == "error":
        raise ModelStreamFailed("the model reported an error during generation")
    token = obj.get("token")
    if not isinstance(token, dict) or token.get("special") or token.get("special_token"):
        return None
    text = token.get("text")
    return text if isinstance(text, str) else None


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# SageMaker client (cached per warm Lambda, like invoke.py's: endpoint_runtime/clients.py)

_client = None  # a client set here (tests) is used instead of the cached one


def make_client():
    return invoke.make_client(read_timeout=read_timeout_s())


def get_client():
    return _client if _client is not None else clients.cached("stream:sagemaker-runtime", make_client)


def reset_client() -> None:
    global _client
    _client = None
    clients.forget("stream:")


# ---------------------------------------------------------------------------------------------------------------
# The stream


def open_stream(
    endpoint_name: str,
    payload: Any,
    client=None,
    *,
    log: dict | None = None,
    inference_component: str | None = None,
    body: invoke.bodies.EndpointBody | None = None,
) -> tuple[int, Any]:
    """Validate `payload` and start the stream: (200, an iterator of the client's JSON lines as bytes), or
    (status, error body) when the request is refused or SageMaker refuses the call. Never raises for request, model
    or AWS errors. `log` (the request's log record) receives the AWS error and, as the stream ends, its figures.
    `inference_component`: the component whose model answers, on an endpoint that hosts inference components.
    `body`: how the container takes a prompt (prepare) and where its chat chunks carry reasoning, streamed as tokens
    like the rest of the text (None: bodies.EndpointBody from the environment)."""
    log = {} if log is None else log
    try:
        body = invoke.bodies.EndpointBody.from_env() if body is None else body
        sent = prepare(payload, body)
        deadline_s = stream_deadline_s()
    except RequestError as e:
        return e.status, contract.error_body(e)
    except SetupError as e:
        return 500, {"error": str(e), "error_type": "configuration"}
    status, answer = _start(endpoint_name, sent, client, log, inference_component, CONTENT_TYPE)
    if status != 200:
        return status, answer
    framer = TokenLines(endpoint_name, body.reasoning_field)
    return 200, _relay(answer["events"], endpoint_name, answer["started"], log, deadline_s, framer)


def open_chat_stream(
    endpoint_name: str, payload: Any, client=None, *, log: dict | None = None, inference_component: str | None = None
) -> tuple[int, Any]:
    """A chat request (chat_contract, stream true) streamed: (200, an iterator of OpenAI server-sent events:
    chat.completion.chunk objects as the container sends them, the usage chunk when the request asked for it, then
    `data: [DONE]`), or (status, OpenAI's error object). The container's chunks may come as SSE (`data: {...}`) or as
    JSON lines (LMI's framing, systems/lmi_vllm/chat.py); both are sent on as SSE."""
    log = {} if log is None else log
    try:
        request = invoke.prepare_chat(payload, stream=True)
        deadline_s = stream_deadline_s()
    except invoke.chat_contract.ChatError as e:
        return e.status, invoke.chat_contract.error_body(e)
    except SetupError as e:
        return 500, invoke.as_chat_error(500, {"error": str(e), "error_type": "configuration"})
    log["chat"] = True
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    status, answer = _start(
        endpoint_name,
        body,
        client,
        log,
        inference_component,
        invoke.chat_contract.SSE_CONTENT_TYPE,
        keep_model_message=True,
    )
    if status != 200:
        return status, (
            invoke.model_chat_error(status, answer)
            if answer.get("error_type") == "model_rejected_input"
            else invoke.as_chat_error(status, answer)
        )
    return 200, _relay(answer["events"], endpoint_name, answer["started"], log, deadline_s, ChatEvents(endpoint_name))


def _start(
    endpoint_name: str,
    body: bytes,
    client: Any,
    log: dict,
    inference_component: str | None,
    accept: str,
    keep_model_message: bool = False,
) -> tuple[int, dict]:
    """InvokeEndpointWithResponseStream: (200, {"events", "started"}) or the error every front door answers."""
    # InferenceComponentName: as InvokeEndpoint's, which component's model runs (botocore sagemaker-runtime model).
    component = {"InferenceComponentName": inference_component} if inference_component else {}

    def call() -> Any:
        return (client or get_client()).invoke_endpoint_with_response_stream(
            EndpointName=endpoint_name, ContentType="application/json", Accept=accept, Body=body, **component
        )

    started = time.monotonic()
    status, response = invoke.sagemaker_call(
        endpoint_name, call, started=started, log=log, keep_model_message=keep_model_message, waiting="start answering"
    )
    if status != 200:
        return status, response
    return 200, {"events": response["Body"], "started": started}


class _DeadlineReached(Exception):
    pass


class TokenLines:
    """The generation contract's framing: {"token": {"text"}} per token, then the summary line or an error line."""

    def __init__(self, endpoint_name: str, reasoning_field: str | None = None) -> None:
        self.endpoint_name = endpoint_name
        self.reasoning_field = reasoning_field  # an engine's chat chunks: reasoning is generated text too
        self.tokens: list[str] = []
        self.final: dict = {}

    def lines(self, obj: dict) -> Iterator[bytes]:
        text = token_text(obj, self.reasoning_field)
        if isinstance(obj.get("generated_text"), str):
            self.final.update(generated_text=obj["generated_text"])
        if isinstance(obj.get("details"), dict):
            self.final.update(details=obj["details"])
        if text:
            self.tokens.append(text)
            yield _line({"token": {"text": text}})

    def finish(self, ttft_ms: int | None, latency_ms: int) -> list[bytes]:
        return [
            _line(
                {
                    "generated_text": self.final.get("generated_text", "".join(self.tokens)),
                    "details": self.final.get("details", {}),
                    "endpoint": self.endpoint_name,
                    "time_to_first_token_ms": ttft_ms,
                    "latency_ms": latency_ms,
                }
            )
        ]

    def error(self, kind: str, message: str) -> list[bytes]:
        return [_line({"error": message, "error_type": kind})]

    @property
    def count(self) -> int:
        return len(self.tokens)


class ChatEvents:
    """OpenAI's framing: each chat.completion.chunk as `data: {...}`, then `data: [DONE]`; a failure midway is an
    error event ({"error": {...}}, which the openai SDK raises as APIError) and [DONE]."""

    def __init__(self, endpoint_name: str) -> None:
        self.endpoint_name = endpoint_name
        self.count = 0

    def lines(self, obj: dict) -> Iterator[bytes]:
        if "error" in obj:
            error = obj["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise ModelStreamFailed(str(message) or "the model reported an error")
        if obj.get("object") != "chat.completion.chunk":
            raise ValueError(
                f"a chat stream sent {str(obj.get('object') or sorted(obj)[:4])!r}, not a chat.completion.chunk"
            )
        self.count += 1
        yield invoke.chat_contract.sse_event(obj)

    def finish(self, ttft_ms: int | None, latency_ms: int) -> list[bytes]:
        return [invoke.chat_contract.SSE_DONE]

    def error(self, kind: str, message: str) -> list[bytes]:
        status = 504 if kind == "timeout" else 502
        err = invoke.chat_contract.from_error(status, message, kind)
        return [invoke.chat_contract.sse_event(invoke.chat_contract.error_body(err)), invoke.chat_contract.SSE_DONE]


def _client_lines(
    events: Any, endpoint_name: str, started: float, log: dict, deadline_s: float | None = None
) -> Iterator[bytes]:
    """SageMaker's events -> the generation contract's token lines (_relay with TokenLines)."""
    return _relay(events, endpoint_name, started, log, deadline_s, TokenLines(endpoint_name))


def _relay(
    events: Any, endpoint_name: str, started: float, log: dict, deadline_s: float | None, framer: Any
) -> Iterator[bytes]:
    """SageMaker's events -> the client's lines, framed by `framer` (TokenLines, ChatEvents). Ends with the
    framer's finish, or with its error."""
    splitter = LineSplitter()
    first_at = None
    error: tuple[str, str] | None = None

    def lines_of(raw_lines: list[bytes]) -> Iterator[bytes]:
        nonlocal first_at
        for raw in raw_lines:
            obj = parse_line(raw)
            if obj is None:
                continue
            for out in framer.lines(obj):
                first_at = first_at or time.monotonic()
                yield out

    try:
        for event in events:
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                raise _DeadlineReached()
            part = event.get("PayloadPart")
            if part is not None:
                yield from lines_of(splitter.feed(part.get("Bytes", b"")))
        yield from lines_of(splitter.flush())
    except GeneratorExit:  # the client went away: release SageMaker's connection now
        getattr(events, "close", lambda: None)()
        raise
    except _DeadlineReached:
        getattr(events, "close", lambda: None)()
        error = (
            "timeout",
            f"the stream from endpoint {endpoint_name!r} reached this function's limit of {deadline_s:.0f} s",
        )
    except ModelStreamFailed as e:
        error = ("model_error", f"the model on endpoint {endpoint_name!r} failed while streaming: {e}")
    except (ValueError, UnicodeDecodeError) as e:
        error = ("model_error", f"endpoint {endpoint_name!r} streamed a line that is not a JSON object: {e}")
    except botocore.exceptions.ClientError as e:  # EventStreamError: ModelStreamError, InternalStreamFailure
        log["aws_error"] = str(e)[:500]
        code = (e.response or {}).get("Error", {}).get("Code", "")
        message = (e.response or {}).get("Error", {}).get("Message", "") or ""
        if code == "ModelStreamError" and _STREAM_TIMED_OUT.search(message):
            error = ("timeout", f"endpoint {endpoint_name!r} did not finish its reply within SageMaker's time limit")
        elif code == "ModelStreamError":
            error = ("model_error", f"the model on endpoint {endpoint_name!r} broke off its stream ({message})")
        else:
            error = ("upstream_error", f"SageMaker's stream from endpoint {endpoint_name!r} failed ({code})")
    except (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError) as e:
        log["aws_error"] = type(e).__name__
        error = ("timeout", f"endpoint {endpoint_name!r} sent nothing for {read_timeout_s():.0f} s")
    except (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError) as e:
        log["aws_error"] = str(e)[:500]
        error = ("upstream_error", f"the stream from endpoint {endpoint_name!r} was cut off ({type(e).__name__})")

    latency_ms = int(round((time.monotonic() - started) * 1000))
    ttft_ms = None if first_at is None else int(round((first_at - started) * 1000))
    log.update(stream_tokens=framer.count, time_to_first_token_ms=ttft_ms, stream_latency_ms=latency_ms)
    if error is not None:
        log["stream_error_type"] = error[0]
        yield from framer.error(*error)
        return
    yield from framer.finish(ttft_ms, latency_ms)


# ---------------------------------------------------------------------------------------------------------------
# One HTTP request, as lambda/stream/app.py receives it from the Lambda Web Adapter


def handle_request(
    method: str, body: bytes, request_id: str | None = None, path: str = ""
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, body): body is bytes (a JSON error or answer) or an iterator of bytes (the stream).
    A chat request (its path ends in /chat/completions, or its body has "messages") is streamed as OpenAI
    server-sent events, and refused in OpenAI's error shape. Writes one structured log line per request when the
    reply (streamed or not) is complete; never the prompt."""
    record: dict[str, Any] = {"message": "stream", "request_id": request_id}
    started = time.monotonic()
    chat = invoke.is_chat_path(path)
    try:
        if method.upper() != "POST":
            raise RequestError(f"method must be POST, got {method}", status=405, error_type="method_not_allowed")
        endpoint_name = invoke.endpoint_name_from_env()
        record["endpoint"] = endpoint_name
        payload, component = invoke.target_component(invoke.parse_body(body))  # "adapter": one of the endpoint's
        chat = chat or invoke.chat_contract.is_chat_request(payload)
        opener = open_chat_stream if chat else open_stream
        status, answer = opener(endpoint_name, payload, log=record, inference_component=component)
    except RequestError as e:
        status, answer = e.status, contract.error_body(e)
    except SetupError as e:
        status, answer = 500, {"error": str(e), "error_type": "configuration"}
    except Exception as e:
        status, answer = 500, {"error": "internal error", "error_type": "internal"}
        record["exception"] = type(e).__name__
    record["status"] = status
    if status != 200:
        if chat:
            answer = invoke.as_chat_error(status, answer)
        error = answer.get("error")
        record.update(
            error_type=error.get("code") if isinstance(error, dict) else answer.get("error_type"),
            error=error.get("message") if isinstance(error, dict) else error,
            latency_ms=int(round((time.monotonic() - started) * 1000)),
        )
        invoke.log_record(record)
        return status, invoke.response_headers(answer), json.dumps(answer, ensure_ascii=False).encode("utf-8")

    def logged() -> Iterator[bytes]:
        try:
            yield from answer
        finally:  # also when the client goes away mid-stream (the generator is closed)
            invoke.log_record(record)

    headers = (
        {**STREAM_HEADERS, "Content-Type": invoke.chat_contract.SSE_CONTENT_TYPE} if chat else dict(STREAM_HEADERS)
    )
    return 200, headers, logged()


__all__ = [
    "CONTENT_TYPE",
    "ChatEvents",
    "LineSplitter",
    "ModelStreamFailed",
    "TokenLines",
    "handle_request",
    "open_chat_stream",
    "open_stream",
    "parse_line",
    "prepare",
    "token_text",
]
