"""The weights staging job in the account: a CodeBuild project that runs `python -m weights_staging` (the package's
own code, shipped as an S3 asset), its service role with exactly the calls the job makes, and its log group.

Why CodeBuild (and not a Lambda or a SageMaker Processing job), with each limit and its source:
docs/design/staging.md. The project, its role, log group and the grant to start it are stacks/codebuild_job.py's
CodeBuildJob, which the recipe build shares; this module says what is the staging job's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .codebuild_job import IMAGE, MAX_TIMEOUT_MINUTES, MIN_TIMEOUT_MINUTES, PYTHON_RUNTIME, CodeBuildJob, JobKind
from .codebuild_job import secret_arn as secret_arn

JOB_SOURCE = Path(__file__).resolve().parent.parent / "weights_staging"
# Where `model_build stage` writes each staging spec (the build's manifest.json), beside models/ in the bucket.
SPEC_PREFIX = "staging-specs/"
MODELS_PREFIX = "models/"
# CodeBuild on-demand compute (botocore codebuild model, ComputeType; ProjectEnvironment.computeType's documentation:
# "BUILD_GENERAL1_SMALL: Use up to 4 GiB memory and 2 vCPUs"). The job keeps about (inflight + 1) parts of 16-64 MiB
# in memory and writes nothing to disk, so the smallest compute serves every model size.
COMPUTE_TYPE = "BUILD_GENERAL1_SMALL"
# The boto3 the job is tested with (requirements.txt): the image's own Python packages are not pinned.
BOTO3_REQUIREMENT = "boto3==1.44.5"
# The project's default timeout: `model_build stage` sizes each run (StartBuild's timeoutInMinutesOverride).
DEFAULT_TIMEOUT_MINUTES = 60


def staging_project_name(project: str, environment_name: str) -> str:
    """CodeBuild project names: 2-255 of letters, digits, '-' and '_', starting with a letter or digit."""
    return f"{project}-{environment_name}-weights-staging"[:255]


def buildspec() -> dict:
    """Copy the asset's files into a package folder and run the job; STAGING_SPEC and STAGING_DESTINATION come
    from StartBuild's environment overrides. No artifacts, no cache: nothing the job writes is kept."""
    return {
        "version": "0.2",
        "phases": {
            "install": {
                "runtime-versions": {"python": PYTHON_RUNTIME},
                "commands": [f"python -m pip install --quiet --disable-pip-version-check '{BOTO3_REQUIREMENT}'"],
            },
            "build": {
                "commands": [
                    'mkdir -p /tmp/job && cp -r "$CODEBUILD_SRC_DIR" /tmp/job/weights_staging',
                    "cd /tmp/job && python -u -m weights_staging",
                ]
            },
        },
    }


def bucket_statements(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
    """The job's calls on the artifact bucket, each with the operation that needs it (S3 API reference and the
    Service Authorization Reference for Amazon S3):
      - s3:GetObject on the spec prefix (GetObject of the spec) and on models/* (HeadObject of each file, GetObject of
        an existing manifest.json to compare);
      - s3:PutObject on models/* (PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload);
      - s3:AbortMultipartUpload on models/* (a mismatch, and stale uploads of an interrupted run);
      - s3:ListBucket on the bucket (without it S3 answers HeadObject of a missing key with 403, not 404) and
        s3:ListBucketMultipartUploads (ListMultipartUploads, to find an interrupted run's uploads).
    The rest (its code asset, its log group, the Hub token secrets) is every job's: stacks/codebuild_job.py JobRole."""
    models = bucket.arn_for_objects(MODELS_PREFIX + "*")
    specs = bucket.arn_for_objects(SPEC_PREFIX + "*")
    return [
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[specs, models]),
        iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=[models]),
        iam.PolicyStatement(actions=["s3:ListBucket", "s3:ListBucketMultipartUploads"], resources=[bucket.bucket_arn]),
    ]


def staging_kind() -> JobKind:
    return JobKind(
        role_description="The weights staging job: Hub -> models/* of the artifact bucket, verified as it streams",
        project_description="Streams a model's files from the Hugging Face Hub into the artifact bucket "
        "(weights_staging)",
        buildspec=buildspec(),
        compute_type=COMPUTE_TYPE,
        timeout_minutes=DEFAULT_TIMEOUT_MINUTES,
        spec_prefix=SPEC_PREFIX,
        nag_prefixes=(MODELS_PREFIX, SPEC_PREFIX),
        nag_reason="The job writes content-addressed files (models/<endpoint>/<hash>/...) and reads specs whose names "
        "are known only at run time; its log streams are named per build; a secret's ARN ends in six characters "
        "Secrets Manager chooses. Each is limited to one prefix of one bucket, one log group, one secret name.",
        cb4_reason="The project has no build artifacts to encrypt (NO_ARTIFACTS); what it writes goes to the artifact "
        "bucket, encrypted by the bucket's own settings.",
    )


class WeightsStaging(CodeBuildJob):
    """The staging job: its code asset (the weights_staging package), log group, role and project
    (stacks/codebuild_job.py). Props: project_name; bucket (the artifact bucket); the rest as CodeBuildJob's."""

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
            kind=staging_kind(),
            bucket_statements=bucket_statements(bucket),
            code_path=str(JOB_SOURCE),
            code_exclude=["__pycache__", "*.pyc"],
            token_secrets=token_secrets,
            log_retention_days=log_retention_days,
            bucket_key=bucket_key,
            bucket_nag=bucket_nag,
        )


__all__ = ["IMAGE", "MAX_TIMEOUT_MINUTES", "MIN_TIMEOUT_MINUTES", "PYTHON_RUNTIME", "WeightsStaging", "secret_arn"]
