"""The deepspeed-byoc system's whole path on the local emulator, answered by our own server's CPU path (local_runtime/byoc_container.py):
config/scenarios/deepspeed-byoc.yaml through the demo's chain (tests/local/system_scenario.py)."""

import pytest
from system_scenario import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.emulator]


def test_deepspeed_byoc_scenario(tmp_path, record_property):
    run_scenario("deepspeed-byoc", "byoc", tmp_path, record_property)
