"""Request handler of the hf-fastload system: the SageMaker Hugging Face inference toolkit calls these
functions from the artifact's `code/inference.py` (model_build copies this file there).

Runs under two library stacks, on purpose: the container's (transformers 4.49, inference toolkit 2.6) and
the build machine's (transformers 5.x), where model_build verifies the artifact and serves it locally.
So: stdlib + torch + transformers only, and the one argument that differs (`torch_dtype` in 4.x, `dtype` in
5.x) is chosen from the installed version.

Request: {"inputs": str | [str, ...], "parameters": {...}} (application/json; text/plain is one prompt).
Reply:   [{"generated_text": str}, ...], one entry per input, holding the continuation only (like
         text-generation-inference); pass "return_full_text": true for prompt + continuation.
Chat:    a body with "messages" is an OpenAI Chat Completions request (chat_contract.py, copied beside this file
         like request_contract.py): the tokenizer's chat template renders it (with its tools), the reply is a
         chat.completion (tool calls read in the hermes format) from predict_fn.
Streaming: none. The toolkit answers POST /invocations with output_fn's one reply and calls no streaming function,
         so a body with "stream": true is refused (400) and InvokeEndpointWithResponseStream gets the whole reply as
         one part; model_build's local server answers the same way. stream_fn below is no container's hook.
Every invalid request raises ValueError whose message names the key, the value and the limit; the toolkit
and model_build's local server turn it into a 400 reply (chat refusals are chat_contract.ChatError, whose
error_body() is OpenAI's error object).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

import torch
import transformers

import chat_contract  # code/chat_contract.py beside this file, as request_contract.py
import request_contract  # the artifact's code/request_contract.py beside this file (the recipe copies it); the repository's own top-level module in tests

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
TORCH_SAVE_FILE = "model.pt"
MANIFEST_FILE = "manifest.json"

# Limits: request_contract's (MAX_NEW_TOKENS, MAX_BATCH_SIZE from the container environment, read per request);
# these two are the values at import, for callers that want to show them.
MAX_NEW_TOKENS_CAP = request_contract.limits().max_new_tokens
MAX_BATCH_SIZE = request_contract.limits().max_batch_size
DEFAULT_MAX_NEW_TOKENS = request_contract.DEFAULT_MAX_NEW_TOKENS

_TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])


def dtype_kwargs(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """`from_pretrained`'s dtype argument: `torch_dtype` before transformers 5, `dtype` since."""
    return {"torch_dtype": dtype} if _TRANSFORMERS_MAJOR < 5 else {"dtype": dtype}


def read_manifest(model_dir: str | Path) -> dict[str, Any]:
    """The artifact's manifest.json, or {} when absent (a plain transformers directory still serves)."""
    path = Path(model_dir) / MANIFEST_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def choose_dtype(manifest: dict[str, Any], cuda: bool) -> torch.dtype:
    """The dtype the artifact was built and verified in (its storage dtype); without a manifest fp16 on GPU,
    fp32 on CPU."""
    name = os.environ.get("HF_FASTLOAD_DTYPE") or manifest.get("dtype") or ("fp16" if cuda else "fp32")
    if name not in TORCH_DTYPES:
        raise ValueError(f"dtype {name!r} is not supported; allowed: {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES[name]


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX tiles), by torch's own capability checks
    (torch/cpu/__init__.py; absent in older torch: then False). AVX2-only CPUs emulate bf16, slower than fp32."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def compute_dtype(storage: torch.dtype, cuda: bool) -> torch.dtype:
    """The dtype the model computes in. GPU: the storage dtype. CPU: fp32 (fp16 and bf16 widen to it exactly;
    a CPU without fp16 matmul kernels took 7.5 s for GPT-2-large's first fp16 token against 0.76 s in fp32),
    except bf16 storage on a CPU with native bf16 (`cpu_has_fast_bf16`), which stays bf16."""
    if cuda or storage == torch.float32:
        return storage
    if storage == torch.bfloat16 and cpu_has_fast_bf16():
        return torch.bfloat16
    return torch.float32


def compute_dtype_rule(storage: str) -> dict[str, str]:
    """`compute_dtype` as the manifest records it (the recipe writes it): the dtype on GPU, on CPU, and on a CPU
    with native bf16 where that differs."""
    rule = {"gpu": storage, "cpu": "fp32"}
    if storage == "bf16":
        rule["cpu_native_bf16"] = "bf16"
    return rule


# The decode path (HF_FASTLOAD_DECODE, from the endpoint's `engine.decode`; systems/hf_fastload/__init__.py):
#   eager         transformers' default dynamic KV cache
#   static-cache  a preallocated static KV cache (cache_implementation="static"), compilation disabled
#   compiled      static KV cache, and transformers' generate compiles the decoding forward with torch.compile
#                 (it does so by itself for a static cache on CUDA: generation/utils.py, `_valid_auto_compile_criteria`
#                 in 5.x, `get_compiled_call` in `_sample` in 4.49); on CPU it is the static-cache path.
# (https://huggingface.co/docs/transformers/v4.49.0/en/llm_optims, "Static kv-cache and torch.compile").
# Off (eager) by default: on one H200 compiled decoded 2.1-2.7x faster but traced each new batch size first
# (20-40 s) while a request waits (docs/design/bench.md, "Measured on one H200").
DECODE_MODES = ("eager", "static-cache", "compiled")
DECODE_ENV = "HF_FASTLOAD_DECODE"


def supports_static_cache(model: Any) -> bool:
    """transformers 4.x flags each architecture (`_supports_static_cache`; GPT-2 lacks it in 4.49); 5.x gives
    every model the cache classes and flags what compiles (`_can_compile_fullgraph`)."""
    if _TRANSFORMERS_MAJOR < 5:
        return bool(getattr(model, "_supports_static_cache", False))
    return bool(getattr(model, "_can_compile_fullgraph", False))


def decode_settings(model: Any, mode: str | None = None) -> tuple[str, dict[str, Any]]:
    """(the decode path in effect, generate's extra keyword arguments) for `mode` (default: HF_FASTLOAD_DECODE,
    else eager). A model without static-cache support decodes eagerly, whatever was asked."""
    mode = mode or os.environ.get(DECODE_ENV) or "eager"
    if mode not in DECODE_MODES:
        raise ValueError(f"{DECODE_ENV}={mode!r} is not supported; allowed: {', '.join(DECODE_MODES)}")
    if mode == "eager" or not supports_static_cache(model):
        return "eager", {}
    kwargs: dict[str, Any] = {"cache_implementation": "static"}
    if mode == "static-cache":
        kwargs["disable_compile"] = True  # a GenerationConfig field in 4.49 and 5.x
    return mode, kwargs


def skip_weight_init() -> Any:
    """transformers 5 builds the model on the meta device but still runs every module's weight init there, work the
    checkpoint then overwrites (5.23: modeling_utils.py `get_init_context`; GPT-2's Conv1D calls nn.init.normal_,
    which torch runs through its Python reference on meta tensors): ~0.13 CPU-s of the GPT-2-large load here.
    `initialization.no_init_weights` skips those calls; 4.x's from_pretrained skips them itself (`no_init_weights`
    with low_cpu_mem_usage), so there this is a no-op. Weights missing from the checkpoint are still initialized:
    5.23 runs `_initialize_missing_keys` with its own guarded init functions in place of torch.nn.init's
    (tests/systems/test_hf_handler_load.py checks it)."""
    if _TRANSFORMERS_MAJOR >= 5:
        from transformers.initialization import no_init_weights

        return no_init_weights()
    return contextlib.nullcontext()


def load_model(
    model_dir: str | Path,
    dtype: torch.dtype | None = None,
    weights_format: str | None = None,
    decode: str | None = None,
) -> dict:
    """Load tokenizer and model for serving; model_build's verification calls this too, so the check
    exercises the very code the endpoint runs.

    dtype: given, the model computes in exactly it (the verification passes the storage dtype); else
    `compute_dtype` of the storage dtype (fp32 on CPU, the storage dtype on GPU).
    safetensors (default): memory-mapped, sharded, no code runs on load; on GPU `device_map` loads each tensor
    from its shard straight onto the device, so the model never exists whole in CPU memory (transformers'
    "large model loading", huggingface/transformers docs/source/en/main_classes/model.md).
    torch-save (opt-in): the whole pickled model via torch.load, which executes code from the file and is
    slower; only used when the manifest says so.
    decode: the decode path (`decode_settings`; default HF_FASTLOAD_DECODE, else eager).
    """
    model_dir = Path(model_dir)
    manifest = read_manifest(model_dir)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    storage = choose_dtype(manifest, cuda)
    dtype = dtype or compute_dtype(storage, cuda)
    weights_format = weights_format or manifest.get("weights_format", "safetensors")

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"  # decoder-only batches pad on the left so every row continues its prompt
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    if weights_format == "torch-save":
        model = torch.load(model_dir / TORCH_SAVE_FILE, map_location=device, weights_only=False)
        model = model.to(device=device, dtype=dtype)
    elif weights_format == "safetensors":
        kwargs: dict[str, Any] = dict(use_safetensors=True, **dtype_kwargs(dtype))
        # Load straight into place instead of initializing random weights first. transformers 5 always does;
        # 4.x needs accelerate for it. A `device_map` needs accelerate in both (transformers 5.23 raises
        # "Using a `device_map` ... requires `accelerate`"); the HF inference containers ship it.
        if importlib.util.find_spec("accelerate") is not None:
            kwargs["low_cpu_mem_usage"] = True
            if cuda:  # every tensor straight onto the GPU; "auto" splits a model over several
                kwargs["device_map"] = "auto" if torch.cuda.device_count() > 1 else {"": device}
        with skip_weight_init():
            model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
        if cuda and "device_map" not in kwargs:
            model = model.to(device)  # without accelerate: a whole CPU copy first
    else:
        raise ValueError(f"weights_format {weights_format!r} is not supported; allowed: safetensors, torch-save")
    model.eval()
    config = model.config
    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    decode_mode, generate_kwargs = decode_settings(model, decode)
    return {
        "name": manifest.get("endpoint") or model_dir.name,  # the model name chat replies give when asked none
        "model": model,
        "tokenizer": tokenizer,
        "device": next(model.parameters()).device,
        "dtype": next(model.parameters()).dtype,  # what it computes in
        "storage_dtype": storage,
        "decode": decode_mode,
        "generate_kwargs": generate_kwargs,  # the decode path's extra `generate` arguments
        "context_length": context,
        "lock": threading.Lock(),  # generate is not re-entrant on one model; serialize calls
    }


# ---- request validation: request_contract's (one table for every entry point) --------------------------


def validate_request(data: Any) -> tuple[list[str], dict[str, Any]]:
    """Check a decoded request; return (prompts, generate's parameters with defaults). Raises ValueError
    (request_contract.RequestError)."""
    prompts, given = request_contract.validate_request(data)
    params: dict[str, Any] = {"max_new_tokens": given["max_new_tokens"]}
    for key in ("min_new_tokens", "repetition_penalty", "num_beams"):
        if key in given:
            params[key] = given[key]
    sampling: dict[str, Any] = {k: given[k] for k in ("temperature", "top_p", "top_k") if k in given}
    # Setting a sampling knob means sampling, unless do_sample says otherwise (then the knobs are dropped).
    params["do_sample"] = given.get("do_sample", bool(sampling))
    if params["do_sample"]:
        params.update(sampling)
    params["return_full_text"] = given.get("return_full_text", False)
    if "seed" in given:
        params["seed"] = given["seed"]
    return prompts, params


# ---- the toolkit's four functions ---------------------------------------------------------------------


def model_fn(model_dir: str, context: Any = None) -> dict:
    """Load once per worker. dtype and weights format come from the artifact's manifest.json."""
    return load_model(model_dir)


# ---- the body: bytes or str -> JSON value: request_contract.decode_body (strict JSON: no NaN/Infinity, no
# out-of-range numbers, no lone surrogates, no duplicate keys, at most 32 levels) ------------------------------
decode_json = request_contract.decode_json
check_json_tree = request_contract.check_json_tree


def input_fn(input_data: bytes | str, content_type: str | None, context: Any = None) -> Any:
    """Decode the request body: JSON, or text/plain as a single prompt with default parameters. The inference
    toolkit hands over str for application/json (handler_service.handle decodes its UTF8_TYPES, application/json
    and text/csv, before calling this); bytes otherwise, and model_build's server always hands bytes."""
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if media == "application/json":
        return request_contract.decode_body(input_data)
    if media == "text/plain":
        if isinstance(input_data, (bytes, bytearray)):
            try:
                input_data = bytes(input_data).decode("utf-8")
            except UnicodeDecodeError as err:
                raise request_contract.RequestError(
                    f"request body is not valid UTF-8: {err.reason} at byte {err.start}"
                ) from None
        request_contract.refuse_lone_surrogate(input_data)
        return {"inputs": input_data}
    raise ValueError(f"content type {content_type!r} is not supported; allowed: application/json, text/plain")


def check_context_length(model: dict, prompt_tokens: int, max_new_tokens: int) -> None:
    """Refuse a generation request whose prompt and new tokens together pass the model's context (ValueError)."""
    context_length = model.get("context_length")
    if context_length and prompt_tokens + max_new_tokens > context_length:
        raise ValueError(
            f"inputs tokens + parameters.max_new_tokens must be <= {context_length}; given: {prompt_tokens} "
            f"inputs tokens and max_new_tokens {max_new_tokens}"
        )


def predict_fn(data: Any, model: dict, context: Any = None) -> list[dict[str, str]] | dict[str, Any]:
    """Generate for every prompt; validates first, so a bad request costs no compute. A chat request (a body
    with "messages") gets a chat.completion."""
    if chat_contract.is_chat_request(data):
        return chat_completion(data, model)
    prompts, params = validate_request(data)
    tokenizer, lm = model["tokenizer"], model["model"]
    return_full_text = params.pop("return_full_text")
    seed = params.pop("seed", None)
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(model["device"])
    prompt_tokens = encoded["input_ids"].shape[1]
    check_context_length(model, prompt_tokens, params["max_new_tokens"])
    with model["lock"], torch.inference_mode():
        if seed is not None:
            torch.manual_seed(seed)
        decode_kwargs = model.get("generate_kwargs", {}) if params.get("num_beams", 1) == 1 else {}  # beams: eager
        output = lm.generate(**encoded, **params, **decode_kwargs, pad_token_id=tokenizer.pad_token_id)
    continuations = tokenizer.batch_decode(output[:, prompt_tokens:], skip_special_tokens=True)
    if return_full_text:
        return [{"generated_text": p + c} for p, c in zip(prompts, continuations)]
    return [{"generated_text": c} for c in continuations]


def output_fn(prediction: Any, accept: str | None, context: Any = None) -> str:
    """Encode the reply as JSON (the only format offered)."""
    media = (accept or "application/json").split(";")[0].strip().lower()
    if media not in ("application/json", "*/*"):
        raise ValueError(f"accept type {accept!r} is not supported; allowed: application/json")
    return json.dumps(prediction)


def stream_fn(data: Any, model: dict, context: Any = None) -> Any:
    """Generate for one prompt and yield the reply token by token as JSON lines (bytes), LMI's streaming framing:
    {"token": {"id": int, "text": str}} per token, then {"generated_text": str, "details": {"finish_reason",
    "generated_tokens"}} (deepjavalibrary/djl-serving 0.36.0-lmi27-dlc, serving/docs/lmi/user_guides/
    lmi_input_output_schema.md; LMI puts its last token on that final line too). A generator: validation runs at
    the first next(), so a bad request raises ValueError before anything is sent.

    No container calls it: SageMaker's Hugging Face inference toolkit has no streaming hook, so an hf-fastload
    endpoint does not stream (its ServingSystem says so and the config refuses `streaming.enabled` for it), and
    model_build's local server answers the response stream as the toolkit does, whole. Only tests call it: the
    stream function's relay tests (local_runtime/serve.py ModelHost.stream_with_handler) and the handler's own."""
    if chat_contract.is_chat_request(data):
        yield from chat_stream(data, model)
        return
    if isinstance(data, dict) and "stream" in data:  # LMI's request shape asks for a stream with "stream": true
        if data["stream"] is not True:
            raise request_contract.RequestError(f"stream must be true on the streaming path, got {data['stream']!r}")
        data = {k: v for k, v in data.items() if k != "stream"}
    prompts, params = validate_request(data)
    if len(prompts) != 1:
        raise request_contract.RequestError(
            f"inputs: a streamed request takes one prompt, got a list of {len(prompts)}"
        )
    if params.get("num_beams", 1) != 1:
        raise request_contract.RequestError(f"parameters.num_beams must be 1 when streaming, got {params['num_beams']}")
    tokenizer = model["tokenizer"]
    return_full_text = params.pop("return_full_text")
    seed = params.pop("seed", None)
    encoded = tokenizer(prompts, return_tensors="pt").to(model["device"])
    prompt_tokens = encoded["input_ids"].shape[1]
    check_context_length(model, prompt_tokens, params["max_new_tokens"])
    ids: list[int] = []
    shown = ""
    for token_id, delta, text in _decoded_stream(tokenizer, _token_stream(model, encoded, params, seed), True):
        if token_id is not None:
            ids.append(token_id)
        shown = text
        if delta:
            yield (json.dumps({"token": {"id": ids[-1], "text": delta}}) + "\n").encode()
    finish = "length" if len(ids) >= params["max_new_tokens"] else "eos_token"
    final = {
        "generated_text": (prompts[0] if return_full_text else "") + shown,
        "details": {"finish_reason": finish, "generated_tokens": len(ids)},
    }
    yield (json.dumps(final) + "\n").encode()


def _token_stream(model: dict, encoded: Any, params: dict[str, Any], seed: int | None) -> Any:
    """The new token ids of one generate call, as they are made (generate runs in a thread; its failure is
    raised here, where the reply is being sent)."""
    import queue

    from transformers.generation.streamers import BaseStreamer

    tokenizer, lm = model["tokenizer"], model["model"]
    done = object()

    class TokenQueue(BaseStreamer):
        """generate's streamer: the first put() is the prompt, each later one a new token."""

        def __init__(self) -> None:
            self.items: queue.Queue = queue.Queue()
            self.prompt_seen = False

        def put(self, value: Any) -> None:
            if not self.prompt_seen:
                self.prompt_seen = True
                return
            for token_id in value.reshape(-1).tolist():
                self.items.put(token_id)

        def end(self) -> None:
            self.items.put(done)

    tokens = TokenQueue()

    def generate() -> None:
        try:
            with model["lock"], torch.inference_mode():
                if seed is not None:
                    torch.manual_seed(seed)
                lm.generate(
                    **encoded,
                    **params,
                    **model.get("generate_kwargs", {}),
                    streamer=tokens,
                    pad_token_id=tokenizer.pad_token_id,
                )
        except Exception as err:  # handed to the reader, which raises it where the reply is being sent
            tokens.items.put(err)
        tokens.items.put(done)

    # A client that goes away stops reading, not generating: the thread finishes its max_new_tokens and ends.
    threading.Thread(target=generate, name="stream-generate", daemon=True).start()
    while (item := tokens.items.get()) is not done:
        if isinstance(item, Exception):
            raise item
        yield item


def _decoded_stream(tokenizer: Any, token_ids: Any, skip_special_tokens: bool, stop_ids: tuple[int, ...] = ()) -> Any:
    """(token id, new text, all text so far) per token, then (None, the rest, all text) if text was held back: a
    token that ends inside a UTF-8 sequence (U+FFFD) gives its text with the next one. Ids in stop_ids (end of
    sequence) are passed on but not decoded."""
    ids: list[int] = []
    shown = ""
    for token_id in token_ids:
        if token_id not in stop_ids:
            ids.append(token_id)
        text = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        if text.endswith("\ufffd"):  # an incomplete UTF-8 sequence: its next token completes it
            yield token_id, "", shown
            continue
        delta, shown = text[len(shown) :], text
        yield token_id, delta, shown
    text = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
    if text != shown:
        yield None, text[len(shown) :], text


# ---- chat: OpenAI Chat Completions (chat_contract) ---------------------------------------------------------


def _chat_request(data: Any, stream: bool) -> chat_contract.ChatRequest:
    request = chat_contract.parse_chat_request(data, request_contract.limits())  # no constrained decoding here
    if request.stream != stream:
        if stream:
            raise chat_contract.ChatError("stream must be true on the streaming path", param="stream")
        raise chat_contract.ChatError(
            "stream: hf-fastload answers whole replies only (the Hugging Face inference toolkit has no streaming); "
            "send stream false",
            param="stream",
            code="unsupported_value",
        )
    return request


def _eos_ids(model: dict) -> tuple[int, ...]:
    """The ids that end a reply: the generation config's eos_token_id (one or a list) and the tokenizer's."""
    eos = getattr(model["model"].generation_config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos]) | {model["tokenizer"].eos_token_id}
    return tuple(i for i in ids if i is not None)


def chat_prompt(model: dict, request: chat_contract.ChatRequest) -> Any:
    """The request rendered by the tokenizer's chat template (with its tools and chat_template_kwargs) and
    tokenized as it stands (the template writes any BOS itself). A tokenizer without a chat template refuses chat:
    guessing a prompt format would answer noise."""
    import jinja2

    tokenizer = model["tokenizer"]
    if not getattr(tokenizer, "chat_template", None):
        raise chat_contract.ChatError(
            "this model has no chat template, so it cannot serve chat requests; send a generation request "
            '{"inputs": ...}, or build the artifact with a chat template',
            param="messages",
            code="chat_template_missing",
        )
    try:
        text = tokenizer.apply_chat_template(
            request.template_messages(),
            tools=request.template_tools(),
            add_generation_prompt=True,
            tokenize=False,
            **request.chat_template_kwargs,
        )
    except (jinja2.exceptions.TemplateError, TypeError) as err:
        raise chat_contract.ChatError(
            f"messages: the model's chat template cannot render them: {err}", param="messages"
        ) from None
    encoded = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    # only what a causal LM takes (a generic tokenizer may add token_type_ids, which generate() refuses)
    return {k: v.to(model["device"]) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}


def _chat_generation(model: dict, request: chat_contract.ChatRequest, prompt_tokens: int) -> dict[str, Any]:
    """generate's arguments for a chat request. max_tokens asked for must fit the context with the prompt;
    not asked for, the reply may use the rest of the context up to the endpoint's limit."""
    context_length = model.get("context_length")
    # this handler's front doors bound max_tokens themselves (no engine_limits): the contract always sets it
    assert request.max_tokens is not None
    room = (context_length - prompt_tokens) if context_length else request.max_tokens
    if room < 1 or (request.max_tokens_given and request.max_tokens > room):
        asked = f"max_tokens {request.max_tokens}" if request.max_tokens_given else "at least 1 new token"
        raise chat_contract.ChatError(
            f"messages: the prompt has {prompt_tokens} tokens and {asked} was asked for; this model's context is "
            f"{context_length} tokens",
            param="messages",
            code="context_length_exceeded",
        )
    params: dict[str, Any] = {"max_new_tokens": min(request.max_tokens, room)}
    # temperature 0 is greedy (as vLLM reads it); otherwise a sampling knob means sampling; none given: the
    # model's generation config decides.
    if request.temperature == 0:
        params["do_sample"] = False
    elif request.temperature is not None or request.top_p is not None:
        params["do_sample"] = True
        params.update({k: getattr(request, k) for k in ("temperature", "top_p") if getattr(request, k) is not None})
    if request.stop:
        criteria = transformers.StoppingCriteriaList([StopOnText(model["tokenizer"], request.stop, prompt_tokens)])
        params["stopping_criteria"] = criteria
    return params


class StopOnText(transformers.StoppingCriteria):
    """Ends generation once the decoded reply holds a stop sequence. Not transformers' `stop_strings`: its
    StopStringCriteria precomputes, in pure Python, every stop string against every token of the vocabulary
    (generation/stopping_criteria.py, _stop_string_get_matching_positions), O(stop characters x vocabulary) under
    the model's lock before the first token: minutes for a 64 KB body of stop strings at a 50,000-token vocabulary.
    Here each step decodes only the last tokens that can hold the longest stop sequence (a character spans at most 4
    byte-level tokens) and searches them: the work per token is bounded by the stop sequences' length, whatever the
    vocabulary. The reply is cut at the stop sequence afterwards (chat_contract.truncate_at_stop)."""

    def __init__(self, tokenizer: Any, stops: tuple[str, ...] | list[str], prompt_tokens: int) -> None:
        self.tokenizer, self.stops, self.prompt_tokens = tokenizer, tuple(stops), prompt_tokens
        self.window = 4 * max(len(s) for s in self.stops) + 4

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        done = []
        for row in input_ids:
            tail = row[max(self.prompt_tokens, len(row) - self.window) :].tolist()
            text = self.tokenizer.decode(tail, skip_special_tokens=False)
            done.append(any(stop in text for stop in self.stops))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def chat_completion(data: Any, model: dict) -> dict[str, Any]:
    """A chat request's whole reply: a chat.completion."""
    request = _chat_request(data, stream=False)
    encoded = chat_prompt(model, request)
    prompt_tokens = encoded["input_ids"].shape[1]
    params = _chat_generation(model, request, prompt_tokens)
    tokenizer, lm = model["tokenizer"], model["model"]
    with model["lock"], torch.inference_mode():
        if request.seed is not None:
            torch.manual_seed(request.seed)
        output = lm.generate(
            **encoded, **params, **model.get("generate_kwargs", {}), pad_token_id=tokenizer.pad_token_id
        )
    new = output[0, prompt_tokens:].tolist()
    eos = _eos_ids(model)
    ended = next((i for i, t in enumerate(new) if t in eos), None)
    kept = new if ended is None else new[:ended]
    # with tools on offer, special tokens are kept (a model may mark its tool-call tags special; vLLM's hermes
    # parser does the same), the end-of-sequence token aside
    text = tokenizer.decode(kept, skip_special_tokens=not request.tools_active)
    finish = "stop" if ended is not None or len(new) < params["max_new_tokens"] else "length"
    return chat_contract.completion_from_text(request, model["name"], text, finish, prompt_tokens, len(new))


def chat_stream(data: Any, model: dict) -> Any:
    """A streamed chat request's reply: SSE chunks (chat_contract.ChatStream), validated before the first."""
    request = _chat_request(data, stream=True)
    encoded = chat_prompt(model, request)
    prompt_tokens = encoded["input_ids"].shape[1]
    params = _chat_generation(model, request, prompt_tokens)
    stream = chat_contract.ChatStream(request, model["name"])
    yield from stream.start()
    eos = _eos_ids(model)
    count, ended = 0, False
    tokens = _token_stream(model, encoded, params, request.seed)
    try:
        for token_id, delta, _ in _decoded_stream(model["tokenizer"], tokens, not request.tools_active, eos):
            if token_id is not None:
                count += 1
                ended = ended or token_id in eos
            yield from stream.feed(delta)
    except Exception as err:  # the status line is sent: the failure goes into the stream, as OpenAI's servers do
        yield from stream.error(f"generation failed: {type(err).__name__}: {err}")
        return
    finish = "stop" if ended or count < params["max_new_tokens"] else "length"
    yield from stream.finish(finish, prompt_tokens, count)
