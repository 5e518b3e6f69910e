"""Fixtures of the workstation tests: the environment `make deploy` / `make destroy` run in against the emulator."""

from __future__ import annotations

import os

import pytest
from helpers import ROOT


@pytest.fixture
def make_env(emulator) -> dict[str, str]:
    """This process's environment with the emulator's endpoint and credentials, and the project's venv first on
    PATH, as a developer's shell has it after `make install`."""
    return {**os.environ, **emulator.client_env(), "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
