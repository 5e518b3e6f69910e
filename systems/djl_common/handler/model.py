"""Custom DJL Serving handler (`model.py`) for the djl-deepspeed and djl-accelerate systems, shipped in the
artifact when `engine.custom_handler: true` (serving.properties then names `option.entryPoint=model.py`).

DJL calls `handle(inputs)` once with an empty input at start (the model loads then) and once per request
batch after. Loading follows the engine in serving.properties (passed as properties without `option.`):
  engine DeepSpeed: transformers model + deepspeed.init_inference(tensor parallel, kernel injection);
  engine Python:    transformers with accelerate's device_map="auto" across the worker's GPUs;
  no GPU (tests):   plain transformers on CPU in fp32.
Request: {"inputs": str | [str], "parameters": {max_new_tokens, temperature, top_p, top_k, do_sample,
repetition_penalty}} -> [{"generated_text": continuation}] per input. Bad requests get HTTP 400 with a message
naming the parameter, the value and the limit. Only stdlib + torch + transformers (+ deepspeed on GPU).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from djl_python import Input, Output

LIMITS = {  # name: (type, low, low exclusive, high)
    "max_new_tokens": (int, 1, False, int(os.environ.get("DJL_MAX_NEW_TOKENS", "1024"))),
    "temperature": (float, 0.0, True, 5.0),
    "top_p": (float, 0.0, True, 1.0),
    "top_k": (int, 0, False, 1000),
    "repetition_penalty": (float, 0.0, True, 10.0),
}
MAX_INPUTS = 16
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}

_model: dict[str, Any] = {}


def load(properties: dict[str, str]) -> dict[str, Any]:
    import torch
    import transformers

    model_dir = properties.get("model_id") or properties.get("model_dir") or "/opt/ml/model"
    cuda = torch.cuda.is_available()
    dtype = getattr(torch, DTYPES[properties.get("dtype", "fp16")]) if cuda else torch.float32
    tp = int(properties.get("tensor_parallel_degree", "1"))
    engine = properties.get("engine", "Python")
    dtype_kw = {"dtype": dtype} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": dtype}
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if cuda and engine == "DeepSpeed":
        import deepspeed

        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, low_cpu_mem_usage=True, **dtype_kw)
        model = deepspeed.init_inference(
            model, tensor_parallel={"tp_size": tp}, dtype=dtype, replace_with_kernel_inject=True
        ).module
    elif cuda:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, device_map="auto", **dtype_kw)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **dtype_kw)
    logging.info("loaded %s (engine %s, tp %d, %s)", model_dir, engine, tp, dtype)
    return {"model": model.eval(), "tokenizer": tokenizer, "device": next(model.parameters()).device}


def parse_request(data: Any) -> tuple[list[str], dict[str, Any]]:
    if not isinstance(data, dict) or "inputs" not in data:
        raise ValueError('request must be a JSON object with "inputs" (a string or a list of strings)')
    prompts = [data["inputs"]] if isinstance(data["inputs"], str) else data["inputs"]
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError("inputs: must be a non-empty string or a list of non-empty strings")
    if len(prompts) > MAX_INPUTS:
        raise ValueError(f"inputs: {len(prompts)} prompts given; allowed: 1 to {MAX_INPUTS}")
    raw = data.get("parameters") or {}
    if not isinstance(raw, dict):
        raise ValueError("parameters: must be a JSON object")
    params: dict[str, Any] = {"max_new_tokens": 64}
    for key, value in raw.items():
        if key == "do_sample":
            if not isinstance(value, bool):
                raise ValueError(f"parameters.do_sample: value {value!r} must be true or false")
            params[key] = value
            continue
        if key not in LIMITS:
            raise ValueError(f"parameters.{key}: not supported; allowed: do_sample, {', '.join(LIMITS)}")
        kind, low, low_open, high = LIMITS[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            raise ValueError(f"parameters.{key}: value {value!r} must be {'an integer' if kind is int else 'a number'}")
        if value < low or (low_open and value == low) or value > high:
            raise ValueError(
                f"parameters.{key}: value {value!r} is out of range; allowed: {'>' if low_open else '>='} {low} and <= {high}"
            )
        params[key] = kind(value)
    params.setdefault("do_sample", any(k in params for k in ("temperature", "top_p", "top_k")))
    return prompts, params


def generate(model: dict[str, Any], prompts: list[str], params: dict[str, Any]) -> list[dict[str, str]]:
    import torch

    tokenizer = model["tokenizer"]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(model["device"])
    with torch.inference_mode():
        out = model["model"].generate(**encoded, **params, pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    return [{"generated_text": t} for t in texts]


def handle(inputs: Input) -> Output | None:
    if not _model:
        _model.update(load(inputs.get_properties()))
    if inputs.is_empty():  # the server's warm-up call at start: the model is loaded, nothing to answer
        return None
    try:
        prompts, params = parse_request(inputs.get_as_json())
    except ValueError as err:
        out = Output()
        out.set_code(400)
        out.set_message(str(err))
        return out.add_as_json({"error": str(err)})
    return Output().add_as_json(generate(_model, prompts, params))
