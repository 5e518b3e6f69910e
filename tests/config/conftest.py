"""Fixtures of the config tests: every example config synthesized in every environment it defines, and the real
CDK CLI's runs in the background lane (tests/background.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from background import Background, starts_early
from helpers import EXAMPLE_CASES, ROOT


@pytest.fixture(scope="session")
def all_examples(synth):
    """{(config path, environment): Synthesized} for every example (helpers.EXAMPLE_CASES), cdk-nag included (cfn-lint
    and checkov scan them: tests/conftest.py template_scan)."""
    return {case: synth(*case) for case in EXAMPLE_CASES}


CLI_ENV = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "PATH": f"{ROOT / '.venv/bin'}:{os.environ['PATH']}"}


@starts_early
def start_cli_synths(request: pytest.FixtureRequest) -> dict[str, tuple[Background, Path]]:
    """The real CDK CLI, in the background (~10 s of node and a Python app each): {name: (the run, its output folder)}:
    "example" synthesizes config/examples/hf-fastload.yaml (prod), "bad-config" a file whose tensor parallel degree
    does not divide the instance's GPUs."""
    lane = request.getfixturevalue("background")
    root = request.getfixturevalue("tmp_path_factory").mktemp("cli-synth")
    bad = root / "bad.yaml"
    bad.write_text(
        "endpoints:\n  - {name: gptj, system: hf-fastload, model: EleutherAI/gpt-j-6b, instance_type: ml.g5.12xlarge, "
        "tensor_parallel_degree: 3}\n"
    )
    runs = {}
    for name, args in {
        "example": ["-c", "config=config/examples/hf-fastload.yaml", "-c", "env=prod", "-c", "allow_unbuilt=true"],
        "bad-config": ["-c", f"config={bad}"],
    }.items():
        out = root / name / "cdk.out"
        command = [str(ROOT / "node_modules/.bin/cdk"), "synth", "--no-notices", "-q", *args, "-o", str(out)]
        runs[name] = (lane.submit(f"cli-synth-{name}", command, env=CLI_ENV), out)
    return runs


@pytest.fixture(scope="session")
def cli_synths(request: pytest.FixtureRequest) -> dict[str, tuple[Background, Path]]:
    return start_cli_synths(request)
