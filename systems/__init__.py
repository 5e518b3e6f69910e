"""The serving systems, one package each: recipe (model_build), handler or engine config, and container facts.

The registry: `REGISTRY` names, for every `system:` value of the config (endpoint_config.SYSTEM_NAMES), the
package that defines its ServingSystem as `SYSTEM`; that ServingSystem names its build recipe (`recipe`,
loaded by `load_recipe`) and the typed model of the `engine:` options it implements (`engine_options`, checked
by `engine_problems`, read by `engine`). `get_system(name)` imports only the system's light package (no torch), so the CDK app
stays quick.

Dependency direction: systems imports endpoint_config (the schema) and artifact (what a build needs), never
model_build, stacks or deployment.
"""

from __future__ import annotations

import importlib

from endpoint_config import SYSTEM_NAMES

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
}


def get_system(name: str) -> ServingSystem:
    if name not in SYSTEM_NAMES or name not in REGISTRY:
        raise KeyError(f"unknown serving system {name!r}; known: {', '.join(SYSTEM_NAMES)}")
    return importlib.import_module(REGISTRY[name]).SYSTEM


__all__ = ["REGISTRY", "ServingSystem", "get_system"]
