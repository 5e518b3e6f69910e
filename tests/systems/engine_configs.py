"""Endpoint configs for the engine-system tests, written, loaded, refused and built in a test's tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from endpoint_config import ConfigError


def endpoint_yaml(
    name: str,
    system: str,
    model: str,
    instance: str = "ml.g6e.xlarge",
    dtype: str = "bf16",
    tp: int = 1,
    engine: dict | None = None,
    extra: str = "",
) -> str:
    text = (
        f"  - name: {name}\n    system: {system}\n    model: {model}\n    dtype: {dtype}\n"
        f"    instance_type: {instance}\n    tensor_parallel_degree: {tp}\n"
    )
    if engine:
        text += f"    engine: {json.dumps(engine)}\n"
    return text + extra


def load(tmp_path: Path, *endpoints: str):
    from deployment import load_config

    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    path.write_text("endpoints:\n" + "".join(endpoints))
    return load_config(path, build_root=tmp_path / "no-build")


def refusals(tmp_path: Path, *endpoints: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, *endpoints)
    return str(caught.value)


def build(tmp_path: Path, endpoint: str, name: str):
    from model_build.cli import build_endpoint

    plan = load(tmp_path, endpoint).plans[0]
    out = tmp_path / "build" / name
    return plan, build_endpoint(plan.spec, out, progress=False, engine=plan.engine), out
