"""Fixtures of the workstation tests: the environment `make deploy` / `make destroy` run in against the emulator."""

from __future__ import annotations

import pytest
from hermetic import subprocess_env


@pytest.fixture
def make_env(emulator) -> dict[str, str]:
    """This process's environment with the emulator's endpoint and credentials, and the project's venv first on
    PATH, as a developer's shell has it after `make install`."""
    return subprocess_env(**emulator.client_env())  # the venv's bin is on its PATH (tests/hermetic.py)
