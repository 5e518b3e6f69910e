"""The pipeline rolls an environment's endpoints back when its smoke test or SLO gate fails (operations review R1):
every <env>-endpoints stage, whose post steps are the smoke tests and SLO gates, carries OnFailure ROLLBACK, on a V2
pipeline (stacks/pipeline_stack.py _roll_back_failed_endpoint_stages). CodePipeline cannot run here: the template is
what is checked; the rollback itself is unverified until an account runs it (docs/design/guards.md)."""

from __future__ import annotations


def test_every_endpoints_stage_with_smoke_and_gate_steps_rolls_back_on_failure(pipeline_synth):
    _, _, template, _ = pipeline_synth
    [pipeline] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    props = pipeline["Properties"]
    assert props.get("PipelineType") == "V2"  # stage conditions need V2
    gated = []
    for stage in props["Stages"]:
        names = [a["Name"] for a in stage["Actions"]]
        checks = [n for n in names if n.startswith(("Smoke-", "SloGate-"))]
        if checks:
            gated.append(stage["Name"])
            assert stage.get("OnFailure") == {"Result": "ROLLBACK"}, stage["Name"]
            # the smoke tests and gates run after the stage's deploy actions, inside the stage that rolls back
            deploy_orders = [a["RunOrder"] for a in stage["Actions"] if a["ActionTypeId"]["Category"] == "Deploy"]
            check_orders = [a["RunOrder"] for a in stage["Actions"] if a["Name"] in checks]
            assert min(check_orders) > max(deploy_orders)
        else:
            assert "OnFailure" not in stage, stage["Name"]
    assert gated == ["dev-endpoints", "prod-endpoints"]
