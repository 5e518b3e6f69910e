"""The weights staging job in the account: a CodeBuild project that runs `python -m weights_staging` (the package's
own code, shipped as an S3 asset), its service role with exactly the calls the job makes, and its log group.

Why CodeBuild (and not a Lambda or a SageMaker Processing job), with each limit and its source:
docs/design/staging.md. One resource per construct: StagingLogs (the log group), StagingRole (the role and its
policy), StagingProject (the project).
"""

from __future__ import annotations

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

JOB_SOURCE = Path(__file__).resolve().parent.parent / "weights_staging"
# Where `model_build stage` writes each staging spec (the build's manifest.json), beside models/ in the bucket.
SPEC_PREFIX = "staging-specs/"
MODELS_PREFIX = "models/"
# CodeBuild on-demand compute (botocore codebuild model, ComputeType; ProjectEnvironment.computeType's documentation:
# "BUILD_GENERAL1_SMALL: Use up to 4 GiB memory and 2 vCPUs"). The job keeps about (inflight + 1) parts of 16-64 MiB
# in memory and writes nothing to disk, so the smallest compute serves every model size.
COMPUTE_TYPE = "BUILD_GENERAL1_SMALL"
# Ubuntu 24.04 standard image 8.0 (Python 3.10-3.14 as runtime versions; stacks/pipeline_stack.py CPU_BUILD_IMAGE).
IMAGE = "aws/codebuild/standard:8.0"
PYTHON_RUNTIME = "3.12"
# The boto3 the job is tested with (requirements.txt): the image's own Python packages are not pinned.
BOTO3_REQUIREMENT = "boto3==1.44.5"
# StartBuild's timeoutInMinutesOverride is 5-2160 (botocore codebuild model); `model_build stage` sizes each run.
MIN_TIMEOUT_MINUTES, MAX_TIMEOUT_MINUTES = 5, 2160


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


class StagingLogs(Construct):
    """The project's CloudWatch log group: the job's progress lines land here, and `model_build stage` reads them."""

    def __init__(self, scope: Construct, construct_id: str, *, project_name: str, retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.group = logs.LogGroup(
            self,
            "Group",
            log_group_name=f"/aws/codebuild/{project_name}",
            retention=retention(retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )


class StagingRole(Construct):
    """The job's service role. Trust: codebuild.amazonaws.com, for this account's project of this name only
    (aws:SourceAccount, aws:SourceArn). Calls, each with the operation that needs it (S3 API reference and the
    Service Authorization Reference for Amazon S3, Secrets Manager, CloudWatch Logs):
      - s3:GetObject on the spec prefix (GetObject of the spec) and on models/* (HeadObject of each file, GetObject of
        an existing manifest.json to compare);
      - s3:PutObject on models/* (PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload);
      - s3:AbortMultipartUpload on models/* (a mismatch, and stale uploads of an interrupted run);
      - s3:ListBucket on the bucket (without it S3 answers HeadObject of a missing key with 403, not 404) and
        s3:ListBucketMultipartUploads (ListMultipartUploads, to find an interrupted run's uploads);
      - secretsmanager:GetSecretValue on the Hub token secrets the config names, nothing else;
      - logs:CreateLogStream and logs:PutLogEvents on its own log group;
      - s3:GetObject and s3:GetObjectVersion on the job's code asset (CodeBuild reads an S3 source with the
        service role: CodeBuild User Guide, "Allow CodeBuild to interact with other AWS services")."""

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
            description="The weights staging job: Hub -> models/* of the artifact bucket, verified as it streams",
        )
        models = bucket.arn_for_objects(MODELS_PREFIX + "*")
        specs = bucket.arn_for_objects(SPEC_PREFIX + "*")
        statements = [
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[specs, models]),
            iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=[models]),
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:ListBucketMultipartUploads"], resources=[bucket.bucket_arn]
            ),
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],  # "<group ARN>:*": streams within it
            ),
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[code.bucket.arn_for_objects(code.s3_object_key)],
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
                f"AwsSolutions-IAM5[Resource::{bucket_nag}/{SPEC_PREFIX}*]",
                f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(log_group.node.default_child)}.Arn>]",  # type: ignore[arg-type]
            ]
            + [f"AwsSolutions-IAM5[Resource::{_nag_secret(s)}]" for s in token_secrets if not s.startswith("arn:")],
            "The job writes content-addressed files (models/<endpoint>/<hash>/...) and reads specs whose names are "
            "known only at run time; its log streams are named per build; a secret's ARN ends in six characters "
            "Secrets Manager chooses. Each is limited to one prefix of one bucket, one log group, one secret name.",
        )


def secret_arn(secret: str) -> str:
    """A secret given by name matches its ARN with Secrets Manager's six-character suffix ("-??????", Secrets
    Manager User Guide, "Permissions to AWS Secrets Manager secrets": a name without the suffix in a policy);
    an ARN is used as given."""
    if secret.startswith("arn:"):
        return secret
    return f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{secret}-??????"


def _nag_secret(secret: str) -> str:
    return f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{secret}-??????"


class StagingProject(Construct):
    """The CodeBuild project (L1: the L2 Project adds report-group and log permissions of its own to the role).

    Props: project_name; role (StagingRole's); log_group; code (the job's asset); timeout_minutes: the project's
    default, each StartBuild overrides it with the size of its model; queued_timeout_minutes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        role: iam.IRole,
        log_group: logs.ILogGroup,
        code: s3_assets.Asset,
        timeout_minutes: int = 60,
        queued_timeout_minutes: int = 60,
    ) -> None:
        super().__init__(scope, construct_id)
        if not MIN_TIMEOUT_MINUTES <= timeout_minutes <= MAX_TIMEOUT_MINUTES:
            raise ValueError(f"timeout_minutes {timeout_minutes}: CodeBuild allows 5-2160")
        import json

        self.project = codebuild.CfnProject(
            self,
            "Project",
            name=project_name,
            description="Streams a model's files from the Hugging Face Hub into the artifact bucket (weights_staging)",
            service_role=role.role_arn,
            source=codebuild.CfnProject.SourceProperty(
                type="S3",
                location=f"{code.s3_bucket_name}/{code.s3_object_key}",
                build_spec=json.dumps(buildspec(), indent=2),
            ),
            artifacts=codebuild.CfnProject.ArtifactsProperty(type="NO_ARTIFACTS"),
            environment=codebuild.CfnProject.EnvironmentProperty(
                type="LINUX_CONTAINER",
                compute_type=COMPUTE_TYPE,
                image=IMAGE,
                image_pull_credentials_type="CODEBUILD",
            ),
            logs_config=codebuild.CfnProject.LogsConfigProperty(
                cloud_watch_logs=codebuild.CfnProject.CloudWatchLogsConfigProperty(
                    status="ENABLED", group_name=log_group.log_group_name
                ),
                s3_logs=codebuild.CfnProject.S3LogsConfigProperty(status="DISABLED"),
            ),
            timeout_in_minutes=timeout_minutes,
            queued_timeout_in_minutes=queued_timeout_minutes,
        )
        self.project.node.add_dependency(role)
        acknowledge(
            self.project,
            "AwsSolutions-CB4",
            "The project has no build artifacts to encrypt (NO_ARTIFACTS); what it writes goes to the artifact "
            "bucket, encrypted by the bucket's own settings.",
        )


class WeightsStaging(Construct):
    """The three above, wired: the job's code asset, its log group, role and project.

    Props: project_name; bucket (the artifact bucket); token_secrets: the Secrets Manager secrets (names or ARNs)
    the config names for Hub tokens; log_retention_days; bucket_key: the bucket's SSE-KMS key construct when there
    is one (its grant_s3_use gives the role what S3 needs of it); bucket_nag: the bucket's ARN as cdk-nag prints it
    (`<ArtifactBucket.Arn>` for the stack's own bucket, the literal ARN for one adopted by name)."""

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
        self.code = s3_assets.Asset(self, "Code", path=str(JOB_SOURCE), exclude=["__pycache__", "*.pyc"])
        self.logs = StagingLogs(self, "Logs", project_name=project_name, retention_days=log_retention_days)
        self.role = StagingRole(
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
        self.project = StagingProject(
            self, "Project", project_name=project_name, role=self.role.role, log_group=self.logs.group, code=self.code
        )

    def grant_start(
        self, grantee: iam.IGrantable, *, bucket: s3.IBucket, bucket_nag: str = "<ArtifactBucket.Arn>"
    ) -> None:
        """What `model_build stage` (model_build/stage.py; `model_build publish` of a staged manifest runs it) calls
        besides publish's own uploads (ArtifactStoreStack.grant_publish), for the pipeline's model build to start and
        follow this job: s3:PutObject of the spec under staging-specs/ (PutObject); cloudformation:DescribeStacks of
        this stack (its WeightsStagingProject output: staging_project); codebuild:ListBuildsForProject and
        codebuild:BatchGetBuilds (a build already staging the destination, then the build's status and log stream),
        codebuild:StartBuild on this project; logs:GetLogEvents on its log group (the job's lines, printed as they
        come). Operation -> action from the Service Authorization Reference (Amazon S3, AWS CloudFormation, AWS
        CodeBuild, Amazon CloudWatch Logs). tests/stacks/test_pipeline_staging.py holds the grant to exactly these."""
        stack = Stack.of(self)
        project_arn = f"arn:{Aws.PARTITION}:codebuild:{Aws.REGION}:{Aws.ACCOUNT_ID}:project/{self.project_name}"
        stack_arn = f"arn:{Aws.PARTITION}:cloudformation:{Aws.REGION}:{Aws.ACCOUNT_ID}:stack/{stack.stack_name}/*"
        statements = [
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(SPEC_PREFIX + "*")]),
            iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[stack_arn]),
            iam.PolicyStatement(
                actions=["codebuild:BatchGetBuilds", "codebuild:ListBuildsForProject", "codebuild:StartBuild"],
                resources=[project_arn],
            ),
            iam.PolicyStatement(actions=["logs:GetLogEvents"], resources=[self.logs.group.log_group_arn]),
        ]
        for statement in statements:
            iam.Grant.add_to_principal(grantee=grantee, actions=statement.actions, resource_arns=statement.resources)
        if isinstance(grantee, Construct):
            acknowledge(
                grantee,
                [
                    f"AwsSolutions-IAM5[Resource::{bucket_nag}/{SPEC_PREFIX}*]",
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:"
                    f"stack/{stack.stack_name}/*]",
                ],
                "The spec's key names the endpoint and content hash, known only when a build is staged; a stack's ARN "
                "ends in an id CloudFormation chooses. One prefix of one bucket, one stack by name.",
            )
