"""A local stand-in for the SageMaker inference container, on a built artifact directory.

It speaks the container contract (GET /ping, POST /invocations) by calling the artifact's own
`code/inference.py` functions, imported from the artifact the way the Hugging Face inference toolkit does,
so what is tested locally is the handler that ships. It also answers the sagemaker-runtime InvokeEndpoint
path (POST /endpoints/{name}/invocations), so a boto3 `sagemaker-runtime` client with
`endpoint_url=http://127.0.0.1:PORT` reaches the model as it would a deployed endpoint, and the
InvokeEndpointWithResponseStream path (POST /endpoints/{name}/invocations-response-stream): the artifact's
`stream_fn` (one JSON line per token, LMI's framing) sent as AWS event-stream PayloadPart messages, one per line,
as boto3's EventStream reads them (model_build/event_stream.py); a failure after the first token is a
ModelStreamError message, one before it the same 424 ModelError as InvokeEndpoint's.

Errors: on /invocations a ValueError from the handler is 400 {"error": message}, anything else 500. The
real toolkit answers 400 for every exception (sagemaker-huggingface-inference-toolkit, handler_service.handle:
`raise PredictionException(str(e), 400)`); 500 here makes a handler bug visible in tests, so every bad request
must end in a ValueError (the handler's input_fn refuses what json.loads alone would let through). On the
InvokeEndpoint path they come back as SageMaker does it: HTTP 424 `ModelError` carrying the container's
status and message (boto3 raises `client.exceptions.ModelError`). Error bodies are ASCII-escaped JSON, so a
message quoting a lone surrogate from the request still encodes.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from . import event_stream

HANDLER_PATH = Path("code") / "inference.py"


def load_handler(artifact_dir: Path) -> ModuleType:
    """Import the artifact's code/inference.py as a fresh module (not the repo's copy)."""
    path = Path(artifact_dir) / HANDLER_PATH
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the artifact has no handler (rebuild it)")
    spec = importlib.util.spec_from_file_location(f"artifact_inference_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ModelHost:
    """Loads the model in a background thread (so /ping can answer 503 while loading) and runs requests."""

    def __init__(self, artifact_dir: Path) -> None:
        self.artifact_dir = Path(artifact_dir)
        self.handler: ModuleType | None = None
        self.model: Any = None
        self.load_error: str | None = None
        self.loaded = threading.Event()

    def load(self) -> None:
        try:
            self.handler = load_handler(self.artifact_dir)
            self.model = self.handler.model_fn(str(self.artifact_dir))
        except Exception as err:  # reported by /ping; the server stays up so the cause can be read
            self.load_error = f"{type(err).__name__}: {err}"
            traceback.print_exc()
        finally:
            self.loaded.set()

    def invoke(self, body: bytes, content_type: str | None, accept: str | None) -> tuple[int, str]:
        """Run input_fn -> predict_fn -> output_fn; return (status, body). 400 for ValueError, 500 else."""
        if not self.loaded.is_set() or self.model is None:
            return 503, json.dumps({"error": self.load_error or "model is still loading"})
        handler = self.handler
        try:
            data = handler.input_fn(body, content_type)
            prediction = handler.predict_fn(data, self.model)
            return 200, handler.output_fn(prediction, accept)
        except ValueError as err:
            return 400, json.dumps({"error": str(err)})
        except Exception as err:
            traceback.print_exc()
            return 500, json.dumps({"error": f"{type(err).__name__}: {err}"})

    def stream(self, body: bytes, content_type: str | None) -> tuple[int, Any]:
        """Start input_fn -> stream_fn; return (200, an iterator of the reply's chunks) once the first chunk is
        ready (so a bad request still gets its status), else (status, error JSON) as `invoke` does."""
        if not self.loaded.is_set() or self.model is None:
            return 503, json.dumps({"error": self.load_error or "model is still loading"})
        handler = self.handler
        if not hasattr(handler, "stream_fn"):
            return 501, json.dumps({"error": "the artifact's code/inference.py has no stream_fn: it does not stream"})
        try:
            chunks = handler.stream_fn(handler.input_fn(body, content_type), self.model)
            first = next(chunks, None)
        except ValueError as err:
            return 400, json.dumps({"error": str(err)})
        except Exception as err:
            traceback.print_exc()
            return 500, json.dumps({"error": f"{type(err).__name__}: {err}"})
        return 200, itertools.chain([] if first is None else [first], chunks)


def create_app(artifact_dir: str | Path, endpoint_name: str | None = None, torch_threads: int = 1) -> FastAPI:
    """The ASGI app. Loading starts when the app starts (lifespan), in a thread.

    torch_threads: intra-op threads; 1 suits small CPU boxes (and one model copy per worker).
    endpoint_name: when given, InvokeEndpoint calls naming another endpoint get 404 like SageMaker's
    ValidationError; None accepts any name.
    """
    from contextlib import asynccontextmanager

    host = ModelHost(Path(artifact_dir))

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        import torch

        torch.set_num_threads(torch_threads)
        threading.Thread(target=host.load, name="model-load", daemon=True).start()
        yield

    app = FastAPI(title="model_build local endpoint", lifespan=lifespan)
    app.state.host = host

    @app.get("/ping")
    def ping() -> Response:
        if host.model is not None:
            return Response(status_code=200, content="")
        status = 500 if host.load_error else 503
        return JSONResponse({"error": host.load_error or "model is still loading"}, status_code=status)

    @app.post("/invocations")
    async def invocations(request: Request) -> Response:
        body = await request.body()
        status, content = await _run(host, body, request)
        return Response(content=content, status_code=status, media_type="application/json")

    @app.post("/endpoints/{name}/invocations")
    async def invoke_endpoint(name: str, request: Request) -> Response:
        if endpoint_name is not None and name != endpoint_name:
            return _aws_error(400, "ValidationError", f"Endpoint {name} of account 123456789012 not found.")
        body = await request.body()
        status, content = await _run(host, body, request)
        if status != 200:
            message = json.loads(content).get("error", content)
            return _aws_error(
                424,
                "ModelError",
                f"Received client error ({status}) from primary with message \"{content}\".",
                OriginalStatusCode=status,
                OriginalMessage=message,
            )
        return Response(
            content=content,
            media_type="application/json",
            headers={"x-Amzn-Invoked-Production-Variant": "AllTraffic"},
        )

    @app.post("/endpoints/{name}/invocations-response-stream")
    async def invoke_endpoint_with_response_stream(name: str, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        if endpoint_name is not None and name != endpoint_name:
            return _aws_error(400, "ValidationError", f"Endpoint {name} of account 123456789012 not found.")
        body = await request.body()
        status, content = await run_in_threadpool(host.stream, body, request.headers.get("content-type"))
        if status != 200:
            message = json.loads(content).get("error", content)
            return _aws_error(
                424,
                "ModelError",
                f"Received client error ({status}) from primary with message \"{content}\".",
                OriginalStatusCode=status,
                OriginalMessage=message,
            )
        # A sync iterator: Starlette pulls it in a worker thread, sending each message as it is produced.
        return StreamingResponse(
            _event_messages(content),
            media_type=event_stream.CONTENT_TYPE,
            headers={"x-Amzn-Invoked-Production-Variant": "AllTraffic",
                     "X-Amzn-SageMaker-Content-Type": "application/jsonlines"},
        )  # fmt: skip

    return app


def _event_messages(chunks: Any) -> Any:
    """The reply's chunks as PayloadPart messages; a failure mid-reply ends the stream with a ModelStreamError
    (SageMaker's StreamBroken: the container closed the stream)."""
    try:
        for chunk in chunks:
            yield event_stream.payload_part(chunk)
    except Exception as err:
        traceback.print_exc()
        yield event_stream.model_stream_error(f"the model failed while streaming: {type(err).__name__}: {err}",
                                              "StreamBroken")  # fmt: skip


async def _run(host: ModelHost, body: bytes, request: Request) -> tuple[int, str]:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(
        host.invoke, body, request.headers.get("content-type"), request.headers.get("accept")
    )


def _aws_error(status: int, code: str, message: str, **extra: Any) -> Response:
    """An error in the shape botocore parses for sagemaker-runtime (rest-json: x-amzn-ErrorType + body).

    ASCII-escaped JSON, not JSONResponse: the handler's message may quote the request, and a lone UTF-16
    surrogate from it ("\\ud800" in the body) cannot be encoded as UTF-8, which turned a 400 into a 500."""
    body = json.dumps({"__type": code, "message": message, **extra}, ensure_ascii=True)
    return Response(body, status_code=status, media_type="application/json", headers={"x-amzn-ErrorType": code})


def serve(
    artifact_dir: str | Path, host: str = "127.0.0.1", port: int = 8080, endpoint_name: str | None = None
) -> None:
    """Serve until interrupted (the CLI's `serve`)."""
    import uvicorn

    name = endpoint_name or "<name>"
    print(f"serving {artifact_dir} on http://{host}:{port} (GET /ping, POST /invocations, "
          f"POST /endpoints/{name}/invocations, POST /endpoints/{name}/invocations-response-stream)")  # fmt: skip
    uvicorn.run(create_app(artifact_dir, endpoint_name=endpoint_name), host=host, port=port, log_level="info")
