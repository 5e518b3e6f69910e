"""LoRA adapters through model_build: tiny adapters made offline with peft on the tiny Llama, built (validated against
the base and the container's LoRA limits) and published to the emulator's S3 as the tar.gz SageMaker takes, each
refusal shown both ways (refused where it must be, accepted where it fits)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import tarfile
from pathlib import Path

import boto3
import pytest

from artifact import BuildError
from deployment import load_config
from deployment.adapters import adapter_build_dir
from local_emulator import moto_server
from model_build import cli
from model_build.adapters import build_adapter, config_problems, safetensors_shapes
from model_build.preflight import artifact_checks
from model_build.tiny_adapters import make_tiny_adapter

CONFIG = """\
environments:
  emu: {{account: "{account}", region: {region}, emulator: true}}
endpoints:
  - name: tiny-lora
    system: lmi-vllm
    model: {base}
    dtype: fp16
    instance_type: ml.g5.2xlarge
    volume_size_gb: null
    engine: {engine}
    hosting: {{mode: inference-components}}
    adapters:
{adapters}
"""


@pytest.fixture(scope="module")
def adapters(tmp_path_factory, tiny_chat_models, tiny_models) -> dict[str, Path]:
    """peft adapters: on the tiny Llama at rank 8 (q_proj, v_proj) and 32, and one of the tiny GPT-2 (c_attn)."""
    root = tmp_path_factory.mktemp("adapters")
    llama = tiny_chat_models["llama"]
    return {
        "sql": make_tiny_adapter(llama, root / "sql", rank=8),
        "wide": make_tiny_adapter(llama, root / "wide", rank=32, target_modules=("q_proj", "o_proj"), seed=1),
        "gpt2": make_tiny_adapter(tiny_models["gpt2"], root / "gpt2", rank=8, target_modules=("c_attn",)),
    }


def write_config(tmp_path: Path, base: Path | str, adapters: dict[str, Path | str], engine: dict | None = None) -> Path:
    listed = "\n".join(f"      - {{name: {name}, model: '{model}'}}" for name, model in adapters.items())
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        CONFIG.format(
            account=moto_server.EMULATOR_ACCOUNT,
            region=moto_server.EMULATOR_REGION,
            base=base,
            engine=json.dumps(engine or {}),
            adapters=listed,
        )
    )
    return path


def test_build_then_publish_through_the_cli(emulator, tmp_path, capsys, tiny_chat_models, adapters):
    """`model_build build` builds the base and its adapter, each under its own content hash; `publish` puts the adapter
    as model.tar.gz (its files at the archive's root, as vLLM reads them) under its own prefix, manifest.json last."""
    config = write_config(tmp_path, tiny_chat_models["llama"], {"sql": adapters["sql"]})
    build_root = tmp_path / "build"
    args = ["--config", str(config), "--env", "emu", "--endpoint", "tiny-lora", "--build-root", str(build_root)]
    assert cli.main(["build", *args, "--quiet"]) == 0
    built = json.loads((adapter_build_dir(build_root, "tiny-lora", "sql") / "manifest.json").read_text())
    assert (
        f"built adapter sql of tiny-lora: content hash {built['content_hash'][:12]}, rank 8 (container max 16)"
        in capsys.readouterr().out
    )
    assert sorted(f["path"] for f in built["files"]) == ["adapter_config.json", "adapter_model.safetensors"]
    assert (
        built["kind"] == "lora-adapter"
        and built["lora"]["rank"] == 8
        and built["base"]["architectures"] == ["LlamaForCausalLM"]
    )
    # The adapter's files are copied unchanged.
    assert (adapter_build_dir(build_root, "tiny-lora", "sql") / "adapter_model.safetensors").read_bytes() == (
        adapters["sql"] / "adapter_model.safetensors"
    ).read_bytes()
    plan = load_config(config, "emu", build_root=build_root).plan("tiny-lora")
    [adapter] = plan.adapters
    assert (adapter.artifact.source, adapter.artifact.content_hash) == ("manifest", built["content_hash"])
    assert adapter.component_name == "emu-tiny-lora-sql"

    bucket = plan.artifact_bucket(moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION)
    with emulator.activated():
        s3 = boto3.client("s3", region_name=emulator.region)
        s3.create_bucket(Bucket=bucket)
        environment_plan = load_config(config, "emu", build_root=build_root)
        try:
            # Preflight (what `make deploy` runs after publishing) finds the adapter missing, then in place.
            check = artifact_checks(environment_plan, s3, moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION)[-1]
            assert (check.name, check.ok) == (
                "artifact tiny-lora adapter sql",
                False,
            ) and "is not published" in check.message
            assert cli.main(["publish", *args]) == 0
            assert all(
                c.ok
                for c in artifact_checks(
                    environment_plan, s3, moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION
                )
            )
            keys = [
                o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="models/tiny-lora/adapters/")["Contents"]
            ]
            archive = s3.get_object(Bucket=bucket, Key=adapter.prefix + "model.tar.gz")["Body"].read()
        finally:
            for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=o["Key"])
            s3.delete_bucket(Bucket=bucket)
    assert sorted(keys) == [adapter.prefix + "manifest.json", adapter.prefix + "model.tar.gz"]
    assert f"s3://{bucket}/{adapter.prefix}model.tar.gz" in capsys.readouterr().out
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["adapter_config.json", "adapter_model.safetensors", "manifest.json"]


def test_a_rank_above_the_container_maximum_is_refused_and_fits_once_raised(tmp_path, tiny_chat_models, adapters):
    base = tiny_chat_models["llama"]
    refused = load_config(write_config(tmp_path, base, {"other": "org/unused"}), "emu").plan("tiny-lora")
    # A Hub adapter's rank is not read at load but by the build: the local rank-32 adapter stands in for one.
    [hub] = refused.adapters
    wide = dataclasses.replace(hub, spec=hub.spec.model_copy(update={"model": str(adapters["wide"])}))
    with pytest.raises(BuildError) as err:
        build_adapter(refused, wide, tmp_path / "out", base_dir=base)
    assert str(err.value) == (
        "endpoint 'tiny-lora': adapters[0] ('other', 'org/unused'): rank 32 is above the container's max LoRA rank 16 "
        "(vLLM's default max_lora_rank 16); set engine.max_lora_rank: 32, or use an adapter of rank <= 16"
    )
    assert not (tmp_path / "out").exists()
    plan = load_config(write_config(tmp_path, base, {"wide": adapters["wide"]}, {"max_lora_rank": 32}), "emu").plan(
        "tiny-lora"
    )
    manifest = build_adapter(plan, plan.adapters[0], tmp_path / "out", base_dir=base)
    assert (manifest["lora"]["r"], manifest["lora"]["rank"], manifest["lora"]["lora_alpha"]) == (32, 32, 64)
    assert manifest["container"] == {"max_rank": 32, "max_adapters": 1}


def test_an_adapter_of_another_base_is_refused(tmp_path, tiny_chat_models, tiny_models, adapters):
    """By shape: the GPT-2 adapter's c_attn weights have no counterpart in the Llama; by name: an adapter trained on
    another Hub model than the endpoint serves is refused before anything is downloaded."""
    base = tiny_chat_models["llama"]
    plan = load_config(write_config(tmp_path, base, {"gpt2": adapters["gpt2"]}), "emu").plan("tiny-lora")
    with pytest.raises(BuildError) as err:
        build_adapter(plan, plan.adapters[0], tmp_path / "out", base_dir=base)
    message = str(err.value)
    assert message.startswith(
        f"endpoint 'tiny-lora': adapters[0] ('gpt2', '{adapters['gpt2']}'): does not fit the base model"
    )
    assert (
        "tensor 'base_model.model.transformer.h.0.attn.c_attn.lora_A.weight': the base model has no weight" in message
    )
    # The same adapter fits its own base (GPT-2's Conv1D layers: peft's fan_in_fan_out).
    gpt2 = tiny_models["gpt2"]
    gpt2_plan = load_config(write_config(tmp_path, gpt2, {"gpt2": adapters["gpt2"]}), "emu").plan("tiny-lora")
    assert (
        build_adapter(gpt2_plan, gpt2_plan.adapters[0], tmp_path / "gpt2-out", base_dir=gpt2)["verification"]["tensors"]
        == 4
    )

    renamed = make_tiny_adapter(base, tmp_path / "renamed", trained_on="meta-llama/Llama-3.1-8B")
    hub = load_config(write_config(tmp_path, "meta-llama/Llama-3.2-1B", {"sql": renamed}), "emu").plan("tiny-lora")
    with pytest.raises(BuildError) as err:
        build_adapter(hub, hub.adapters[0], tmp_path / "out")
    assert str(err.value) == (
        f"endpoint 'tiny-lora': adapters[0] ('sql', '{renamed}'): it was trained on 'meta-llama/Llama-3.1-8B' "
        "(adapter_config.json base_model_name_or_path), but the endpoint serves 'meta-llama/Llama-3.2-1B'; use an "
        "adapter of 'meta-llama/Llama-3.2-1B', or serve 'meta-llama/Llama-3.1-8B'"
    )


def test_a_pickled_adapter_is_stored_as_safetensors(tmp_path, tiny_chat_models, adapters):
    import torch
    from safetensors.torch import load_file

    source = tmp_path / "pickled"
    source.mkdir()
    (source / "adapter_config.json").write_bytes((adapters["sql"] / "adapter_config.json").read_bytes())
    tensors = load_file(adapters["sql"] / "adapter_model.safetensors")
    torch.save(tensors, source / "adapter_model.bin")
    plan = load_config(write_config(tmp_path, tiny_chat_models["llama"], {"sql": source}), "emu").plan("tiny-lora")
    build_adapter(plan, plan.adapters[0], tmp_path / "out", base_dir=tiny_chat_models["llama"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "manifest.json",
    ]
    stored = load_file(tmp_path / "out" / "adapter_model.safetensors")
    assert stored.keys() == tensors.keys() and all(torch.equal(stored[k], tensors[k]) for k in tensors)
    assert safetensors_shapes(tmp_path / "out" / "adapter_model.safetensors") == {
        k: list(v.shape) for k, v in tensors.items()
    }


# (what is wrong in adapter_config.json, the one message): what vLLM 0.23.0's PEFTHelper refuses, and non-LoRA adapters.
BAD_CONFIGS = [
    ({"modules_to_save": ["lm_head"]}, "modules_to_save: value ['lm_head'] is not supported by vLLM; allowed: null"),
    ({"use_dora": True}, "use_dora: value True is not supported by vLLM (no DoRA); allowed: false"),
    ({"bias": "all"}, "bias: value 'all' is not supported by vLLM; allowed: 'none'"),
    ({"peft_type": "IA3"}, "peft_type: value 'IA3' is not a LoRA adapter; allowed: 'LORA'"),
    ({"r": 0}, "r: value 0 is not a positive integer rank"),
    ({"task_type": "SEQ_CLS"}, "task_type: value 'SEQ_CLS' is not a text-generation adapter; allowed: 'CAUSAL_LM'"),
]


@pytest.mark.parametrize(("change", "expected"), BAD_CONFIGS, ids=[next(iter(c)) for c, _ in BAD_CONFIGS])
def test_adapter_configs_vllm_refuses_are_refused(adapters, change, expected):
    config = json.loads((adapters["sql"] / "adapter_config.json").read_text())
    assert config_problems(config) == []
    assert config_problems({**config, **change}) == [expected]


def test_a_directory_without_an_adapter_is_refused(tmp_path, tiny_chat_models, adapters):
    """Refused when the config loads (endpoint_config/adapters.py adapter_problems: the base model itself, a folder
    without adapter_config.json), and by the build for a plan that reaches it otherwise."""
    from endpoint_config import ConfigError

    llama = tiny_chat_models["llama"]
    with pytest.raises(ConfigError, match="is the endpoint's base model itself, not a LoRA adapter"):
        load_config(write_config(tmp_path, llama, {"sql": llama}), "emu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="is a directory without adapter_config.json, so not a PEFT LoRA adapter"):
        load_config(write_config(tmp_path, llama, {"sql": tmp_path / "empty"}), "emu")
    plan = load_config(write_config(tmp_path, llama, {"sql": adapters["sql"]}), "emu").plan("tiny-lora")
    adapter = dataclasses.replace(plan.adapters[0], spec=plan.adapters[0].spec.model_copy(update={"model": str(llama)}))
    with pytest.raises(BuildError, match=re.escape("has no adapter_config.json: not a PEFT adapter")):
        build_adapter(plan, adapter, tmp_path / "out")


def test_an_adapter_whose_rank_its_tensors_contradict_is_refused(tmp_path, tiny_chat_models, adapters):
    """adapter_config.json says r 4, the tensors carry rank 8 (lora_A is [8, in]): the engine would use the tensors'
    and the config's alpha / r scaling would be wrong, so the build refuses naming both."""
    source = tmp_path / "lying"
    source.mkdir()
    config = json.loads((adapters["sql"] / "adapter_config.json").read_text())
    (source / "adapter_config.json").write_text(json.dumps({**config, "r": 4}))
    (source / "adapter_model.safetensors").write_bytes((adapters["sql"] / "adapter_model.safetensors").read_bytes())
    plan = load_config(write_config(tmp_path, tiny_chat_models["llama"], {"sql": source}), "emu").plan("tiny-lora")
    with pytest.raises(BuildError) as err:
        build_adapter(plan, plan.adapters[0], tmp_path / "out", base_dir=tiny_chat_models["llama"])
    assert "adapter_config.json r: value 4 is contradicted by the tensors, whose highest rank is 8" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_pickle_that_is_more_than_tensors_is_refused_before_the_endpoint_builds(tmp_path, tiny_chat_models, adapters):
    """An adapter_model.bin whose pickle would run code: torch.load(weights_only=True) stops it, and the build says
    so by file, exit 2 with no traceback, before the base's artifact is written (the review found 13 files left)."""
    import pickle

    source = tmp_path / "pickled"
    source.mkdir()
    (source / "adapter_config.json").write_bytes((adapters["sql"] / "adapter_config.json").read_bytes())

    class Runs:
        def __reduce__(self):
            return (print, ("this would run",))

    (source / "adapter_model.bin").write_bytes(pickle.dumps({"w": Runs()}))
    config = write_config(tmp_path, tiny_chat_models["llama"], {"sql": source})
    build_root = tmp_path / "build"
    args = ["--config", str(config), "--env", "emu", "--endpoint", "tiny-lora", "--build-root", str(build_root)]
    from helpers import run_cli

    done = run_cli("build", *args, "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "adapter_model.bin is not a file of tensors torch.load(weights_only=True) reads" in done.stderr
    assert "this would run" not in done.stdout
    assert not build_root.exists() or not any(build_root.iterdir())
