"""Shared fixtures. Synth costs ~5 s the first time in a process and ~0.2 s after, so every configuration is
synthesized once per session and its templates shared by all tests."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The Node that package.json installs (Node 20 is end-of-life), for jsii in this process and the CDK CLI in subprocesses.
os.environ["PATH"] = f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
# Synth must not depend on the machine's AWS settings.
for _var in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
    os.environ.pop(_var, None)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAKE_HASH = "ab" * 32


@dataclass
class Synthesized:
    outdir: Path
    templates: dict[str, dict]  # stack name -> template JSON
    stacks: dict[str, object]

    def template(self, stack_name: str):
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[stack_name])

    def resources(self, stack_name: str, type_name: str) -> list[dict]:
        return [r for r in self.templates[stack_name]["Resources"].values() if r["Type"] == type_name]


def cdk_context() -> dict:
    """An App built in-process does not read cdk.json: merge its context so tests see what `cdk synth` sees."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def write_fake_manifest(build_root: Path, name: str, system: str, dtype: str, content_hash: str = FAKE_HASH) -> None:
    """What the stack reads from a build: system, dtype and content hash (synth needs no weights)."""
    d = build_root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({"system": system, "dtype": dtype, "content_hash": content_hash}))


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
def synth(tmp_path_factory):
    """synth(config, env=None, build_root=None, allow_unbuilt=True) -> Synthesized, cached per session."""
    import aws_cdk as cdk

    from deployment import load_config
    from stacks import add_stacks

    cache: dict[tuple, Synthesized] = {}

    def _synth(config: str, env: str | None = None, build_root: Path | None = None, allow_unbuilt: bool = True):
        key = (config, env, str(build_root), allow_unbuilt)
        if key not in cache:
            outdir = tmp_path_factory.mktemp("cdkout")
            app = cdk.App(context=cdk_context(), outdir=str(outdir))
            deployment = load_config(ROOT / config, env)
            stacks = add_stacks(
                app, deployment, build_root=build_root or outdir / "no-build", allow_unbuilt=allow_unbuilt
            )
            app.synth()  # raises if cdk-nag finds anything unacknowledged
            templates = {
                name: json.loads((outdir / f"{name}.template.json").read_text()) for name in stacks
            }
            cache[key] = Synthesized(outdir, templates, stacks)
        return cache[key]

    return _synth


@pytest.fixture(scope="session")
def gpu_pipeline(tmp_path_factory) -> dict:
    """The GPU option, a Hugging Face token from Secrets Manager, and an own image built with a Docker Hub login,
    synthesized with cdk-nag (one environment only, to keep it quick); tests/test_image_references.py reads it too."""
    import aws_cdk as cdk
    from test_pipeline_stack import CONFIG, DOCKER_HUB_SECRET, HF_SECRET, TOOLS, _deployments_with

    from stacks.nag import add_nag_checks
    from stacks.pipeline_stack import PipelineStack

    deployments, spec = _deployments_with(
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
        app, "P", config_path=CONFIG, deployments=deployments, pipeline=spec,
        env={"account": TOOLS, "region": "us-east-1"},
    )
    add_nag_checks(app)
    app.synth()  # the GPU image's own findings (CB5, ecr:GetAuthorizationToken) are acknowledged
    return json.loads((outdir / "P.template.json").read_text())


@pytest.fixture(scope="session", autouse=True)
def _sagemaker_tables_load_endpoints_once():
    """sagemaker.core.image_uris.retrieve builds a new botocore endpoint resolver, reading botocore's endpoints.json
    (~0.1 s), on every call; the image tests ask it hundreds of questions. One resolver serves them all: the
    answers are the same, only faster."""
    import functools

    try:
        from sagemaker.core import common_utils
    except ImportError:
        yield
        return
    original = common_utils._botocore_resolver
    common_utils._botocore_resolver = functools.cache(original)
    yield
    common_utils._botocore_resolver = original
