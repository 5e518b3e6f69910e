"""The serving systems, one package each: recipe (model_build), handler or engine config, and container facts.

`get_system(name)` imports only the system's light package (no torch), so the CDK app stays quick.
"""

from __future__ import annotations

import importlib

from endpoint_config import SYSTEM_NAMES

from .base import ServingSystem


def get_system(name: str) -> ServingSystem:
    if name not in SYSTEM_NAMES:
        raise KeyError(f"unknown serving system {name!r}; known: {', '.join(SYSTEM_NAMES)}")
    module = importlib.import_module(f"systems.{name.replace('-', '_')}")
    return module.SYSTEM


__all__ = ["ServingSystem", "get_system"]
