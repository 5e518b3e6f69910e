"""The `adapters:` block of an endpoint: LoRA adapters, each served as a SageMaker adapter inference component on the
endpoint's base inference component (`hosting.mode: inference-components` only).

SageMaker's model of it (SageMaker Developer Guide, "Fine-tune models with adapter inference components",
https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-adapt.html): an adapter inference component names
its base inference component (Specification.BaseInferenceComponentName) and the adapter's artifacts, "a tar.gz file"
in S3 (Specification.Container.ArtifactUrl); it has no compute of its own ("omit the ComputeResourceRequirements
key ... it uses the compute resources of the base inference component"), and clients invoke it by its name
(InvokeEndpoint's InferenceComponentName). Which serving systems load adapters that way, and how their LoRA options
are sized, is each system's own fact (ServingSystem.adapters).

Names: each adapter's component is "<endpoint name>-<adapter name>" (`adapter_component_name`), held to botocore's
InferenceComponentName shape (sagemaker 2017-07-24 service model, botocore 1.44.8: max 63, pattern
[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?). The base component is "<endpoint name>-ic" (hosting.component_name), so an
adapter may not be called "ic".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from facts.model_files import UnreadableModel, read_adapter_config, read_model_json

from .base import Strict
from .hosting import COMPONENT_NAME_MAX, COMPONENT_NAME_SUFFIX
from .model_reference import ModelReference, Revision, is_directory

if TYPE_CHECKING:
    from .schema import EndpointSpec

# botocore 1.44.8, sagemaker service model, shape InferenceComponentName (tests/stacks/test_adapters.py reads it there).
COMPONENT_NAME_PATTERN = r"[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?"
ADAPTER_NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$"
ADAPTER_CONFIG = "adapter_config.json"


class AdapterSpec(Strict):
    """One LoRA adapter. model: a Hugging Face Hub id or a local directory holding a PEFT LoRA adapter
    (adapter_config.json + adapter_model.safetensors, as peft's `save_pretrained` writes it); revision: the Hub
    revision; artifact_hash: pin an adapter artifact already published (its manifest's content hash) instead of
    reading the local build."""

    name: str = Field(pattern=ADAPTER_NAME_PATTERN, min_length=1, max_length=40)
    model: ModelReference  # a Hugging Face Hub id or a local directory of a PEFT LoRA adapter
    revision: Revision | None = None
    artifact_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


def adapter_component_name(endpoint_name: str, adapter: str) -> str:
    """The adapter inference component's name: the SageMaker endpoint's name plus the adapter's."""
    return f"{endpoint_name}-{adapter}"


def component_name_problem(endpoint_name: str, adapter: str) -> str | None:
    """Why "<endpoint>-<adapter>" is not a valid InferenceComponentName (length, pattern), else None."""
    name = adapter_component_name(endpoint_name, adapter)
    if len(name) > COMPONENT_NAME_MAX:
        return (
            f"its inference component name {name!r} has {len(name)} characters, more than SageMaker's "
            f"{COMPONENT_NAME_MAX}; allowed: an adapter name of at most {COMPONENT_NAME_MAX - len(endpoint_name) - 1} "
            "characters here"
        )
    if not re.fullmatch(COMPONENT_NAME_PATTERN, name):
        return f"its inference component name {name!r} does not match SageMaker's pattern {COMPONENT_NAME_PATTERN}"
    return None


def adapter_problems(ep: EndpointSpec) -> list[str]:
    """The `adapters:` rules that need no serving system: the hosting mode, unique names, the name reserved by the
    base component. One message per problem, naming endpoint, key, value and what is allowed."""
    if not ep.adapters:
        return []
    problems: list[str] = []
    if not ep.hosting.uses_components:
        problems.append(
            f"endpoint {ep.name!r}: adapters: {len(ep.adapters)} adapter(s) need hosting.mode: inference-components "
            f"(got {ep.hosting.mode!r}): each adapter is an adapter inference component on the endpoint's base "
            "inference component; set hosting.mode: inference-components or remove adapters"
        )
    seen: set[str] = set()
    reserved = COMPONENT_NAME_SUFFIX.lstrip("-")
    for i, adapter in enumerate(ep.adapters):
        where = f"endpoint {ep.name!r}: adapters[{i}].name"
        if adapter.name in seen:
            problems.append(f"{where}: value {adapter.name!r} is used twice; adapter names must be unique")
        seen.add(adapter.name)
        if adapter.model == ep.model:
            problems.append(
                f"endpoint {ep.name!r}: adapters[{i}].model: value {adapter.model!r} is the endpoint's base model "
                "itself, not a LoRA adapter; allowed: a PEFT LoRA adapter (a Hub id or a local directory with "
                f"{ADAPTER_CONFIG})"
            )
        elif is_directory(adapter.model) and not (Path(adapter.model).expanduser() / ADAPTER_CONFIG).is_file():
            problems.append(
                f"endpoint {ep.name!r}: adapters[{i}].model: value {adapter.model!r} is a directory without "
                f"{ADAPTER_CONFIG}, so not a PEFT LoRA adapter; allowed: a directory as peft's save_pretrained writes "
                f"it ({ADAPTER_CONFIG} + adapter_model.safetensors), or a Hub id"
            )
        if adapter.name == reserved:
            problems.append(
                f"{where}: value {adapter.name!r} is reserved: the base inference component is named "
                f"'<endpoint>{COMPONENT_NAME_SUFFIX}'; choose another name"
            )
    return problems


def local_adapter_config(model: str) -> dict[str, Any] | None:
    """A local adapter directory's adapter_config.json (None for a Hub id or a directory without one): read at load,
    so a rank above the container's maximum is refused before a build."""
    path = Path(model).expanduser() / ADAPTER_CONFIG
    if not path.is_file():
        return None
    try:
        return read_model_json(path)  # bounded: facts/model_files.py
    except UnreadableModel:
        return None  # unreadable_adapter_config says what is wrong with it


def unreadable_adapter_config(model: str) -> str | None:
    """Why a local adapter's adapter_config.json cannot be read as a JSON object, or None (also for a Hub id or a
    folder without one, which other rules refuse)."""
    path = Path(model).expanduser() / ADAPTER_CONFIG
    if not (path.is_file() or (os.path.lexists(path) and not path.is_dir())):
        return None
    try:
        read_adapter_config(path, name=ADAPTER_CONFIG)  # bounded, r / lora_alpha / target_modules typed
    except UnreadableModel as err:
        return str(err)
    return None


def adapter_config_problem(config: dict[str, Any]) -> str | None:
    """What makes an adapter_config.json unusable as a LoRA adapter's, in words, or None: peft's LoraConfig.r is a
    positive integer, and rank_pattern maps module names to positive integers (a rank read as None would skip the
    rank check at load and at build)."""
    r = config.get("r")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        return f"adapter_config.json r: value {r!r} is not a LoRA rank; allowed: a positive integer (peft LoraConfig.r)"
    pattern = config.get("rank_pattern") or {}
    if not isinstance(pattern, dict):
        return f"adapter_config.json rank_pattern: value {pattern!r} is not a mapping of module names to ranks"
    for module, rank in pattern.items():
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            return (
                f"adapter_config.json rank_pattern[{module!r}]: value {rank!r} is not a LoRA rank; allowed: a "
                "positive integer"
            )
    return None


def adapter_rank(config: dict[str, Any]) -> int | None:
    """The highest LoRA rank an adapter_config.json declares: `r`, or a larger per-module rank in `rank_pattern`
    (peft's LoraConfig fields). None when `r` is not a positive integer."""
    r = config.get("r")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        return None
    pattern = config.get("rank_pattern") or {}
    ranks = (
        [v for v in pattern.values() if isinstance(v, int) and not isinstance(v, bool)]
        if isinstance(pattern, dict)
        else []
    )
    return max([r, *ranks])


__all__ = [
    "ADAPTER_CONFIG",
    "AdapterSpec",
    "COMPONENT_NAME_PATTERN",
    "adapter_component_name",
    "adapter_config_problem",
    "unreadable_adapter_config",
    "adapter_problems",
    "adapter_rank",
    "component_name_problem",
    "local_adapter_config",
]
