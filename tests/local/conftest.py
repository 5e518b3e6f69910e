"""Fixtures of the local-emulator tests: `make demo`'s chain run as a user runs it."""

from __future__ import annotations

import pytest
from system_scenario import run_demo


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str]:
    """`make demo`'s (exit code, stdout, stderr)."""
    result = run_demo(tmp_path_factory.mktemp("demo") / "logs")
    return result.returncode, result.stdout, result.stderr
