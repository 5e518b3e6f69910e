"""The tiny models the repository's configs name exist before any test reads those configs (tests/conftest.py
`_repository_tiny_models_exist`): a plan reads a local model's folder when it is there (the volume sized from its
weights, chat turned on by its template), so without them a test's templates depended on whether a demo had run
earlier in the session (config/local.yaml's endpoint: VolumeSizeInGB 11 with build/tiny-models/gpt2, none
without it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import ROOT, TINY_MODELS, make_repository_tiny_models, repository_tiny_models, synthesize

from deployment import load_config


def test_every_tiny_model_a_repository_config_names_exists_during_the_session():
    named = repository_tiny_models()
    assert "gpt2" in named, named  # config/local.yaml's, `make demo`'s default
    assert [arch for arch in named if not (ROOT / TINY_MODELS / arch / "config.json").is_file()] == []


def test_the_maker_makes_only_what_is_missing_and_only_tiny_models(tmp_path: Path):
    (tmp_path / "config").mkdir()
    endpoints = [
        {"name": "a", "model": "build/tiny-models/gpt2"},
        {"name": "b", "model": "Qwen/Qwen3-8B"},  # a Hub model: the build's to fetch
        {"name": "c", "model": "build/tiny-models/not-an-architecture"},
    ]
    (tmp_path / "config" / "x.yaml").write_text(yaml.safe_dump({"endpoints": endpoints}))
    (tmp_path / "config" / "notes.yaml").write_text("- a list, not a config\n")
    assert make_repository_tiny_models(tmp_path) == ["gpt2"]
    assert (tmp_path / TINY_MODELS / "gpt2" / "config.json").is_file()
    assert [p.name for p in (tmp_path / TINY_MODELS).iterdir() if p.name != ".making.lock"] == ["gpt2"]
    assert make_repository_tiny_models(tmp_path) == []


def test_the_default_configs_template_is_sized_from_its_tiny_model(tmp_path: Path):
    """What the fixture fixes: config/local.yaml synthesized unbuilt reads build/tiny-models/gpt2's weights."""
    templates = synthesize("config/local.yaml", "local", tmp_path / "cdk.out").templates
    configs = [
        resource["Properties"]
        for resource in templates["llm-endpoints-local-tiny-gpt2"]["Resources"].values()
        if resource["Type"] == "AWS::SageMaker::EndpointConfig"
    ]
    sized = load_config(ROOT / "config/local.yaml", "local").plans[0].volume_size_gb
    assert sized is not None
    assert [variant.get("VolumeSizeInGB") for config in configs for variant in config["ProductionVariants"]] == [sized]
