"""Fixtures of the config tests: every example config synthesized in every environment it defines, and the real CDK
CLI's synths."""

from __future__ import annotations

import pytest
from helpers import EXAMPLE_CASES


@pytest.fixture(scope="session")
def all_examples(synth):
    """{(config path, environment): Synthesized} for every example (helpers.EXAMPLE_CASES), cdk-nag included (cfn-lint
    and checkov scan them: tests/conftest.py template_scan)."""
    return {case: synth(*case) for case in EXAMPLE_CASES}
