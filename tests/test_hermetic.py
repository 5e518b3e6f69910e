"""The suite's result does not depend on the caller's shell (tests/hermetic.py), and no test reaches real AWS or the
Hub: the suite's AWS-using tests and tests/hermetic_probe.py run in a child pytest started from a hostile shell
(a profile that does not exist, another region, credentials, endpoint limits, the Hub online) and pass."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT
from hermetic import kept, subprocess_env

HOSTILE = {
    "AWS_PROFILE": "does-not-exist",
    "AWS_REGION": "ap-south-2",
    "AWS_DEFAULT_REGION": "ap-south-2",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "CDK_DEFAULT_ACCOUNT": "999999999999",
    "CDK_DEFAULT_REGION": "ap-south-2",
    "MAX_INPUT_CHARS": "7",
    "MAX_NEW_TOKENS": "3",
    "HF_HUB_OFFLINE": "0",
    "HF_HOME": "/nonexistent/hf-home",
    "PYTHONWARNINGS": "error",
}
# Test modules whose code calls AWS (through the emulator) or reads the endpoint limits.
AWS_USING = ["tests/model_build/test_clean.py", "tests/lambda/test_smoke.py", "tests/lambda/test_invoke_lambda.py"]


def test_no_hostile_variable_is_kept():
    assert not [name for name in HOSTILE if kept(name)]
    assert kept("PATH") and kept("PIP_CERT") and kept("PYTEST_XDIST_WORKER")


def test_subprocess_env_is_the_frozen_base_not_the_live_environment(monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "set-by-a-test")
    assert "AWS_PROFILE" not in subprocess_env()
    assert subprocess_env(EXTRA="1")["EXTRA"] == "1"


@pytest.mark.slow
def test_the_suites_aws_code_passes_from_a_hostile_shell(tmp_path):
    env = {**subprocess_env(), **HOSTILE}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-p", "no:xdist"]
    # the same socket guard as pytest.ini's addopts (cleared above so that -p no:xdist has nothing to fight)
    command += ["--allow-hosts=127.0.0.1,::1,localhost", "--allow-unix-socket", "--basetemp", str(tmp_path / "t")]
    result = subprocess.run(
        [*command, "tests/hermetic_probe.py", *AWS_USING],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


# A child that reports which of SIGINT (bit 1) and SIGQUIT (bit 2) its process ignores, from /proc/self/status.
IGNORED = "print(int([l for l in open('/proc/self/status') if l.startswith('SigIgn')][0].split(':')[1], 16) & 6)"


@pytest.mark.parametrize("restored", [True, False])
def test_a_suite_started_with_sigint_ignored_gives_its_children_the_default(restored: bool) -> None:
    """`make test &` from a script starts the suite with SIGINT and SIGQUIT ignored; hermetic.signals() (conftest)
    gives the tests' children Ctrl-C back. Without it the child inherits both ignored (the control case)."""
    import signal

    suite = (
        f"import subprocess, sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import hermetic; "
        + ("hermetic.signals(); " if restored else "")
        + f"subprocess.run([sys.executable, '-c', {IGNORED!r}])"
    )

    def ignore_like_a_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    done = subprocess.run(
        [sys.executable, "-c", suite],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=ignore_like_a_background_job,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("0" if restored else "6")
