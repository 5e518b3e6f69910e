"""System tgi (systems/tgi): what only TGI has, from its sources (systems/tgi/__init__.py [ENTRY], [LAUNCH], [SM]).
What every system keeps (example, image, environment limits, timeouts, local run, synth) is in
tests/systems/test_system_contract.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers import config_refusal

from deployment import load_config
from systems import get_system

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "tgi.yaml"


def _config(tmp_path: Path, **changes: Any) -> Path:
    """The example with its endpoint's fields changed (engine: replaced whole)."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["endpoints"][0].update(changes)
    path = tmp_path / "tgi.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_environment_is_the_entrypoints_and_the_launchers_variables(tmp_path):
    """HF_MODEL_ID (the entrypoint exits without it) at the mounted artifact; SM_NUM_GPUS, which it turns into
    NUM_SHARD; the launcher's own variables; the quantization as HF_MODEL_QUANTIZE (-> QUANTIZE)."""
    engine = {"max_input_tokens": 1000, "max_total_tokens": 2000, "max_batch_prefill_tokens": 4096, "quantize": "awq"}
    [plan] = load_config(_config(tmp_path, engine=engine, tensor_parallel_degree=1), "dev").plans
    assert plan.container_environment("bucket") == {
        "DTYPE": "bfloat16",
        "HF_MODEL_ID": "/opt/ml/model",
        "HF_MODEL_QUANTIZE": "awq",
        "MAX_BATCH_PREFILL_TOKENS": "4096",
        "MAX_INPUT_TOKENS": "1000",
        "MAX_TOTAL_TOKENS": "2000",
        "SM_NUM_GPUS": "1",
    }


def test_the_image_is_the_huggingface_llm_table_s_newest_tgi():
    import sagemaker.core

    table = json.loads((Path(sagemaker.core.__file__).parent / "image_uri_config" / "huggingface-llm.json").read_text())
    versions = table["inference"]["versions"]
    newest = max(versions, key=lambda v: tuple(int(part) for part in v.split(".")))
    image = get_system("tgi").image
    assert image is not None and image.sdk_version == newest == "3.3.6"
    assert image.gpu_tag.startswith(versions[newest]["tag_prefix"])


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        (
            {"engine": {"max_input_tokens": 4096, "max_total_tokens": 4096}},
            "engine.max_input_tokens: value 4096 must be below engine.max_total_tokens (4096)",
        ),
        ({"engine": {"quantize": "int8"}}, "engine.quantize: value 'int8'"),
        ({"engine": {"max_model_len": 4096}}, "TGI's name for prompt + generated tokens is max_total_tokens"),
        (
            {"dtype": "fp32"},
            "dtype: value 'fp32' is not one of TGI's dtypes (launcher/src/main.rs enum Dtype); allowed",
        ),
    ],
)
def test_what_the_launcher_refuses_is_refused_at_load_naming_the_field(tmp_path, changes, fragment):
    message = config_refusal(_config(tmp_path, **changes))
    assert "endpoint 'llama31-8b-tgi'" in message and fragment in message, message


def test_max_total_tokens_is_the_context_the_length_rules_read(tmp_path):
    """TGI's prompt + generated tokens (max_total_tokens) is what the shared rules hold to the model's positions and
    to the SLO workload, named by its own key."""
    from helpers import write_hand_made_model

    model = write_hand_made_model(tmp_path / "model")  # config.json: 512 positions
    engine = {"max_input_tokens": 256, "max_total_tokens": 1024}
    message = config_refusal(_config(tmp_path, model=str(model), dtype="fp16", engine=engine))
    assert (
        f"engine.max_total_tokens: value 1024 is beyond the 512 positions of {str(model)!r} "
        "(config.json max_position_embeddings, no rope scaling); allowed: up to 512"
    ) in message, message
    slo = {
        "concurrency": 1,
        "max_error_rate": 0,
        "workload": {"input_tokens": {"mean": 6000}, "output_tokens": {"mean": 4000}},
    }
    message = config_refusal(_config(tmp_path, slo=slo))
    assert "= 10000 tokens a request, more than the 8192 the endpoint serves (engine.max_total_tokens)" in message, (
        message
    )


@pytest.fixture(scope="module")
def stand_in_url(tiny_chat_models: dict[str, Path]) -> Iterator[str]:
    """tgi's local stand-in (its LocalRun dialect) on a tiny model, in this process."""
    from local_runtime.stand_in import StandIn, serving

    dialect = get_system("tgi").local.dialect
    with serving(StandIn({"--model": str(tiny_chat_models["llama"])}, dialect)) as url:
        yield url


def test_the_stand_in_answers_tgis_invocations_bodies(stand_in_url):
    """[SM]: a generate body answers [{"generated_text"}] (compat_generate wraps it in a list); a chat body an OpenAI
    chat completion; both on /invocations, as the plan's bodies say the clients send them."""
    bodies = get_system("tgi").bodies
    assert bodies.prompt_kind == "generation" and bodies.chat
    generation = httpx.post(
        f"{stand_in_url}/invocations", json={"inputs": "Hello", "parameters": {"max_new_tokens": 3}}, timeout=120
    )
    assert generation.status_code == 200
    [reply] = generation.json()
    assert isinstance(reply["generated_text"], str)
    chat = httpx.post(
        f"{stand_in_url}/invocations", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
    )
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["role"] == "assistant"


def test_the_recipe_builds_the_checkpoints_own_files(tmp_path, tiny_chat_models):
    """The artifact TGI's launcher loads from HF_MODEL_ID=/opt/ml/model: the checkpoint's files, verified (a system
    without an engine profile skips only the engine-table checks)."""
    from engine_configs import build, endpoint_yaml

    model = str(tiny_chat_models["llama"])
    _, manifest, out = build(tmp_path, endpoint_yaml("tiny-tgi", "tgi", model, instance="ml.g5.xlarge"), "tiny-tgi")
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))
    assert manifest["system"] == "tgi"


def test_a_tokenizer_transformers_5_saved_is_rewritten_for_the_images_transformers_451(tmp_path, tiny_chat_models):
    """[TOK]: TGI's router loads the tokenizer with the image's transformers 4.51, which knows no TokenizersBackend,
    and reads the chat template from tokenizer_config.json, not chat_template.jinja: the build rewrites both (the
    rewrite_metadata_for_image facet; tests/systems/test_container_tokenizers.py loads the result under 4.51.0)."""
    import shutil

    from engine_configs import build, endpoint_yaml
    from helpers import CHAT_TEMPLATE, EXTRA_SPECIAL_TOKENS, save_tokenizer_with_transformers5

    source = tmp_path / "source"
    shutil.copytree(tiny_chat_models["llama"], source)
    save_tokenizer_with_transformers5(source)
    assert json.loads((source / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    _, manifest, out = build(tmp_path, endpoint_yaml("tiny-tgi", "tgi", str(source), instance="ml.g5.xlarge"), "tgi")
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["chat_template"] == CHAT_TEMPLATE
    assert set(EXTRA_SPECIAL_TOKENS) <= set(config["additional_special_tokens"])
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"  # transformers 4.x's key
    assert manifest["target_container"]["transformers"] == "==4.51.0"
    assert "tokenizer_config.json" in manifest["verification"]["container_files"]
