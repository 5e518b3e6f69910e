"""Where the pipeline's stage rollback fires (operations review F4, issue 33 item 4), checked on the synthesized
pipeline (stacks/pipeline_stack.py; CodePipeline cannot run here, so the template is what is checked and the rollback
itself is unverified until an account runs it: docs/design/guards.md "Pipeline"):

- <env>-endpoints holds the endpoint stacks' deploy actions and nothing else, and is the only stage with OnFailure
  ROLLBACK: it fails only when a stack's deploy failed (its smoke check custom resource, or any resource, failed and
  CloudFormation rolled that stack back), and its rollback execution is deploy actions only, with no pipeline smoke
  step that would find the stack UPDATE_ROLLBACK_COMPLETE and no load test whose noise could fail it;
- <env>-artifacts (Preflight, ModelBuild) has no rollback: a refusal or a failed build changes no endpoint;
- <env>-slo-gate (the SLO gates) has no rollback: a miss stops the promotion and rolls nothing back, as `make deploy`."""

from __future__ import annotations


def _stages(pipeline_synth) -> list[dict]:
    _, _, template, _ = pipeline_synth
    [pipeline] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    assert pipeline["Properties"].get("PipelineType") == "V2"  # stage conditions need V2
    return pipeline["Properties"]["Stages"]


def test_only_the_endpoints_stages_roll_back_and_they_hold_only_deploy_actions(pipeline_synth):
    stages = _stages(pipeline_synth)
    rolling = [s["Name"] for s in stages if "OnFailure" in s]
    assert rolling == ["dev-endpoints", "prod-endpoints"]
    for stage in stages:
        if stage["Name"] in rolling:
            assert stage["OnFailure"] == {"Result": "ROLLBACK"}
            # the endpoint stacks' change sets, prepared and executed by CloudFormation: no CodeBuild step (no smoke
            # step, no SLO gate, no build) whose failure or rerun could fail the stage or its rollback
            providers = {(a["ActionTypeId"]["Category"], a["ActionTypeId"]["Provider"]) for a in stage["Actions"]}
            assert providers == {("Deploy", "CloudFormation")}, stage["Name"]
            modes = sorted(a["Configuration"]["ActionMode"] for a in stage["Actions"])
            assert modes == ["CHANGE_SET_EXECUTE", "CHANGE_SET_REPLACE"], stage["Name"]


def test_no_pipeline_smoke_step_anywhere(pipeline_synth):
    """Each deploy action ran its stack's own smoke check (stacks/smoke_check.py), so a deploy that succeeded has
    passed it; a pipeline smoke step after a stack CloudFormation rolled back failed the rollback for nothing."""
    steps = [
        a["Name"] for s in _stages(pipeline_synth) for a in s["Actions"] if a["ActionTypeId"]["Provider"] == "CodeBuild"
    ]
    assert "Synth" in steps and not [n for n in steps if n.startswith("Smoke-")], steps


def test_the_slo_gates_have_their_own_stage_after_the_endpoints_without_rollback(pipeline_synth):
    stages = _stages(pipeline_synth)
    names = [s["Name"] for s in stages]
    for env in ("dev", "prod"):
        gate = stages[names.index(f"{env}-slo-gate")]
        assert names.index(f"{env}-slo-gate") == names.index(f"{env}-endpoints") + 1
        assert "OnFailure" not in gate
        assert [a["Name"] for a in gate["Actions"]] == ["SloGate-gptj-fastload"]
        assert gate["Actions"][0]["ActionTypeId"]["Provider"] == "CodeBuild"
    # a miss in dev stops the promotion: prod's stages come after dev's gate
    assert names.index("dev-slo-gate") < names.index("prod-artifacts")
