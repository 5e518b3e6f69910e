"""Whether a system's container knows a model's architecture (config.json "architectures"), from the generated tables
of systems/engine_tables/: refused at load (a local model directory) and at build (the files read), naming the
version that knows it or the systems that serve it.

What a container knows: its engine's model registry where the system names one (ServingSystem.model_registry, e.g.
LMI 27's vLLM), else its transformers (ImagePin.python_stack / OWN_CONTAINER_STACKS, pinned to one version):
AutoModelForCausalLM builds only the classes of its MODEL_FOR_CAUSAL_LM_MAPPING_NAMES. A version with its own table
(transformers 4.49.0, 4.51.3, 5.5.3) is read exactly; another pinned one (4.34-4.39) is known to lack every class
TRANSFORMERS_FIRST_RELEASE dates after it, and nothing else is claimed (the tables start at 4.49.0). A range
(LMI's ">=4.56,<=5.9") or an image without recorded libraries is not checked here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from endpoint_config import EndpointSpec
from facts.model_files import config_fields, read_model_config

from . import engine_tables
from .base import ServingSystem
from .images import OWN_CONTAINER_STACKS


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _transformers_pin(system: ServingSystem) -> str | None:
    """The one transformers version in the system's container (an "==X" pin), else None."""
    stack = (
        system.image.python_stack
        if system.image is not None
        else (OWN_CONTAINER_STACKS.get(system.own_container.dockerfile) if system.own_container else None)
    )
    if stack is None or not stack.verified or stack.transformers is None:
        return None
    match = re.fullmatch(r"==\s*(\d+(?:\.\d+)*)", stack.transformers.strip())
    return match.group(1) if match else None


def unknown_reason(system: ServingSystem, architecture: str) -> str | None:
    """Why `system`'s container cannot build `architecture`, or None when it can or this cannot tell."""
    registry = system.model_registry
    if registry is not None:
        if architecture in engine_tables.ARCHITECTURES[registry]:
            return None
        dropped = engine_tables.VLLM_REMOVED.get(registry, {}).get(architecture)
        engine = registry.replace("==", " ")
        return f"{engine}, the engine in the image of system {system.name!r}, does not serve it" + (
            f" (its last release that did: {dropped})" if dropped else ""
        )
    pinned = _transformers_pin(system)
    if pinned is None:
        return None
    first = engine_tables.TRANSFORMERS_FIRST_RELEASE.get(architecture)
    table = engine_tables.ARCHITECTURES.get(f"transformers=={pinned}")
    if table is not None:
        if architecture in table:
            return None
    elif not (first and _version(first) > _version(pinned)):
        return None  # a pin without its own table: only a class first released after it is known to be missing
    needs = (
        f"; it needs transformers >= {first}"
        if first
        else ("; no transformers release read here builds it with AutoModelForCausalLM")
    )
    return f"transformers {pinned}, in the image of system {system.name!r}, does not know it{needs}"


def architecture_problem(
    ep: EndpointSpec, system: ServingSystem, architecture: str, systems: dict[str, ServingSystem]
) -> str | None:
    """The refusal of `architecture` for `ep` on `system`, naming the systems whose containers know it."""
    reason = unknown_reason(system, architecture)
    if reason is None:
        return None
    serving = systems_serving(architecture, systems, but=system)
    where = f"systems that serve it: {', '.join(serving)}" if serving else "no registered system is known to serve it"
    return f"endpoint {ep.name!r}: model: value {ep.model!r} has architecture {architecture!r}: {reason}; {where}"


def systems_serving(
    architecture: str, systems: dict[str, ServingSystem], but: ServingSystem | None = None
) -> list[str]:
    """The systems (other than `but`) whose containers are known to build `architecture`: the one list every
    architecture refusal names (at load here, and with the checkpoint's facts in systems/checks.py)."""
    return [name for name, other in systems.items() if other is not but and _knows(other, architecture)]


def _knows(system: ServingSystem, architecture: str) -> bool:
    """Known for sure: in the engine's registry, or in the pinned transformers' own table."""
    registry = system.model_registry
    if registry is not None:
        return architecture in engine_tables.ARCHITECTURES[registry]
    pinned = _transformers_pin(system)
    return pinned is not None and architecture in engine_tables.ARCHITECTURES.get(
        f"transformers=={pinned}", frozenset()
    )


def local_architecture(model: str) -> str | None:
    """config.json's first "architectures" entry of a local model directory (None for a Hub id or no config),
    read bounded and checked (facts.model_files: read_model_config, config_fields): UnreadableModel naming the file,
    which the loader reports as a problem of `model:`."""
    folder = Path(model).expanduser()
    if not (folder.is_dir() and os.path.lexists(folder / "config.json")):
        return None
    return config_fields(read_model_config(folder / "config.json")).architecture


def load_problems(ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem]) -> list[str]:
    """At load: a local model directory's architecture against the system's container."""
    architecture = local_architecture(ep.model)
    problem = architecture_problem(ep, system, architecture, systems) if architecture else None
    return [problem] if problem else []


__all__ = ["architecture_problem", "load_problems", "local_architecture", "systems_serving", "unknown_reason"]
