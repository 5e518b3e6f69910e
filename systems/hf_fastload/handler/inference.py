"""Request handler of the hf-fastload system: the SageMaker Hugging Face inference toolkit calls these
functions from the artifact's `code/inference.py` (model_build copies this file there).

Runs under two library stacks, on purpose: the container's (transformers 4.49, inference toolkit 2.6) and
the build machine's (transformers 5.x), where model_build verifies the artifact and serves it locally.
So: stdlib + torch + transformers only, and the one argument that differs (`torch_dtype` in 4.x, `dtype` in
5.x) is chosen from the installed version.

Request: {"inputs": str | [str, ...], "parameters": {...}} (application/json; text/plain is one prompt).
Reply:   [{"generated_text": str}, ...], one entry per input, holding the continuation only (like
         text-generation-inference); pass "return_full_text": true for prompt + continuation.
Every invalid request raises ValueError whose message names the key, the value and the limit; the toolkit
and model_build's local server turn it into a 400 reply.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

import torch
import transformers

try:
    import request_contract  # the artifact's code/request_contract.py, beside this file (the recipe copies both)
except ImportError:  # the repository: systems/request_contract.py
    from systems import request_contract

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
    """The dtype the artifact was built and verified in; without a manifest fp16 on GPU, fp32 on CPU."""
    name = os.environ.get("HF_FASTLOAD_DTYPE") or manifest.get("dtype") or ("fp16" if cuda else "fp32")
    if name not in TORCH_DTYPES:
        raise ValueError(f"dtype {name!r} is not supported; allowed: {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES[name]


def load_model(model_dir: str | Path, dtype: torch.dtype | None = None, weights_format: str | None = None) -> dict:
    """Load tokenizer and model for serving; model_build's verification calls this too, so the check
    exercises the very code the endpoint runs.

    safetensors (default): memory-mapped, sharded, no code runs on load; on GPU `device_map` places the
    weights straight onto the device. torch-save (opt-in): the whole pickled model via torch.load, which
    executes code from the file and is slower; only used when the manifest says so.
    """
    model_dir = Path(model_dir)
    manifest = read_manifest(model_dir)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = dtype or choose_dtype(manifest, cuda)
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
        # 4.x needs accelerate for it (the HF inference containers ship it).
        if importlib.util.find_spec("accelerate") is not None:
            kwargs["low_cpu_mem_usage"] = True
            if cuda:
                kwargs["device_map"] = "auto"  # weights go straight onto the GPU(s)
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
        if cuda and "device_map" not in kwargs:
            model = model.to(device)
    else:
        raise ValueError(f"weights_format {weights_format!r} is not supported; allowed: safetensors, torch-save")
    model.eval()
    config = model.config
    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return {
        "model": model,
        "tokenizer": tokenizer,
        "device": next(model.parameters()).device,
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
    sampling = {k: given[k] for k in ("temperature", "top_p", "top_k") if k in given}
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


def predict_fn(data: Any, model: dict, context: Any = None) -> list[dict[str, str]]:
    """Generate for every prompt; validates first, so a bad request costs no compute."""
    prompts, params = validate_request(data)
    tokenizer, lm = model["tokenizer"], model["model"]
    return_full_text = params.pop("return_full_text")
    seed = params.pop("seed", None)
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(model["device"])
    prompt_tokens = encoded["input_ids"].shape[1]
    context_length = model.get("context_length")
    if context_length and prompt_tokens + params["max_new_tokens"] > context_length:
        raise ValueError(
            f"inputs tokens + parameters.max_new_tokens must be <= {context_length}; given: {prompt_tokens} "
            f"inputs tokens and max_new_tokens {params['max_new_tokens']}"
        )
    with model["lock"], torch.inference_mode():
        if seed is not None:
            torch.manual_seed(seed)
        output = lm.generate(**encoded, **params, pad_token_id=tokenizer.pad_token_id)
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
