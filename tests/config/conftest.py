"""Fixtures of the config tests: every example config synthesized in every environment it defines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import EXAMPLE_CASES, ROOT, Background


@pytest.fixture(scope="session")
def all_examples(synth, background, tmp_path_factory):
    """{(config path, environment): Synthesized} for every example (helpers.EXAMPLE_CASES), cdk-nag included; starts
    cfn-lint on all their templates in the background (test_examples.py collects it, last)."""
    examples = {case: synth(*case) for case in EXAMPLE_CASES}
    paths = [str(s.outdir / f"{name}.template.json") for s in examples.values() for name in s.templates]
    background.setdefault("examples-cfn-lint", Background(
        [str(ROOT / ".venv" / "bin" / "cfn-lint"), *paths], directory=tmp_path_factory.mktemp("examples-cfn-lint")))
    return examples


@pytest.fixture(scope="session")
def cli_synth_of_an_example(background, tmp_path_factory) -> tuple[Background, Path]:
    """The real CDK CLI synthesizing config/examples/hf-fastload.yaml (prod) into a fresh directory, in the
    background (~15 s of node and a Python app): (the run, its output directory)."""
    out = tmp_path_factory.mktemp("cli-synth") / "cdk.out"
    command = [str(ROOT / "node_modules/.bin/cdk"), "synth", "--no-notices", "-q", "-c",
               "config=config/examples/hf-fastload.yaml", "-c", "env=prod", "-c", "allow_unbuilt=true", "-o", str(out)]
    env = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "PATH": f"{ROOT / '.venv/bin'}:{os.environ['PATH']}"}
    run = background.setdefault("cli-synth", Background(command, directory=out.parent / "log", env=env))
    return run, out


@pytest.fixture(scope="session", autouse=True)
def _background_commands_start_with_the_config_tests(request):
    """Start the config tests' background commands at their first test, when the session runs a test that reads one."""
    for fixture in ("cli_synth_of_an_example",):
        if any(fixture in item.fixturenames for item in request.session.items):
            request.getfixturevalue(fixture)
