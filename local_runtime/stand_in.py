"""The stand-in container: for a system whose engine has no CPU build on the package registries, a small server that
answers that container's routes and bodies with the artifact's model run by transformers on the CPU. Everything that
prints or reports its answers says "stand-in".

Why a stand-in, per system (searched on PyPI, 2026-11-27):
  sglang                 the `sglang==0.5.20` wheel needs CUDA (cuda-python>=13, flashinfer cu13, sglang-kernel 0.4.7)
  lmi-vllm, lmi-trtllm   LMI's front end is DJL Serving (Java) with djl_python's handlers, shipped in the image only
  djl-*                  the same DJL Serving front end (DeepSpeed, Accelerate, FasterTransformer handlers)
  tgi                    TGI's launcher and router are Rust with CUDA kernels, shipped in the image only

What is reproduced, each from the container's own rules (written here from them, not copied):
  sglang_argv   aws/deep-learning-containers scripts/docker/sglang/sagemaker_entrypoint.sh (3a66fab5ed): its
                `env | grep` + `IFS='=' read` loop, run by the real bash so that bash's splitting rules apply; then
                --port 8080, --host 0.0.0.0, --model-path /opt/ml/model unless set.
  the engines'  GET /ping; POST /invocations and /v1/chat/completions taking an OpenAI chat body, and for vLLM an
  OpenAI routes OpenAI completion body on /invocations too (vLLM 0.30.0 entrypoints/serve/sagemaker/api_router.py tries
                ChatCompletionRequest, then CompletionRequest; SGLang 0.5.20 http_server.py's /invocations takes a
                ChatCompletionRequest only, FastAPI's 422 otherwise); neither takes {"inputs", "parameters"} (vLLM:
                "Cannot find suitable handler for request", 400). The served model name is checked as vLLM checks
                it (empty or one of the --served-model-name values, entrypoints/serve/engine/serving.py
                _is_model_supported; SGLang does not check it); max_model_len / context_length caps prompt + output;
                streaming as server-sent events.
  LMI 27        (lmi-vllm) POST /invocations as LMI 27's async vLLM service answers it (LMI27, each framing below
                with its source lines): {"inputs", "parameters"} (request_contract.py's checks) answered with the JSON
                object {"generated_text"} and a newline; with "stream": true, JSON lines of {"index", "token": {"id",
                "text", "logprob"}, "generated_text", "details"}, the last token's line holding the whole text; an
                OpenAI chat or completion body answered as vLLM answers it, a stream as JSON lines (vLLM's chunks
                without `data: `), each piece followed by a newline.
  LMI and DJL   (lmi-trtllm, djl-*) POST /invocations with the generation contract {"inputs", "parameters"}
                (request_contract.py) answered [{"generated_text"}], and for LMI an OpenAI chat body on /invocations
                too (systems/lmi_vllm/chat.py); a generation request with "stream": true answers JSON lines
                ({"token": {"text"}} per token, then {"generated_text"}).
  TGI 3.3.6     (tgi) its router's /invocations: local_runtime/tgi_router.py, each rule with its source file.
What it is not: the engines' schedulers, kernels, parsers (reasoning, tool calls) or memory planning.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import tgi_router
from .process import SystemContainer, base_environment
from .stopping import Ending, openai_ending, stop_strings, tgi_ending

# Where LMI 27's replies come from: the image systems/images.py pins (DJL_LMI 0.36.0-lmi27.0.0) is built from this
# branch of djl-serving; the line numbers below are of these files at that commit.
LMI27 = "deepjavalibrary/djl-serving@0.36.0-lmi27-dlc (7e13b081) engines/python/setup/djl_python/"

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


def sglang_argv(env: Mapping[str, str], model_dir: Path) -> list[str]:
    """The argv the SGLang DLC's entrypoint builds from `env` (its loop, run by bash), `model_dir` for /opt/ml/model."""
    script = SGLANG_LOOP.replace("MODEL_DIR", str(model_dir))
    clean = {"PATH": "/usr/local/bin:/usr/bin:/bin", **env}
    out = subprocess.run(["bash", "-c", script], env=clean, capture_output=True, check=True, timeout=30).stdout
    return out.decode().split("\0")[:-1]


def lmi_argv(env: Mapping[str, str], model_dir: Path) -> list[str]:
    """The stand-in's flags from LMI's OPTION_* variables: the model (OPTION_MODEL_ID /opt/ml/model, or unset, is
    the artifact) and the context (OPTION_MAX_MODEL_LEN, vLLM's max_model_len; OPTION_MAX_SEQ_LEN, TensorRT-LLM's)."""
    argv = ["--model", str(model_dir)]
    context = env.get("OPTION_MAX_MODEL_LEN") or env.get("OPTION_MAX_SEQ_LEN")
    return [*argv, "--max-model-len", context] if context else argv


def tgi_argv(env: Mapping[str, str], model_dir: Path) -> list[str]:
    """The stand-in's flags from TGI's environment (systems/tgi [ENTRY], [LAUNCH]): the model (HF_MODEL_ID
    /opt/ml/model is the artifact), MAX_TOTAL_TOKENS and MAX_INPUT_TOKENS, the router's length checks."""
    argv = ["--model", str(model_dir)]
    for variable, flag in (("MAX_TOTAL_TOKENS", "--max-model-len"), ("MAX_INPUT_TOKENS", "--max-input-tokens")):
        if env.get(variable):
            argv += [flag, env[variable]]
    return argv


def djl_model_dir(model_dir: Path) -> Path:
    """Where a DJL artifact keeps the model's config.json: the artifact itself, or its weights/ folder
    (djl-fastertransformer's layout: code/ beside weights/)."""
    return model_dir if (model_dir / "config.json").is_file() else model_dir / "weights"


def djl_argv(env: Mapping[str, str], model_dir: Path) -> list[str]:
    """The stand-in's flags for DJL Serving's handlers: the model only (its options are the handler's)."""
    return ["--model", str(djl_model_dir(model_dir))]


def flags_of(argv: list[str]) -> dict[str, Any]:
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


def _error(status: int, message: str, kind: str = "BadRequestError") -> tuple[int, Any]:
    return status, {"error": {"message": message, "type": kind}}


# Own replies: a dialect whose whole /invocations (and chat route) one function answers, as (status, body, content
# type); the stand-in's generic routes answer the others.
OwnReplies = Callable[["StandIn", Any, bool], tuple[int, Any, str]]


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """The routes and bodies of one server the stand-in answers as (a system picks one: its LocalRun.dialect), as
    typed facts the stand-in reads instead of branching on the server's name; a new server is one record in
    DIALECTS. Each default is the most common answer; each record says where its own facts come from."""

    name: str
    # the container's flags from its environment, by that container's own entrypoint rules
    argv: Callable[[Mapping[str, str], Path], list[str]]
    # serves POST /v1/chat/completions beside /invocations (the engines' own OpenAI servers, TGI's router)
    openai_route: bool = False
    # where the local runtime sends chat: that route, or None for /invocations
    container_chat_path: str | None = None
    # takes an OpenAI chat body at all (DJL Serving's handlers take the generation contract only)
    takes_chat: bool = True
    # takes an OpenAI completion body ({"prompt"}) on /invocations too
    completion_on_invocations: bool = False
    # takes the generation contract {"inputs", "parameters"} on /invocations
    generation_contract: bool = False
    # a generation request may carry "stream" beside "inputs" (LMI's request_response_utils.py:68)
    stream_beside_inputs: bool = False
    # min_new_tokens reaches the model (LMI 27 hands it to vLLM's CompletionRequest, which has no such field)
    reads_min_new_tokens: bool = True
    # a generation reply is the first prompt's {"generated_text"} object, not a list of them
    first_output_only: bool = False
    # a chat body's "model" must be empty or a served model name (404 otherwise)
    checks_served_model_name: bool = False
    # a body without messages is FastAPI's 422 "Field required" (not the 400 of vLLM's handler search)
    refuses_without_messages_422: bool = False
    # the choice field that names the stop string that ended it, and whether it is written as null when none did
    stop_field: str | None = None
    stop_field_null_when_unmatched: bool = True
    # the stop sequence stays in the text and EOS is written "stop" (TGI's StoppingCriteria), not cut (vLLM's rule)
    keeps_stop_sequence: bool = False
    own_replies: OwnReplies | None = None


class StandIn:
    """A served model behind one engine's SageMaker routes, from the parsed argv of that engine."""

    def __init__(self, flags: dict[str, Any], engine: str) -> None:
        if engine not in DIALECTS:
            raise ValueError(f"engine {engine!r}; allowed: {', '.join(DIALECTS)}")
        self.engine = engine
        self.dialect = DIALECTS[engine]
        path = flags.get("--model") or flags.get("--model-path")
        served = flags.get("--served-model-name")
        self.served = [served] if isinstance(served, str) else list(served or [])
        self.max_len = int(flags.get("--max-model-len") or flags.get("--context-length") or 0) or None
        self.max_input = int(flags.get("--max-input-tokens") or 0) or None  # tgi's MAX_INPUT_TOKENS
        # The model's files read bounded and its chat templates rendered under a budget before serving starts
        # (docs/design/untrusted-input.md): an artifact built before those checks, or edited since, is refused here,
        # by file, not at its first chat request.
        from artifact import BuildError
        from systems.chat_template import check_served_model

        try:
            if path is not None and Path(path).is_dir():  # a Hub id is the engine's to resolve
                check_served_model(Path(path))
        except BuildError as err:
            raise SystemExit(f"error: the stand-in does not serve {path}: {err}") from None
        import torch  # after the checks: a refused model is refused in a second, not after torch's ~3 s import
        import transformers

        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        config = transformers.AutoConfig.from_pretrained(path)
        loader = transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder else transformers.AutoModelForCausalLM
        self.model = loader.from_pretrained(path, dtype=torch.float32).eval()
        self.encoder_decoder = bool(config.is_encoder_decoder)
        self.positions = getattr(config, "max_position_embeddings", None)
        self.lock = threading.Lock()

    def tgi_limits(self) -> tuple[int, int]:
        """TGI's (max_total_tokens, max_input_tokens): the launcher's values, else its defaults (launcher/src/
        main.rs: max_total_tokens min(max_allocatable, max_position_embeddings), max_input_tokens one below); 4096 for
        a config without positions is the stand-in's own choice, not TGI's."""
        total = self.max_len or self.positions or 4096
        return total, self.max_input or total - 1

    @property
    def takes_chat(self) -> bool:
        return self.dialect.takes_chat

    def _tokens(self, ids: Any, wanted: int, minimum: int = 0) -> list[tuple[int, str, float]]:
        """Greedy generation as (token id, the text it adds, its log-probability) per token: what LMI 27's streamed
        completion chunks carry (vLLM's logprobs=1, return_tokens_as_token_ids)."""
        import torch

        with self.lock, torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=wanted,
                min_new_tokens=minimum,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out.sequences[0] if self.encoder_decoder else out.sequences[0, ids.shape[1] :]
        new = new[-len(out.scores) :] if out.scores else new[:0]
        tokens, shown = [], ""
        for step, token_id in enumerate(new.tolist()):
            text = self.tokenizer.decode(new[: step + 1], skip_special_tokens=True)
            logprob = float(torch.log_softmax(out.scores[step][0].float(), dim=-1)[token_id])
            tokens.append((token_id, text[len(shown) :], logprob))
            shown = text
        return tokens

    def lmi27_stream(self, body: dict[str, Any]) -> tuple[int, Any]:
        """LMI 27's stream of a {"inputs", "stream": true} request (bytes, application/jsonlines); else an error."""
        status, outputs = self.generation({**body, "stream": False}, tokens=True)
        if status != 200:
            return status, outputs
        prompt, params, tokens = outputs
        return 200, lmi27_token_lines(tokens, prompt if params.get("return_full_text") else "")

    def _generate(self, ids: Any, wanted: int, minimum: int = 0) -> tuple[str, int]:
        import torch

        with self.lock, torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=wanted,
                min_new_tokens=minimum,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0] if self.encoder_decoder else out[0, ids.shape[1] :]
        return self.tokenizer.decode(new, skip_special_tokens=True), len(new)

    def _ending(self, pieces: list[str], wanted: int, stop: list[str]) -> Ending:
        """Where this engine's OpenAI routes end the generation (local_runtime/stopping.py): TGI keeps the stop
        sequence and writes its end-of-sequence reason as "stop" there (FinishReason::format(true)); vLLM, LMI 27
        (vLLM) and SGLang cut the stop string off."""
        if not self.dialect.keeps_stop_sequence:
            return openai_ending(pieces, wanted, stop)
        ending = tgi_ending(pieces, wanted, stop)
        return replace(ending, finish_reason="stop") if ending.finish_reason == "eos_token" else ending

    def _stop_fields(self, ending: Ending) -> dict[str, Any]:
        """The field naming the stop string that ended a choice (the dialect's stop_field; vLLM's is null when none
        did, SGLang's left out)."""
        field = self.dialect.stop_field
        if field is None or (ending.matched is None and not self.dialect.stop_field_null_when_unmatched):
            return {}
        return {field: ending.matched}

    def _too_long(self, prompt_tokens: int, wanted: int) -> bool:
        return self.max_len is not None and prompt_tokens + wanted > self.max_len

    def generation(self, body: dict[str, Any], tokens: bool = False) -> tuple[int, Any]:
        """The generation contract: LMI 27 (lmi-vllm) answers {"generated_text"} of the first prompt (vLLM's first
        choice: request_response_utils.py:143-146); the older LMI and DJL handlers [{"generated_text"}] per prompt.
        tokens: (the prompt, its parameters, _tokens()) of the first prompt instead, for LMI 27's stream."""
        import request_contract

        try:
            # LMI takes "stream" beside the request (request_response_utils.py:68); the DJL systems' handler
            # (systems/djl_common/handler/model.py, validate_request) does not stream and refuses the key.
            streams = self.dialect.stream_beside_inputs
            prompts, params = request_contract.validate_request(
                {k: v for k, v in body.items() if k != "stream" or not streams}, request_contract.limits({})
            )
        except request_contract.RequestError as err:
            return 400, {"error": str(err)}
        # LMI 27 hands what it does not map to vLLM's CompletionRequest, which has no min_new_tokens field (its name is
        # min_tokens) and ignores it (LMI27 lmi_vllm/request_response_utils.py:56-99, `completion_dict.update(
        # parameters)`; systems/lmi_vllm's unread_parameters): the stand-in ignores it too. (CompletionRequest read at
        # vLLM 0.30.0 in .venv-vllm; the vLLM 0.23.0 inside LMI 27 was not read: unverified there.)
        minimum = params.get("min_new_tokens", 0) if self.dialect.reads_min_new_tokens else 0
        outputs = []
        for prompt in prompts:
            ids = self.tokenizer(prompt, return_tensors="pt")["input_ids"]
            wanted = params["max_new_tokens"]
            if self._too_long(ids.shape[1], wanted):
                return 400, {"error": f"the prompt and max_new_tokens exceed the context of {self.max_len} tokens"}
            if tokens:
                return 200, (prompt, params, self._tokens(ids, wanted, minimum))
            text, _ = self._generate(ids, wanted, minimum)
            outputs.append({"generated_text": (prompt + text) if params.get("return_full_text") else text})
        if self.dialect.first_output_only:
            return 200, outputs[0]
        return 200, outputs

    def chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        # vLLM's /invocations, LMI 27 (vllm_async_service.py:282-286) and TGI (router/src/sagemaker.rs) take an OpenAI
        # completion body too.
        completion = (
            self.dialect.completion_on_invocations and not isinstance(body.get("messages"), list) and "prompt" in body
        )
        if not isinstance(body.get("messages"), list) and not completion:
            if self.dialect.refuses_without_messages_422:
                return 422, {"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required"}]}
            if self.dialect.generation_contract and "inputs" in body:
                return self.generation(body)
            return _error(
                400,
                "Cannot find suitable handler for request. Expected one of: "
                "['ChatCompletionRequest', 'CompletionRequest']",
            )
        if not self.takes_chat:
            return 400, {"error": "the DJL handler takes {'inputs', 'parameters'} only"}
        model = body.get("model")
        if self.dialect.checks_served_model_name and model and model not in self.served:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        if completion:
            if not isinstance(body["prompt"], str):
                return _error(400, "the stand-in takes one prompt string")
            ids = self.tokenizer(body["prompt"], return_tensors="pt")["input_ids"]
        else:
            ids = self.tokenizer.apply_chat_template(
                body["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if self._too_long(ids.shape[1], wanted):
            return _error(400, f"This model's maximum context length is {self.max_len} tokens")
        stop = stop_strings(body.get("stop"))
        if stop is None:
            return _error(400, f"stop: value {body.get('stop')!r}; allowed: a string or a list of strings")
        ending = self._ending([piece for _, piece, _ in self._tokens(ids, wanted)], wanted, stop)
        text, count = ending.text, ending.tokens
        usage = {"prompt_tokens": ids.shape[1], "completion_tokens": count, "total_tokens": ids.shape[1] + count}
        served = self.served[0] if self.served else ""
        if completion:
            echoed = body["prompt"] if body.get("echo") else ""
            choice: dict[str, Any] = {"index": 0, "finish_reason": ending.finish_reason, "text": echoed + text}
            choice.update(self._stop_fields(ending))
            return 200, {
                "id": "cmpl-stand-in",
                "object": "text_completion",
                "created": int(time.time()),
                "model": served,
                "choices": [choice],
                "usage": usage,
            }
        choice = {"index": 0, "finish_reason": ending.finish_reason, "message": {"role": "assistant", "content": text}}
        choice.update(self._stop_fields(ending))
        return 200, {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served,
            "choices": [choice],
            "usage": usage,
        }


def _stream_chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A whole OpenAI reply as the chunks of its stream: one text chunk, then the usage chunk when asked."""
    choice = reply["choices"][0]
    ended = {k: v for k, v in choice.items() if k in ("finish_reason", "stop_reason", "matched_stop")}
    if "text" in choice:  # a completion streams text_completion chunks
        chunk = {**reply, "choices": [{"index": 0, "text": choice["text"], **ended}]}
        chunk.pop("usage")
    else:
        chunk = {
            "id": reply["id"],
            "object": "chat.completion.chunk",
            "created": reply["created"],
            "model": reply["model"],
            "choices": [{"index": 0, "delta": {"content": choice["message"]["content"]}, **ended}],
        }
    usage = {**chunk, "choices": [], "usage": reply["usage"]}
    return [chunk, usage] if include_usage else [chunk]


def _sse(reply: dict[str, Any], include_usage: bool) -> bytes:
    """A whole OpenAI reply as the server-sent events of its stream (vLLM's and SGLang's framing), then [DONE]."""
    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in _stream_chunks(reply, include_usage))
    return f"{events}data: [DONE]\n\n".encode()


# LMI 27's framings (LMI27 files). Every piece of a reply is written with a newline after it (async_utils.py:62-63,
# _create_output: `data_str = data_str + '\n'`); a whole reply is application/json (create_non_stream_output,
# async_utils.py:23-34), a stream application/jsonlines (create_stream_chunk_output, async_utils.py:37-47).


def lmi27_whole(reply: Any) -> bytes:
    """A whole reply: the generation contract's {"generated_text"} object (convert_completion_response_to_lmi_schema,
    request_response_utils.py:137-146) or vLLM's chat.completion / text_completion as vLLM dumps it
    (vllm_non_stream_output_formatter, request_response_utils.py:166-177), then the newline."""
    return (json.dumps(reply, ensure_ascii=False) + "\n").encode()


def lmi27_chunk_lines(reply: dict[str, Any], include_usage: bool) -> bytes:
    """A streamed chat or completion: vLLM's SSE chunks with `data: ` cut off, one JSON object per line
    (vllm_stream_output_formatter, request_response_utils.py:180-192: `trimmed_chunk = chunk[6:].strip()`), and
    vLLM's `data: [DONE]` as an empty last piece: a bare newline."""
    lines = "".join(json.dumps(chunk, ensure_ascii=False) + "\n" for chunk in _stream_chunks(reply, include_usage))
    return (lines + "\n").encode()


def lmi27_token_lines(tokens: list[tuple[int, str, float]], prefix: str = "") -> bytes:
    """A streamed {"inputs"} request (convert_completion_chunk_response_to_lmi_schema, request_response_utils.py:
    195-255): per token {"index", "token": {"id", "text", "logprob"}, "generated_text": null, "details": null}, the
    last token's line carrying the whole text in generated_text (prefixed with the prompt for return_full_text,
    :243-244); then vLLM's usage chunk, which has no choices, as an empty piece (:216-218) and [DONE] as another
    (:206-209): two bare newlines. details stays null: the stand-in takes no "details" parameter
    (request_contract.py refuses it)."""
    lines, texts = [], []
    for position, (token_id, text, logprob) in enumerate(tokens):
        texts.append(text)
        last = position == len(tokens) - 1
        line = {
            "index": 0,
            "token": {"id": token_id, "text": text, "logprob": logprob},
            "generated_text": prefix + "".join(texts) if last else None,
            "details": None,
        }
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    return ("".join(lines) + "\n\n").encode()


def _json_lines(outputs: list[dict[str, Any]], tokenizer: Any) -> bytes:
    """A generation reply as LMI's jsonlines stream: each token of the text, then the whole text."""
    text = outputs[0]["generated_text"]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    lines = [{"token": {"id": i, "text": tokenizer.decode([i])}} for i in ids]
    lines.append({"generated_text": text})
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _lmi27_reply(stand_in: StandIn, body: Any, chat_route: bool = False) -> tuple[int, Any, str]:
    """(status, body, content type) LMI 27's async vLLM service answers `body` with (LMI27 framings above); it has
    no chat route of its own (chat_route is always False)."""
    if not isinstance(body, dict):
        return 400, {"error": {"message": "the body must be a JSON object"}}, JSON
    streamed = bool(body.get("stream"))
    if streamed and "inputs" in body and not isinstance(body.get("messages"), list):
        status, reply = stand_in.lmi27_stream(body)
        return (status, reply, "application/jsonlines") if status == 200 else (status, reply, JSON)
    status, reply = stand_in.chat(body)
    if status != 200:
        return status, reply, JSON
    if streamed:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return 200, lmi27_chunk_lines(reply, include_usage), "application/jsonlines"
    return 200, lmi27_whole(reply), JSON


JSON = "application/json"

# The servers the stand-in answers as, by name (a system's LocalRun.dialect names one).
DIALECTS: dict[str, Dialect] = {
    dialect.name: dialect
    for dialect in (
        # vLLM's own OpenAI server (vLLM 0.30.0 entrypoints/serve/sagemaker/api_router.py: ChatCompletionRequest, then
        # CompletionRequest; entrypoints/serve/engine/serving.py _is_model_supported; chat_completion/protocol.py
        # `stop_reason: int | str | None = None`). vllm runs its real engine here; the client suite's bodies use this.
        Dialect(
            name="vllm-openai",
            argv=djl_argv,
            openai_route=True,
            completion_on_invocations=True,
            checks_served_model_name=True,
            stop_field="stop_reason",
        ),
        # SGLang 0.5.20's http_server.py (/invocations takes a ChatCompletionRequest only; `matched_stop`, left out
        # when none matched: unverified against SGLang's source); the DLC entrypoint's flags (sglang_argv).
        Dialect(
            name="sglang-http",
            argv=sglang_argv,
            openai_route=True,
            container_chat_path="/v1/chat/completions",
            refuses_without_messages_422=True,
            stop_field="matched_stop",
            stop_field_null_when_unmatched=False,
        ),
        # LMI 27's async vLLM service (OPTION_ENTRYPOINT djl_python.lmi_vllm.vllm_async_service; LMI27 files):
        # vllm_async_service.py:282-286 takes completions; request_response_utils.py:56-99 hands min_new_tokens to
        # vLLM's CompletionRequest, which ignores it; :137-146 answers the primary choice's text only.
        Dialect(
            name="lmi27",
            argv=lmi_argv,
            completion_on_invocations=True,
            generation_contract=True,
            stream_beside_inputs=True,
            reads_min_new_tokens=False,
            first_output_only=True,
            stop_field="stop_reason",
            own_replies=_lmi27_reply,
        ),
        # The older LMI handlers: the generation contract and an OpenAI chat body on /invocations
        # (systems/lmi_vllm/chat.py), "stream" beside the request.
        Dialect(name="lmi", argv=lmi_argv, generation_contract=True, stream_beside_inputs=True),
        # DJL Serving's handlers (systems/djl_common/handler/model.py validate_request): the generation contract only.
        Dialect(name="djl", argv=djl_argv, takes_chat=False, generation_contract=True),
        # TGI 3.3.6's router (router/src/sagemaker.rs, server.rs): local_runtime/tgi_router.py answers every route.
        Dialect(
            name="tgi-router",
            argv=tgi_argv,
            openai_route=True,
            completion_on_invocations=True,
            keeps_stop_sequence=True,
            own_replies=tgi_router.reply,
        ),
    )
}


def make_server(stand_in: StandIn, port: int = 0) -> ThreadingHTTPServer:
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
            # TGI's router serves the route as well (router/src/server.rs); LMI and DJL take chat on /invocations.
            openai_path = self.path == "/v1/chat/completions" and stand_in.dialect.openai_route
            if self.path != "/invocations" and not openai_path:
                return self._send(404, {"error": "not found"})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError as err:
                return self._send(400, {"error": {"message": f"JSON decode error: {err}"}})
            if stand_in.dialect.own_replies is not None:
                return self._send(*stand_in.dialect.own_replies(stand_in, body, openai_path))
            if not isinstance(body, dict):
                return self._send(400, {"error": {"message": "the body must be a JSON object"}})
            if openai_path and "messages" not in body:
                return self._send(400, {"error": {"message": "messages: Field required", "type": "BadRequestError"}})
            status, reply = stand_in.chat(body)
            if status == 200 and body.get("stream"):
                if isinstance(reply, list):  # the generation contract: LMI's jsonlines
                    return self._send(200, _json_lines(reply, stand_in.tokenizer), "application/jsonlines")
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return self._send(200, _sse(reply, include_usage), "text/event-stream")
            return self._send(status, reply)

    return _Server(("127.0.0.1", port), Handler)


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: 32 clients connecting at once (bench/front_door.py at concurrency 32)
    # were reset, where the engines' own servers (uvicorn: 2048) queue them.
    request_queue_size = 2048


@contextlib.contextmanager
def serving(stand_in: StandIn) -> Iterator[str]:
    """Serve `stand_in` on 127.0.0.1 (a free port) in a thread, yielding its base URL."""
    server = make_server(stand_in)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class StandInContainer(SystemContainer):
    """`python -m local_runtime.stand_in` for `system`, its flags built from the plan's container environment by the
    system's entrypoint rules."""

    engine = "stand-in"
    local_kind = "stand-in"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stand_in_engine = self.local.dialect
        self.chat_path = DIALECTS[self.stand_in_engine].container_chat_path

    def engine_argv(self) -> list[str]:
        return DIALECTS[self.stand_in_engine].argv(self.container_env, self.model_dir)

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "local_runtime.stand_in",
            "--engine",
            self.stand_in_engine,
            "--listen",
            str(self.port),
            "--",
            *self.engine_argv(),
        ]

    def environment(self, home: Path) -> dict[str, str]:
        root = Path(__file__).resolve().parent.parent
        return {
            **base_environment(home, f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"),
            **self.container_env,
            "PYTHONPATH": str(root),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }

    def check_ready(self) -> None:
        self.version_line = f"stand-in for {self.system}: {self.local.note}"

    def answered_by(self) -> str:
        return (
            f"stand-in: local_runtime/stand_in.py ({self.stand_in_engine} routes, transformers on the CPU) for "
            f"{self.system}, since {self.local.note}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_runtime.stand_in", description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=tuple(DIALECTS), required=True)
    parser.add_argument("--listen", type=int, required=True, help="the loopback port to serve on")
    parser.add_argument("engine_argv", nargs=argparse.REMAINDER, help="-- then the engine's own flags")
    args = parser.parse_args(argv)
    flags = flags_of([token for token in args.engine_argv if token != "--"])
    server = make_server(StandIn(flags, args.engine), args.listen)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(
        f"stand-in ({args.engine} routes) serving {flags.get('--model') or flags.get('--model-path')} "
        f"on 127.0.0.1:{args.listen}",
        flush=True,
    )
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
