"""Fixtures of the stack tests: the pipeline app with the GPU build options (cdk-nag runs in synth; the plain
pipeline's synth, `pipeline_synth`, is in tests/conftest.py with the template scan that reads it), and one guarded
inference-component endpoint stack."""

from __future__ import annotations

import json

import pytest
from helpers import (
    DOCKER_HUB_SECRET,
    HF_SECRET,
    PIPELINE_CONFIG,
    TOOLS,
    cdk_context,
    environment_plans_with,
    made_once,
    run_dir_of,
)


@pytest.fixture(scope="session")
def gpu_pipeline(tmp_path_factory) -> dict:
    """The GPU option, a Hugging Face token from Secrets Manager, and an own image built with a Docker Hub login,
    synthesized with cdk-nag (one environment only, to keep it quick); tests/stacks/test_image_references.py reads it too."""
    environment_plans, spec = environment_plans_with(
        **{
            "pipeline.build": {"compute": "SMALL", "gpu": True, "hf_token": HF_SECRET},
            "pipeline.images": {"compute": "X2_LARGE", "timeout_minutes": 180, "docker_hub_secret": DOCKER_HUB_SECRET},
            "endpoints.0.system": "deepspeed-byoc",
            "pipeline.stages": ["dev"],
            "pipeline.manual_approval_before": [],
        }
    )
    entry = run_dir_of(tmp_path_factory) / "shared-synth" / "gpu-pipeline"  # once per run, whichever worker asks first
    outdir = entry / "cdk.out"
    with made_once(entry, outdir / "P.template.json") as to_make:
        if to_make:
            import aws_cdk as cdk

            from stacks.nag import add_nag_checks
            from stacks.pipeline_stack import PipelineStack

            app = cdk.App(context=cdk_context(), outdir=str(outdir))
            PipelineStack(
                app,
                "P",
                config_path=PIPELINE_CONFIG,
                environment_plans=environment_plans,
                pipeline=spec,
                env={"account": TOOLS, "region": "us-east-1"},
            )
            add_nag_checks(app)
            app.synth()  # the GPU image's own findings (CB5, ecr:GetAuthorizationToken) are acknowledged
    return json.loads((outdir / "P.template.json").read_text())


# An inference-component endpoint with what config/examples/production.yaml's assist-ic leaves out: a rolling update
# of the component with its rollback alarms, and a created VPC (tests/stacks/test_inference_components.py,
# test_alarms.py).
GUARDED_COMPONENT = """\
project: llm-endpoints
environments:
  prod: {account: "111122223333", region: us-east-1}
endpoints:
  - name: guarded-ic
    system: lmi-vllm
    model: EleutherAI/gpt-j-6B
    instance_type: ml.g5.12xlarge
    tensor_parallel_degree: 1
    hosting:
      mode: inference-components
      instance_scaling: {min_instances: 1, max_instances: 3}   # 12 GPUs: 8 copies and a rolling batch (R5)
      copies: 2
      copy_scaling: {min_copies: 2, max_copies: 8, target_concurrency: 4}
    deployment: {rolling: {maximum_batch_size: {copies: 1}, wait_interval_s: 600}}
    network: {create_vpc: true}
"""


@pytest.fixture(scope="session")
def guarded_component(tmp_path_factory) -> dict:
    """GUARDED_COMPONENT's endpoint stack template (its stack alone, ~2 s)."""
    from helpers import synthesize_endpoint_stack

    path = tmp_path_factory.mktemp("guarded-component") / "guarded.yaml"
    path.write_text(GUARDED_COMPONENT)
    return synthesize_endpoint_stack(path, "prod", "guarded-ic")


@pytest.fixture
def plan_of(tmp_path):
    """The EndpointPlan of one config entry (a dict), planned as load_config plans each entry of a file (names as
    its environment "dev" of project llm-endpoints gives them), for a construct tested on its own."""
    from deployment.plan import plan_endpoint
    from endpoint_config import EndpointSpec
    from systems import get_system

    def plan(entry: dict):
        spec = EndpointSpec.model_validate(entry)
        return plan_endpoint(
            spec,
            get_system(spec.system),
            project="llm-endpoints",
            environment_name="dev",
            endpoint_name=f"llm-endpoints-dev-{spec.name}",
            stack_name=f"llm-endpoints-dev-{spec.name}",
            emulator=False,
            build_root=tmp_path,
        )

    return plan
