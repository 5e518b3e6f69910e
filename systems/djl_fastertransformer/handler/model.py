"""DJL Serving handler (`model.py`) of the djl-fastertransformer system; model_build copies it to the
artifact's code/ folder, and serving.properties names it (option.entryPoint=model.py).

`handle(inputs)`: the first, empty call loads the model; every later call is one request_contract.py request,
translated to FasterTransformer's arguments (transformers `generate` where fastertransformer does not import),
-> {"outputs": [str, ...]}; an invalid request gets 400. The argument mapping and its sources: docs/design/engines.md.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

from djl_python import Input, Output

# Beside this file in the artifact's code/ (the recipe copies it): DJL imports model.py as
# `importlib.import_module("model")` from the model directory (djl-serving engines/python/setup/djl_python/
# service_loader.py, load_model_service), so its siblings import alike.
import request_contract

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
# The keyword arguments each FasterTransformer model's generate() accepts beyond the lengths and beams
# (docs/design/engines.md): random_seed for all, min_length for T5 and GPTModel (BLOOM inherits it), not OPT or GPT-NeoX.
SAMPLING = ("temperature", "top_k", "top_p", "repetition_penalty", "random_seed", "min_length")
SAMPLING_BY_MODEL_TYPE: dict[str, tuple[str, ...]] = {
    "t5": SAMPLING,
    "gpt2": SAMPLING,
    "opt": ("temperature", "top_k", "top_p", "repetition_penalty", "random_seed"),
    "gpt_neox": ("temperature", "top_k", "top_p", "repetition_penalty", "random_seed"),
    "bloom": SAMPLING,  # BLOOMModel inherits GPTModel.generate
}
# request_contract's parameter -> FasterTransformer's
FT_NAMES = {
    "max_new_tokens": "max_seq_len",
    "num_beams": "beam_width",
    "seed": "random_seed",
    "min_new_tokens": "min_length",
}
# What this handler serves with FasterTransformer: the engine=FasterTransformer (non-Triton) model types of DJL
# 0.24 (0.24.0-dlc wlm/src/main/java/ai/djl/serving/wlm/LmiUtils.java FASTERTRANSFORMER_MODELS). The package
# also knows gptj, but only in Triton mode: its GPTJModel.initialize raises NotImplementedError("Not supported
# under python mode") (gptjmodel.py), and LmiUtils sends gptj to engine=Python + Triton instead.
MODEL_TYPES = tuple(SAMPLING_BY_MODEL_TYPE)

_model: dict[str, Any] = {}


RequestError = request_contract.RequestError  # the client's fault: answered with HTTP 400


def model_location(properties: dict[str, str]) -> str:
    location = properties.get("model_id") or properties.get("s3url") or properties.get("model_dir")
    if not location:
        raise RuntimeError("no model location: set option.model_id (OPTION_MODEL_ID) to the weights' S3 prefix")
    return location


def load(properties: dict[str, str]) -> dict[str, Any]:
    location = model_location(properties)
    dtype = properties.get("dtype", "fp16")
    if dtype not in DTYPES:
        raise RuntimeError(f"option.dtype {dtype!r} is not supported; allowed: {', '.join(DTYPES)}")
    tp = int(properties.get("tensor_parallel_degree", "1"))
    model_type = read_model_type(location)
    if model_type not in MODEL_TYPES:
        raise RuntimeError(
            f"{location}/config.json: model_type {model_type!r} is not served by this handler; allowed: "
            f"{', '.join(MODEL_TYPES)}"
        )
    ft = fastertransformer_module()
    if ft is not None:
        logging.info("FasterTransformer: loading %s (%s), tensor parallel %d, %s", location, model_type, tp, dtype)
        model = ft.init_inference(location, tp, 1, dtype)  # (model, tensor_parallel_degree, pipeline_degree, dtype)
        return {"engine": "fastertransformer", "model": model, "model_type": model_type}
    return load_transformers(location, dtype)


def fastertransformer_module() -> Any:
    """The image's `fastertransformer` package, or None where it is not installed (CPU, tests)."""
    if importlib.util.find_spec("fastertransformer") is None:
        return None
    import fastertransformer

    return fastertransformer


def read_model_type(location: str) -> str | None:
    import json
    from pathlib import Path

    return json.loads((Path(location) / "config.json").read_text()).get("model_type")


def load_transformers(location: str, dtype: str) -> dict[str, Any]:
    """The CPU fallback (and what model_build's verification uses): fp32 on CPU, `dtype` on a GPU."""
    import json
    from pathlib import Path

    import torch
    import transformers

    config = json.loads((Path(location) / "config.json").read_text())
    encoder_decoder = bool(config.get("is_encoder_decoder"))
    cls = transformers.AutoModelForSeq2SeqLM if encoder_decoder else transformers.AutoModelForCausalLM
    cuda = torch.cuda.is_available()
    torch_dtype = getattr(torch, DTYPES[dtype]) if cuda else torch.float32
    kwargs = (
        {"dtype": torch_dtype} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": torch_dtype}
    )
    model = cls.from_pretrained(location, **kwargs).eval()
    if cuda:
        model = model.to("cuda")
    tokenizer = transformers.AutoTokenizer.from_pretrained(location)
    if not encoder_decoder:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    logging.info("transformers fallback: loaded %s (%s)", location, torch_dtype)
    return {
        "engine": "transformers",
        "model": model,
        "tokenizer": tokenizer,
        "encoder_decoder": encoder_decoder,
        "model_type": config.get("model_type"),
    }


def parse_request(data: Any) -> tuple[list[str], dict[str, Any]]:
    """request_contract's check, then FasterTransformer's names (FT_NAMES); RequestError names key, value, limit."""
    prompts, given = request_contract.validate_request(data)
    if given.get("do_sample") is False:  # greedy: FT's default top_k=1
        for key in ("temperature", "top_k", "top_p"):
            given.pop(key, None)
    given.pop("do_sample", None)
    params = {FT_NAMES.get(k, k): v for k, v in given.items()}
    params.setdefault("return_full_text", False)
    return prompts, params


def check_for_model(params: dict[str, Any], model_type: str) -> None:
    """Refuse a parameter the model's FasterTransformer generate() cannot take (RequestError: HTTP 400)."""
    allowed = SAMPLING_BY_MODEL_TYPE[model_type]
    contract_name = {v: k for k, v in FT_NAMES.items()}
    for key in params:
        if key in SAMPLING and key not in allowed:
            raise RequestError(
                f"parameters.{contract_name.get(key, key)}: not supported for model type {model_type!r} by "
                f"FasterTransformer; allowed: max_new_tokens, num_beams, "
                f"{', '.join(contract_name.get(k, k) for k in allowed)}"
            )


def ft_generate(ft_model: Any, model_type: str, prompts: list[str], params: dict[str, Any]) -> list[str]:
    """One FasterTransformer call in the shape `model_type`'s pipeline_generate takes (docs/design/engines.md)."""
    sampling = {k: v for k, v in params.items() if k in SAMPLING}
    beam_width = params.get("beam_width", 1)
    if model_type == "t5":
        # T5Model: max_seq_len is the decoder's output length; one text per input (its first beam).
        return list(
            ft_model.pipeline_generate(prompts, max_seq_len=params["max_seq_len"], beam_width=beam_width, **sampling)
        )
    # GPT-style models: one batch of all prompts (DJL's handler passes batch_size=len(inputs) too: the package's
    # batching loop pairs outputs with `inputs` from the start, right only for a single batch); output_len is the
    # number of new tokens. The result holds beam_width texts per input, input-major (gptmodel.py appends every
    # beam): keep each input's first beam. (Unverified: that FasterTransformer orders beams best first.)
    texts = list(
        ft_model.pipeline_generate(
            prompts, batch_size=len(prompts), output_len=params["max_seq_len"], beam_width=beam_width, **sampling
        )
    )
    if len(texts) != len(prompts) * beam_width:
        raise RuntimeError(
            f"FasterTransformer returned {len(texts)} texts for {len(prompts)} inputs x {beam_width} beams"
        )
    return texts[::beam_width]


def generate(model: dict[str, Any], prompts: list[str], params: dict[str, Any]) -> list[str]:
    params = dict(params)
    full_text = params.pop("return_full_text", False)
    if model["engine"] == "fastertransformer":
        texts = ft_generate(model["model"], model["model_type"], prompts, params)
    else:
        texts = _generate_transformers(model, prompts, params)
    return [p + t for p, t in zip(prompts, texts)] if full_text else texts


def _generate_transformers(model: dict[str, Any], prompts: list[str], params: dict[str, Any]) -> list[str]:
    """FasterTransformer's parameters in transformers terms: beam_width -> num_beams, min_length -> min_new_tokens,
    length_penalty; FT samples when top_k > 1, 0 < top_p < 1 or a temperature is given (greedy otherwise)."""
    import torch

    tokenizer, lm = model["tokenizer"], model["model"]
    kwargs: dict[str, Any] = {"max_new_tokens": params["max_seq_len"]}
    if "min_length" in params:
        kwargs["min_new_tokens"] = params["min_length"]
    beams = params.get("beam_width", 1)
    if beams > 1:
        kwargs["num_beams"] = beams
    top_k, top_p = params.get("top_k", 1), params.get("top_p", 0.0)
    sample = beams == 1 and (top_k > 1 or 0 < top_p < 1 or "temperature" in params)
    kwargs["do_sample"] = sample
    if sample:
        kwargs["top_k"] = top_k if top_k > 1 else 0  # 0: no top-k filter
        if 0 < top_p < 1:
            kwargs["top_p"] = top_p
        if "temperature" in params:
            kwargs["temperature"] = params["temperature"]
    if "repetition_penalty" in params:
        kwargs["repetition_penalty"] = params["repetition_penalty"]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(lm.device)
    with torch.inference_mode():
        if "random_seed" in params:
            torch.manual_seed(params["random_seed"])
        out = lm.generate(**encoded, **kwargs, pad_token_id=tokenizer.pad_token_id)
    if not model["encoder_decoder"]:
        out = out[:, encoded["input_ids"].shape[1] :]
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def handle(inputs: Input) -> Output | None:
    if not _model:
        _model.update(load(inputs.get_properties()))
    if inputs.is_empty():  # the server's warm-up call at worker start: the model is now loaded
        return None
    try:
        # The raw body, decoded strictly (request_contract.decode_body), not Input.get_as_json's plain json.loads
        # (djl-serving engines/python/setup/djl_python/inputs.py: get_as_bytes returns the body).
        prompts, params = parse_request(request_contract.decode_body(inputs.get_as_bytes()))
        check_for_model(params, _model["model_type"])
    except RequestError as err:
        out = Output()
        out.set_code(err.status)
        out.set_message("Bad Request")
        return out.add_as_json(request_contract.error_body(err))
    return Output().add_as_json({"outputs": generate(_model, prompts, params)})
