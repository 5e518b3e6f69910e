"""The sglang system (the AWS SGLang DLC of systems/images_current.py): its environment through the entrypoint's own
loop (run by bash) to the flags the pinned SGLang accepts, the artifact served on a CPU stand-in, and the rules only
SGLang has. The build of every tiny architecture and the shared compatibility checks are in test_system_vllm.py."""

from __future__ import annotations

import re

import pytest
from engine_configs import build, endpoint_yaml, load, refusals
from engine_stand_in import StandIn, flags_of, serving, sglang_argv

from systems.engine_tables import CLI_FLAGS
from systems.images_current import SGLANG_ENGINE

FULL_ENGINE = {
    "context_length": 512,
    "max_running_requests": 32,
    "mem_fraction_static": 0.85,
    "max_prefill_tokens": 4096,
    "chunked_prefill_size": 1024,
    "enable_prefix_caching": False,
    "kv_cache_dtype": "fp8_e4m3",
    "ep_size": 2,
    "tool_call_parser": "qwen25",
    "reasoning_parser": "qwen3",
    "speculative": {"algorithm": "NGRAM", "num_draft_tokens": 4},
    "enable_lora": True,
    "max_loras_per_batch": 2,
    "max_loaded_loras": 4,
    "max_lora_rank": 16,
    "lora_target_modules": "all",
    "chat_template": "/opt/ml/model/templates/a b=c.jinja",
}


def test_registered_with_its_image_ami_and_capabilities():
    from systems import REGISTRY, get_system
    from systems.images_current import SGLANG_DLC

    system = get_system("sglang")
    assert REGISTRY["sglang"] == "systems.sglang" and system.image is SGLANG_DLC and system.gpu_only
    assert system.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert system.streaming.supported and system.inference_components.supported and system.network_isolation
    assert system.streamed_weights is None  # the image's Run:ai S3 backend is unverified (systems/sglang/__init__.py)
    assert {"enable_lora", "max_loras_per_batch", "max_loaded_loras", "max_lora_rank"} <= set(
        system.engine_options.model_fields
    )


def test_environment_reaches_sglang_through_the_entrypoints_loop(tmp_path, tiny_chat_models):
    """bash reads `env` line by line with IFS='=': a value keeps its spaces and later '=' signs."""
    source = tiny_chat_models["qwen3_moe"]
    plan = load(
        tmp_path, endpoint_yaml("full", "sglang", str(source), "ml.g6e.12xlarge", tp=2, engine=FULL_ENGINE)
    ).plans[0]
    flags = flags_of(sglang_argv(plan.container_environment("bucket"), source))
    assert set(flags) - CLI_FLAGS[SGLANG_ENGINE] == set(), f"a flag {SGLANG_ENGINE} does not have"
    assert flags == {
        "--chat-template": "/opt/ml/model/templates/a b=c.jinja",
        "--chunked-prefill-size": "1024",
        "--context-length": "512",
        "--disable-radix-cache": True,
        "--dtype": "bfloat16",
        "--enable-lora": True,
        "--enable-metrics": True,  # engine_metrics.detailed_observability (on by default): /metrics for SageMaker
        "--ep-size": "2",
        "--host": "0.0.0.0",
        "--kv-cache-dtype": "fp8_e4m3",
        "--lora-target-modules": "all",
        "--max-loaded-loras": "4",
        "--max-lora-rank": "16",
        "--max-loras-per-batch": "2",
        "--max-prefill-tokens": "4096",
        "--max-running-requests": "32",
        "--mem-fraction-static": "0.85",
        "--model-path": str(source),
        "--port": "8080",
        "--reasoning-parser": "qwen3",
        "--served-model-name": "full",
        "--speculative-algorithm": "NGRAM",
        "--speculative-num-draft-tokens": "4",
        "--tool-call-parser": "qwen25",
        "--tp-size": "2",
    }
    assert plan.network_isolation and plan.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"


def test_artifact_serves_openai_chat_on_the_stand_in(tmp_path, tiny_chat_models):
    """Built as sglang (a mixture of experts), served from the container's --model-path default: an OpenAI chat
    body on /invocations and /v1/chat/completions; the project's {"inputs"} body is refused."""
    import httpx
    import openai

    plan, _, out = build(tmp_path, endpoint_yaml("tiny-sglang", "sglang", str(tiny_chat_models["mixtral"])), "served")
    flags = flags_of(sglang_argv(plan.container_environment("bucket"), out))
    assert flags["--model-path"] == str(out)
    with serving(StandIn(flags, "sglang-http")) as url:
        reply = openai.OpenAI(base_url=f"{url}/v1", api_key="unused").chat.completions.create(
            model="tiny-sglang", max_tokens=3, messages=[{"role": "user", "content": "Hi"}]
        )
        assert reply.usage.completion_tokens == 3
        invoked = httpx.post(
            f"{url}/invocations", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
        )
        assert invoked.json()["choices"][0]["message"]["content"] == reply.choices[0].message.content
        # FastAPI refuses a body that is not a ChatCompletionRequest with 422 (http_server.py's /invocations)
        assert httpx.post(f"{url}/invocations", json={"inputs": "Hi"}).status_code == 422


def test_default_memory_share_is_an_upper_bound_of_sglangs_rule():
    """srt/arg_groups/memory_hook.py: (GPU memory - reserved) / GPU memory, reserving at least 1536 MiB + tp/8 GiB."""
    from systems.sglang import default_memory_fraction

    assert default_memory_fraction(96.0, 1) == round((98304 - 1536 - 128) / 98304, 3) == 0.983
    assert default_memory_fraction(44.703125, 4) == round((45776 - 1536 - 512) / 45776, 3)


@pytest.mark.parametrize(
    ("engine", "tp", "expected"),
    [
        ({"tp_size": 4}, 2, r"engine.tp_size: value 4 differs from tensor_parallel_degree 2"),
        (
            {"max_batch_size": 8},
            2,
            r"engine.max_batch_size: .*SGLang's name for concurrent requests is max_running_requests",
        ),
        (
            {"mem_fraction_static": 0.6},
            2,
            r"28.4 GiB of weights .* more than the 26.8 GiB the engine fills of each 44.7 "
            r"GiB NVIDIA L40S .*\(engine.mem_fraction_static",
        ),
        ({"context_length": 65536}, 2, r"engine.context_length: value 65536 is beyond the 40960 positions"),
        (
            {"ep_size": 4},
            2,
            r"engine.ep_size: value 4 must be 1 or equal the tensor parallel size, tensor_parallel_degree 2",
        ),
    ],
)
def test_sglang_refusals(tmp_path, engine, tp, expected):
    text = refusals(
        tmp_path, endpoint_yaml("x", "sglang", "Qwen/Qwen3-30B-A3B", "ml.g6e.12xlarge", tp=tp, engine=engine)
    )
    assert re.search(expected, text), text


def test_sglang_accepts_what_fits(tmp_path):
    environment_plan = load(
        tmp_path,
        endpoint_yaml(
            "a", "sglang", "Qwen/Qwen3-30B-A3B", "ml.g6e.12xlarge", tp=2, engine={"mem_fraction_static": 0.7}
        ),
        endpoint_yaml("b", "sglang", "Qwen/Qwen3-30B-A3B", "ml.g6e.12xlarge", tp=4, engine={"tp_size": 4}),
    )
    assert [p.container_environment("b")["SM_SGLANG_TP_SIZE"] for p in environment_plan.plans] == ["2", "4"]
