"""The serving systems, one package each: recipe (model_build), handler or engine config, and container facts.

`REGISTRY` is the list of systems: each `system:` value of the config names the package that defines its
ServingSystem as `SYSTEM`. Adding a system is its package plus one line here. `get_system(name)` imports only the
system's light package (no torch), so the CDK app stays quick.
"""

from __future__ import annotations

import importlib

from .base import ServingSystem

REGISTRY: dict[str, str] = {
    "hf-fastload": "systems.hf_fastload",
    "djl-deepspeed": "systems.djl_deepspeed",
    "djl-accelerate": "systems.djl_accelerate",
    "deepspeed-byoc": "systems.deepspeed_byoc",
    "djl-fastertransformer": "systems.djl_fastertransformer",
    "tensorrt-byoc": "systems.tensorrt_byoc",
    "lmi-vllm": "systems.lmi_vllm",
    "lmi-trtllm": "systems.lmi_trtllm",
    "vllm": "systems.vllm",
    "sglang": "systems.sglang",
    "tgi": "systems.tgi",
}


def get_system(name: str) -> ServingSystem:
    """The registered system `name`; KeyError (naming the known ones) for any other."""
    if name not in REGISTRY:
        raise KeyError(f"unknown serving system {name!r}; known: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name]).SYSTEM


def all_systems() -> dict[str, ServingSystem]:
    """Every registered system, by name."""
    return {name: get_system(name) for name in REGISTRY}


__all__ = ["REGISTRY", "ServingSystem", "all_systems", "get_system"]
