"""The published-artifact check before the Model: a custom resource (endpoint_runtime/artifact_check.py) that fails
the deploy unless the artifact's manifest.json, which publish writes last, is in the bucket with the plan's content
hash. The local emulator runs it too (local_emulator/server.py runs the function's deployed code)."""

from __future__ import annotations

from aws_cdk import Aws, CfnCustomResource, Duration
from aws_cdk import aws_iam as iam
from constructs import Construct

from .endpoint_network import BucketKeyRef
from .functions import PythonFunction
from .lambda_asset import LAMBDA_ROOT, function_code
from .nag import acknowledge, nag_text

# How long CloudFormation waits for a custom resource's answer: "an integer from 1 to 3600", default 3600 (the
# AWS::CloudFormation::CustomResource reference; cfn-lint schema property ServiceTimeout). An answer lost (a function
# killed at its timeout) would otherwise hold the stack an hour, and its rollback another (operations review R3).
# 300 s covers the function's 180 s (a manifest read and every listed object's HeadObject:
# endpoint_runtime/artifact_check.py AWS_CALLS_PER_EVENT) and an answer.
CUSTOM_RESOURCE_TIMEOUT_S = 300
ARTIFACT_CHECK_TIMEOUT_S = 180


class PublishedArtifactCheck(Construct):
    """Keyword-only props: bucket_name (the artifact bucket, may hold tokens); manifest_key (the plan's);
    content_hash (the artifact the stack deploys: a new hash re-runs the check); bucket_key (the bucket's KMS key,
    None when it has none); log_retention_days; publish_command (the exact command that publishes this endpoint's
    artifacts, named in the check's failure; None: the generic form).

    Depend on `resource` (the custom resource) from whatever must not be created for an unpublished artifact."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        manifest_key: str,
        content_hash: str,
        log_retention_days: int,
        bucket_key: BucketKeyRef | None = None,
        publish_command: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.publish_command = publish_command
        self.handler = PythonFunction(
            self,
            "Function",
            code=function_code(LAMBDA_ROOT / "artifact_check" / "handler.py"),
            handler="artifact_check/handler.handler",
            environment={},
            timeout=Duration.seconds(ARTIFACT_CHECK_TIMEOUT_S),
            description=f"Fails the deploy unless s3://.../{manifest_key} and the objects it lists are published",
            log_retention_days=log_retention_days,
        )
        function = self.handler.function
        self.bucket_name = bucket_name
        if bucket_key is not None:  # an SSE-KMS object is read with the key (S3 User Guide, "Using SSE-KMS")
            bucket_key.grant_s3_use(function, read_only=True)  # it only reads
            if bucket_key.alias_name is not None:
                acknowledge(
                    function.role,  # type: ignore[arg-type]
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:kms:<AWS::Region>:<AWS::AccountId>:key/*]",
                    "The artifact bucket's key is created by the artifacts stack; it is named by its alias "
                    f"{bucket_key.alias_name} (kms:ResourceAliases), and only through S3 in this region (kms:ViaService).",
                )
        self.resource = self.check("Resource", manifest_key=manifest_key, content_hash=content_hash)

    def check(self, construct_id: str, *, manifest_key: str, content_hash: str) -> CfnCustomResource:
        """One more manifest the same function checks (a LoRA adapter's: operations review R6): its own custom
        resource, to depend on from what must not be created before that artifact is published."""
        function = self.handler.function
        # The artifact's prefix: its manifest and the HeadObject of each file it lists (s3:GetObject), and the listing
        # of that prefix only, without which S3 answers 403 instead of 404 for a missing key (S3 API reference,
        # HeadObject "Permissions").
        prefix = manifest_key.rsplit("/", 1)[0] + "/"
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{self.bucket_name}"
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{bucket_arn}/{prefix}*"])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        acknowledge(
            function.role,  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{nag_text(self.bucket_name)}/{prefix}*]",
            "The check reads the objects of one content-addressed artifact prefix (models/<endpoint>/<hash>/), "
            "whose file names are listed by its manifest, read at deploy time.",
        )
        resource = CfnCustomResource(
            self, construct_id, service_token=function.function_arn, service_timeout=CUSTOM_RESOURCE_TIMEOUT_S
        )
        resource.add_property_override("Bucket", self.bucket_name)
        resource.add_property_override("ManifestKey", manifest_key)
        resource.add_property_override("ContentHash", content_hash)
        if self.publish_command is not None:  # what the check's failure tells a plain `cdk deploy` user to run
            resource.add_property_override("PublishCommand", self.publish_command)
        # The answer must come after the role may read the manifest.
        resource.node.add_dependency(function.role)  # type: ignore[arg-type]
        return resource


__all__ = ["CUSTOM_RESOURCE_TIMEOUT_S", "PublishedArtifactCheck"]
