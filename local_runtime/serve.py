"""A local stand-in for the SageMaker inference container, on a built artifact directory.

Serves /ping and /invocations, sagemaker-runtime's InvokeEndpoint and response-stream paths, and SageMaker's OpenAI
route, all through the artifact's own code/inference.py. A handler ValueError is 400, anything else 500 (on the
InvokeEndpoint path: 424 ModelError). Paths, error mapping, sources, unverified: docs/design/local-server.md.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeGuard

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

import chat_contract
from endpoint_runtime.invoke import Retryable, retryable_error

from . import bearer_token, event_stream, invoke_rules, sigv4
from .artifact_handler import HANDLER_PATH as HANDLER_PATH  # re-exported: where it was
from .artifact_handler import load_handler

# What SageMaker answers InvokeEndpoint for an inference component scaled to zero copies: ValidationError (HTTP 400)
# "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if
# configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
# (aws-samples/sagemaker-genai-hosting-examples, scale-to-zero notebook). What its OpenAI route answers then is not
# documented: this server answers the retryable 503 with Retry-After the front doors give (invoke.RETRYABLE_ERRORS).
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
    "in-progress (if configured) or try to increase the capacity by invoking "
    "UpdateInferenceComponentRuntimeConfig API."
)


def _retryable(code: str, message: str) -> Retryable:
    """The invoke.RETRYABLE_ERRORS entry of an error this server answers."""
    found = retryable_error(code, message)
    if found is None:
        raise LookupError(f"invoke.RETRYABLE_ERRORS has no entry for {code}: {message!r}")
    return found


NO_CAPACITY = _retryable("ValidationError", NO_CAPACITY_MESSAGE)
# While the model loads, /invocations and the OpenAI route answer 503 with this Retry-After (a choice: a tiny model
# loads in seconds; the container contract's GET /ping says when it is ready).
LOADING_RETRY_AFTER_S = 5


class ModelHost:
    """Loads the model in a background thread (so /ping can answer 503 while loading) and runs requests.
    capacity: model copies running; 0 plays an inference component scaled to zero (tests set it)."""

    def __init__(self, artifact_dir: Path) -> None:
        self.artifact_dir = Path(artifact_dir)
        self.handler: ModuleType | None = None
        self.model: Any = None
        self.load_error: str | None = None
        self.loaded = threading.Event()
        self.capacity = 1
        self.stream_with_handler = False

    def load(self) -> None:
        try:
            self.handler = load_handler(self.artifact_dir)
            self.model = self.handler.model_fn(str(self.artifact_dir))
        except Exception as err:  # reported by /ping; the server stays up so the cause can be read
            self.load_error = f"{type(err).__name__}: {err}"
            traceback.print_exc()
        finally:
            self.loaded.set()

    def invoke(
        self,
        body: bytes,
        content_type: str | None,
        accept: str | None,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> tuple[int, str, dict[str, str]]:
        """Run input_fn -> predict_fn -> output_fn; return (status, body, response headers). 400 for ValueError,
        500 else. The reply's Content-Type is the toolkit's: the request's Accept, application/json when it is
        absent or */* (aws/sagemaker-huggingface-inference-toolkit handler_service.py `handle`). `component` and
        `custom_attributes` reach no handler function (the toolkit passes neither to them)."""
        if not self.loaded.is_set() or self.model is None or self.handler is None:
            return 503, json.dumps({"error": self.load_error or "model is still loading"}), {}
        handler = self.handler
        reply_type = accept if accept and accept != "*/*" else JSON
        try:
            data = handler.input_fn(body, content_type)
            prediction = handler.predict_fn(data, self.model)
            return 200, handler.output_fn(prediction, accept), {"Content-Type": reply_type}
        except ValueError as err:
            if _is_chat_error(err):  # a chat request's refusal: OpenAI's error object, its status
                return err.status, json.dumps(chat_contract.error_body(err)), {}
            return 400, json.dumps({"error": str(err)}), {}
        except Exception as err:
            traceback.print_exc()
            return 500, json.dumps({"error": f"{type(err).__name__}: {err}"}), {}

    def chat(self, body: bytes, component: str | None = None) -> tuple[int, Any, str]:
        """The OpenAI route: (status, JSON text or an iterator of SSE events, media type). The body must be a
        chat request, answered by predict_fn + output_fn: the route forwards it to the container, whose toolkit
        answers whole replies only, so `"stream": true` gets the handler's own refusal (400), as on AWS. With
        stream_with_handler (tests of a streaming front door only) a streamed one is answered by stream_fn.
        Refusals and failures in OpenAI's shape."""
        if not self.loaded.is_set() or self.model is None or self.handler is None:
            return 503, _openai_error(self.load_error or "model is still loading", "service_unavailable"), JSON
        handler = self.handler
        try:
            data = handler.input_fn(body, "application/json")
            if not chat_contract.is_chat_request(data):  # only chat here: the parser names what is missing
                chat_contract.parse_chat_request(data)
            if self.stream_with_handler and isinstance(data, dict) and data.get("stream") is True:
                chunks = iter(handler.stream_fn(data, self.model))
                first = next(chunks, None)
                return 200, _sse_events(itertools.chain([] if first is None else [first], chunks)), SSE
            return 200, handler.output_fn(handler.predict_fn(data, self.model), "application/json"), JSON
        except ValueError as err:  # a ChatError, or the generation contract's refusal of the body (bad JSON)
            if _is_chat_error(err):
                return err.status, json.dumps(chat_contract.error_body(err)), JSON
            return 400, _openai_error(getattr(err, "message", str(err))), JSON
        except Exception as err:
            traceback.print_exc()
            return 500, _openai_error(f"{type(err).__name__}: {err}", "server_error"), JSON

    def stream(
        self,
        body: bytes,
        content_type: str | None,
        accept: str | None = None,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> tuple[int, Any, dict[str, str]]:
        """InvokeEndpointWithResponseStream: SageMaker sends the body to the container's POST /invocations, and the
        Hugging Face toolkit answers it whole (it calls no streaming function), so the reply is one part, or the
        handler's refusal (a body with "stream": true: 400), as invoke answers. (status, an iterator of chunks or
        the error JSON, response headers). stream_with_handler: input_fn -> stream_fn instead, token by token
        (tests of the stream function's relay only: no SageMaker container does this)."""
        if not self.stream_with_handler:
            status, content, headers = self.invoke(body, content_type, accept)
            return status, (iter([content.encode()]) if status == 200 else content), headers
        if not self.loaded.is_set() or self.model is None or self.handler is None:
            return 503, json.dumps({"error": self.load_error or "model is still loading"}), {}
        handler = self.handler
        try:
            chunks = handler.stream_fn(handler.input_fn(body, content_type), self.model)
            first = next(chunks, None)
        except ValueError as err:
            if _is_chat_error(err):
                return err.status, json.dumps(chat_contract.error_body(err)), {}
            return 400, json.dumps({"error": str(err)}), {}
        except Exception as err:
            traceback.print_exc()
            return 500, json.dumps({"error": f"{type(err).__name__}: {err}"}), {}
        return 200, itertools.chain([] if first is None else [first], chunks), {"Content-Type": "application/jsonlines"}


JSON = "application/json"
SSE = chat_contract.SSE_CONTENT_TYPE


def _is_chat_error(err: Exception) -> TypeGuard[chat_contract.ChatError]:
    """A chat_contract.ChatError, from whichever copy of the module the artifact's handler imported."""
    return all(hasattr(err, name) for name in ("status", "type", "param", "code", "message"))


def _openai_error(message: str, kind: str = "invalid_request_error", code: str | None = None) -> str:
    return json.dumps(
        chat_contract.error_body(chat_contract.ChatError(message, type=kind, code=code)), ensure_ascii=True
    )


def _loading(status: int) -> dict[str, str]:
    """Retry-After on the 503 of a model still loading."""
    return {"Retry-After": str(LOADING_RETRY_AFTER_S)} if status == 503 else {}


def _sse_events(chunks: Any) -> Any:
    """The handler's SSE events; a failure after the first ends the stream with an error event (the openai SDK
    raises APIError on it) and [DONE]."""
    try:
        yield from chunks
    except Exception as err:
        traceback.print_exc()
        yield chat_contract.sse_event(
            json.loads(_openai_error(f"the model failed while streaming: {type(err).__name__}: {err}", "server_error"))
        )
        yield chat_contract.SSE_DONE


def create_app(
    artifact_dir: str | Path,
    endpoint_name: str | None = None,
    torch_threads: int = 1,
    region: str | None = None,
    component_name: str | None = None,
    container_host: Any = None,
    credentials: Mapping[str, str] = sigv4.LOCAL_CREDENTIALS,
    invoke_timeout_s: float = invoke_rules.INVOKE_TIMEOUT_S,
) -> FastAPI:
    """The ASGI app. Loading starts when the app starts (lifespan), in a thread.

    torch_threads: intra-op threads; 1 suits small CPU boxes (and one model copy per worker).
    endpoint_name: when given, InvokeEndpoint calls naming another endpoint get 404 like SageMaker's
    ValidationError; None accepts any name.
    region: the endpoint's region: InvokeEndpoint and the response stream must be SigV4-signed for it
    (sigv4.LOCAL_REGION, the emulator's, when None) and the OpenAI route's bearer tokens scoped to it (None: any).
    component_name: the endpoint's inference component (hosting.mode inference-components): InvokeEndpoint must name
    it or one of the container host's adapter components, as the OpenAI route's component path; None: the endpoint
    hosts no components, and a component name is refused.
    container_host: forward to the system's local container process instead (local_runtime.process.ContainerHost:
    load() and stop() as ModelHost's, and ainvoke(), astream(), achat(), which relay on the event loop), started when
    the app starts and stopped when it stops.
    credentials: access key id -> secret the SigV4 check knows (the emulator's, sigv4.LOCAL_CREDENTIALS).
    invoke_timeout_s: how long the container may take to answer (invoke_rules.INVOKE_TIMEOUT_S; tests lower it).
    """
    from contextlib import asynccontextmanager

    host = container_host if container_host is not None else ModelHost(Path(artifact_dir))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if container_host is None:  # the in-process handler's model; a container process sets its own threads
            import torch

            torch.set_num_threads(torch_threads)
        threading.Thread(target=host.load, name="model-load", daemon=True).start()
        yield
        if container_host is not None:
            container_host.stop()

    app = FastAPI(title="model_build local endpoint", lifespan=lifespan)
    app.state.host = host
    _add_container_routes(app, host)
    doors = Doors(host, endpoint_name, region or sigv4.LOCAL_REGION, component_name, credentials, invoke_timeout_s)
    _add_invoke_routes(app, doors)
    _add_openai_routes(app, doors, region)
    return app


def _add_container_routes(app: FastAPI, host: Any) -> None:
    """The container's own routes, as SageMaker calls them: GET /ping and POST /invocations."""

    @app.get("/ping")
    def ping() -> Response:
        if host.model is not None:
            return Response(status_code=200, content="")
        status = 500 if host.load_error else 503
        return JSONResponse({"error": host.load_error or "model is still loading"}, status_code=status)

    @app.post("/invocations")
    async def invocations(request: Request) -> Response:
        body = await request.body()
        status, content, headers = await _run(host, body, request, None)
        return Response(
            content=content,
            status_code=status,
            headers={**_loading(status), **_passed_back(headers), **_content_type(headers)},
        )


@dataclass(frozen=True)
class Doors:
    """What the sagemaker-runtime doors check before the container sees a request (invoke_rules.py, sigv4.py)."""

    host: Any
    endpoint_name: str | None
    region: str
    component_name: str | None
    credentials: Mapping[str, str]
    timeout_s: float

    def components(self) -> set[str]:
        """The inference components this endpoint hosts: its own and its adapters' (loaded or being handed over)."""
        if self.component_name is None:
            return set()
        adapters = set(getattr(self.host, "adapters", {})) | set(getattr(self.host, "handed_adapters", {}))
        return {self.component_name} | adapters

    def refusal(self, name: str, request: Request, body: bytes) -> Response | None:
        """SageMaker's refusal of this call before it reaches the container, in the order the service checks
        (authentication first); None: the container may answer."""
        problem = sigv4.check_signature(
            request.method,
            request.scope.get("raw_path", b"").decode("latin-1") or request.url.path,
            request.scope.get("query_string", b"").decode("latin-1"),
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
            body,
            self.region,
            self.credentials,
        )
        if problem is not None:
            return _aws_error(problem.status, problem.code, problem.message)
        refused = _endpoint_refusal(self.host, self.endpoint_name, name)
        if refused is not None:
            return refused
        if len(body) > invoke_rules.MAX_BODY_BYTES:
            body_json = json.dumps({"message": invoke_rules.BODY_TOO_LARGE_MESSAGE})
            return Response(body_json, status_code=413, media_type=JSON)
        headers = request.headers
        for header, why in invoke_rules.REFUSED_HEADERS.items():
            if header in headers:
                return _aws_error(400, "ValidationError", f"Endpoint {name} {why}")
        variant = headers.get(TARGET_VARIANT_HEADER)
        if variant is not None and variant != invoke_rules.VARIANT_NAME:
            return _aws_error(400, "ValidationError", invoke_rules.variant_not_found(variant, name))
        component = headers.get(INFERENCE_COMPONENT_HEADER)
        known = self.components()
        if component is None and known:
            return _aws_error(400, "ValidationError", invoke_rules.COMPONENT_REQUIRED_MESSAGE)
        if component is not None and component not in known:
            return _aws_error(400, "ValidationError", invoke_rules.component_not_found(component))
        return None


def _add_invoke_routes(app: FastAPI, doors: Doors) -> None:
    """sagemaker-runtime's InvokeEndpoint and InvokeEndpointWithResponseStream."""
    host = doors.host

    async def invoke_endpoint(request: Request) -> Response:
        name = request.path_params["name"]
        body = await request.body()
        refused = doors.refusal(name, request, body)
        if refused is not None:
            return refused
        try:
            async with asyncio.timeout(doors.timeout_s):  # no extra Task per call, as wait_for makes (relay.py)
                status, content, headers = await _run(
                    host, body, request, request.headers.get(INFERENCE_COMPONENT_HEADER)
                )
        except asyncio.TimeoutError:
            return _timed_out()
        if status != 200:
            return _model_error(status, content)
        return Response(
            content=content,
            headers={
                "x-Amzn-Invoked-Production-Variant": invoke_rules.VARIANT_NAME,
                **_passed_back(headers),
                **_content_type(headers),
            },
        )

    async def invoke_endpoint_with_response_stream(request: Request) -> Response:
        name = request.path_params["name"]
        from starlette.concurrency import run_in_threadpool

        body = await request.body()
        refused = doors.refusal(name, request, body)
        if refused is not None:
            return refused
        arguments = (
            body,
            request.headers.get("content-type"),
            request.headers.get(STREAM_ACCEPT_HEADER),
            _adapter(host, request.headers.get(INFERENCE_COMPONENT_HEADER)),
            request.headers.get(CUSTOM_ATTRIBUTES_HEADER),
        )
        # A container process is relayed on the event loop (relay.py); the in-process handler runs in a thread.
        call = host.astream(*arguments) if _relays(host) else run_in_threadpool(lambda: host.stream(*arguments))
        try:
            async with asyncio.timeout(doors.timeout_s):
                status, content, headers = await call
        except asyncio.TimeoutError:
            return _timed_out()
        if status != 200:
            return _model_error(status, content)
        # A sync iterator: Starlette pulls it in a worker thread, sending each message as it is produced.
        extra = {k: v for k, v in _passed_back(headers).items()}
        return StreamingResponse(
            _async_event_messages(content) if _relays(host) else _event_messages(content),
            media_type=event_stream.CONTENT_TYPE,
            headers={
                "x-Amzn-Invoked-Production-Variant": invoke_rules.VARIANT_NAME,
                # The stream's ContentType output member is this header: "The MIME type of the inference returned
                # from the model container" (botocore sagemaker-runtime model).
                "X-Amzn-SageMaker-Content-Type": headers.get("Content-Type", "application/octet-stream"),
                **extra,
            },
        )

    # Starlette routes (see _add_openai_routes)
    app.add_route("/endpoints/{name}/invocations", invoke_endpoint, methods=["POST"])
    app.add_route(
        "/endpoints/{name}/invocations-response-stream", invoke_endpoint_with_response_stream, methods=["POST"]
    )


def _add_openai_routes(app: FastAPI, doors: Doors, region: str | None) -> None:
    """SageMaker's OpenAI chat route, on the endpoint and on an inference component (an adapter component's chat
    goes to its adapter, as InvokeEndpoint's does)."""
    host, endpoint_name = doors.host, doors.endpoint_name

    async def openai_chat(request: Request, name: str, component: str | None) -> Response:
        from starlette.concurrency import run_in_threadpool

        problem = bearer_token.check_authorization(request.headers.get("authorization"), region)
        if problem is not None:  # checked first, as the service authenticates before it looks anything up
            return _aws_error(problem.status, problem.code, problem.message)
        if endpoint_name is not None and name != endpoint_name:
            return _endpoint_not_found(name)
        if component is not None and component not in doors.components():
            return _aws_error(400, "ValidationError", invoke_rules.component_not_found(component))
        if host.capacity == 0:
            return Response(
                _openai_error(f"endpoint {name}: {NO_CAPACITY_MESSAGE}", "service_unavailable", "no_capacity"),
                status_code=NO_CAPACITY.status,
                media_type=JSON,
                headers={"Retry-After": str(NO_CAPACITY.retry_after_s)},
            )
        body = await request.body()
        if _relays(host):
            status, content, media = await host.achat(body, _adapter(host, component))
        else:
            status, content, media = await run_in_threadpool(host.chat, body, _adapter(host, component))
        # The container's own framing and content type, passed through ("returns responses directly from the
        # container, including streaming": the Developer Guide's OpenAI-compatible route page).
        return (
            Response(content, status_code=status, headers={**_loading(status), "Content-Type": media})
            if isinstance(content, str)
            else StreamingResponse(content, media_type=media)
        )

    async def openai_chat_endpoint(request: Request) -> Response:
        return await openai_chat(request, request.path_params["name"], None)

    async def openai_chat_component(request: Request) -> Response:
        return await openai_chat(request, request.path_params["name"], request.path_params["component"])

    # Starlette routes, not FastAPI's: no dependency solving or response validation on a relayed request (a third
    # of the front door's time per request, bench/front_door.py).
    app.add_route("/endpoints/{name}/openai/v1/chat/completions", openai_chat_endpoint, methods=["POST"])
    app.add_route(
        "/endpoints/{name}/inference-components/{component}/openai/v1/chat/completions",
        openai_chat_component,
        methods=["POST"],
    )


def _endpoint_not_found(name: str) -> Response:
    return _aws_error(400, "ValidationError", f"Endpoint {name} of account 123456789012 not found.")


def _endpoint_refusal(host: Any, endpoint_name: str | None, name: str) -> Response | None:
    """InvokeEndpoint's refusal of a call to another endpoint or to one at zero instances; None: served."""
    if endpoint_name is not None and name != endpoint_name:
        return _endpoint_not_found(name)
    if host.capacity == 0:
        return _aws_error(400, "ValidationError", NO_CAPACITY_MESSAGE)
    return None


def _model_error(status: int, content: str) -> Response:
    """InvokeEndpoint's answer when the container answered an error: 424 ModelError quoting it."""
    return _aws_error(
        424,
        "ModelError",
        f'Received client error ({status}) from primary with message "{content}".',
        OriginalStatusCode=status,
        OriginalMessage=_container_message(content),
    )


def _timed_out() -> Response:
    """SageMaker's answer when the container took longer than the invoke limit (invoke_rules.INVOKE_TIMEOUT_S)."""
    return _aws_error(
        424,
        "ModelError",
        f'Received server error (0) from primary with message "{invoke_rules.TIMED_OUT_MESSAGE}".',
        OriginalStatusCode=0,
        OriginalMessage=invoke_rules.TIMED_OUT_MESSAGE,
    )


def _event_messages(chunks: Any) -> Any:
    """The reply's chunks as PayloadPart messages; a failure mid-reply ends the stream with a ModelStreamError
    (SageMaker's StreamBroken: the container closed the stream; ModelInvocationTimeExceeded: it stopped sending for
    longer than the invoke limit, the container host's read timeout)."""
    try:
        for chunk in chunks:
            yield event_stream.payload_part(chunk)
    except TimeoutError as err:
        yield event_stream.model_stream_error(
            f"the model stopped sending for longer than the invoke limit: {err}", "ModelInvocationTimeExceeded"
        )
    except Exception as err:
        traceback.print_exc()
        yield event_stream.model_stream_error(
            f"the model failed while streaming: {type(err).__name__}: {err}", "StreamBroken"
        )


async def _async_event_messages(chunks: Any) -> Any:
    """_event_messages for a relayed container's async chunks."""
    try:
        async for chunk in chunks:
            yield event_stream.payload_part(chunk)
    except TimeoutError as err:
        yield event_stream.model_stream_error(
            f"the model stopped sending for longer than the invoke limit: {err or 'no bytes'}",
            "ModelInvocationTimeExceeded",
        )
    except Exception as err:
        traceback.print_exc()
        yield event_stream.model_stream_error(
            f"the model failed while streaming: {type(err).__name__}: {err}", "StreamBroken"
        )


# The request and response headers of botocore's sagemaker-runtime model the local runtime reads or passes on
# (invoke_rules.FIELDS says how each member is treated).
INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
TARGET_VARIANT_HEADER = "X-Amzn-SageMaker-Target-Variant"
CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"  # "forwarded verbatim" both ways (the model's doc)
STREAM_ACCEPT_HEADER = "X-Amzn-SageMaker-Accept"  # the response stream's Accept member


def _adapter(host: Any, component: str | None) -> str | None:
    """The adapter component `component` names on a container host that loaded it (local_runtime adapters); None
    for the endpoint's own component or none."""
    return component if component is not None and component in getattr(host, "adapters", {}) else None


def _content_type(headers: Mapping[str, str]) -> dict[str, str]:
    """The container's Content-Type as it sent it (a header, not Starlette's media_type, which adds a charset)."""
    return {"Content-Type": headers.get("Content-Type", JSON)}


def _passed_back(headers: Mapping[str, str]) -> dict[str, str]:
    """The container's response headers SageMaker passes back besides the body: its custom attributes."""
    return {k: v for k, v in headers.items() if k.lower() == CUSTOM_ATTRIBUTES_HEADER.lower()}


async def _run(host: Any, body: bytes, request: Request, component: str | None) -> tuple[int, str, dict[str, str]]:
    from starlette.concurrency import run_in_threadpool

    content_type, accept = request.headers.get("content-type"), request.headers.get("accept")
    attributes = request.headers.get(CUSTOM_ATTRIBUTES_HEADER)
    if _relays(host):
        return await host.ainvoke(body, content_type, accept, _adapter(host, component), attributes)
    return await run_in_threadpool(host.invoke, body, content_type, accept, _adapter(host, component), attributes)


def _relays(host: Any) -> bool:
    """Whether `host` relays to a container process on the event loop (process.ContainerHost's a-methods)."""
    return hasattr(host, "ainvoke")


def _container_message(content: str) -> str:
    """The container's error message for ModelError's OriginalMessage: the generation contract's "error" string,
    else (OpenAI's error object) the container's whole body."""
    error = json.loads(content).get("error", content)
    return error if isinstance(error, str) else content


def _aws_error(status: int, code: str, message: str, **extra: Any) -> Response:
    """An error in the shape botocore parses for sagemaker-runtime (rest-json: x-amzn-ErrorType + body).

    ASCII-escaped JSON, not JSONResponse: the handler's message may quote the request, and a lone UTF-16
    surrogate from it ("\\ud800" in the body) cannot be encoded as UTF-8, which turned a 400 into a 500."""
    body = json.dumps({"__type": code, "message": message, **extra}, ensure_ascii=True)
    return Response(body, status_code=status, media_type="application/json", headers={"x-amzn-ErrorType": code})


def serve(
    artifact_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    endpoint_name: str | None = None,
    container_host: Any = None,
    region: str | None = None,
    component_name: str | None = None,
) -> None:
    """Serve until interrupted (the CLI's `serve`)."""
    import uvicorn

    name = endpoint_name or "<name>"
    signed = region or sigv4.LOCAL_REGION
    print(
        f"serving {artifact_dir} on http://{host}:{port} (GET /ping, POST /invocations, "
        f"POST /endpoints/{name}/invocations, POST /endpoints/{name}/invocations-response-stream, "
        f"POST /endpoints/{name}/openai/v1/chat/completions with a bearer token); sagemaker-runtime calls must be "
        f"SigV4-signed for {signed} with the emulator's credentials (access key {', '.join(sigv4.LOCAL_CREDENTIALS)})"
    )
    if container_host is None:
        print(
            "the artifact's handler answers as the Hugging Face inference toolkit does: whole replies only (the "
            'response stream sends the reply as one part; a body with "stream": true is the handler\'s 400)'
        )
    uvicorn.Server(
        server_config(
            create_app(
                artifact_dir,
                endpoint_name=endpoint_name,
                container_host=container_host,
                region=region,
                component_name=component_name,
            ),
            host,
            port,
        )
    ).run()


# The most bytes of a request's line and headers the local server reads. uvicorn's h11 default (16 KiB) answers a
# longer header section with a 400 and closes the socket while the client is still sending it, so the client sees
# a connection reset and no status (a 200 KB Authorization header, reliability probe R2). Read up to 1 MiB, the
# app answers such a request itself (a malformed bearer token: 403, as the route's other bad tokens); above that
# the reset remains (h11 must stop buffering somewhere). SageMaker's own limit is not documented.
MAX_HEADER_BYTES = 1024 * 1024


def server_config(app: Any, host: str, port: int, log_level: str = "info") -> Any:
    """The uvicorn configuration `serve` runs `app` with (tests start the same one)."""
    import uvicorn

    return uvicorn.Config(
        app, host=host, port=port, log_level=log_level, http="h11", h11_max_incomplete_event_size=MAX_HEADER_BYTES
    )
