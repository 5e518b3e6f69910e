"""Every request the contract accepts is served or refused with a 4xx and a message, never a 5xx.

A table of edge values, derived from request_contract.PARAMETERS so a widened bound is tested at its new edge: the
smallest and largest accepted value of every parameter, each with sampling on and off, all edges at once, num_beams
with sampling, min_new_tokens = max_new_tokens, the seed extremes, return_full_text, prompts at the character limit
and batches at the batch limit. Each request goes over HTTP to the real handlers on tiny models:
  hf-fastload     the artifact's code/inference.py behind local_runtime/serve.py's container-contract server
  deepspeed-byoc  DeepSpeedHandler on its non-injected path (CPU) behind byoc_server
  tensorrt-byoc   TensorRTHandler on ONNX Runtime behind byoc_server
The limits are the endpoint's environment (request_contract.limits(), read per request): MAX_NEW_TOKENS is kept
small so that generations fit the tiny models' contexts and run to the sampling code; the long-prompt cases use the
default character limit too, where the models' contexts refuse them (a 4xx)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from helpers import running

import request_contract

# slow: every accepted request served by the built handlers (make test-fast leaves them out)
pytestmark = pytest.mark.slow

MAX_NEW_TOKENS = 12  # the endpoint limit for these tests: prompt + new tokens fit every tiny model's context
SHORT_CHARS = 40  # a character limit whose prompts fit the TensorRT profile (max_sequence_length 42) with the above
SAMPLING_KNOBS = ("temperature", "top_p", "top_k")
GREEDY_READS = ("repetition_penalty", "num_beams", "min_new_tokens", "max_new_tokens")  # sent with do_sample false too


class Case(NamedTuple):
    name: str
    body: dict[str, Any]
    env: dict[str, str]  # the endpoint's limits for this request
    served: bool  # True: every server must generate (200); False: a 4xx with a message is also right


def accepted_edges(name: str, spec: request_contract.Parameter, limits: request_contract.Limits) -> list[Any]:
    """The smallest and the largest value the contract accepts for one parameter."""
    if spec.kind == "boolean":
        return [False, True]
    high = getattr(limits, spec.high) if isinstance(spec.high, str) else spec.high
    low = spec.low
    if spec.low_open:  # the first value above an excluded bound
        low = low + 1 if spec.kind == "integer" else math.nextafter(low, math.inf)
    return [low, high]


def cases() -> list[Case]:
    env = {"MAX_NEW_TOKENS": str(MAX_NEW_TOKENS), "MAX_INPUT_CHARS": str(SHORT_CHARS)}
    limits = request_contract.limits(env)
    two = ["The quick brown fox", "Hello"]
    table: list[Case] = []
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    for name, spec in request_contract.PARAMETERS.items():
        low, high = accepted_edges(name, spec, limits)
        lows[name], highs[name] = low, high
        for value in (low, high):
            # with sampling, where the values divide and filter the logits; greedy too for what greedy reads
            for sample in (True, False) if name in GREEDY_READS else (True,):
                params: dict[str, Any] = {name: value}
                if name != "do_sample":
                    params["do_sample"] = sample
                if name == "min_new_tokens":
                    params["max_new_tokens"] = limits.max_new_tokens  # min_new_tokens = max_new_tokens at the top
                beams = params.get("num_beams", 1) > 1  # tensorrt-byoc offers num_beams 1 only (a 400)
                label = ",".join(f"{k}={v!r}" for k, v in params.items())
                table.append(Case(label, {"inputs": two, "parameters": params}, env, served=not beams))
    for edge, values in (("lowest", lows), ("highest", highs)):
        params = {k: v for k, v in values.items() if k not in ("do_sample", "num_beams")}
        params.update(do_sample=True, min_new_tokens=min(params["min_new_tokens"], params["max_new_tokens"]))
        table.append(
            Case(
                f"every parameter at its {edge} accepted value, sampling",
                {"inputs": two, "parameters": params},
                env,
                served=True,
            )
        )
    table.append(
        Case(
            "num_beams at its limit with sampling and the sampling knobs",
            {
                "inputs": two,
                "parameters": {
                    "num_beams": highs["num_beams"],
                    "do_sample": True,
                    **{k: lows[k] for k in SAMPLING_KNOBS},
                },
            },
            env,
            served=False,
        )
    )
    # prompts at the character limit, batches at the batch limit: within the contexts, and at the default limits
    short = ("a b c " * SHORT_CHARS)[:SHORT_CHARS]
    batch = limits.max_batch_size
    table.append(
        Case(
            "a batch at the limit of prompts at the character limit",
            {"inputs": [short] * batch, "parameters": {"max_new_tokens": 2}},
            env,
            served=True,
        )
    )
    defaults = request_contract.limits({})
    long = ("The quick brown fox jumps over the lazy dog. " * 1000)[: defaults.max_input_chars]
    emoji = "\U0001f600" * defaults.max_input_chars  # characters, not bytes: 4 bytes of UTF-8 each
    for label, prompt in (("ASCII", long), ("emoji", emoji)):
        table.append(
            Case(
                f"default limits: a batch at the limit of {label} prompts at the character limit",
                {"inputs": [prompt] * defaults.max_batch_size, "parameters": {"max_new_tokens": 1}},
                {},
                served=False,
            )
        )
    return table


CASES = cases()


# ------------------------------------------------------------------------------------------------ the servers


def _config(tmp_path: Path, models: dict[str, Path]) -> Path:
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        "endpoints:\n"
        f"  - {{name: tiny-ds, system: deepspeed-byoc, model: {models['gptj']}, instance_type: ml.g5.2xlarge, "
        "max_shard_size: 300KB}\n"
        f"  - {{name: tiny-trt, system: tensorrt-byoc, model: {models['gpt2']}, instance_type: ml.g4dn.xlarge}}\n"
    )
    return path


@pytest.fixture(scope="module")
def servers(tmp_path_factory, tiny_models: dict[str, Path], gpt2_artifact: Path) -> Iterator[dict[str, str]]:
    """{system: its /invocations URL}, all three serving at once."""
    import torch

    from deployment import load_config
    from local_runtime.serve import create_app as local_server
    from model_build.cli import build_endpoint
    from systems.byoc_server.app import create_app as byoc_server
    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("accepted-requests")
    environment_plan = load_config(_config(root, tiny_models))
    for name in ("tiny-ds", "tiny-trt"):
        build_endpoint(environment_plan.endpoint(name), root / name, progress=False)
    with (
        running(local_server(gpt2_artifact, endpoint_name="tiny-gpt2"), timeout=60) as hf,
        running(byoc_server(DeepSpeedHandler(), root / "tiny-ds", load_in_background=False), timeout=60) as ds,
        running(
            byoc_server(TensorRTHandler(backend="onnxruntime"), root / "tiny-trt", load_in_background=False), timeout=60
        ) as trt,
    ):
        yield {
            "hf-fastload": f"{hf}/invocations",
            "deepspeed-byoc": f"{ds}/invocations",
            "tensorrt-byoc": f"{trt}/invocations",
        }


# ------------------------------------------------------------------------------------------------ the table


def test_the_table_reaches_every_edge_of_the_contract():
    """Derived from PARAMETERS: each parameter's smallest and largest accepted value is sent; the low edges are
    the ones that used to crash (temperature and repetition_penalty divide the logits)."""
    sent = {name: set() for name in request_contract.PARAMETERS}
    for case in CASES:
        for name, value in case.body.get("parameters", {}).items():
            sent[name].add(value)
    limits = request_contract.limits({"MAX_NEW_TOKENS": str(MAX_NEW_TOKENS)})
    for name, spec in request_contract.PARAMETERS.items():
        assert set(accepted_edges(name, spec, limits)) <= sent[name], name
        for value in accepted_edges(name, spec, limits):  # accepted, not refused by the contract itself
            request_contract.validate_request({"inputs": "x", "parameters": {name: value}}, limits)
    assert 0.01 in sent["temperature"] and 0.1 in sent["repetition_penalty"] and 5e-324 in sent["top_p"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_accepted_request_is_served_or_refused_with_a_4xx_never_a_5xx(servers, case: Case, monkeypatch):
    for key in request_contract.LIMIT_ENV:
        monkeypatch.delenv(key, raising=False)
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    answers = {}
    for system, url in servers.items():
        reply = httpx.post(
            url, content=json.dumps(case.body), headers={"Content-Type": "application/json"}, timeout=120
        )
        answers[system] = (reply.status_code, reply.text[:300])
        assert reply.status_code < 500, f"{system} answered {reply.status_code}: {reply.text[:500]}"
        if reply.status_code == 200:
            generated = reply.json()
            assert isinstance(generated, list) and len(generated) == len(case.body["inputs"]), (system, generated)
            assert all(isinstance(item["generated_text"], str) for item in generated), (system, generated)
        else:
            assert 400 <= reply.status_code < 500 and reply.json()["error"], (system, reply.text[:500])
    if case.served:
        assert all(status == 200 for status, _ in answers.values()), answers
