"""The SageMaker container contract for our own images: GET /ping and POST /invocations around a `Handler`.

The server does HTTP, validation and errors; the handler does the model (contract.Handler). Importable as
`byoc_server` in the deepspeed-byoc and tensorrt-byoc images and as `systems.byoc_server` in the tests: so stdlib +
fastapi/starlette + pydantic only, relative imports. The model loads once, at startup, in a background thread.
The status codes of each route: docs/design/engines.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from .contract import (
    ChatError,
    ChatHandler,
    Handler,
    RequestError,
    chat_contract,
    chat_parameters,
    decode_body,
    parse_request,
    request_contract,
)

log = logging.getLogger("byoc_server")

DEFAULT_MODEL_DIR = "/opt/ml/model"
# SageMaker real-time invocations carry at most 6 MB; nginx.conf's client_max_body_size says the same.
MAX_BODY_BYTES = int(os.environ.get("MAX_BODY_BYTES", str(6 * 1024 * 1024)))
JSON = "application/json"


def model_dir_from_env() -> Path:
    """Where SageMaker puts the model data: SM_MODEL_DIR when set, else /opt/ml/model."""
    return Path(os.environ.get("SM_MODEL_DIR") or DEFAULT_MODEL_DIR)


class ModelState:
    """Loads the handler's model once (in a thread) and serializes generate calls (one model, one GPU)."""

    def __init__(self, handler: Handler, model_dir: Path) -> None:
        self.handler = handler
        self.model_dir = model_dir
        self.loaded = threading.Event()
        self.load_error: str | None = None
        self.lock = threading.Lock()

    def load(self) -> None:
        started = time.perf_counter()
        try:
            log.info("loading model from %s with %s", self.model_dir, type(self.handler).__name__)
            self.handler.load(self.model_dir)
        except BaseException as err:  # reported on /ping; the server stays up so the log can be read
            self.load_error = f"model failed to load from {self.model_dir}: {type(err).__name__}: {err}"
            log.error("%s\n%s", self.load_error, traceback.format_exc())
            return
        self.loaded.set()
        log.info("model loaded in %.1f s", time.perf_counter() - started)

    def generate(self, prompts: list[str], parameters: Any) -> list[str]:
        with self.lock:
            return self.handler.generate(prompts, parameters)

    def generate_stream(self, prompt: str, parameters: Any) -> Any:
        """The handler's pieces of text, holding the model's lock until the last one."""
        handler = cast(ChatHandler, self.handler)  # chat() refused a stream from a handler without generate_stream
        with self.lock:
            yield from handler.generate_stream(prompt, parameters)

    def chat(self, data: Any) -> tuple[chat_contract.ChatRequest, str, Any]:
        """Parse a chat request and render its prompt: (request, prompt, generation parameters)."""
        request = chat_contract.parse_chat_request(data, request_contract.limits())  # no constrained decoding
        chat_prompt = getattr(self.handler, "chat_prompt", None)
        if chat_prompt is None:
            raise ChatError(
                f"this container's handler ({type(self.handler).__name__}) does not serve chat requests; "
                'send a generation request {"inputs": ...}',
                param="messages",
                code="chat_not_supported",
            )
        if request.stream and getattr(self.handler, "generate_stream", None) is None:
            raise ChatError(
                "stream: this container's handler does not stream; send stream false",
                param="stream",
                code="unsupported_value",
            )
        return request, chat_prompt(request), chat_parameters(request)

    def chat_reply(self, request: chat_contract.ChatRequest, prompt: str, parameters: Any) -> dict[str, Any]:
        """The whole reply: generate, then stop sequences, tool calls and usage (chat_contract)."""
        [text] = self.generate([prompt], parameters)
        count = getattr(self.handler, "count_tokens", None)
        if count is None:  # no token counts: no usage, and "stop" (the length cannot be told)
            return chat_contract.completion_from_text(request, self.model_name, str(text), "stop")
        used = count(str(text))
        finish = "length" if used >= parameters.max_new_tokens else "stop"
        return chat_contract.completion_from_text(request, self.model_name, str(text), finish, count(prompt), used)

    def chat_events(self, request: chat_contract.ChatRequest, prompt: str, parameters: Any) -> Any:
        """The streamed reply's SSE events (chat_contract.ChatStream); a failure midway ends it with an error event."""
        stream = chat_contract.ChatStream(request, self.model_name)
        yield from stream.start()
        pieces: list[str] = []
        try:
            for piece in self.generate_stream(prompt, parameters):
                pieces.append(piece)
                yield from stream.feed(piece)
                if stream.stopped:
                    break
        except Exception:
            request_id = uuid.uuid4().hex[:12]
            log.error("chat stream %s failed:\n%s", request_id, traceback.format_exc())
            yield from stream.error(f"generation failed; see the container log, request id {request_id}")
            return
        count = getattr(self.handler, "count_tokens", None)
        used = count("".join(pieces)) if count else len(pieces)
        finish = "length" if count and used >= parameters.max_new_tokens else "stop"
        yield from stream.finish(finish, count(prompt) if count else 0, used)

    @property
    def model_name(self) -> str:
        """What chat replies name as their model when the request named none."""
        return getattr(self.handler, "model_name", None) or self.model_dir.name


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def _accepts_json(accept: str | None) -> bool:
    if not accept:
        return True
    for item in accept.split(","):
        media = _media_type(item)
        if media in (JSON, "application/*", "*/*", "*"):
            return True
    return False


def create_app(
    handler: Handler,
    model_dir: Path | str | None = None,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    load_in_background: bool = True,
) -> FastAPI:
    """The ASGI app serving `handler`; the model loads from `model_dir` (default: SM_MODEL_DIR or
    /opt/ml/model) when the app starts. load_in_background=False loads before the server accepts requests."""
    state = ModelState(handler, Path(model_dir) if model_dir is not None else model_dir_from_env())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if load_in_background:
            threading.Thread(target=state.load, name="model-load", daemon=True).start()
        else:
            await run_in_threadpool(state.load)
        yield

    app = FastAPI(title="byoc_server", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.model = state

    @app.get("/ping")
    def ping() -> Response:
        if state.loaded.is_set():
            return Response(status_code=200)
        if state.load_error:
            return _error(500, state.load_error)
        return _error(503, "model is loading")

    @app.post("/invocations")
    async def invocations(request: Request) -> Response:
        content_type = request.headers.get("content-type")
        if content_type and _media_type(content_type) != JSON:
            return _error(415, f"content type {content_type!r} is not supported; allowed: {JSON}")
        accept = request.headers.get("accept")
        if not _accepts_json(accept):
            return _error(406, f"accept {accept!r} is not supported; the reply is {JSON}")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            return _error(413, f"request body has {declared} bytes; the limit is {max_body_bytes}")
        body = bytearray()
        async for chunk in request.stream():  # chunked uploads carry no content-length: count as it arrives
            body += chunk
            if len(body) > max_body_bytes:
                return _error(413, f"request body exceeds {max_body_bytes} bytes; the limit is {max_body_bytes}")
        if not state.loaded.is_set():
            return _error(503, state.load_error or "model is loading; retry when /ping answers 200")
        try:
            # In a thread: checking a 6 MB body takes a while, and the event loop must keep answering /ping.
            data = await run_in_threadpool(decode_body, bytes(body))
            if chat_contract.is_chat_request(data):
                return await _chat(state, data)
            generation = await run_in_threadpool(parse_request, data)
            texts = await run_in_threadpool(state.generate, list(generation.inputs), generation.parameters)
            if not isinstance(texts, list) or len(texts) != len(generation.inputs):
                raise TypeError(
                    f"handler returned {type(texts).__name__} of {len(texts) if isinstance(texts, list) else '?'} "
                    f"items for {len(generation.inputs)} inputs"
                )
        except RequestError as err:  # request_contract's error shape: {"error", "error_type"}
            return JSONResponse(request_contract.error_body(err), status_code=err.status)
        except Exception as err:
            request_id = uuid.uuid4().hex[:12]
            log.error("request %s failed:\n%s", request_id, traceback.format_exc())
            return _error(
                500, f"generation failed ({type(err).__name__}); see the container log, request id {request_id}"
            )
        prefix = list(generation.inputs) if generation.parameters.return_full_text else [""] * len(texts)
        return JSONResponse([{"generated_text": p + str(t)} for p, t in zip(prefix, texts)])

    return app


async def _chat(state: ModelState, data: Any) -> Response:
    """/invocations for a chat request: a chat.completion, or SSE when it streams; refusals in OpenAI's shape."""
    try:
        request, prompt, parameters = await run_in_threadpool(state.chat, data)
        if request.stream:
            events = state.chat_events(request, prompt, parameters)
            return StreamingResponse(iterate_in_threadpool(events), media_type=chat_contract.SSE_CONTENT_TYPE)
        reply = await run_in_threadpool(state.chat_reply, request, prompt, parameters)
    except ChatError as err:
        return JSONResponse(chat_contract.error_body(err), status_code=err.status)
    except RequestError as err:  # the handler refused the generation (e.g. prompt + max_new_tokens too long)
        return JSONResponse(chat_contract.error_body(ChatError(err.message, status=err.status)), status_code=err.status)
    except Exception as err:
        request_id = uuid.uuid4().hex[:12]
        log.error("chat request %s failed:\n%s", request_id, traceback.format_exc())
        body = ChatError(
            f"generation failed ({type(err).__name__}); see the container log, request id {request_id}",
            status=500,
            type="server_error",
        )
        return JSONResponse(chat_contract.error_body(body), status_code=500)
    return JSONResponse(reply)
