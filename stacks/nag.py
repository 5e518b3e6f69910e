"""cdk-nag (AwsSolutions) on every synth, and acknowledgements kept beside the constructs they concern."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, App, Aws, Stack, Validations
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from constructs import Construct, IConstruct


def add_nag_checks(app: App) -> None:
    """Run the AwsSolutions pack at synth; any unacknowledged finding fails the synth with a report."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(
    construct: IConstruct,
    rule_ids: str | Iterable[str],
    reason: str,
    *,
    path_suffix: str | None = None,
) -> None:
    """Acknowledge specific AwsSolutions findings on one construct (and its children), each with its reason.

    `path_suffix` picks a child of `construct` by its id, for constructs CDK creates behind our back
    (for example the auto-delete-objects provider, a stack-level singleton).
    """
    ids = [rule_ids] if isinstance(rule_ids, str) else list(rule_ids)
    target: IConstruct = construct
    if path_suffix is not None:
        found = construct.node.try_find_child(path_suffix)
        if found is None:
            raise ValueError(f"no construct {path_suffix!r} under {construct.node.path}")
        target = found
    Validations.of(target).acknowledge(
        *[Acknowledgment(id=f"AwsSolutions::{rule_id}", reason=reason) for rule_id in ids]
    )


def nag_text(value: str) -> str:
    """How cdk-nag writes a string holding pseudo parameters in its finding ids (e.g. <AWS::AccountId>)."""
    for token, text in (
        (Aws.ACCOUNT_ID, "<AWS::AccountId>"),
        (Aws.REGION, "<AWS::Region>"),
        (Aws.PARTITION, "<AWS::Partition>"),
    ):
        value = value.replace(token, text)
    return value


def logical_id(construct: IConstruct) -> str:
    """The logical id cdk-nag prints (as `<id>` or `<id.Arn>`) for a construct's CloudFormation resource, for
    finding ids that name a resource CDK generates (CDK Pipelines' artifact bucket and projects). CDK derives it from
    the construct path, so an acknowledgement built with it is keyed on that path, not on a copied hash."""
    cfn = construct if hasattr(construct, "logical_id") else construct.node.default_child
    stack = Stack.of(cfn)
    return stack.resolve(stack.get_logical_id(cfn))


# ------------------------------------------------------------------------------------------- the pipeline's


def acknowledge_pipeline_findings(stack: Any) -> None:
    """CDK Pipelines' generated roles and bucket of a PipelineStack: each finding id acknowledged on the policy it
    arises in.

    The ids name CDK's own grants (artifact bucket and key, CodeBuild logs and reports); if a CDK upgrade changes
    them, synth fails and prints the new ids, to be reviewed here."""
    pipeline = stack.pipeline.pipeline
    acknowledge(
        pipeline.artifact_bucket,
        "AwsSolutions-S1",
        "The pipeline's artifact bucket is created by CDK Pipelines and holds only transient, KMS-encrypted build "
        "artifacts; reads and writes come from the pipeline's own roles and are recorded by CloudTrail.",
    )
    bucket = f"<{logical_id(pipeline.artifact_bucket)}.Arn>/*"
    artifacts_read = {
        "Action::s3:GetObject*": _S3_GROUPS,
        "Action::s3:GetBucket*": _S3_GROUPS,
        "Action::s3:List*": _S3_GROUPS,
        f"Resource::{bucket}": _ARTIFACT_OBJECTS,
    }
    artifacts_write = {**artifacts_read, "Action::s3:DeleteObject*": _S3_GROUPS, "Action::s3:Abort*": _S3_GROUPS}
    key = {"Action::kms:GenerateDataKey*": _KMS_GROUPS, "Action::kms:ReEncrypt*": _KMS_GROUPS}

    def project_findings(project) -> dict[str, str]:
        lid = logical_id(project)
        return {
            f"Resource::arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws/codebuild/<{lid}>:*": _LOGS,
            f"Resource::arn:{stack.partition}:codebuild:{stack.region}:{stack.account}:report-group/<{lid}>-*": _REPORTS,
        }

    def ack(construct, findings: dict[str, str]) -> None:
        for finding, reason in findings.items():
            acknowledge(construct, f"AwsSolutions-IAM5[{finding}]", reason)

    ack(pipeline.role, {**artifacts_write, **key})
    source_stage = pipeline.node.find_child("Source")
    for role in source_stage.node.find_all():
        if isinstance(role, iam.Role):  # the connection source action's role: writes the checked-out source
            ack(role, {**artifacts_write, **key})
    synth = stack.pipeline.synth_project
    ack(synth.role, {**artifacts_write, **key, **project_findings(synth)})
    mutation = stack.pipeline.self_mutation_project
    ack(
        mutation.role,
        {
            **artifacts_read,
            **key,
            **project_findings(mutation),
            "Resource::*": "Self-mutation reads the pipeline stack's state (cloudformation:DescribeStacks) and the "
            "CDK bootstrap bucket's location (s3:ListBucket), which CDK grants on * before the names are known.",
            f"Resource::arn:*:iam::{stack.account}:role/*": "Self-mutation runs `cdk deploy` of the pipeline stack, "
            "which assumes the CDK bootstrap roles (cdk-<qualifier>-*-role-<account>-<region>); CDK limits the trust "
            "to roles tagged aws-cdk:bootstrap-role by a condition.",
        },
    )
    assets = stack.node.try_find_child("Pipeline").node.try_find_child("Assets")
    if assets is not None:  # file/image assets: one shared role per asset kind
        for kind in ("FileRole", "DockerRole"):
            role = assets.node.try_find_child(kind)
            if role is None:
                continue
            ack(
                role,
                {
                    **artifacts_read,
                    f"Resource::arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws/codebuild/*": (
                        "One asset role serves every asset publishing project, whose names CDK generates: log "
                        "groups under /aws/codebuild/ only."
                    ),
                    f"Resource::arn:{stack.partition}:codebuild:{stack.region}:{stack.account}:report-group/*": (
                        "One asset role serves every asset publishing project: report groups of those projects."
                    ),
                    "Resource::*": "cdk-nag reads the policy before the template override that narrows CDK "
                    "Pipelines' StartBuild/BatchGetBuilds/StopBuild on * to this role's own asset projects "
                    "(PipelineStack._scope_asset_builds); the synthesized template has no * here "
                    "(tests/stacks/test_pipeline_stack.py checks it).",
                },
            )
    for step in [*stack.own_steps, stack.tests_step]:
        ack(step.project.role, {**artifacts_read, **key, **project_findings(step.project)})
    if stack.pipeline_spec.build.gpu:
        for step in stack.build_steps.values():
            acknowledge(
                step.project,
                "AwsSolutions-CB5",
                "CodeBuild offers no curated GPU image with CUDA and Python 3.12; the model build uses an AWS Deep "
                f"Learning Container pinned by tag ({stack.gpu_build_image.repository}:{stack.gpu_build_image.gpu_tag}).",
            )
            ack(
                step.project.role,
                {
                    "Resource::*": "Pulling the Deep Learning Container needs ecr:GetAuthorizationToken, which has no "
                    "resource-level permissions; the pull actions themselves are limited to that one repository."
                },
            )


_LOGS = "CodeBuild writes log streams named at run time under the project's own log group (/aws/codebuild/<project>:*)."
_REPORTS = "CodeBuild report groups of this project are named <project>-<report>; CDK grants that prefix only."
_ARTIFACT_OBJECTS = (
    "Pipeline artifacts are objects whose keys CodePipeline chooses per execution, in the pipeline's own artifact "
    "bucket (<bucket>/*); no other bucket."
)
_S3_GROUPS = (
    "CDK's bucket grants use S3 action groups (s3:GetObject*, s3:GetBucket*, s3:List*, and for writers s3:DeleteObject*, "
    "s3:Abort*) on the pipeline's own artifact bucket only."
)
_KMS_GROUPS = "CDK's key grants use kms:GenerateDataKey* and kms:ReEncrypt* on the pipeline's own artifact key only."


__all__ = ["Construct", "acknowledge", "acknowledge_pipeline_findings", "add_nag_checks", "logical_id", "nag_text"]
