"""The lmi-trtllm system's whole path on the local emulator, answered by the stand-in container (local_runtime/stand_in.py says why):
config/scenarios/lmi-trtllm.yaml through the demo's chain (tests/local/system_scenario.py)."""

import pytest
from system_scenario import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.emulator]


def test_lmi_trtllm_scenario(tmp_path, record_property):
    run_scenario("lmi-trtllm", "stand-in", tmp_path, record_property)
