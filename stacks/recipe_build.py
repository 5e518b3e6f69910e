"""The recipe build in the account: a CodeBuild project that runs a converting system's recipe for one endpoint
(`python -m model_build build` then `publish`), so no workstation downloads and converts the weights.

Its source is this repository's code as an S3 asset (only what model_build imports, the requirements files and the
Makefile); its install phase builds the build venv (`make venv-build`); `model_build build --in-account`
(model_build/recipe_job.py) uploads the config under recipe-specs/, sizes the compute from the model's bytes and
starts a build with the config, environment and endpoint as overrides. docs/design/staging.md "Converting recipes in
the account". One resource per construct: RecipeBuildLogs, RecipeBuildRole, RecipeBuildProject.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .log_groups import retention
from .nag import acknowledge
from .weights_staging import IMAGE, MODELS_PREFIX, PYTHON_RUNTIME, _nag_secret, secret_arn

ROOT = Path(__file__).resolve().parent.parent
RECIPE_SPEC_PREFIX = "recipe-specs/"  # model_build/recipe_job.py RECIPE_SPEC_PREFIX
# What `model_build build|publish` import (tests/test_architecture.py, model_build's allowed packages) and what
# `make venv-build` reads; nothing else of the repository travels (no tests, docs, stacks, venvs).
CODE = (
    "Makefile",
    "requirements.txt",
    "requirements-build.txt",
    "request_contract.py",
    "chat_contract.py",
    "artifact",
    "facts",
    "endpoint_runtime",
    "endpoint_config",
    "systems",
    "deployment",
    "local_runtime",
    "load_testing",
    "model_build",
)
# The project's default; each StartBuild overrides it with the compute sized for its model (recipe_job.COMPUTE).
COMPUTE_TYPE = "BUILD_GENERAL1_LARGE"


def recipe_project_name(project: str, environment_name: str) -> str:
    """CodeBuild project names: 2-255 of letters, digits, '-' and '_', starting with a letter or digit."""
    return f"{project}-{environment_name}-recipe-build"[:255]


def code_excludes() -> list[str]:
    """The asset's exclude globs: everything but CODE (a folder with all beneath it), and no bytecode."""
    keep = [pattern for name in CODE for pattern in (f"!{name}", f"!{name}/**")]
    return ["*", ".*", *keep, "**/__pycache__", "**/*.pyc"]


def buildspec() -> dict:
    """RECIPE_CONFIG (the config's S3 URI), RECIPE_ENV, RECIPE_ENDPOINT and, for a gated model, HF_TOKEN come from
    StartBuild's overrides. The config is fetched with the AWS CLI of the standard image; no artifacts, no cache."""
    where = '--config /tmp/recipe/config.yaml --env "$RECIPE_ENV" --endpoint "$RECIPE_ENDPOINT"'
    return {
        "version": "0.2",
        "env": {"variables": {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONUNBUFFERED": "1"}},
        "phases": {
            "install": {"runtime-versions": {"python": PYTHON_RUNTIME}, "commands": ["make venv-build"]},
            "pre_build": {"commands": ['mkdir -p /tmp/recipe && aws s3 cp "$RECIPE_CONFIG" /tmp/recipe/config.yaml']},
            "build": {
                "commands": [
                    f"df -h . && .venv/bin/python -m model_build build {where}",
                    f".venv/bin/python -m model_build publish {where}",
                ]
            },
        },
    }


class RecipeBuildLogs(Construct):
    """The project's log group: `model_build build --in-account` prints its lines as they come."""

    def __init__(self, scope: Construct, construct_id: str, *, project_name: str, retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.group = logs.LogGroup(
            self,
            "Group",
            log_group_name=f"/aws/codebuild/{project_name}",
            retention=retention(retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )


class RecipeBuildRole(Construct):
    """The project's service role. Trust: codebuild.amazonaws.com for this account's project of this name only
    (aws:SourceAccount, aws:SourceArn). Calls (S3 API reference; Service Authorization Reference for Amazon S3,
    Secrets Manager, CloudWatch Logs), as `model_build publish`'s own grant (ArtifactStoreStack.grant_publish):
      - s3:ListBucket on the bucket (HeadBucket; HeadObject of a missing key answers 404, not 403);
      - s3:GetObject, s3:PutObject, s3:AbortMultipartUpload on models/* (HeadObject of each file, the uploads with
        If-None-Match, which the bucket policy requires, and the multipart calls; abort of a failed upload);
      - s3:GetObject on recipe-specs/* (`aws s3 cp` of the config);
      - s3:GetObject and s3:GetObjectVersion on the code asset (CodeBuild reads an S3 source with the service role);
      - secretsmanager:GetSecretValue on the Hub token secrets the config names (the HF_TOKEN override);
      - logs:CreateLogStream and logs:PutLogEvents on its own log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        bucket: s3.IBucket,
        log_group: logs.ILogGroup,
        code: s3_assets.Asset,
        token_secrets: Sequence[str],
        bucket_nag: str = "<ArtifactBucket.Arn>",
    ) -> None:
        super().__init__(scope, construct_id)
        project_arn = f"arn:{Aws.PARTITION}:codebuild:{Aws.REGION}:{Aws.ACCOUNT_ID}:project/{project_name}"
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "codebuild.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": project_arn},
                },
            ),
            description="The recipe build: a converting system's model_build build + publish, in the account",
        )
        models = bucket.arn_for_objects(MODELS_PREFIX + "*")
        statements = [
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]),
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"], resources=[models]
            ),
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(RECIPE_SPEC_PREFIX + "*")]),
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[code.bucket.arn_for_objects(code.s3_object_key)],
            ),
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            ),
        ]
        if token_secrets:
            statements.append(
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"], resources=[secret_arn(s) for s in token_secrets]
                )
            )
        for statement in statements:
            self.role.add_to_policy(statement)
        acknowledge(
            self.role,
            [
                f"AwsSolutions-IAM5[Resource::{bucket_nag}/{MODELS_PREFIX}*]",
                f"AwsSolutions-IAM5[Resource::{bucket_nag}/{RECIPE_SPEC_PREFIX}*]",
                f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(log_group.node.default_child)}.Arn>]",  # type: ignore[arg-type]
            ]
            + [f"AwsSolutions-IAM5[Resource::{_nag_secret(s)}]" for s in token_secrets if not s.startswith("arn:")],
            "The build publishes content-addressed files (models/<endpoint>/<hash>/...) and reads configs whose keys "
            "hold their hash, known only at run time; its log streams are named per build; a secret's ARN ends in six "
            "characters Secrets Manager chooses. Each is one prefix of one bucket, one log group, one secret name.",
        )


class RecipeBuildProject(Construct):
    """The CodeBuild project (L1, as the staging job's: the L2 adds report-group permissions to the role)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        role: iam.IRole,
        log_group: logs.ILogGroup,
        code: s3_assets.Asset,
    ) -> None:
        super().__init__(scope, construct_id)
        self.project = codebuild.CfnProject(
            self,
            "Project",
            name=project_name,
            description="Runs a converting system's recipe for one endpoint: model_build build + publish",
            service_role=role.role_arn,
            source=codebuild.CfnProject.SourceProperty(
                type="S3",
                location=f"{code.s3_bucket_name}/{code.s3_object_key}",
                build_spec=json.dumps(buildspec(), indent=2),
            ),
            artifacts=codebuild.CfnProject.ArtifactsProperty(type="NO_ARTIFACTS"),
            environment=codebuild.CfnProject.EnvironmentProperty(
                type="LINUX_CONTAINER", compute_type=COMPUTE_TYPE, image=IMAGE, image_pull_credentials_type="CODEBUILD"
            ),
            logs_config=codebuild.CfnProject.LogsConfigProperty(
                cloud_watch_logs=codebuild.CfnProject.CloudWatchLogsConfigProperty(
                    status="ENABLED", group_name=log_group.log_group_name
                ),
                s3_logs=codebuild.CfnProject.S3LogsConfigProperty(status="DISABLED"),
            ),
            timeout_in_minutes=120,  # each StartBuild overrides it, sized from the model's bytes
            queued_timeout_in_minutes=60,
        )
        self.project.node.add_dependency(role)
        acknowledge(
            self.project,
            "AwsSolutions-CB4",
            "The project has no build artifacts to encrypt (NO_ARTIFACTS); what it publishes goes to the artifact "
            "bucket, encrypted by the bucket's own settings.",
        )


class RecipeBuild(Construct):
    """The code asset, log group, role and project, wired. Props as WeightsStaging's (stacks/weights_staging.py)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        bucket: s3.IBucket,
        token_secrets: Sequence[str] = (),
        log_retention_days: int = 30,
        bucket_key=None,
        bucket_nag: str = "<ArtifactBucket.Arn>",
    ) -> None:
        super().__init__(scope, construct_id)
        self.project_name = project_name
        self.code = s3_assets.Asset(self, "Code", path=str(ROOT), exclude=code_excludes())
        self.logs = RecipeBuildLogs(self, "Logs", project_name=project_name, retention_days=log_retention_days)
        self.role = RecipeBuildRole(
            self,
            "Role",
            project_name=project_name,
            bucket=bucket,
            log_group=self.logs.group,
            code=self.code,
            token_secrets=token_secrets,
            bucket_nag=bucket_nag,
        )
        if bucket_key is not None:
            bucket_key.grant_s3_use(self.role.role)
        self.project = RecipeBuildProject(
            self, "Project", project_name=project_name, role=self.role.role, log_group=self.logs.group, code=self.code
        )
