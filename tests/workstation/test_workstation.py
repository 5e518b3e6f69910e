"""`make deploy` / `make destroy` against the local emulator: preflight, build, publish, deploy, smoke, destroy."""

from __future__ import annotations

import subprocess

import pytest
from helpers import ROOT

pytestmark = pytest.mark.emulator

GOOD_REPLY = [{"generated_text": " Paris."}]


def test_make_deploy_and_destroy_run_the_workstation_commands():
    """The targets run `python -m workstation deploy|destroy` with the config and environment given. What that code
    does end to end (preflight, build, synth, bootstrap, deploy, publish, smoke test, destroy, nothing left) runs in
    tests/local/test_emulator_demo.py, which drives the same workstation.deploy/destroy against the emulator; the test
    below runs `make deploy` for real up to its first failing check."""
    for target in ("deploy", "destroy"):
        planned = subprocess.run(
            ["make", "--no-print-directory", "-n", target, "CONFIG=config/local.yaml", "ENV=local"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert planned.returncode == 0, planned.stderr
        assert f"-m workstation {target} --config config/local.yaml --env local" in planned.stdout


def test_make_deploy_stops_at_the_first_failed_preflight_check(make_env, tmp_path):
    """Credentials of another account: the deploy stops before building or deploying anything."""
    config = tmp_path / "other-account.yaml"
    config.write_text(
        (ROOT / "config" / "local.yaml").read_text().replace('account: "123456789012"', 'account: "111122223333"')
    )
    result = subprocess.run(
        ["make", "--no-print-directory", "deploy", f"CONFIG={config}", "ENV=local"],
        cwd=ROOT,
        env=make_env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "preflight failed" in result.stderr and "111122223333" in result.stderr
    assert "Traceback" not in result.stderr and "==> cdk" not in result.stdout
