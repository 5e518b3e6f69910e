"""After `cdk deploy`, `make deploy` prints each endpoint's smoke test and runs the SLO gates (workstation/deploy.py
check_deployed). The stacks' own smoke checks already guarded the deploy (CloudFormation rolled back a failed one), so a
miss here has one consequence: DeployError naming it (exit 2), nothing rolled back, and how to return
(docs/design/guards.md, "The SLO gate")."""

from __future__ import annotations

import pytest

from workstation import deploy


def test_an_slo_miss_fails_the_deploy_naming_it_and_rolls_nothing_back(monkeypatch):
    gated = []
    monkeypatch.setattr(deploy, "smoke_tests", lambda *a, **k: {})
    monkeypatch.setattr(
        deploy,
        "slo_misses",
        lambda *a, skip, **k: gated.append(skip) or {"chat": "SLO gate of chat: p95 TTFT 900 ms > 500 ms at 4"},
    )
    with pytest.raises(deploy.DeployError) as raised:
        deploy.check_deployed(object(), session=object(), echo=lambda _: None)  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("SLO gate of chat: p95 TTFT 900 ms > 500 ms at 4")
    assert "serve the version this deploy made" in message and "deploy the previous config" in message
    assert gated == [set()]


def test_an_endpoint_whose_smoke_test_fails_after_the_deploy_is_not_load_tested(monkeypatch):
    gated = []
    monkeypatch.setattr(deploy, "smoke_tests", lambda *a, **k: {"chat": "smoke test of chat failed: invoke: 503"})
    monkeypatch.setattr(deploy, "slo_misses", lambda *a, skip, **k: gated.append(skip) or {})
    with pytest.raises(deploy.DeployError, match="smoke test of chat failed"):
        deploy.check_deployed(object(), session=object(), echo=lambda _: None)  # type: ignore[arg-type]
    assert gated == [{"chat"}]


def test_the_workstation_keeps_no_rollback_of_its_own():
    """CloudFormation rolls a stack back (its smoke check custom resource); the snapshot-and-UpdateStack rollback is
    gone, and with it the user's own cloudformation:UpdateStack (operations review F11)."""
    source = deploy.__file__ and open(deploy.__file__).read()
    assert "update_stack" not in source and "UpdateStack" not in source and "take_snapshot" not in source
