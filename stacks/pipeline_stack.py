"""Continuous delivery with CDK Pipelines: source -> synth + tests -> per environment: artifacts, model build, endpoints,
SLO gates; a manual approval before the environments that ask for one.

Per environment: <env>-artifacts (the artifact stack, Preflight, ModelBuild), <env>-endpoints (the endpoint stacks
only, each running its own smoke check as a custom resource; the one stage that rolls back on failure) and, when an
endpoint has `slo:`, <env>-slo-gate (SloGate-<e>, no rollback: a miss stops the promotion). Cross-account steps assume
narrow roles the environment's stacks create (stacks/trusted_pipeline.py). Why: docs/design/guards.md "Pipeline".
The stages, why they are so, and the cross-account design: docs/design/pipeline.md.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Annotations, Duration, Stack, Stage, Tags, pipelines
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from deployment import ConfigError, EnvironmentPlan, check_pipeline, load_all_environments
from deployment.config_blocks import PipelineSpec
from systems.base import docker_hub_bases
from systems.images import ImagePin

from . import add_artifact_stack, add_endpoint_stacks, tag_environment
from .benchmark import gate_role_name
from .nag import acknowledge_pipeline_findings, add_nag_checks
from .trusted_pipeline import TrustedPipeline, role_name

ROOT = Path(__file__).resolve().parent.parent

COMPUTE_TYPES = {
    "SMALL": codebuild.ComputeType.SMALL,
    "MEDIUM": codebuild.ComputeType.MEDIUM,
    "LARGE": codebuild.ComputeType.LARGE,
    "X2_LARGE": codebuild.ComputeType.X2_LARGE,
}
# An AWS Deep Learning Container with CUDA and Python 3.12 (PyTorch 2.6, the framework of the pinned HF inference
# image, systems/images.py); CodeBuild pulls it from the DLC registry of the region. The tag is the one the
# `sagemaker` package's table gives (sagemaker.core.image_uris.retrieve("pytorch", version="2.6.0",
# py_version="py312", image_scope="inference", GPU instance)): tests/stacks/test_image_references.py checks every image a
# template names against those tables. "2.6.0-gpu-py312-cu124-ubuntu22.04" without the -ec2/-sagemaker suffix is
# not published (aws/deep-learning-containers release notes, v1.x-pt-*-2.6.0-inf-gpu-py312).
GPU_BUILD_IMAGE = ImagePin(
    repository="pytorch-inference",
    gpu_tag="2.6.0-gpu-py312",
    sdk_framework="pytorch",
    sdk_version="2.6.0",
)
# Ubuntu 24.04 standard image 8.0: Python 3.10-3.14 and Node.js 22/24 as runtime versions
# (aws/aws-codebuild-docker-images, ubuntu/standard/8.0/runtimes.yml). standard:7.0 offers Node 18/20 only, both
# end-of-life, and defaults to Python 3.11. CodeBuild picks an image's default runtimes unless the buildspec pins
# them (docs.aws.amazon.com/codebuild/latest/userguide/available-runtimes.html), so every curated-image step pins.
# aws-cdk-lib 2.273 has no LinuxBuildImage.STANDARD_8_0 constant (added in 2.274): the same image by its id.
CPU_BUILD_IMAGE = codebuild.LinuxBuildImage.from_code_build_image_id("aws/codebuild/standard:8.0")
RUNTIME_VERSIONS = {"python": "3.12", "nodejs": "24"}
# Runtime selection is not supported on custom images (the GPU DLC): those steps get no runtime-versions.
PINNED_RUNTIMES = codebuild.BuildSpec.from_object({"phases": {"install": {"runtime-versions": RUNTIME_VERSIONS}}})
# CDK Pipelines builds DockerImageAssets in its asset publishing projects (made privileged by CDK itself); synth only
# stages the Docker build context, so the synth project needs no Docker even for own containers.
DOCKER_FOR_SYNTH = False
SLO_GATE_TIMEOUT = Duration.minutes(60)
PREFLIGHT_TIMEOUT = Duration.minutes(15)
PREFLIGHT_ASSEMBLY_DIR = "synth-output"  # where the Preflight step finds the synthesized cloud assembly
TESTS_TIMEOUT = Duration.minutes(60)
# What each step installs (Makefile targets, one requirements set each): synth, preflight and the SLO gate need no torch.
SYNTH_INSTALL = "make venv-deploy cdk-cli"
CHECK_INSTALL = "make venv-deploy"  # also the model build step's: it checks what is published before installing more
MODEL_BUILD_INSTALL = "make venv-build"
# The CDK CLI the pipeline's self-mutation installs: the one package.json pins (it reads this aws-cdk-lib's cloud
# assemblies; CLI 3.x cannot). cdk-assets 4.7.3, the newest on npm, reads cloud assembly schema 54 at most, which is why
# requirements.txt pins aws-cdk-lib 2.273.0 (the last release on schema 54; 2.274+ write 55): tests/stacks/
# test_buildspecs.py runs this cdk-assets on the synthesized asset manifests.
CDK_CLI_VERSION = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
CDK_ASSETS_VERSION = "4.7.3"


# The CodeBuild actions CDK Pipelines gives its asset roles on "*" (PipelineStack._scope_asset_builds narrows them).
ASSET_BUILD_ACTIONS = ("codebuild:BatchGetBuilds", "codebuild:StartBuild", "codebuild:StopBuild")


def _listed(value: object) -> list:
    return value if isinstance(value, list) else [value]


def _profile_commands(profile: str, role_arn: str, region: str) -> list[str]:
    """Write an AWS profile that assumes `role_arn` with the CodeBuild container's own credentials."""
    body = f"[profile {profile}]\\nrole_arn = {role_arn}\\ncredential_source = EcsContainer\\nregion = {region}\\n"
    return ["mkdir -p ~/.aws", f"printf '{body}' >> ~/.aws/config"]


@dataclass(frozen=True)
class _EndpointStep:
    """A pipeline step that checks one deployed endpoint under a role of its stack: the SLO gate."""

    name: str  # the step's id prefix (and its CodeBuild role's: <name>Role-<env>-<endpoint>)
    title: str  # what the role's description calls it
    role: str  # what the role's description calls the endpoint stack's role
    profile: str  # the AWS profile that assumes the endpoint stack's role
    command: str  # the model_build command
    compute_type: codebuild.ComputeType
    extra_args: str = ""


# 4 vCPUs: the load generator spreads streams over processes (one per 4 in flight, load_testing/loadtest.py
# processes_for), so its own CPU does not cap what it measures at the gate's usual levels.
SLO_GATE_STEP = _EndpointStep(
    "SloGate", "SLO gate", "SLO gate", "slo", "slo-gate", codebuild.ComputeType.MEDIUM, extra_args=" --quiet"
)


class PipelineStack(Stack):
    """Keyword-only props:
    config_path: the config file, relative to the repository root (the pipeline's steps read it from the source).
    environment_plans: every environment of that file, planned (`deployment.load_all_environments`).
    pipeline: the file's `pipeline:` section.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config_path: str,
        environment_plans: dict[str, EnvironmentPlan],
        pipeline: PipelineSpec,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config_path = config_path
        self.pipeline_spec = pipeline
        self.gpu_build_image = GPU_BUILD_IMAGE
        first = environment_plans[pipeline.stages[0]]
        project = first.project
        self.pipeline_account = self.account
        check_pipeline(config_path, environment_plans, pipeline, self.region)

        source = pipelines.CodePipelineSource.connection(
            pipeline.repository, pipeline.branch, connection_arn=pipeline.connection_arn
        )
        # Synth needs only the deploy set (no torch): `make synth-pipeline` runs the CDK CLI with the venv's python3
        # first on PATH, which cdk.json's "python3 app.py" needs (a bare `npx cdk synth` would run the system python).
        self.synth_step = pipelines.CodeBuildStep(
            "Synth",
            input=source,
            install_commands=[SYNTH_INSTALL],
            commands=[f"make synth-pipeline CONFIG={shlex.quote(config_path)}"],
            build_environment=codebuild.BuildEnvironment(
                build_image=CPU_BUILD_IMAGE, compute_type=codebuild.ComputeType.MEDIUM
            ),
            partial_build_spec=PINNED_RUNTIMES,
            primary_output_directory="cdk.out",
        )
        # The test suite gates every deployment; it needs the whole dev set (torch, transformers), so it runs in its
        # own step rather than in synth, which the self-mutation waits for.
        self.tests_step = pipelines.CodeBuildStep(
            "Tests",
            input=source,
            commands=["make test"],
            build_environment=codebuild.BuildEnvironment(
                build_image=CPU_BUILD_IMAGE, compute_type=codebuild.ComputeType.LARGE
            ),
            partial_build_spec=PINNED_RUNTIMES,
            timeout=TESTS_TIMEOUT,
        )
        images = pipeline.images
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=f"{project}-pipeline",
            synth=self.synth_step,
            self_mutation=True,
            cli_version=CDK_CLI_VERSION,
            cdk_assets_cli_version=CDK_ASSETS_VERSION,
            cross_account_keys=True,  # artifact bucket encrypted with a customer-managed KMS key other accounts may use
            enable_key_rotation=True,
            docker_enabled_for_synth=DOCKER_FOR_SYNTH,
            # Defaults merge into every project, the GPU model build's custom image too, which refuses
            # runtime-versions: the runtimes are pinned per kind of project instead.
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=CPU_BUILD_IMAGE)
            ),
            self_mutation_code_build_defaults=pipelines.CodeBuildOptions(partial_build_spec=PINNED_RUNTIMES),
            # Own images (deepspeed-byoc compiles DeepSpeed's CUDA kernels during `docker build`): size and time.
            asset_publishing_code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(compute_type=COMPUTE_TYPES[images.compute]),
                partial_build_spec=PINNED_RUNTIMES,
                timeout=Duration.minutes(images.timeout_minutes),
            ),
            docker_credentials=self._docker_credentials(images.docker_hub_secret),
        )

        self.stages: dict[str, tuple[Stage, Stage]] = {}
        self.build_steps: dict[str, pipelines.CodeBuildStep] = {}
        self.preflight_steps: dict[str, pipelines.CodeBuildStep] = {}
        self.gate_steps: dict[str, dict[str, pipelines.CodeBuildStep]] = {}
        self.approvals: dict[str, pipelines.ManualApprovalStep] = {}
        self.own_steps: list[pipelines.CodeBuildStep] = []  # preflight, model build and gate steps, with our own roles
        self._previous: str | None = None  # the environment deployed before the one being added
        for env_name in pipeline.stages:
            self._add_environment(project, environment_plans[env_name], source)

        Tags.of(self).add("llm-endpoints:project", project)
        self.pipeline.build_pipeline()
        self._roll_back_failed_endpoint_stages()
        self._warn_about_docker_hub(environment_plans)
        self._grant_connection_use()
        self._scope_asset_builds()
        acknowledge_pipeline_findings(self)

    def _roll_back_failed_endpoint_stages(self) -> None:
        """<env>-endpoints holds the endpoint stacks' deploy actions only, so it fails only when a stack's deploy
        failed: its smoke check (or any resource) failed and CloudFormation already rolled that stack back. CodePipeline
        then rolls the stage back: "When the stage fails, the stage is rolled back to the most recent successful
        execution", a new execution with "the variables and artifacts from the execution to which it is rolling back"
        (CodePipeline User Guide, stage-rollback-auto.html and stage-rollback.html): the other stacks this execution
        updated return to the previous templates, so the environment runs one release that passed as a whole. That
        execution is deploy actions only, each guarded by its stack's own check: no step that reads the stack's status
        (a pipeline smoke step found UPDATE_ROLLBACK_COMPLETE and failed the rollback) and no load test whose noise
        could fail it (operations review F4). Stage conditions need a V2 pipeline (AWS::CodePipeline::Pipeline
        OnFailure.Result ROLLBACK, cfn-lint schema). It does nothing before a first successful execution, or after the
        pipeline's structure changed (the manual `aws codepipeline rollback-stage` then: docs/design/guards.md). The
        artifacts and SLO gate stages carry no rollback: their failures stop the promotion and change nothing."""
        cfn_pipeline = self.pipeline.pipeline.node.default_child
        cfn_pipeline.add_property_override("PipelineType", "V2")
        for index, stage in enumerate(self.pipeline.pipeline.stages):
            if stage.stage_name.endswith("-endpoints"):
                cfn_pipeline.add_property_override(f"Stages.{index}.OnFailure", {"Result": "ROLLBACK"})

    def _warn_about_docker_hub(self, environment_plans: dict[str, EnvironmentPlan]) -> None:
        """What only a run of the asset stage would show: said at synth, where the reviewer of the pipeline reads."""
        if self.pipeline_spec.images.docker_hub_secret:
            return
        for environment_plan in environment_plans.values():
            for plan in environment_plan.plans:
                own = plan.own_container
                hub = [b for b in docker_hub_bases(own)] if own else []
                if hub:
                    Annotations.of(self).add_warning_v2(
                        "llm-endpoints:docker-hub-anonymous",
                        f"endpoint {plan.name!r} ({plan.system.name}) builds from {', '.join(hub)} on Docker Hub, which "
                        "rate-limits anonymous pulls per IP (CodeBuild shares IPs): set pipeline.images."
                        "docker_hub_secret to a Secrets Manager secret with `username` and `secret`",
                    )
                    return

    def _docker_credentials(self, secret_id: str | None) -> list[pipelines.DockerCredential]:
        """Docker Hub login for the asset-publishing projects, from a Secrets Manager secret (username, secret)."""
        if secret_id is None:
            return []
        secret = (
            secretsmanager.Secret.from_secret_complete_arn(self, "DockerHubSecret", secret_id)
            if secret_id.startswith("arn:")
            else secretsmanager.Secret.from_secret_name_v2(self, "DockerHubSecret", secret_id)
        )
        return [
            pipelines.DockerCredential.docker_hub(secret, usages=[pipelines.DockerCredentialUsage.ASSET_PUBLISHING])
        ]

    def _grant_connection_use(self) -> None:
        """CDK grants the source action `codestar-connections:UseConnection` only; IAM evaluates the action of the
        service prefix the connection ARN carries, and connections created since the rename are
        `arn:aws:codeconnections:...` (AWS CodeConnections docs, "Service prefix change": both prefixes are
        accepted for the same connection resource). Grant both, on the connection in both ARN spellings."""
        arn = self.pipeline_spec.connection_arn
        arns = sorted(
            {
                arn,
                arn.replace(":codestar-connections:", ":codeconnections:"),
                arn.replace(":codeconnections:", ":codestar-connections:"),
            }
        )
        statement = iam.PolicyStatement(
            actions=["codestar-connections:UseConnection", "codeconnections:UseConnection"], resources=arns
        )
        source_stage = self.pipeline.pipeline.node.find_child("Source")
        for role in source_stage.node.find_all():
            if isinstance(role, iam.Role):
                role.add_to_principal_policy(statement)

    def _scope_asset_builds(self) -> None:
        """CDK Pipelines gives each asset role (one per asset kind, the service role of every asset publishing
        project) codebuild:StartBuild, StopBuild and BatchGetBuilds on "*" (aws-cdk-lib 2.273.0
        pipelines/lib/private/asset-singleton-role.js, in its constructor, with no option to narrow it): an asset build
        could start any project in the account with a buildspec override, the model build and its publisher role
        included. The pipeline starts the asset builds with its own CodeBuild action role (which CDK scopes to the
        projects); the asset role keeps the three actions on its own asset projects only. The role offers no way to
        remove a statement, so the statement's Resource is overridden in the template; tests/stacks/
        test_pipeline_stack.py checks no pipeline role keeps such a grant on "*"."""
        assets = self.pipeline.node.try_find_child("Assets")
        if assets is None:
            return
        for role in [c for c in assets.node.children if isinstance(c, iam.Role)]:
            projects = [
                c
                for c in assets.node.find_all()
                if isinstance(c, codebuild.Project) and c.role is not None and c.role.node.path == role.node.path
            ]
            policy = role.node.try_find_child("DefaultPolicy")
            if not projects or policy is None:
                continue
            statements = self.resolve(policy.document)["Statement"]
            found = [
                i
                for i, st in enumerate(statements)
                if sorted(_listed(st["Action"])) == sorted(ASSET_BUILD_ACTIONS) and st.get("Resource") == "*"
            ]
            if len(found) != 1:  # CDK changed how it grants these: review, do not guess
                raise ValueError(
                    f"{role.node.path}: expected one statement of {ASSET_BUILD_ACTIONS} on '*', found {len(found)}"
                )
            policy.node.default_child.add_property_override(
                f"PolicyDocument.Statement.{found[0]}.Resource", [p.project_arn for p in projects]
            )

    # ------------------------------------------------------------------------------------------- environments

    def _add_environment(
        self, project: str, environment_plan: EnvironmentPlan, source: pipelines.CodePipelineSource
    ) -> None:
        env_name = environment_plan.environment_name
        account, region = self._target(environment_plan)
        stage_env = {"account": account, "region": region}

        artifacts_stage = Stage(self.node.root, f"{env_name}-artifacts", env=stage_env)
        # The environment's stacks create the roles these steps assume, each trusting only the step's role here.
        build_role_name = role_name(project, env_name, "model-build")
        preflight_cb_role = role_name(project, env_name, "preflight-cb")
        artifacts = add_artifact_stack(
            artifacts_stage,
            environment_plan,
            trusted_pipeline=TrustedPipeline(self.pipeline_account, build_role_name),
            trusted_preflight=TrustedPipeline(self.pipeline_account, preflight_cb_role),
        )
        publisher = f"arn:{artifacts.partition}:iam::{artifacts.account}:role/{artifacts.publisher_role_name}"
        preflight_target = f"arn:{artifacts.partition}:iam::{artifacts.account}:role/{artifacts.preflight_role_name}"
        tag_environment(artifacts_stage, environment_plan)

        endpoints_stage = Stage(self.node.root, f"{env_name}-endpoints", env=stage_env)
        gate_cb_roles = {
            plan.name: role_name(project, env_name, plan.name, "slo-cb")
            for plan in environment_plan.plans
            if plan.slo is not None
        }
        add_endpoint_stacks(
            endpoints_stage,
            environment_plan,
            allow_unbuilt=False,
            trusted_gates={name: TrustedPipeline(self.pipeline_account, cb) for name, cb in gate_cb_roles.items()},
        )
        tag_environment(endpoints_stage, environment_plan)

        pre_artifacts: list[pipelines.Step] = []
        if self._previous is None:
            pre_artifacts.append(self.tests_step)  # the tests gate the first environment, so every one after it
        if env_name in self.pipeline_spec.manual_approval_before:
            approval = pipelines.ManualApprovalStep(
                f"Approve-{env_name}",
                comment=f"Deploy to {env_name} (account {account}, {region})"
                + (
                    f": {self._previous} deployed (each endpoint passed its smoke check) and passed its SLO gates"
                    if self._previous
                    else ""
                ),
            )
            self.approvals[env_name] = approval
            if self.tests_step in pre_artifacts:
                approval.add_step_dependency(self.tests_step)  # nobody approves a change whose tests have not passed
            pre_artifacts.append(approval)
        preflight_step = self._preflight_step(environment_plan, source, region, preflight_cb_role, preflight_target)
        build_step = self._model_build_step(environment_plan, source, account, region, build_role_name, publisher)
        build_step.add_step_dependency(preflight_step)  # nothing is built for an update the preflight refuses
        # After the artifact stack (the build publishes into its bucket), before the endpoints stage: a preflight
        # refusal or a failed build fails this stage, which has no rollback, and never the endpoints stage, whose
        # rollback would rebuild and load-test the previous model for nothing (operations review F4).
        self.pipeline.add_stage(artifacts_stage, pre=pre_artifacts, post=[preflight_step, build_step])
        # The endpoint stacks alone: each deploy action ran its stack's smoke check (stacks/smoke_check.py), so a
        # deploy that succeeded has passed it, and one that failed was rolled back by CloudFormation in the action.
        self.pipeline.add_stage(endpoints_stage)
        gate_steps = {
            name: self._gate_step(
                environment_plan, name, source, account, region, cb_role, gate_role_name(environment_plan.plan(name))
            )
            for name, cb_role in gate_cb_roles.items()
        }
        if gate_steps:
            # Its own stage, after the endpoints stage, without rollback: a miss fails this stage, which stops the
            # promotion to the next environment and rolls nothing back (the endpoints passed their smoke checks and
            # serve the new version), as `make deploy` answers a miss; a noisy re-run can never fail a rollback.
            self.pipeline.add_wave(f"{env_name}-slo-gate", post=list(gate_steps.values()))
        self.preflight_steps[env_name] = preflight_step
        self.stages[env_name] = (artifacts_stage, endpoints_stage)
        self.build_steps[env_name] = build_step
        self.gate_steps[env_name] = gate_steps
        self._previous = env_name

    def _target(self, environment_plan: EnvironmentPlan) -> tuple[str, str]:
        env = environment_plan.environment
        return env.account or self.pipeline_account, env.region or self.region

    def _preflight_step(
        self, environment_plan: EnvironmentPlan, source, region, cb_role_name, target_arn
    ) -> pipelines.CodeBuildStep:
        """`model_build preflight --only-updates` against the stage's synthesized templates, before anything of the
        stage runs: the check `make deploy` makes (a component endpoint's config must not be replaced, an
        autoscaled variant's instance type not changed, the invocation or hosting mode not switched in place:
        operations review R2), under the artifact stack's read-only preflight role."""
        env_name = environment_plan.environment_name
        role = iam.Role(
            self,
            f"PreflightRole-{env_name}",
            role_name=cb_role_name,
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"Preflight of {env_name}: may only assume that environment's preflight role",
        )
        config = shlex.quote(self.config_path)
        step = pipelines.CodeBuildStep(
            "Preflight",
            input=source,
            # The synth output beside the source: the stage's templates, as its deploy actions will deploy them.
            additional_inputs={PREFLIGHT_ASSEMBLY_DIR: self.synth_step},
            install_commands=[CHECK_INSTALL, *_profile_commands("preflight", target_arn, region)],
            commands=[
                f".venv/bin/python -m model_build preflight --config {config} --env {env_name} --only-updates "
                f"--assembly {PREFLIGHT_ASSEMBLY_DIR}"
            ],
            env={"AWS_PROFILE": "preflight"},
            build_environment=codebuild.BuildEnvironment(
                build_image=CPU_BUILD_IMAGE, compute_type=codebuild.ComputeType.SMALL
            ),
            partial_build_spec=PINNED_RUNTIMES,
            role=role,
            role_policy_statements=[iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[target_arn])],
            timeout=PREFLIGHT_TIMEOUT,
        )
        self.own_steps.append(step)
        return step

    def _model_build_step(
        self, environment_plan: EnvironmentPlan, source, account, region, cb_role_name, publisher_arn
    ) -> pipelines.CodeBuildStep:
        env_name = environment_plan.environment_name
        build = self.pipeline_spec.build
        role = iam.Role(
            self,
            f"ModelBuildRole-{env_name}",
            role_name=cb_role_name,
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"Model build of {env_name}: may only assume the model publisher role of {env_name}",
        )
        bucket = environment_plan.artifact_bucket(account, region)
        config = shlex.quote(self.config_path)
        commands = []
        for plan in environment_plan.plans:
            if plan.artifact.from_hub:  # model_source: SageMaker reads the hub's own S3 prefix
                commands.append(f"echo '{plan.name}: a hub model (model_source): nothing to build or publish'")
                continue
            key = plan.manifest_key
            where = f"--config {config} --env {env_name} --endpoint {plan.name}"
            published = (
                '.venv/bin/python -c \'import sys, boto3; boto3.client("s3").head_object(Bucket=sys.argv[1], '
                f"Key=sys.argv[2])' {bucket} {key} 2>/dev/null"
            )
            # The build set (torch, transformers: GBs with CUDA) is installed only when something is to be built. A
            # recipe that converts a Hub model runs in the account's recipe build project, on compute sized for the
            # model (docs/design/staging.md), not on this step's disk; it publishes there, and this step follows it.
            build_and_publish = (
                f".venv/bin/python -m model_build build --in-account {where}"
                if plan.converts_hub_model
                else f".venv/bin/python -m model_build build {where} --quiet "
                f"&& .venv/bin/python -m model_build publish {where}"
            )
            commands.append(
                f"if {published}; then echo '{plan.name}: s3://{bucket}/{key} is published: skipping its build'; "
                f"else {MODEL_BUILD_INSTALL} && {build_and_publish}; fi"
            )
        if build.gpu:
            # The registry account given explicitly: CDK Pipelines resolves the build environment before the project
            # binds the image, and the image's lazy account lookup fails there (LinuxGpuBuildImageNotUsedInProject).
            image = codebuild.LinuxGpuBuildImage.aws_deep_learning_containers_image(
                GPU_BUILD_IMAGE.repository, GPU_BUILD_IMAGE.gpu_tag, GPU_BUILD_IMAGE.registry_account(self.region)
            )
            runtimes = None  # a custom image: CodeBuild refuses runtime-versions there
        else:
            image, runtimes = CPU_BUILD_IMAGE, PINNED_RUNTIMES
        variables = {}
        if build.hf_token is not None:
            # CodeBuild reads the secret when the build starts and CDK grants the project role GetSecretValue on it;
            # huggingface_hub reads HF_TOKEN (gated and private models). Value syntax: secret-id[:json-key].
            ref = build.hf_token
            variables["HF_TOKEN"] = codebuild.BuildEnvironmentVariable(
                type=codebuild.BuildEnvironmentVariableType.SECRETS_MANAGER,
                value=ref.secret + (f":{ref.json_key}" if ref.json_key else ""),
            )
        step = pipelines.CodeBuildStep(
            "ModelBuild",
            input=source,
            install_commands=[CHECK_INSTALL, *_profile_commands("publisher", publisher_arn, region)],
            commands=commands,
            env={"AWS_PROFILE": "publisher", "HF_HUB_DISABLE_PROGRESS_BARS": "1"},
            build_environment=codebuild.BuildEnvironment(
                build_image=image, compute_type=COMPUTE_TYPES[build.compute], environment_variables=variables
            ),
            partial_build_spec=runtimes,
            role=role,
            role_policy_statements=[iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[publisher_arn])],
            timeout=Duration.minutes(build.timeout_minutes),
        )
        self.own_steps.append(step)
        return step

    def _gate_step(
        self, environment_plan: EnvironmentPlan, endpoint, source, account, region, cb_role_name, target_name
    ) -> pipelines.CodeBuildStep:
        """The SLO gate of one endpoint: `model_build slo-gate` under the endpoint stack's gate role (stacks/
        benchmark.py SloGateRole), which may invoke that endpoint and keep results in the environment's bucket."""
        return self._endpoint_step(
            SLO_GATE_STEP,
            environment_plan,
            endpoint,
            source,
            account,
            region,
            cb_role_name,
            target_name,
            SLO_GATE_TIMEOUT,
        )

    def _endpoint_step(
        self,
        kind: _EndpointStep,
        environment_plan: EnvironmentPlan,
        endpoint: str,
        source,
        account: str,
        region: str,
        cb_role_name: str,
        target_name: str,
        timeout: Duration,
    ) -> pipelines.CodeBuildStep:
        """`model_build <kind.command>` on one endpoint under that endpoint stack's role `target_name` (as AWS profile
        kind.profile): the step's own CodeBuild role `cb_role_name` may assume that role and nothing else."""
        env_name = environment_plan.environment_name
        target_arn = f"arn:{self.partition}:iam::{account}:role/{target_name}"
        role = iam.Role(
            self,
            f"{kind.name}Role-{env_name}-{endpoint}",
            role_name=cb_role_name,
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"{kind.title} of {env_name}/{endpoint}: may only assume that endpoint's {kind.role} role",
        )
        config = shlex.quote(self.config_path)
        step = pipelines.CodeBuildStep(
            f"{kind.name}-{endpoint}",
            input=source,
            install_commands=[CHECK_INSTALL, *_profile_commands(kind.profile, target_arn, region)],
            commands=[
                f".venv/bin/python -m model_build {kind.command} --config {config} --env {env_name} "
                f"--endpoint {endpoint}{kind.extra_args}"
            ],
            env={"AWS_PROFILE": kind.profile},
            build_environment=codebuild.BuildEnvironment(build_image=CPU_BUILD_IMAGE, compute_type=kind.compute_type),
            partial_build_spec=PINNED_RUNTIMES,
            role=role,
            role_policy_statements=[iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[target_arn])],
            timeout=timeout,
        )
        self.own_steps.append(step)
        return step


def add_pipeline(app, config_path: str | os.PathLike) -> PipelineStack:
    """The pipeline stack for `-c pipeline=true`: every environment of the file, deployed through CodePipeline."""
    path = Path(config_path)
    absolute = path if path.is_absolute() else (ROOT / path)
    try:
        relative = absolute.resolve().relative_to(ROOT)
    except ValueError:
        raise ConfigError(
            f"{config_path}: the pipeline reads the config from the repository, so it must be a file inside "
            f"{ROOT}; pass -c config=<path relative to the repository>"
        ) from None
    environment_plans = load_all_environments(absolute)
    first = next(iter(environment_plans.values()))
    spec = first.app_config.pipeline if first.app_config else None
    if spec is None:
        raise ConfigError(
            f"{relative}: pipeline: required key is missing: -c pipeline=true deploys through CodePipeline, which "
            "needs a `pipeline:` section (connection_arn, repository, stages, ...); see config/examples/pipeline.yaml, "
            "or drop -c pipeline=true to deploy the stacks directly"
        )
    account = spec.account or os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = spec.region or os.environ.get("CDK_DEFAULT_REGION")
    missing = [key for key, value in (("account", account), ("region", region)) if not value]
    if missing:
        raise ConfigError(
            f"{relative}: pipeline.{missing[0]}: required key is missing: cross-account deployment needs the "
            "pipeline's account and region; set them in the config or run with AWS credentials (CDK_DEFAULT_*)"
        )
    stack = PipelineStack(
        app,
        f"{first.project}-pipeline",
        config_path=relative.as_posix(),
        environment_plans=environment_plans,
        pipeline=spec,
        env={"account": account, "region": region},
        stack_name=f"{first.project}-pipeline",
        description=f"{first.project}: CodePipeline deploying {', '.join(spec.stages)}",
    )
    add_nag_checks(app)
    return stack


__all__ = ["PipelineStack", "add_pipeline", "role_name"]
