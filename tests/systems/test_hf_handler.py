"""The hf-fastload request handler, called directly: request parsing, parameters and their bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from systems.hf_fastload.handler import inference as handler


@pytest.fixture(scope="module")
def loaded(gpt2_artifact: Path) -> dict:
    return handler.model_fn(str(gpt2_artifact))


def generate(loaded: dict, inputs, **parameters) -> list[dict[str, str]]:
    return handler.predict_fn({"inputs": inputs, "parameters": parameters}, loaded)


def test_model_fn_follows_manifest_and_computes_in_fp32_on_cpu(loaded: dict) -> None:
    import torch

    assert not torch.cuda.is_available()  # these tests run on CPU
    assert loaded["storage_dtype"] == torch.float16  # the manifest's dtype, as stored
    assert loaded["model"].dtype == loaded["dtype"] == torch.float32  # widened: CPUs lack fast fp16 matmuls
    assert loaded["tokenizer"].padding_side == "left"
    assert loaded["context_length"] == 512
    assert loaded["decode"] == "eager" and loaded["generate_kwargs"] == {}  # the default decode path


def test_compute_dtype_rule(monkeypatch) -> None:
    import torch

    assert handler.compute_dtype(torch.float16, cuda=True) == torch.float16  # GPU: as stored
    assert handler.compute_dtype(torch.bfloat16, cuda=True) == torch.bfloat16
    monkeypatch.setattr(handler, "cpu_has_fast_bf16", lambda: False)
    assert handler.compute_dtype(torch.float16, cuda=False) == torch.float32
    assert handler.compute_dtype(torch.bfloat16, cuda=False) == torch.float32
    monkeypatch.setattr(handler, "cpu_has_fast_bf16", lambda: True)
    assert handler.compute_dtype(torch.bfloat16, cuda=False) == torch.bfloat16  # native bf16: no widening
    assert handler.compute_dtype(torch.float16, cuda=False) == torch.float32  # fp16 never computes as bf16
    assert handler.compute_dtype_rule("bf16") == {"gpu": "bf16", "cpu": "fp32", "cpu_native_bf16": "bf16"}
    assert handler.compute_dtype_rule("fp16") == {"gpu": "fp16", "cpu": "fp32"}


def test_static_cache_path_gives_the_eager_tokens(gpt2_artifact: Path, loaded: dict) -> None:
    """The fast decode path's greedy tokens equal the eager path's (batch of two, left padding). On CPU the
    static-cache path runs without torch.compile (transformers compiles only on CUDA by itself); the compiled
    path's tokens are compared on a GPU by `python -m bench --only gpu`."""
    fast = handler.load_model(gpt2_artifact, decode="static-cache")
    assert fast["decode"] == "static-cache" and fast["generate_kwargs"]["cache_implementation"] == "static"
    prompts = ["The quick brown fox", "Hello"]
    params = dict(max_new_tokens=8, min_new_tokens=8)
    assert generate(fast, prompts, **params) == generate(loaded, prompts, **params)


def test_decode_switch_is_read_from_the_environment(loaded: dict, monkeypatch) -> None:
    monkeypatch.setenv(handler.DECODE_ENV, "compiled")
    assert handler.decode_settings(loaded["model"]) == ("compiled", {"cache_implementation": "static"})
    monkeypatch.setenv(handler.DECODE_ENV, "fast")
    with pytest.raises(
        ValueError,
        match=r"HF_FASTLOAD_DECODE='fast' is not supported; allowed: eager, static-cache, "
        r"compiled",
    ):
        handler.decode_settings(loaded["model"])
    no_static = type("NoStatic", (), {"_supports_static_cache": False, "_can_compile_fullgraph": False})()
    assert handler.decode_settings(no_static, "compiled") == ("eager", {})  # unsupported: eager, not an error


def test_engine_decode_reaches_the_container_and_only_hf_fastload_takes_it() -> None:
    from endpoint_config.schema import EndpointSpec
    from systems import hf_fastload
    from systems.base import engine_problems
    from systems.deepspeed_byoc import DeepSpeedByocEngineOptions

    spec = dict(name="e", system="hf-fastload", model="gpt2", instance_type="ml.g5.xlarge")
    plain = EndpointSpec(**spec)
    assert hf_fastload.container_environment(plain, hf_fastload.SYSTEM.engine(plain))["HF_FASTLOAD_DECODE"] == "eager"
    fast = EndpointSpec(**spec, engine={"decode": "compiled"})
    decode = hf_fastload.container_environment(fast, hf_fastload.SYSTEM.engine(fast))["HF_FASTLOAD_DECODE"]
    assert decode == "compiled"
    other = EndpointSpec(**{**spec, "system": "deepspeed-byoc"}, engine={"decode": "compiled"})
    assert engine_problems(other, DeepSpeedByocEngineOptions) == [
        "endpoint 'e': engine.decode: value 'compiled' is not supported by system 'deepspeed-byoc'; remove the key"
    ]
    assert engine_problems(EndpointSpec(**spec, engine={"decode": "fast"}), hf_fastload.HfFastloadEngineOptions) == [
        "endpoint 'e': engine.decode: value 'fast' is not supported by system 'hf-fastload'; allowed: eager, "
        "static-cache, compiled (or leave it out)"
    ]


def test_greedy_is_deterministic_and_continuation_only(loaded: dict) -> None:
    first = generate(loaded, "The quick brown fox", max_new_tokens=6, min_new_tokens=6)
    assert first == generate(loaded, "The quick brown fox", max_new_tokens=6, min_new_tokens=6)
    text = first[0]["generated_text"]
    assert len(first) == 1 and isinstance(text, str) and text
    full = generate(loaded, "The quick brown fox", max_new_tokens=6, min_new_tokens=6, return_full_text=True)
    assert full[0]["generated_text"] == "The quick brown fox" + text


def test_new_token_count_follows_parameters(loaded: dict) -> None:
    tokenizer = loaded["tokenizer"]
    prompt_ids = tokenizer("Hello world")["input_ids"]
    out = handler.predict_fn(
        {"inputs": "Hello world", "parameters": {"max_new_tokens": 4, "min_new_tokens": 4}}, loaded
    )
    full = tokenizer("Hello world" + out[0]["generated_text"])["input_ids"]
    # byte-level BPE may merge differently across the boundary; the count is close, never larger
    assert 1 <= len(full) - len(prompt_ids) <= 4


def test_list_inputs_one_reply_each(loaded: dict) -> None:
    prompts = ["Hello", "The capital of France is", "Once upon a time there was"]
    replies = generate(loaded, prompts, max_new_tokens=3, return_full_text=True)
    assert len(replies) == 3
    for prompt, reply in zip(prompts, replies):
        assert reply["generated_text"].startswith(prompt)


def test_sampling_with_seed_is_reproducible(loaded: dict) -> None:
    params = dict(max_new_tokens=8, min_new_tokens=8, temperature=1.5, top_k=0, top_p=0.95, seed=7)
    assert generate(loaded, "Hello", **params) == generate(loaded, "Hello", **params)


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({"max_new_tokens": 0}, ["max_new_tokens", "got 0", "between 1 and"]),
        ({"max_new_tokens": handler.MAX_NEW_TOKENS_CAP + 1}, ["max_new_tokens", str(handler.MAX_NEW_TOKENS_CAP)]),
        ({"max_new_tokens": "ten"}, ["max_new_tokens", '"ten"', "integer"]),
        ({"max_new_tokens": True}, ["max_new_tokens", "true (boolean)", "integer"]),
        ({"max_new_tokens": 5, "min_new_tokens": 6}, ["min_new_tokens", "got 6", "at most max_new_tokens (5)"]),
        ({"temperature": 0}, ["temperature", "got 0", "between 0.01 and 2", "set do_sample false"]),
        ({"temperature": 5.5}, ["temperature", "5.5", "between 0.01 and 2"]),
        ({"top_p": 0.0}, ["top_p", "0.0", "greater than 0"]),
        ({"top_p": 1.5}, ["top_p", "1.5", "at most 1"]),
        ({"top_k": -1}, ["top_k", "-1", "between 0 and 1000"]),
        ({"repetition_penalty": 0}, ["repetition_penalty", "0", "between 0.1 and 10"]),
        ({"do_sample": "yes"}, ["do_sample", '"yes"', "true or false"]),
        ({"max_tokens": 5}, ["max_tokens", "unknown parameters", "max_new_tokens"]),
    ],
)
def test_parameter_bounds(loaded: dict, parameters: dict, expected: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        handler.predict_fn({"inputs": "Hello", "parameters": parameters}, loaded)
    for text in expected:
        assert text in str(err.value), str(err.value)


def test_prompt_plus_max_new_tokens_within_the_context(loaded: dict, monkeypatch) -> None:
    monkeypatch.setenv("MAX_NEW_TOKENS", "1024")  # the contract lets it through; the tiny model's context is 512
    with pytest.raises(ValueError, match="must be <= 512"):
        handler.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 600}}, loaded)


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [
        ({"prompt": "x"}, "unknown request keys ['prompt']"),
        ({"inputs": 5}, "inputs must be a non-empty string or a list"),
        ({"inputs": []}, "inputs must be a list of 1 to"),
        ({"inputs": ["ok", ""]}, "inputs[1] must be a non-empty string"),
        ({"inputs": ["x"] * (handler.MAX_BATCH_SIZE + 1)}, f"list of 1 to {handler.MAX_BATCH_SIZE} strings"),
        ({"inputs": "x", "parameters": [1]}, "parameters must be an object, got [1]"),
    ],
)
def test_request_shape_errors(loaded: dict, request_body: dict, expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        handler.predict_fn(request_body, loaded)


def test_sampling_knobs_switch_sampling_on_unless_told() -> None:
    _, params = handler.validate_request({"inputs": "x", "parameters": {"temperature": 0.7}})
    assert params["do_sample"] is True and params["temperature"] == 0.7
    _, params = handler.validate_request({"inputs": "x", "parameters": {"temperature": 0.7, "do_sample": False}})
    assert params["do_sample"] is False and "temperature" not in params
    _, params = handler.validate_request({"inputs": "x"})
    assert params == {"max_new_tokens": 64, "do_sample": False, "return_full_text": False}


def test_input_and_output_functions() -> None:
    body = json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 2}}).encode()
    assert handler.input_fn(body, "application/json; charset=utf-8")["inputs"] == "hi"
    assert handler.input_fn(b"plain prompt", "text/plain") == {"inputs": "plain prompt"}
    with pytest.raises(ValueError, match="not valid JSON"):
        handler.input_fn(b"{nope", "application/json")
    with pytest.raises(ValueError, match="'image/png' is not supported; allowed: application/json"):
        handler.input_fn(b"x", "image/png")
    assert json.loads(handler.output_fn([{"generated_text": "a"}], "application/json")) == [{"generated_text": "a"}]
    with pytest.raises(ValueError, match="'text/csv'"):
        handler.output_fn([], "text/csv")
