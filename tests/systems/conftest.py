"""Fixtures of the serving-system tests: the tiny source models only some systems need (the root conftest
makes the tiny GPT-2 and GPT-J every area uses)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_gptj(tiny_models: dict[str, Path]) -> Path:
    """The tiny GPT-J source model (DeepSpeed kernel injection's architecture)."""
    return tiny_models["gptj"]


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny T5 (FasterTransformer's flan-t5 shape), made offline."""
    from model_build.tiny_models import make_tiny_model

    return make_tiny_model("t5", tmp_path_factory.mktemp("tiny-t5") / "t5")
