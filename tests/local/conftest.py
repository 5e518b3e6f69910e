"""Fixtures of the local-emulator tests: `make demo`'s chain run as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from helpers import ROOT
from hermetic import python_path_env

from local_emulator import moto_server


def run_demo(logs, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m local_emulator.demo ARGS` (what `make demo` runs) on a free model-server port, in its own process
    group: a timeout stops what it started too (the emulator, the CDK CLI, the model server)."""
    command = [sys.executable, "-m", "local_emulator.demo", "--port", str(moto_server.free_port()), "--logs", str(logs)]
    process = subprocess.Popen(
        [*command, *args],
        cwd=ROOT,
        env=python_path_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str]:
    """`make demo`'s (exit code, stdout, stderr)."""
    result = run_demo(tmp_path_factory.mktemp("demo") / "logs")
    return result.returncode, result.stdout, result.stderr
