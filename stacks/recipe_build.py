"""The recipe build in the account: a CodeBuild project that runs a converting system's recipe for one endpoint
(`python -m model_build build` then `publish`), so no workstation downloads and converts the weights.

Its source is this repository's code as an S3 asset (only what model_build imports, the requirements files and the
Makefile); its install phase builds the build venv (`make venv-build`); `model_build build --in-account`
(model_build/recipe_job.py) uploads the config under recipe-specs/, sizes the compute from the model's bytes and
starts a build with the config, environment and endpoint as overrides. docs/design/staging.md "Converting recipes in
the account". The project, its role, log group and the grant to start it are stacks/codebuild_job.py's CodeBuildJob,
which the weights staging job shares; this module says what is the recipe build's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .codebuild_job import PYTHON_RUNTIME, CodeBuildJob, JobKind
from .weights_staging import MODELS_PREFIX

ROOT = Path(__file__).resolve().parent.parent
RECIPE_SPEC_PREFIX = "recipe-specs/"  # model_build/recipe_job.py RECIPE_SPEC_PREFIX
CONTENT_HASH_VARIABLE = "RECIPE_CONTENT_HASH"  # model_build/recipe_job.py reads it back
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
# The project's defaults; each StartBuild overrides both with the compute and timeout sized for its model
# (model_build/recipe_job.py plan_recipe_build).
COMPUTE_TYPE = "BUILD_GENERAL1_LARGE"
DEFAULT_TIMEOUT_MINUTES = 120


def recipe_project_name(project: str, environment_name: str) -> str:
    """CodeBuild project names: 2-255 of letters, digits, '-' and '_', starting with a letter or digit."""
    return f"{project}-{environment_name}-recipe-build"[:255]


def code_excludes() -> list[str]:
    """The asset's exclude globs: everything but CODE (a folder with all beneath it), and no bytecode."""
    keep = [pattern for name in CODE for pattern in (f"!{name}", f"!{name}/**")]
    return ["*", ".*", *keep, "**/__pycache__", "**/*.pyc"]


def buildspec() -> dict:
    """RECIPE_CONFIG (the config's S3 URI), RECIPE_ENV, RECIPE_ENDPOINT and, for a gated model, HF_TOKEN come from
    StartBuild's overrides. The config is fetched with the AWS CLI of the standard image; no artifacts, no cache.
    Once publish succeeded, the artifact's content hash (from the manifest the build wrote, build/<endpoint>/) is
    exported as CONTENT_HASH_VARIABLE: BatchGetBuilds returns it in exportedEnvironmentVariables, which is how
    `model_build build --in-account` learns which artifact to deploy (CodeBuild API reference,
    ExportedEnvironmentVariable: settable until the end of post_build). Version 0.2 runs a phase's commands in one
    shell, so the variable set by one command is there at the end (CodeBuild User Guide, "Shells and commands in
    build environments"); `VAR=$(...) && export VAR` fails the command when the read fails."""
    where = '--config /tmp/recipe/config.yaml --env "$RECIPE_ENV" --endpoint "$RECIPE_ENDPOINT"'
    read_hash = (
        ".venv/bin/python -c 'import sys; from artifact.manifest import Manifest; "
        'print(Manifest.load(sys.argv[1]).content_hash)\' "build/$RECIPE_ENDPOINT"'
    )
    return {
        "version": "0.2",
        "env": {
            "variables": {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONUNBUFFERED": "1"},
            "exported-variables": [CONTENT_HASH_VARIABLE],
        },
        "phases": {
            "install": {"runtime-versions": {"python": PYTHON_RUNTIME}, "commands": ["make venv-build"]},
            "pre_build": {"commands": ['mkdir -p /tmp/recipe && aws s3 cp "$RECIPE_CONFIG" /tmp/recipe/config.yaml']},
            "build": {
                "commands": [
                    f"df -h . && .venv/bin/python -m model_build build {where}",
                    f".venv/bin/python -m model_build publish {where}",
                    f'{CONTENT_HASH_VARIABLE}="$({read_hash})" && export {CONTENT_HASH_VARIABLE}',
                ]
            },
        },
    }


def bucket_statements(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
    """The build's calls on the artifact bucket (S3 API reference; Service Authorization Reference for Amazon S3),
    as `model_build publish`'s own grant (ArtifactStoreStack.grant_publish):
      - s3:ListBucket on the bucket (HeadBucket; HeadObject of a missing key answers 404, not 403);
      - s3:GetObject, s3:PutObject, s3:AbortMultipartUpload on models/* (HeadObject of each file, the uploads with
        If-None-Match, which the bucket policy requires, and the multipart calls; abort of a failed upload);
      - s3:GetObject on recipe-specs/* (`aws s3 cp` of the config).
    The rest (its code asset, its log group, the Hub token secrets: the HF_TOKEN override) is every job's:
    stacks/codebuild_job.py JobRole."""
    return [
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]),
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            resources=[bucket.arn_for_objects(MODELS_PREFIX + "*")],
        ),
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(RECIPE_SPEC_PREFIX + "*")]),
    ]


def recipe_kind() -> JobKind:
    return JobKind(
        role_description="The recipe build: a converting system's model_build build + publish, in the account",
        project_description="Runs a converting system's recipe for one endpoint: model_build build + publish",
        buildspec=buildspec(),
        compute_type=COMPUTE_TYPE,
        timeout_minutes=DEFAULT_TIMEOUT_MINUTES,
        spec_prefix=RECIPE_SPEC_PREFIX,
        nag_prefixes=(MODELS_PREFIX, RECIPE_SPEC_PREFIX),
        nag_reason="The build publishes content-addressed files (models/<endpoint>/<hash>/...) and reads configs "
        "whose keys hold their hash, known only at run time; its log streams are named per build; a secret's ARN "
        "ends in six characters Secrets Manager chooses. Each is one prefix of one bucket, one log group, one secret "
        "name.",
        cb4_reason="The project has no build artifacts to encrypt (NO_ARTIFACTS); what it publishes goes to the "
        "artifact bucket, encrypted by the bucket's own settings.",
    )


class RecipeBuild(CodeBuildJob):
    """The recipe build: its code asset (CODE of this repository), log group, role and project
    (stacks/codebuild_job.py). Props as WeightsStaging's (stacks/weights_staging.py)."""

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
        super().__init__(
            scope,
            construct_id,
            project_name=project_name,
            kind=recipe_kind(),
            bucket_statements=bucket_statements(bucket),
            code_path=str(ROOT),
            code_exclude=code_excludes(),
            token_secrets=token_secrets,
            log_retention_days=log_retention_days,
            bucket_key=bucket_key,
            bucket_nag=bucket_nag,
        )


__all__ = ["CODE", "RECIPE_SPEC_PREFIX", "RecipeBuild", "buildspec", "code_excludes", "recipe_project_name"]
