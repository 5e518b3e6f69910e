"""CPU stand-ins of the AWS vLLM and SGLang containers' contracts, for the container-contract tests.

What is reproduced, each from the container's source (written here from the rules, not copied):
  vllm_argv    aws/deep-learning-containers scripts/docker/vllm/sagemaker_args.py (19aa4751eb) build_args: the
               product's local_runtime/vllm_args.py, which says the rules.
  sglang_argv  scripts/docker/sglang/sagemaker_entrypoint.sh (3a66fab5ed): its `env | grep` + `IFS='=' read` loop, run
               by the real bash here so that bash's splitting rules apply; then --port 8080, --host 0.0.0.0,
               --model-path /opt/ml/model unless set.
  StandIn      the served part both engines share: GET /ping; POST /invocations and /v1/chat/completions taking
               an OpenAI chat body, and for vLLM an OpenAI completion body on /invocations too (vLLM 0.30.0
               entrypoints/serve/sagemaker/api_router.py tries ChatCompletionRequest, then CompletionRequest;
               SGLang 0.5.20 http_server.py's /invocations takes a ChatCompletionRequest only, FastAPI's 422
               otherwise); neither takes {"inputs", "parameters"} (vLLM: "Cannot find suitable handler for
               request", 400). The served model name is checked as vLLM checks it (empty or one of the
               --served-model-name values, entrypoints/serve/engine/serving.py _is_model_supported; SGLang does
               not check it), max_model_len / context_length caps prompt + output, streaming as server-sent events. The model is loaded with
               transformers on the CPU from the --model / --model-path directory: the artifact as the engine gets it.
What it is not: the engines' schedulers, kernels, parsers or memory planning; those need the GPU.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from helpers import serve_in_thread

from local_runtime.vllm_args import build_args

SGLANG_PREFIX = "SM_SGLANG_"
MODEL_DIR = "/opt/ml/model"


def vllm_argv(env: dict[str, str], model_dir: Path) -> list[str]:
    """The argv the vLLM DLC's entrypoint builds from `env`, with `model_dir` standing for /opt/ml/model (the product's
    rules, local_runtime/vllm_args.py, which the local SageMaker runtime starts the real engine with)."""
    return build_args(env, model_dir)


SGLANG_LOOP = r"""
ARGS=()
while IFS='=' read -r key value; do
    if [ "$key" = "SM_SGLANG_ENGINE" ]; then continue; fi
    name=$(echo "${key#SM_SGLANG_}" | tr '[:upper:]' '[:lower:]' | tr '_' '-')
    lower=$(echo "$value" | tr '[:upper:]' '[:lower:]')
    if [ "$lower" = "true" ]; then ARGS+=("--$name")
    elif [ "$lower" = "false" ]; then continue
    else ARGS+=("--$name"); if [ -n "$value" ]; then ARGS+=("$value"); fi
    fi
done < <(env | grep "^SM_SGLANG_")
if ! [[ " ${ARGS[*]} " =~ " --port " ]]; then ARGS+=(--port "${SM_SGLANG_PORT:-8080}"); fi
if ! [[ " ${ARGS[*]} " =~ " --host " ]]; then ARGS+=(--host "${SM_SGLANG_HOST:-0.0.0.0}"); fi
if ! [[ " ${ARGS[*]} " =~ " --model-path " ]]; then ARGS+=(--model-path "${SM_SGLANG_MODEL_PATH:-MODEL_DIR}"); fi
printf '%s\0' "${ARGS[@]}"
"""


def sglang_argv(env: dict[str, str], model_dir: Path) -> list[str]:
    """The argv the SGLang DLC's entrypoint builds from `env` (its loop, run by bash), `model_dir` for /opt/ml/model."""
    script = SGLANG_LOOP.replace("MODEL_DIR", str(model_dir))
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    out = subprocess.run(["bash", "-c", script], env=clean, capture_output=True, check=True, timeout=30).stdout
    return out.decode().split("\0")[:-1]


def flags_of(argv: list[str]) -> dict[str, str | bool | list[str]]:
    """--flag value pairs back from an argv: a flag followed by another flag (or nothing) is a bare True; a flag
    with several value tokens keeps them as a list."""
    flags: dict[str, Any] = {}
    key = None
    for token in argv:
        if token.startswith("--"):
            key = token
            flags[key] = True
        elif key is not None:
            current = flags[key]
            flags[key] = token if current is True else [*(current if isinstance(current, list) else [current]), token]
    return flags


class StandIn:
    """A served model behind the engines' SageMaker routes, from the parsed argv of one engine."""

    def __init__(self, flags: dict[str, Any], engine: str) -> None:
        import torch
        import transformers

        self.engine = engine
        path = flags.get("--model") or flags.get("--model-path")
        served = flags.get("--served-model-name")
        self.served = [served] if isinstance(served, str) else list(served or [])
        self.max_len = int(flags.get("--max-model-len") or flags.get("--context-length") or 0) or None
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.lock = threading.Lock()

    def chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        import torch

        completion = self.engine == "vllm" and not isinstance(body.get("messages"), list) and "prompt" in body
        if not isinstance(body.get("messages"), list) and not completion:
            if self.engine == "sglang":
                return 422, {"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required"}]}
            return 400, {
                "error": {
                    "message": "Cannot find suitable handler for request. Expected one of: "
                    "['ChatCompletionRequest', 'CompletionRequest']",
                    "type": "BadRequestError",
                }
            }
        model = body.get("model")
        if self.engine == "vllm" and model and model not in self.served:
            return 404, {"error": {"message": f"The model `{model}` does not exist.", "type": "NotFoundError"}}
        if completion:
            if not isinstance(body["prompt"], str):
                return 400, {"error": {"message": "the stand-in takes one prompt string", "type": "BadRequestError"}}
            ids = self.tokenizer(body["prompt"], return_tensors="pt")["input_ids"]
        else:
            ids = self.tokenizer.apply_chat_template(
                body["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if self.max_len is not None and ids.shape[1] + wanted > self.max_len:
            return 400, {
                "error": {
                    "message": f"This model's maximum context length is {self.max_len} tokens",
                    "type": "BadRequestError",
                }
            }
        with self.lock, torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=wanted,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[0, ids.shape[1] :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        usage = {"prompt_tokens": ids.shape[1], "completion_tokens": len(new), "total_tokens": ids.shape[1] + len(new)}
        if completion:
            echoed = body["prompt"] if body.get("echo") else ""
            return 200, {
                "id": "cmpl-stand-in",
                "object": "text_completion",
                "created": int(time.time()),
                "model": self.served[0] if self.served else "",
                "choices": [{"index": 0, "finish_reason": "length", "text": echoed + text}],
                "usage": usage,
            }
        return 200, {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served[0] if self.served else "",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        }


@contextlib.contextmanager
def serving(stand_in: StandIn) -> Iterator[str]:
    """Serve `stand_in` on 127.0.0.1 (a free port), yielding its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200 if self.path == "/ping" else 404, {} if self.path == "/ping" else {"error": "not found"})

        def do_POST(self) -> None:
            if self.path not in ("/invocations", "/v1/chat/completions"):
                return self._send(404, {"error": "not found"})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError as err:
                return self._send(400, {"error": {"message": f"JSON decode error: {err}"}})
            if self.path != "/invocations" and isinstance(body, dict) and "messages" not in body:
                return self._send(400, {"error": {"message": "messages: Field required", "type": "BadRequestError"}})
            status, reply = stand_in.chat(body if isinstance(body, dict) else {})
            if status == 200 and body.get("stream"):
                choice = reply["choices"][0]
                if "text" in choice:  # a completion streams text_completion chunks
                    chunk = {**reply, "choices": [{"index": 0, "text": choice["text"]}]}
                    chunk.pop("usage")
                else:
                    chunk = {
                        "id": reply["id"],
                        "object": "chat.completion.chunk",
                        "created": reply["created"],
                        "model": reply["model"],
                        "choices": [{"index": 0, "delta": {"content": choice["message"]["content"]}}],
                    }
                usage = {**chunk, "choices": [], "usage": reply["usage"]}
                tail = (
                    f"data: {json.dumps(usage)}\n\n" if (body.get("stream_options") or {}).get("include_usage") else ""
                )
                events = f"data: {json.dumps(chunk)}\n\n{tail}data: [DONE]\n\n".encode()
                return self._send(200, events, "text/event-stream")
            return self._send(status, reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
