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
import math
import os
import re
import threading
from collections import deque
from pathlib import Path
from typing import Any

import torch
import transformers

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
TORCH_SAVE_FILE = "model.pt"
MANIFEST_FILE = "manifest.json"

# Limits, overridable from the container environment (the CDK stack may set them per endpoint).
MAX_NEW_TOKENS_CAP = int(os.environ.get("HF_FASTLOAD_MAX_NEW_TOKENS", "1024"))
MAX_BATCH_SIZE = int(os.environ.get("HF_FASTLOAD_MAX_BATCH_SIZE", "16"))
DEFAULT_MAX_NEW_TOKENS = 64

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


# ---- request validation -------------------------------------------------------------------------------


def _number(key: str, value: Any, kind: type) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise ValueError(f"parameters.{key}: value {value!r} must be {'an integer' if kind is int else 'a number'}")
    if not math.isfinite(value):  # NaN passes every < and > bound check
        raise ValueError(f"parameters.{key}: value {value!r} must be a finite number")
    return value


def _bounded(key: str, value: Any, kind: type, low: float, high: float | None, low_open: bool = False) -> Any:
    value = _number(key, value, kind)
    allowed = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
    if value < low or (low_open and value == low):
        raise ValueError(f"parameters.{key}: value {value!r} is below the limit; allowed: {allowed}")
    if high is not None and value > high:
        raise ValueError(f"parameters.{key}: value {value!r} is above the limit {high}; allowed: {allowed}")
    return value


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"parameters.{key}: value {value!r} must be true or false")
    return value


ALLOWED_PARAMETERS = (
    "max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "do_sample",
    "repetition_penalty", "return_full_text", "seed",
)  # fmt: skip


def validate_request(data: Any, max_new_tokens_cap: int = MAX_NEW_TOKENS_CAP) -> tuple[list[str], dict[str, Any]]:
    """Check a decoded request; return (prompts, parameters with defaults). Raises ValueError."""
    if not isinstance(data, dict) or "inputs" not in data:
        raise ValueError('request must be a JSON object with "inputs" (a string or a list of strings)')
    unknown = set(data) - {"inputs", "parameters"}
    if unknown:
        raise ValueError(f"request key {sorted(unknown)[0]!r} is not supported; allowed: inputs, parameters")
    inputs = data["inputs"]
    prompts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
        raise ValueError(f"inputs: value {inputs!r} must be a string or a list of strings")
    if not 1 <= len(prompts) <= MAX_BATCH_SIZE:
        raise ValueError(f"inputs: {len(prompts)} prompts given; allowed: 1 to {MAX_BATCH_SIZE} per request")
    if any(not p for p in prompts):
        raise ValueError("inputs: empty prompt; every prompt must contain text")

    raw = data.get("parameters") or {}
    if not isinstance(raw, dict):
        raise ValueError(f"parameters: value {raw!r} must be a JSON object")
    for key in raw:
        if key not in ALLOWED_PARAMETERS:
            raise ValueError(f"parameters.{key}: not supported; allowed: {', '.join(ALLOWED_PARAMETERS)}")

    params: dict[str, Any] = {}
    params["max_new_tokens"] = _bounded(
        "max_new_tokens", raw.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS), int, 1, max_new_tokens_cap
    )
    if "min_new_tokens" in raw:
        params["min_new_tokens"] = _bounded("min_new_tokens", raw["min_new_tokens"], int, 0, params["max_new_tokens"])
    sampling = {}
    if "temperature" in raw:
        sampling["temperature"] = float(_bounded("temperature", raw["temperature"], float, 0, 5, low_open=True))
    if "top_p" in raw:
        sampling["top_p"] = float(_bounded("top_p", raw["top_p"], float, 0, 1, low_open=True))
    if "top_k" in raw:
        sampling["top_k"] = _bounded("top_k", raw["top_k"], int, 0, None)
    # Setting a sampling knob means sampling, unless do_sample says otherwise (then the knobs are dropped).
    do_sample = _flag("do_sample", raw["do_sample"]) if "do_sample" in raw else bool(sampling)
    params["do_sample"] = do_sample
    if do_sample:
        params.update(sampling)
    if "repetition_penalty" in raw:
        params["repetition_penalty"] = float(
            _bounded("repetition_penalty", raw["repetition_penalty"], float, 0, 10, low_open=True)
        )
    params["return_full_text"] = _flag("return_full_text", raw.get("return_full_text", False))
    if "seed" in raw:
        params["seed"] = _bounded("seed", raw["seed"], int, 0, 2**63 - 1)
    return prompts, params


# ---- the toolkit's four functions ---------------------------------------------------------------------


def model_fn(model_dir: str, context: Any = None) -> dict:
    """Load once per worker. dtype and weights format come from the artifact's manifest.json."""
    return load_model(model_dir)


# ---- the body: bytes or str -> JSON value ---------------------------------------------------------------
# Python's json accepts more than a request may carry. Lone UTF-16 surrogates ("\ud800" decodes to a str the
# tokenizer refuses with a TypeError) and nesting deep enough to exhaust the recursion limit (RecursionError)
# made model_build's server answer 500 and the toolkit 400 with Python's internal message; NaN passes every
# bound check and reached generate(). RFC 8259 section 6 leaves NaN/Infinity out of the grammar, section 9 lets a parser limit nesting depth
# and the range of numbers, and section 8.2 says unpaired surrogates make the receiver's behaviour
# unpredictable (https://www.rfc-editor.org/rfc/rfc8259). The checks live here, not in a shared module,
# because this file ships alone as the artifact's code/inference.py.
MAX_JSON_DEPTH = 32  # a request needs 2 levels (body -> parameters)
MAX_INT_DIGITS = 40  # the largest integer a request takes is a seed <= 2**63 - 1 (19 digits)
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # json.loads joins escaped pairs; what is left is unpaired
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate can come from in the JSON text


class _Refused(ValueError):
    """Raised by the json.loads hooks: the message is complete."""


def _reject_constant(name: str) -> Any:
    raise _Refused(f"request body is not valid JSON: {name} is not allowed (numbers must be finite, RFC 8259)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:21] + "..."
        raise _Refused(f"request body has the number {shown}, which is out of range: numbers must fit a 64-bit float")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"request body has an integer of {digits} digits; the limit is {MAX_INT_DIGITS} digits")
    return int(text)


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
        where = f"a key of {_where(chain) or 'the request body'}" if is_key else (_where(chain) or "request body")
        raise ValueError(
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
            raise ValueError(
                f"{_where(chain) or 'request body'}: arrays and objects are nested more than {MAX_JSON_DEPTH} "
                f"levels deep; the limit is {MAX_JSON_DEPTH}"
            )
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(key, str):
                _refuse_lone_surrogate(key, chain, is_key=True)
            if isinstance(item, (str, dict, list)):
                queue.append((item, (chain, key), depth + 1))


def decode_json(text: str) -> Any:
    """Strict json.loads; ValueError naming what is wrong."""
    if not text.strip():
        raise ValueError('request body is empty; send a JSON object with "inputs"')
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except _Refused:
        raise
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"request body is not valid JSON: {err}") from None
    except RecursionError:  # the decoder's own depth guard, far above MAX_JSON_DEPTH
        raise ValueError(
            f"request body: arrays and objects are nested more than {MAX_JSON_DEPTH} levels deep; "
            f"the limit is {MAX_JSON_DEPTH}"
        ) from None
    check_json_tree(value, text)
    return value


def input_fn(input_data: bytes | str, content_type: str | None, context: Any = None) -> Any:
    """Decode the request body: JSON, or text/plain as a single prompt with default parameters. The inference
    toolkit hands over str for application/json (handler_service.handle decodes its UTF8_TYPES, application/json
    and text/csv, before calling this); bytes otherwise, and model_build's server always hands bytes."""
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if isinstance(input_data, (bytes, bytearray)):
        try:
            text = bytes(input_data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"request body is not UTF-8 text: {err.reason} at byte {err.start}") from None
    else:
        text = input_data
    if media == "application/json":
        return decode_json(text)
    if media == "text/plain":
        _refuse_lone_surrogate(text, None)
        return {"inputs": text}
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
