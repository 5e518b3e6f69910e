"""Custom DJL Serving handler (`model.py`) for the djl-deepspeed and djl-accelerate systems, shipped in the
artifact when `engine.custom_handler: true` (serving.properties then names `option.entryPoint=model.py`).

DJL calls `handle(inputs)` once with an empty input at start (the model loads then) and once per request
batch after. Loading follows the engine in serving.properties (passed as properties without `option.`):
  engine DeepSpeed: transformers model + deepspeed.init_inference(tensor parallel, kernel injection);
  engine Python:    transformers with accelerate's device_map="auto" across the worker's GPUs;
  no GPU (tests):   plain transformers on CPU in fp32.
Request: request_contract.py's (shipped beside this file; {"inputs": str | [str], "parameters": {...}}) ->
[{"generated_text": continuation}] per input. Bad requests get HTTP 400 and request_contract.error_body (the
message names the parameter, the value and the limit). Only stdlib + torch + transformers (+ deepspeed on GPU).
"""

from __future__ import annotations

import logging
from typing import Any

from djl_python import Input, Output

# Beside this file in the artifact (systems/djl_common/build.py copies it): DJL imports model.py as
# `importlib.import_module("model")` from the model directory (djl-serving engines/python/setup/djl_python/
# service_loader.py, load_model_service), so its siblings import alike.
import request_contract

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
    """request_contract's check; returns (prompts, generate's parameters: do_sample on when a sampling knob is
    set, unless do_sample says otherwise; return_full_text and seed are the handler's). Raises RequestError."""
    prompts, params = request_contract.validate_request(data)
    sampling = ("temperature", "top_p", "top_k")
    params.setdefault("do_sample", any(k in params for k in sampling))
    if not params["do_sample"]:
        for key in sampling:
            params.pop(key, None)
    return prompts, params


def generate(model: dict[str, Any], prompts: list[str], params: dict[str, Any]) -> list[dict[str, str]]:
    import torch

    tokenizer = model["tokenizer"]
    params = dict(params)
    full_text, seed = params.pop("return_full_text", False), params.pop("seed", None)
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(model["device"])
    with torch.inference_mode():
        if seed is not None:
            torch.manual_seed(seed)
        out = model["model"].generate(**encoded, **params, pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    return [{"generated_text": p + t if full_text else t} for p, t in zip(prompts, texts)]


def handle(inputs: Input) -> Output | None:
    if not _model:
        _model.update(load(inputs.get_properties()))
    if inputs.is_empty():  # the server's warm-up call at start: the model is loaded, nothing to answer
        return None
    try:
        # The raw body, decoded strictly (request_contract.decode_body), not Input.get_as_json's plain json.loads
        # (djl-serving engines/python/setup/djl_python/inputs.py: get_as_bytes returns the body, get_as_json is
        # json.loads of it).
        prompts, params = parse_request(request_contract.decode_body(inputs.get_as_bytes()))
    except request_contract.RequestError as err:
        out = Output()
        out.set_code(err.status)
        out.set_message(err.message)
        return out.add_as_json(request_contract.error_body(err))
    return Output().add_as_json(generate(_model, prompts, params))
