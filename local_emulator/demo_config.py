"""`make demo CONFIG=<any config>`: the config the demo runs, made from the user's own.

A config written for a real account names an account, a region, GPU instance types the emulator (moto) refuses, a
model of tens of GB, a VPC, KMS keys, a data-capture bucket. The demo keeps everything it can run here and replaces
the rest, each replacement printed before the demo starts:
- the environment: the emulator's account and region (moto's fixed account, us-east-1), `emulator: true`,
  `retain_data: false` (the emulator is thrown away; nothing is kept), no pipeline;
- the endpoint: an instance type the emulator knows of the same kind (a GPU type for a GPU type: ml.g4dn.xlarge, whose
  T4 computes fp16, so bf16 becomes fp16), one GPU per copy (the instance count stays: the emulator only records it), no instance pools, capacity reservation,
  VPC, KMS key, data capture, SLO gate or pinned artifact hash (they name things of the real account);
- the model: kept when it is a local model directory, or a Hub id while HF_ENDPOINT names a Hub mirror on this
  machine; otherwise (a Hub id with no mirror, or a folder too large for this machine) a tiny model of the same
  family made offline (model_build.tiny_models), and the engine options tied to the real model's size (context
  length) fitted to it.
The original file is never changed: the demo config is written under build/demo/.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from endpoint_config import ConfigError
from endpoint_config.loader import read_document
from endpoint_config.model_reference import is_hub_id
from facts.instances import parse_instance_type
from local_runtime import runs_real_engine
from systems import REGISTRY, get_system
from systems.base import EngineOptions

from .moto_server import EMULATOR_ACCOUNT, EMULATOR_REGION

ROOT = Path(__file__).resolve().parent.parent
# Instance types moto 5.2.5's SageMaker accepts: its endpoint config's VALID_INSTANCE_TYPES (moto/sagemaker/models.py
# validate_instance_type) stops at g4dn among GPU types (no g5, g6, p4d, p5).
EMULATOR_GPU_INSTANCE = "ml.g4dn.xlarge"
EMULATOR_CPU_INSTANCE = "ml.m5.xlarge"
# A local model folder above this is not served on a 2-core, 24 GiB machine in a demo's time: a tiny one replaces it.
LOCAL_MODEL_MAX_BYTES = 2 * 2**30
# The tiny model's positions (model_build.tiny_models): engine context options above it are fitted to it.
TINY_CONTEXT = 512
# The principal the demo's OpenAI-route role trusts (config/local.yaml's): a role of the emulator's account.
DEMO_ROUTE_CALLER = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/chat-app"
# Blocks that name resources of the real account or that the emulator cannot run: dropped with their reason.
DROPPED_ENDPOINT_BLOCKS = {
    "instance_pools": "the emulator (moto) refuses a production variant without InstanceType",
    "capacity": "a capacity reservation exists only in the real account",
    "network": "the VPC and subnets exist only in the real account",
    "encryption": "the KMS keys exist only in the real account",
    "data_capture": "the capture bucket exists only in the real account",
    "slo": "the SLO gate measures the real instance type; a CPU here says nothing about it",
    "artifact_hash": "the pinned artifact was built from the real model",
    "model_parameters": "declares the real model's size",
    "revision": "the tiny model has no Hub revision",
}
# Which engine options a tiny model drops or fits is each system's fact: its options class's GPU_KEYS and LORA_KEYS
# (dropped), CONTEXT_KEY (fitted to TINY_CONTEXT) and PROMPT_KEY (to half of it, below the context: TGI's
# max_input_tokens < max_total_tokens); systems/base.py EngineOptions.
# The model family (config.json model_type) -> the tiny architecture made offline (model_build.tiny_models).
TINY_OF_FAMILY = {
    "gpt2": "gpt2",
    "gptj": "gptj",
    "t5": "t5",
    "llama": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "mistral": "mistral",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
    "gemma3": "gemma3",
    "mixtral": "mixtral",
    "qwen3_moe": "qwen3_moe",
    "gpt_oss": "gpt_oss",
}
# The one tiny architecture vLLM 0.30.0's CPU attention serves here (head size 64: model_build/tiny_models.py).
VLLM_CPU_TINY = "qwen3_thinking"


@dataclass(frozen=True)
class Substitution:
    where: str  # e.g. "environments.dev.account", "endpoints[qwen3-32b].model"
    was: Any
    now: Any
    why: str

    def line(self) -> str:
        was = "(unset)" if self.was is None else repr(self.was) if not isinstance(self.was, dict) else "{...}"
        now = "(removed)" if self.now is None else repr(self.now)
        return f"{self.where}: {was} -> {now} ({self.why})"


@dataclass(frozen=True)
class DemoConfig:
    path: Path  # the written demo config
    environment: str
    endpoint: str
    substitutions: tuple[Substitution, ...]


def _mirror_serves_hub() -> bool:
    """HF_ENDPOINT names a Hub on this machine (a mirror such as local_emulator.hub_mirror): Hub ids are read there."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "")).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _family(model: str, system: str) -> str | None:
    """config.json's model_type of `model`, from its folder (read bounded: facts.model_files; ConfigError naming the
    file when it does not read), else the known models (facts/models.py) or its Hub id's name (Qwen/Qwen3-32B:
    qwen3); None when none says."""
    from facts.model_files import UnreadableModel, config_fields, read_model_config

    path = ROOT / model if not Path(model).is_absolute() else Path(model)
    if path.is_dir() and os.path.lexists(path / "config.json"):
        try:
            return config_fields(read_model_config(path / "config.json")).model_type or None
        except UnreadableModel as err:
            raise ConfigError(f"model {model!r}: {err}") from None
    from facts.models import KNOWN_MODELS

    if model in KNOWN_MODELS:
        return "t5" if KNOWN_MODELS[model].encoder_decoder else "gpt2" if "gpt2" in model else "gptj"
    lowered = model.lower()
    for family in ("qwen3", "qwen2", "llama", "mistral", "mixtral", "gemma", "gpt-oss", "gpt-j", "gpt2", "t5"):
        if family in lowered:
            return {"gemma": "gemma2", "gpt-oss": "gpt_oss", "gpt-j": "gptj"}.get(family, family)
    return None


def _tiny_model(model: str, system: str) -> tuple[str, str]:
    """(the tiny model's folder, why this architecture) for a model the demo cannot serve here."""
    family = _family(model, system)
    if runs_real_engine(
        system
    ):  # the real vLLM engine serves here: only the head-size-64 Qwen3 runs on its CPU attention
        why = "the only tiny architecture vLLM's CPU attention serves here"
        if family not in ("qwen3", "qwen3_moe"):
            why += f" (the model's family is {family or 'not known'})"
        return f"build/tiny-models/{VLLM_CPU_TINY}", why
    arch = TINY_OF_FAMILY.get(family or "")
    if arch is None:
        arch = "qwen3"
        return f"build/tiny-models/{arch}", f"family {family or 'not known'} has no tiny model here; a tiny Qwen3"
    return f"build/tiny-models/{arch}", f"a tiny {arch} of the same family, made offline"


def _model_substitution(ep: dict[str, Any], where: str) -> Substitution | None:
    model, system = str(ep.get("model", "")), str(ep.get("system", ""))
    path = Path(model) if Path(model).is_absolute() else ROOT / model
    if model.startswith("build/tiny-models/"):
        return None  # made by the demo when missing
    if path.is_dir() and (path / "config.json").is_file():
        size = _folder_bytes(path)
        if size <= LOCAL_MODEL_MAX_BYTES:
            return None
        why = (
            f"a local model of {size / 2**30:.1f} GiB; the demo serves at most {LOCAL_MODEL_MAX_BYTES / 2**30:.0f} GiB"
        )
    elif is_hub_id(model):
        if _mirror_serves_hub():
            return None
        why = "a Hub model and no Hub here (set HF_ENDPOINT to a mirror on this machine to read it from there)"
    else:
        why = "not a local model directory"
    tiny, arch_why = _tiny_model(model, system)
    return Substitution(f"{where}.model", model, tiny, f"{why}; {arch_why}")


def _instance(ep: dict[str, Any]) -> str:
    try:
        return (
            EMULATOR_GPU_INSTANCE if parse_instance_type(str(ep.get("instance_type"))).is_gpu else EMULATOR_CPU_INSTANCE
        )
    except ValueError:
        return EMULATOR_GPU_INSTANCE


def _substitute_endpoint(ep: dict[str, Any], out: list[Substitution], *, for_real_account: bool) -> None:
    where = f"endpoints[{ep.get('name')}]"

    def put(key: str, value: Any, why: str) -> None:
        if ep.get(key) != value:
            out.append(Substitution(f"{where}.{key}", ep.get(key), value, why))
            if value is None:
                ep.pop(key, None)
            else:
                ep[key] = value

    model = _model_substitution(ep, where)
    tiny = model is not None or str(ep.get("model", "")).startswith("build/tiny-models/")
    if model is not None:
        out.append(model)
        ep["model"] = model.now
    instance = _instance(ep)
    put("instance_type", instance, "an instance type the emulator knows, of the same kind")
    if instance == EMULATOR_GPU_INSTANCE and ep.get("dtype") == "bf16":
        put("dtype", "fp16", "the emulator's g4dn is an NVIDIA T4, which computes fp16, not bf16")
    hosting = ep.get("hosting")
    if isinstance(hosting, dict) and hosting.get("mode") == "inference-components":
        put(
            "hosting",
            None,
            "the emulator (moto 5.2.5) has no inference components (an endpoint config without a model crashes it): "
            "the demo hosts the model on the variant",
        )
    chat = ep.get("chat")
    route = chat.get("openai_route") if isinstance(chat, dict) else None
    demo_route = {"create_role": True, "assumed_by": [DEMO_ROUTE_CALLER]}
    if isinstance(chat, dict) and isinstance(route, dict) and for_real_account and route != demo_route:
        out.append(
            Substitution(
                f"{where}.chat.openai_route",
                route,
                demo_route,
                "its callers are principals of the real account; the demo's caller assumes a role the stack creates",
            )
        )
        chat["openai_route"] = demo_route
    if int(ep.get("tensor_parallel_degree") or 1) != 1:
        put("tensor_parallel_degree", 1, f"{EMULATOR_GPU_INSTANCE} has one GPU")
    if ep.get("volume_size_gb") is not None:
        put("volume_size_gb", None, "g4dn has local NVMe storage: SageMaker refuses VolumeSizeInGB there")
    for key, why in DROPPED_ENDPOINT_BLOCKS.items():
        if key in ("revision", "model_parameters") and not tiny:
            continue
        if not for_real_account and key not in ("revision", "model_parameters", "artifact_hash"):
            continue  # written for the emulator already: its blocks are the user's choice
        if ep.get(key) is not None and ep.get(key) != []:
            put(key, None, why)
    if tiny:
        _fit_engine(ep, where, out)
    adapters = ep.get("adapters") or []
    if adapters and (tiny or any(not (ROOT / str(a.get("model", ""))).is_dir() for a in adapters)):
        put("adapters", None, "the adapters were trained for the real model; the tiny one has none")
        engine = ep.get("engine") or {}
        for key in [k for k in engine if k in engine_options_of(ep).LORA_KEYS]:
            out.append(Substitution(f"{where}.engine.{key}", engine.pop(key), None, "the adapters are left out"))


def _fit_engine(ep: dict[str, Any], where: str, out: list[Substitution]) -> None:
    engine = ep.get("engine")
    if not isinstance(engine, dict):
        return
    options = engine_options_of(ep)
    for key in list(engine):
        if key in options.GPU_KEYS:
            out.append(Substitution(f"{where}.engine.{key}", engine.pop(key), None, "set for the real model's GPUs"))
        elif (cap := tiny_context_cap(options, key, engine[key])) is not None:
            why = "the tiny model's positions" if cap == TINY_CONTEXT else "half the tiny model's positions, below it"
            out.append(Substitution(f"{where}.engine.{key}", engine[key], cap, why))
            engine[key] = cap


def engine_options_of(ep: dict[str, Any]) -> type[EngineOptions]:
    """The options class of the endpoint's system (the base class, which names no key of its own, for a system not
    registered: load_config refuses it with the allowed names)."""
    name = ep.get("system")
    return get_system(name).engine_options if isinstance(name, str) and name in REGISTRY else EngineOptions


def tiny_context_cap(options: type[EngineOptions], key: str, value: Any) -> int | None:
    """What an engine option of `options` becomes on the tiny model (TINY_CONTEXT positions), None where it stays:
    the context option above them is fitted to them, the prompt-only limit above half of them to half."""
    if not isinstance(value, int):
        return None
    if key == options.CONTEXT_KEY and value > TINY_CONTEXT:
        return TINY_CONTEXT
    if key == options.PROMPT_KEY and value > TINY_CONTEXT // 2:
        return TINY_CONTEXT // 2
    return None


def _environment(data: dict[str, Any], name: str | None) -> str:
    envs = data.get("environments") or {}
    if not isinstance(envs, dict):
        raise ConfigError("environments: not a mapping")
    if name is not None:
        if name not in envs:
            raise ConfigError(f"environment {name!r} is not in the config; it has: {', '.join(envs) or '(none)'}")
        return name
    if not envs:
        return "default"
    return next(iter(envs))


def make_demo_config(
    config_path: str | Path, endpoint: str | None = None, environment: str | None = None, out_dir: Path | None = None
) -> DemoConfig:
    """The demo config of `config_path` (one environment, one endpoint), written under out_dir (build/demo/), with
    every substitution made. ConfigError when the file or the names do not read."""
    document = read_document(config_path)
    data = copy.deepcopy(document.data)
    if not isinstance(data, dict):
        raise ConfigError(f"{config_path}: the config is not a mapping")
    env_name = _environment(data, environment)
    endpoints = data.get("endpoints") or []
    names = [str(ep.get("name")) for ep in endpoints if isinstance(ep, dict)]
    if endpoint is None:
        if not names:
            raise ConfigError(f"{config_path}: no endpoints")
        endpoint = names[0]
    if endpoint not in names:
        raise ConfigError(f"endpoint {endpoint!r} is not in {config_path}; it has: {', '.join(names)}")
    out: list[Substitution] = []
    env = dict((data.get("environments") or {}).get(env_name) or {})
    for_real_account = not env.get("emulator")
    for key, value, why in (
        ("account", EMULATOR_ACCOUNT, "the emulator's fixed account"),
        ("region", EMULATOR_REGION, "the emulator's region"),
        ("emulator", True, "the demo deploys to the local emulator"),
        ("retain_data", False, "the emulator is thrown away: nothing is kept"),
    ):
        if env.get(key) != value:
            out.append(Substitution(f"environments.{env_name}.{key}", env.get(key), value, why))
            env[key] = value
    for key in ("encryption", "overrides"):
        if env.get(key):
            why = "KMS keys of the real account" if key == "encryption" else "settings for the real account's endpoints"
            out.append(Substitution(f"environments.{env_name}.{key}", env.pop(key), None, why))
    data["environments"] = {env_name: env}
    if data.get("pipeline") is not None:
        out.append(Substitution("pipeline", data.pop("pipeline"), None, "the demo deploys from this machine"))
    chosen = copy.deepcopy(next(ep for ep in endpoints if ep.get("name") == endpoint))
    dropped = [n for n in names if n != endpoint]
    if dropped:
        out.append(Substitution("endpoints", names, [endpoint], "the demo runs one endpoint (ENDPOINT=NAME picks it)"))
    _substitute_endpoint(chosen, out, for_real_account=for_real_account)
    data["endpoints"] = [chosen]
    out_dir = out_dir or ROOT / "build" / "demo"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{Path(config_path).stem}.{endpoint}.yaml"
    header = f"# Made by `make demo CONFIG={config_path}` from that file (local_emulator/demo_config.py); not a config to edit.\n"
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return DemoConfig(path, env_name, endpoint, tuple(out))
