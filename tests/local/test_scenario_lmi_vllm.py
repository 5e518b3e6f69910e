"""The lmi-vllm system's whole path on the local emulator, answered by the stand-in container (local_runtime/stand_in.py says why):
config/scenarios/lmi-vllm.yaml through the demo's chain (tests/local/system_scenario.py)."""

import pytest
from system_scenario import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.emulator]


def test_lmi_vllm_scenario(tmp_path, record_property):
    run_scenario("lmi-vllm", "stand-in", tmp_path, record_property)
