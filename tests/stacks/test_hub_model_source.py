"""A JumpStart / private-hub model (`model_source:`) on the template: the Model's S3DataSource carries
HubAccessConfig and, only with `accept_eula: true`, ModelAccessConfig; no artifact manifest is needed to synthesize
(allow_unbuilt off) and no published-artifact check is added; the execution role reads the hub's prefix only; and
cfn-lint 1.58 passes the templates while a copy with a HubContentArn over the schema's 255 characters is reported."""

from __future__ import annotations

import copy
import json

import pytest
from cfn_lint_runner import lint_with_canary

GATED_ARN = "arn:aws:sagemaker:us-east-1:aws:hub-content/SageMakerPublicHub/Model/meta-textgeneration-llama-3-1-8b-instruct/2.0.0"
GATED_URI = "s3://jumpstart-private-cache-prod-us-east-1/meta-textgeneration/llama-3-1-8b-instruct/artifacts/inference-prepack/v2.0.0/"
PRIVATE_ARN = "arn:aws:sagemaker:us-east-1:123456789012:hub-content/team-hub/Model/qwen3-8b/1.0.0"
PRIVATE_URI = "s3://team-models-us-east-1/qwen3-8b/"
CONFIG = f"""\
environments:
  dev: {{region: us-east-1}}
endpoints:
  - name: llama-js
    system: lmi-vllm
    model: meta-llama/Llama-3.1-8B-Instruct
    model_parameters: 8030261248
    dtype: bf16
    instance_type: ml.g6e.2xlarge
    model_source:
      hub_content_arn: {GATED_ARN}
      s3_uri: {GATED_URI}
      accept_eula: true
  - name: qwen-hub
    system: vllm
    model: Qwen/Qwen3-8B
    model_parameters: 8190735360
    dtype: bf16
    instance_type: ml.g6e.2xlarge
    model_source: {{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}
"""
STACKS = {"llama-js": "llm-endpoints-dev-llama-js", "qwen-hub": "llm-endpoints-dev-qwen-hub"}


@pytest.fixture(scope="module")
def hub(synth, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    path = root / "hub.yaml"
    path.write_text(CONFIG)
    # An empty build root and allow_unbuilt off: a hub model needs no manifest.
    return synth(str(path), "dev", build_root=root / "build", allow_unbuilt=False)


def _source(hub, name: str) -> dict:
    [model] = hub.resources(STACKS[name], "AWS::SageMaker::Model")
    return model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]


def test_the_model_reads_the_hub_prefix_with_hub_access_and_the_accepted_eula(hub):
    assert _source(hub, "llama-js") == {
        "S3Uri": GATED_URI,
        "S3DataType": "S3Prefix",
        "CompressionType": "None",
        "HubAccessConfig": {"HubContentArn": GATED_ARN},
        "ModelAccessConfig": {"AcceptEula": True},
    }


def test_no_eula_is_accepted_unless_the_config_says_so(hub):
    source = _source(hub, "qwen-hub")
    assert source["HubAccessConfig"] == {"HubContentArn": PRIVATE_ARN}
    assert "ModelAccessConfig" not in source


def test_no_artifact_check_and_the_role_reads_only_the_hub_prefix(hub):
    for name, uri in (("llama-js", GATED_URI), ("qwen-hub", PRIVATE_URI)):
        template = hub.templates[STACKS[name]]
        # The stack's own smoke check is its one custom resource: no artifact check (nothing of ours is published).
        customs = [k for k, r in template["Resources"].items() if r["Type"].startswith("AWS::CloudFormation::Custom")]
        assert customs and all(k.startswith("SmokeCheck") for k in customs), customs
        assert "ArtifactCheck" not in json.dumps(template)
        bucket, prefix = uri.removeprefix("s3://").split("/", 1)
        gets = [
            st["Resource"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy" and "ExecutionRole" in json.dumps(r["Properties"]["Roles"])
            for st in r["Properties"]["PolicyDocument"]["Statement"]
            if st["Action"] == "s3:GetObject"
        ]
        assert gets == [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{bucket}/{prefix}*"]]}]


def test_cfn_lint_passes_and_reports_a_hub_content_arn_over_the_schema(hub, tmp_path):
    canary = copy.deepcopy(hub.templates[STACKS["qwen-hub"]])
    [model] = [r for r in canary["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    access = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["HubAccessConfig"]
    access["HubContentArn"] = "arn:" + "x" * 300
    templates = {stack: hub.templates[stack] for stack in STACKS.values()}
    in_templates, [finding] = lint_with_canary(tmp_path, templates, canary)
    assert in_templates == []
    assert finding["Location"]["Path"][-1] == "HubContentArn", finding
