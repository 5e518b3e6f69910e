"""Fixtures of the stack tests: the pipeline app synthesized once per session, with and without the GPU build
options (cdk-nag runs in both synths), and one guarded inference-component endpoint stack."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import pytest
from helpers import (
    CHECKOV_CANARY,
    DOCKER_HUB_SECRET,
    EXAMPLE_CASES,
    HF_SECRET,
    PIPELINE_CONFIG,
    ROOT,
    TOOLS,
    Background,
    cdk_context,
    deployments_with,
    write_fake_manifest,
)

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"


@pytest.fixture(scope="session")
def pipeline_synth(tmp_path_factory):
    """config/examples/pipeline.yaml with -c pipeline=true, synthesized once per session (~18 s; cdk-nag runs in
    synth): (outdir, pipeline stack, pipeline template, {stage: {stack name: (template, account, template path)}})."""
    import aws_cdk as cdk

    from stacks.pipeline_stack import add_pipeline

    outdir = tmp_path_factory.mktemp("pipeline-cdkout")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    stack = add_pipeline(app, "config/examples/pipeline.yaml")
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    stages = {}
    for nested in ("dev-artifacts", "dev-endpoints", "prod-artifacts", "prod-endpoints"):
        sub = assembly.get_nested_assembly(f"assembly-{nested}")
        stages[nested] = {s.stack_name: (s.template, s.environment.account, s.template_full_path) for s in sub.stacks}
    template = json.loads((outdir / "llm-endpoints-pipeline.template.json").read_text())
    return outdir, stack, template, stages


@pytest.fixture(scope="session")
def gpu_pipeline(tmp_path_factory) -> dict:
    """The GPU option, a Hugging Face token from Secrets Manager, and an own image built with a Docker Hub login,
    synthesized with cdk-nag (one environment only, to keep it quick); tests/stacks/test_image_references.py reads it too."""
    import aws_cdk as cdk

    from stacks.nag import add_nag_checks
    from stacks.pipeline_stack import PipelineStack

    deployments, spec = deployments_with(
        **{
            "pipeline.build": {"compute": "SMALL", "gpu": True, "hf_token": HF_SECRET},
            "pipeline.images": {"compute": "X2_LARGE", "timeout_minutes": 180, "docker_hub_secret": DOCKER_HUB_SECRET},
            "endpoints.0.system": "deepspeed-byoc",
            "pipeline.stages": ["dev"], "pipeline.manual_approval_before": [],
        }
    )
    outdir = tmp_path_factory.mktemp("gpu-pipeline")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    PipelineStack(
        app, "P", config_path=PIPELINE_CONFIG, deployments=deployments, pipeline=spec,
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
      instance_scaling: {min_instances: 1, max_instances: 2}
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


# ---- checkov (tests/stacks/test_checkov.py): started early, in the background; its tests run last

def _suite_templates(synth, pipeline_synth, build_root: Path) -> dict[str, dict]:
    """Every template the suite synthesizes, by path under the scan dir (see checkov-skips.yaml's header)."""
    templates: dict[str, dict] = {}
    for config, env in EXAMPLE_CASES:  # test_examples.py's cases: every example file in every environment
        for name, template in synth(config, env).templates.items():
            templates[f"{Path(config).stem}/{env or 'default'}/{name}.template.json"] = template
    # As tests/stacks/test_stacks.py synthesizes the embedded default: a (fake) build, so no unbuilt placeholder.
    write_fake_manifest(build_root, "tiny-gpt2", "hf-fastload", "fp16")
    local = synth("config/local.yaml", build_root=build_root, allow_unbuilt=False)
    for name, template in local.templates.items():
        templates[f"local/local/{name}.template.json"] = template
    _, _, pipeline, stages = pipeline_synth
    templates["pipeline-stack/llm-endpoints-pipeline.template.json"] = pipeline
    for stage, stacks in stages.items():
        for name, (template, _, _) in stacks.items():
            templates[f"pipeline-stack/{stage}/{name}.template.json"] = template
    return templates


def _canary(templates: dict[str, dict]) -> dict:
    """The local artifact stack with the artifact bucket's public access block, versioning and logging removed."""
    canary = copy.deepcopy(templates["local/local/llm-endpoints-local-artifacts.template.json"])
    props = canary["Resources"]["ArtifactBucket"]["Properties"]
    del props["PublicAccessBlockConfiguration"], props["VersioningConfiguration"], props["LoggingConfiguration"]
    return canary



@pytest.fixture(scope="session")
def checkov_scan(synth, pipeline_synth, background, tmp_path_factory) -> tuple[dict[str, dict], Background, float]:
    """(templates by path under the scan dir, the checkov run, when it started): one checkov process per session
    scans one directory of every template the suite synthesizes plus the canary."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make checkov-env` (`make test` does)")
    templates = _suite_templates(synth, pipeline_synth, tmp_path_factory.mktemp("checkov-build"))
    templates[CHECKOV_CANARY] = _canary(templates)
    directory = tmp_path_factory.mktemp("checkov-templates")
    for relative, template in templates.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(template, indent=1))
    # checkov asks PyPI for a newer release at import unless this is set (checkov/common/util/banner.py).
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
    command = [str(CHECKOV), "-d", str(directory), "--framework", "cloudformation", "--skip-download", "--quiet",
               "--compact", "-o", "json"]  # fmt: skip
    started = time.monotonic()
    run = background.setdefault("checkov", Background(command, directory=tmp_path_factory.mktemp("checkov-run"), env=env))
    return templates, run, started


@pytest.fixture(scope="session", autouse=True)
def _checkov_starts_with_the_stack_tests(request):
    """Start the checkov scan at the first stack test when the session runs a test that reads it."""
    if any("scan" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("checkov_scan")
