"""Where model artifacts and our own container images live: one S3 bucket and one ECR repository per environment."""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from constructs import Construct

from endpoint_config import Deployment, artifact_bucket_name, image_repository_name

from .nag import acknowledge


class ArtifactStoreStack(Stack):
    """The artifact bucket (encrypted, versioned, TLS-only, private, access-logged) and the image repository.

    Keyword-only props:
      deployment: the resolved environment. `retain_data` decides what `cdk destroy` does with the bucket, its
        access logs and the repository: keep them (True, CDK's default) or delete them with their contents.
        `emulator` leaves out the Lambda-backed auto-delete custom resource, which the local emulator cannot run
        (the demo empties the bucket itself before destroy).
    """

    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        env = deployment.environment
        retain = env.retain_data
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
        auto_delete = not retain and not env.emulator

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This bucket is the destination of the artifact bucket's access logs; logging it would need another bucket "
            "without end.",
        )

        self.bucket = s3.Bucket(
            self,
            "ArtifactBucket",
            bucket_name=artifact_bucket_name(deployment.project, deployment.environment_name, Aws.ACCOUNT_ID, Aws.REGION),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifact-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                    noncurrent_version_expiration=Duration.days(30),
                )
            ],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        # A stable logical id: tools find the bucket by it, and a CDK refactor must not replace it.
        self.bucket.node.default_child.override_logical_id("ArtifactBucket")

        self.repository = ecr.Repository(
            self,
            "ImageRepository",
            # Named explicitly: deterministic for model_build, and the emulator rejects generated names.
            repository_name=image_repository_name(deployment.project, deployment.environment_name),
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[ecr.LifecycleRule(max_image_count=50, description="keep the 50 newest images")],
            removal_policy=removal,
            # A native CloudFormation property (no custom resource): works on the emulator too.
            empty_on_delete=not retain,
        )

        if auto_delete:
            acknowledge(
                self,
                ["AwsSolutions-IAM4", "AwsSolutions-L1"],
                "CDK's own auto-delete-objects provider (Custom::S3AutoDeleteObjects) for an environment that does not "
                "retain data; its role and runtime are managed by aws-cdk-lib.",
                path_suffix="Custom::S3AutoDeleteObjectsCustomResourceProvider",
            )

        CfnOutput(self, "ArtifactBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "ImageRepositoryUri", value=self.repository.repository_uri)
