"""Fixtures of the local-emulator tests: `make demo`'s chain run as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from system_scenario import run_demo


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str, Path]:
    """`make demo`'s (exit code, stdout, stderr, its --logs folder)."""
    logs = tmp_path_factory.mktemp("demo") / "logs"
    result = run_demo(logs)
    return result.returncode, result.stdout, result.stderr, logs
