"""A first deploy interrupted between CloudFormation's CreateChangeSet and ExecuteChangeSet leaves its stack
REVIEW_IN_PROGRESS, holding nothing; `make deploy` recognises it and creates it again (workstation/deploy.py
recreate_abandoned_first_deploys; issue 37 item 11). On the emulator with the real CDK CLI: `cdk deploy --no-execute`
stops a first deploy exactly there."""

from __future__ import annotations

import subprocess

import boto3
import pytest
import yaml
from helpers import ROOT, synthesize
from hermetic import subprocess_env

from local_emulator import moto_server
from workstation.deploy import DeployError, recreate_abandoned_first_deploys

pytestmark = [pytest.mark.emulator, pytest.mark.e2e]
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")


def _cdk(args: list[str], assembly, emulator) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [CDK, *args, "--no-notices", "--app", str(assembly)],
        cwd=ROOT,
        env=subprocess_env(**emulator.client_env()),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def test_an_interrupted_first_deploy_is_deleted_and_created_again(moto_env, tmp_path):
    spec = yaml.safe_load((ROOT / "config" / "local.yaml").read_text())
    spec["project"] = "abandoned"
    spec["environments"]["local"]["retain_data"] = True  # the artifact stack alone: bucket, logs bucket, repository
    config = tmp_path / "abandoned.yaml"
    config.write_text(yaml.safe_dump(spec))
    assembly = synthesize(config, "local", tmp_path / "cdk.out").outdir
    stack = "abandoned-local-artifacts"
    _cdk(["bootstrap", f"aws://{moto_server.EMULATOR_ACCOUNT}/{moto_server.EMULATOR_REGION}"], assembly, moto_env)
    _cdk(["deploy", stack, "--exclusively", "--no-execute", "--require-approval", "never"], assembly, moto_env)

    session = boto3.Session(region_name=moto_env.region)
    cfn = session.client("cloudformation")
    assert cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"] == "REVIEW_IN_PROGRESS"
    said: list[str] = []
    assert recreate_abandoned_first_deploys(session, [stack, "abandoned-local-never-deployed"], echo=said.append) == [
        stack
    ]
    assert "REVIEW_IN_PROGRESS by an interrupted first deploy" in said[0]
    assert not [
        s
        for s in cfn.list_stacks()["StackSummaries"]
        if s["StackName"] == stack and s["StackStatus"] != "DELETE_COMPLETE"
    ]

    _cdk(["deploy", stack, "--exclusively", "--require-approval", "never"], assembly, moto_env)
    assert cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    assert recreate_abandoned_first_deploys(session, [stack], echo=said.append) == []  # a settled stack is left alone


def test_a_stack_whose_change_set_is_executing_is_not_touched(moto_env):
    session = boto3.Session(region_name=moto_env.region)
    cfn = session.client("cloudformation")
    template = '{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}'
    cfn.create_change_set(StackName="busy", ChangeSetName="cs", ChangeSetType="CREATE", TemplateBody=template)
    real = cfn.list_change_sets

    def executing(**kwargs):  # another deploy's ExecuteChangeSet under way, as CloudFormation lists it
        answer = real(**kwargs)
        for summary in answer["Summaries"]:
            summary["ExecutionStatus"] = "EXECUTE_IN_PROGRESS"
        return answer

    cfn.list_change_sets = executing  # type: ignore[method-assign]
    session.client = lambda name, **kw: cfn  # type: ignore[method-assign]
    with pytest.raises(DeployError, match="is being created by another deploy"):
        recreate_abandoned_first_deploys(session, ["busy"], echo=lambda _: None)
