"""Fixtures of the config tests: every example config synthesized in every environment it defines."""

from __future__ import annotations

import pytest
from helpers import EXAMPLE_CASES


@pytest.fixture(scope="session")
def all_examples(synth):
    """{(config path, environment): Synthesized} for every example (helpers.EXAMPLE_CASES), cdk-nag included."""
    return {case: synth(*case) for case in EXAMPLE_CASES}
