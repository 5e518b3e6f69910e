"""A job the workstation or the pipeline starts in the account and follows: one CodeBuild project with its code as an
S3 asset, its own log group, a service role trusted by CodeBuild for this project only, and the grant that lets a
caller start and follow it. The weights staging job (stacks/weights_staging.py) and the recipe build
(stacks/recipe_build.py) are two of these; each says what its role may do in the bucket, its buildspec and compute.

One resource per construct: JobLogs (the log group), JobRole (the role and its policy), JobProject (the project);
CodeBuildJob wires them under the construct ids both jobs had (Code, Logs/Group, Role/Role, Project/Project), so
their logical ids, and so the deployed resources, stay the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .log_groups import retention
from .nag import acknowledge

# Ubuntu 24.04 standard image 8.0 (Python 3.10-3.14 as runtime versions; stacks/pipeline_stack.py CPU_BUILD_IMAGE).
IMAGE = "aws/codebuild/standard:8.0"
PYTHON_RUNTIME = "3.12"
# StartBuild's timeoutInMinutesOverride and the project's TimeoutInMinutes are 5-2160 (botocore codebuild model).
MIN_TIMEOUT_MINUTES, MAX_TIMEOUT_MINUTES = 5, 2160


def secret_arn(secret: str) -> str:
    """A secret given by name matches its ARN with Secrets Manager's six-character suffix ("-??????", Secrets
    Manager User Guide, "Permissions to AWS Secrets Manager secrets": a name without the suffix in a policy);
    an ARN is used as given."""
    if secret.startswith("arn:"):
        return secret
    return f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{secret}-??????"


def nag_secret(secret: str) -> str:
    return f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{secret}-??????"


def project_arn(project_name: str) -> str:
    return f"arn:{Aws.PARTITION}:codebuild:{Aws.REGION}:{Aws.ACCOUNT_ID}:project/{project_name}"


@dataclass(frozen=True)
class JobKind:
    """What differs between jobs. `bucket_statements(bucket)`: the role's calls on the artifact bucket; `nag_prefixes`:
    the bucket prefixes (each "<prefix>*") those statements name, acknowledged for cdk-nag with `nag_reason`;
    `spec_prefix`: where the caller puts each run's spec (the caller's s3:PutObject)."""

    role_description: str
    project_description: str
    buildspec: dict
    compute_type: str
    timeout_minutes: int
    spec_prefix: str
    nag_prefixes: tuple[str, ...]
    nag_reason: str
    cb4_reason: str


class JobLogs(Construct):
    """The project's CloudWatch log group: the job's lines land here, and its caller prints them as they come."""

    def __init__(self, scope: Construct, construct_id: str, *, project_name: str, retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.group = logs.LogGroup(
            self,
            "Group",
            log_group_name=f"/aws/codebuild/{project_name}",
            retention=retention(retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )


class JobRole(Construct):
    """The job's service role. Trust: codebuild.amazonaws.com for this account's project of this name only
    (aws:SourceAccount, aws:SourceArn). Calls: the kind's own on the bucket, then what every job makes (Service
    Authorization Reference for Amazon S3, Secrets Manager, CloudWatch Logs):
      - s3:GetObject and s3:GetObjectVersion on the job's code asset (CodeBuild reads an S3 source with the
        service role: CodeBuild User Guide, "Allow CodeBuild to interact with other AWS services");
      - logs:CreateLogStream and logs:PutLogEvents on its own log group;
      - secretsmanager:GetSecretValue on the Hub token secrets the config names, nothing else."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        kind: JobKind,
        bucket_statements: Sequence[iam.PolicyStatement],
        log_group: logs.ILogGroup,
        code: s3_assets.Asset,
        token_secrets: Sequence[str],
        bucket_nag: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "codebuild.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": project_arn(project_name)},
                },
            ),
            description=kind.role_description,
        )
        statements = [
            *bucket_statements,
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[code.bucket.arn_for_objects(code.s3_object_key)],
            ),
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],  # "<group ARN>:*": streams within it
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
        group_id = Stack.of(self).get_logical_id(log_group.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            self.role,
            [f"AwsSolutions-IAM5[Resource::{bucket_nag}/{prefix}*]" for prefix in kind.nag_prefixes]
            + [f"AwsSolutions-IAM5[Resource::<{group_id}.Arn>]"]
            + [f"AwsSolutions-IAM5[Resource::{nag_secret(s)}]" for s in token_secrets if not s.startswith("arn:")],
            kind.nag_reason,
        )


class JobProject(Construct):
    """The CodeBuild project (L1: the L2 Project adds report-group and log permissions of its own to the role).
    Its timeout is the project's default: each StartBuild overrides it, sized for its model."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        kind: JobKind,
        role: iam.IRole,
        log_group: logs.ILogGroup,
        code: s3_assets.Asset,
        queued_timeout_minutes: int = 60,
    ) -> None:
        super().__init__(scope, construct_id)
        if not MIN_TIMEOUT_MINUTES <= kind.timeout_minutes <= MAX_TIMEOUT_MINUTES:
            raise ValueError(f"timeout_minutes {kind.timeout_minutes}: CodeBuild allows 5-2160")
        self.project = codebuild.CfnProject(
            self,
            "Project",
            name=project_name,
            description=kind.project_description,
            service_role=role.role_arn,
            source=codebuild.CfnProject.SourceProperty(
                type="S3",
                location=f"{code.s3_bucket_name}/{code.s3_object_key}",
                build_spec=json.dumps(kind.buildspec, indent=2),
            ),
            artifacts=codebuild.CfnProject.ArtifactsProperty(type="NO_ARTIFACTS"),
            environment=codebuild.CfnProject.EnvironmentProperty(
                type="LINUX_CONTAINER",
                compute_type=kind.compute_type,
                image=IMAGE,
                image_pull_credentials_type="CODEBUILD",
            ),
            logs_config=codebuild.CfnProject.LogsConfigProperty(
                cloud_watch_logs=codebuild.CfnProject.CloudWatchLogsConfigProperty(
                    status="ENABLED", group_name=log_group.log_group_name
                ),
                s3_logs=codebuild.CfnProject.S3LogsConfigProperty(status="DISABLED"),
            ),
            timeout_in_minutes=kind.timeout_minutes,
            queued_timeout_in_minutes=queued_timeout_minutes,
        )
        self.project.node.add_dependency(role)
        acknowledge(self.project, "AwsSolutions-CB4", kind.cb4_reason)


class CodeBuildJob(Construct):
    """The code asset, log group, role and project, wired.

    Props: project_name; kind (JobKind); bucket (the artifact bucket); code_path and code_exclude (the asset);
    token_secrets: the Secrets Manager secrets (names or ARNs) the config names for Hub tokens; log_retention_days;
    bucket_key: the bucket's SSE-KMS key construct when there is one (its grant_s3_use gives the role what S3 needs
    of it); bucket_nag: the bucket's ARN as cdk-nag prints it (`<ArtifactBucket.Arn>` for the stack's own bucket, the
    literal ARN for one adopted by name)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        project_name: str,
        kind: JobKind,
        bucket_statements: Sequence[iam.PolicyStatement],
        code_path: str,
        code_exclude: Sequence[str],
        token_secrets: Sequence[str] = (),
        log_retention_days: int = 30,
        bucket_key=None,
        bucket_nag: str = "<ArtifactBucket.Arn>",
    ) -> None:
        super().__init__(scope, construct_id)
        self.project_name = project_name
        self.kind = kind
        self.code = s3_assets.Asset(self, "Code", path=code_path, exclude=list(code_exclude))
        self.logs = JobLogs(self, "Logs", project_name=project_name, retention_days=log_retention_days)
        self.role = JobRole(
            self,
            "Role",
            project_name=project_name,
            kind=kind,
            bucket_statements=bucket_statements,
            log_group=self.logs.group,
            code=self.code,
            token_secrets=token_secrets,
            bucket_nag=bucket_nag,
        )
        if bucket_key is not None:
            bucket_key.grant_s3_use(self.role.role)
        self.project = JobProject(
            self,
            "Project",
            project_name=project_name,
            kind=kind,
            role=self.role.role,
            log_group=self.logs.group,
            code=self.code,
        )

    def grant_start(
        self, grantee: iam.IGrantable, *, bucket: s3.IBucket, bucket_nag: str = "<ArtifactBucket.Arn>"
    ) -> None:
        """What starting and following this job calls (model_build/stage.py follow_codebuild, for `model_build stage`
        and `model_build build --in-account`), besides publish's own uploads (ArtifactStoreStack.grant_publish):
        s3:PutObject of the run's spec under the kind's spec prefix (PutObject); cloudformation:DescribeStacks of this
        stack (the project's name from its output); codebuild:ListBuildsForProject and codebuild:BatchGetBuilds (a
        build already running for the destination, then the build's status, log stream and exported variables),
        codebuild:StartBuild on this project; logs:GetLogEvents on its log group (the job's lines, printed as they
        come). Operation -> action from the Service Authorization Reference (Amazon S3, AWS CloudFormation, AWS
        CodeBuild, Amazon CloudWatch Logs). tests/stacks/test_pipeline_staging.py and test_iam_coverage.py hold the
        grant to exactly these."""
        stack = Stack.of(self)
        stack_arn = f"arn:{Aws.PARTITION}:cloudformation:{Aws.REGION}:{Aws.ACCOUNT_ID}:stack/{stack.stack_name}/*"
        statements = [
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[bucket.arn_for_objects(self.kind.spec_prefix + "*")]
            ),
            iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[stack_arn]),
            iam.PolicyStatement(
                actions=["codebuild:BatchGetBuilds", "codebuild:ListBuildsForProject", "codebuild:StartBuild"],
                resources=[project_arn(self.project_name)],
            ),
            iam.PolicyStatement(actions=["logs:GetLogEvents"], resources=[self.logs.group.log_group_arn]),
        ]
        for statement in statements:
            iam.Grant.add_to_principal(grantee=grantee, actions=statement.actions, resource_arns=statement.resources)
        if isinstance(grantee, Construct):
            acknowledge(
                grantee,
                [
                    f"AwsSolutions-IAM5[Resource::{bucket_nag}/{self.kind.spec_prefix}*]",
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:"
                    f"stack/{stack.stack_name}/*]",
                ],
                "The spec's key names the endpoint and a hash, known only when a run starts; a stack's ARN ends in an "
                "id CloudFormation chooses. One prefix of one bucket, one stack by name.",
            )


__all__ = ["CodeBuildJob", "JobKind", "JobLogs", "JobProject", "JobRole", "nag_secret", "project_arn", "secret_arn"]
