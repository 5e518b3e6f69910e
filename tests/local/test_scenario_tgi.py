"""The tgi system's whole path on the local emulator, answered by the stand-in container's TGI router rules
(local_runtime/tgi_router.py): config/scenarios/tgi.yaml through the demo's chain (tests/local/system_scenario.py)."""

import pytest
from system_scenario import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.emulator]


def test_tgi_scenario(tmp_path, record_property):
    out = run_scenario("tgi", "stand-in", tmp_path, record_property)
    # TGI's router streams chat as server-sent events, which the openai SDK reads through SageMaker's OpenAI route
    assert "a chat exchange through the openai SDK, streamed" in out, out[-3000:]
    # TGI has no min_new_tokens (its unread_parameters): the SLO gate does not ask it, and says so
    assert "note  output lengths were not fixed (the container reads no min_new_tokens)" in out, out[-3000:]
