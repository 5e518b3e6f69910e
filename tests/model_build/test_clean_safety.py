"""`model_build clean` stops, with nothing deleted, where what runs cannot be told (operations review R7, probes F6):
a stack in any status but a settled *_COMPLETE one, and an endpoint whose Model or EndpointConfig was deleted while it
runs."""

from __future__ import annotations

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from endpoint_config import artifact_bucket_name
from local_emulator import moto_server
from model_build.clean import CleanError, stack_resources, unsettled_stack_problem
from model_build.cli import main

ACCOUNT, REGION = moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION
RUNNING, STRAY = "b" * 64, "c" * 64


def stack_statuses() -> list[str]:
    """Every StackStatus botocore's cloudformation service model knows."""
    return list(botocore_shape("StackStatus").enum)


def botocore_shape(name: str):
    import botocore.session

    return botocore.session.get_session().get_service_model("cloudformation").shape_for(name)


class _Session:
    def __init__(self, **clients):
        self.clients = clients

    def client(self, name, **_):
        return self.clients.get(name) or boto3.client(name)


@pytest.mark.parametrize("status", stack_statuses())
def test_only_a_settled_stack_lets_the_clean_read_what_it_names(moto_env, status):
    """R7: UPDATE_ROLLBACK_FAILED (and every other *_FAILED or *_IN_PROGRESS status) used to pass when not
    *_IN_PROGRESS; ContinueUpdateRollback may still need the old config."""
    cfn = boto3.client("cloudformation")
    with Stubber(cfn) as stub:
        stub.add_response(
            "describe_stacks", {"Stacks": [{"StackName": "pf-dev-chat", "CreationTime": 0, "StackStatus": status}]}
        )
        if status.endswith("_COMPLETE"):
            stub.add_response("list_stack_resources", {"StackResourceSummaries": []})
            assert stack_resources(_Session(cloudformation=cfn), "pf-dev-chat") == set()
        else:
            with pytest.raises(CleanError, match=f"stack pf-dev-chat is {status}: .*nothing was deleted"):
                stack_resources(_Session(cloudformation=cfn), "pf-dev-chat")


def test_an_unknown_status_is_refused():
    assert "not a settled status" in unsettled_stack_problem("s", "SOMETHING_NEW")
    assert unsettled_stack_problem("s", "UPDATE_ROLLBACK_COMPLETE") is None


def test_an_endpoint_whose_model_was_deleted_keeps_its_artifact(moto_env, tmp_path, capsys):
    """F6: SageMaker lets a Model be deleted while an endpoint runs it. The clean counted that Model as nothing and
    `--delete` removed the running endpoint's artifact; now it stops and names the endpoint and the model."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "project": "pf",
                "environments": {"dev": {"emulator": True, "account": ACCOUNT, "region": REGION}},
                "endpoints": [
                    {"name": "chat", "system": "hf-fastload", "model": "gpt2", "instance_type": "ml.m5.xlarge"}
                ],
            }
        )
    )
    bucket = artifact_bucket_name("pf", "dev", ACCOUNT, REGION)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for h in (RUNNING, STRAY):
        s3.put_object(Bucket=bucket, Key=f"models/chat/{h}/manifest.json", Body=b"{}")
    sm = boto3.client("sagemaker")
    sm.create_model(
        ModelName="m-b",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
        PrimaryContainer={"Image": "i", "ModelDataUrl": f"s3://{bucket}/models/chat/{RUNNING}/model.tar.gz"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="ec-b",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m-b", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}
        ],
    )
    sm.create_endpoint(EndpointName="dev-chat", EndpointConfigName="ec-b")
    sm.delete_model(ModelName="m-b")

    assert main(["clean", "--config", str(config), "--env", "dev", "--build-root", str(tmp_path), "--delete"]) == 2
    err = capsys.readouterr().err
    assert "endpoint dev-chat runs model m-b, which no longer exists" in err and "nothing was deleted" in err
    left = {o["Key"].split("/")[2] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert left == {RUNNING, STRAY}
