"""Where model artifacts and our own container images live: one S3 bucket and one ECR repository per environment."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deployment import EnvironmentPlan

from .endpoint_network import BucketKey, BucketKeyRef
from .log_groups import owned_log_group
from .nag import acknowledge, nag_text
from .recipe_build import RecipeBuild, recipe_project_name
from .trusted_pipeline import TrustedPipeline, role_name
from .weights_staging import WeightsStaging, staging_project_name


def async_lifecycle_rules(environment_plan: EnvironmentPlan) -> list[s3.LifecycleRule]:
    """Expiry of asynchronous traffic in the artifact bucket, per endpoint with invocation.mode async: its request
    payloads, and its answers and failures when `invocation.result_retention_days` is set (EndpointPlan.async_expiry).
    The bucket is versioned: an expired object becomes a noncurrent version, which the bucket-wide rule removes 30
    days later."""
    return [
        s3.LifecycleRule(id=f"{plan.name}-async-{what}", prefix=prefix, expiration=Duration.days(days))
        for plan in environment_plan.plans
        for what, prefix, days in plan.async_expiry
    ]


def write_once_statement(bucket: s3.IBucket) -> iam.PolicyStatement:
    """Published artifacts are write-once (operations review F9): every write of models/* must carry If-None-Match,
    so S3 refuses one that would replace an existing object, whoever sends it (the publisher role included). The S3
    User Guide's "Enforce conditional writes on Amazon S3 buckets": the s3:if-none-match condition key on s3:PutObject
    covers PutObject and CompleteMultipartUpload; s3:ObjectCreationOperation exempts CreateMultipartUpload and
    UploadPart, which take no conditional header. CopyObject into models/ is refused too (the page's note); nothing
    here copies there. model_build/publish.py sends the header."""
    return iam.PolicyStatement(
        sid="PublishedArtifactsAreWriteOnce",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["s3:PutObject"],
        resources=[bucket.arn_for_objects("models/*")],
        conditions={"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}},
    )


class ArtifactStoreStack(Stack):
    """The artifact bucket (encrypted, versioned, TLS-only, private, access-logged) and the image repository.

    Keyword-only props:
      deployment: the resolved environment. `retain_data` decides what `cdk destroy` does with the bucket, its
        access logs and the repository: keep them (True, CDK's default) or delete them with their contents.
        Without it, CDK's auto-delete custom resource (a Node.js Lambda) empties the bucket before CloudFormation
        deletes it, on AWS and on the local emulator alike (local_emulator/server.py runs it).
      trusted_pipeline: None (the default) creates no role for a pipeline. Given, the stack creates the role
        `<project>-<env>-model-publisher` (`publisher_role_name`), which only that pipeline role may assume and which
        may publish into models/* of the bucket (`grant_publish`): what the pipeline's model build step assumes.
      trusted_preflight: likewise, the role `<project>-<env>-preflight` that the pipeline's Preflight step assumes
        to read what the environment's endpoints run and their stacks' templates (`model_build preflight
        --only-updates`: a component endpoint's config must not be replaced, operations review R2). It lives here
        because this stack is deployed before the endpoint stacks whose update it checks.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment_plan: EnvironmentPlan,
        trusted_pipeline: TrustedPipeline | None = None,
        trusted_preflight: TrustedPipeline | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.preflight_role_name = role_name(environment_plan.project, environment_plan.environment_name, "preflight")
        self._preflight_role(environment_plan, trusted_preflight)
        env = environment_plan.environment
        retain = env.retain_data
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
        auto_delete = not retain

        bucket_name = environment_plan.artifact_bucket(Aws.ACCOUNT_ID, Aws.REGION)
        repository_name = environment_plan.image_repository
        self.publisher_role_name = role_name(
            environment_plan.project, environment_plan.environment_name, "model-publisher"
        )
        # encryption.bucket_key: the bucket's SSE-KMS key, created here or given by ARN (stacks/endpoint_network.py).
        self.bucket_key = (
            BucketKey(self, "BucketKey", environment_plan=environment_plan, retain=retain)
            if BucketKeyRef.of(environment_plan)
            else None
        )
        if env.adopt_kept_data:
            self._adopt(bucket_name, repository_name)
            self._publisher_role(environment_plan, trusted_pipeline)
            self._add_staging(environment_plan)
            return

        self._add_access_logs(removal, auto_delete)
        self._add_bucket(environment_plan, bucket_name, removal, auto_delete)
        self._add_repository(repository_name, removal, retain)

        if auto_delete:
            self._own_auto_delete_logs(environment_plan)
            acknowledge(
                self,
                ["AwsSolutions-IAM4", "AwsSolutions-L1"],
                "CDK's own auto-delete-objects provider (Custom::S3AutoDeleteObjects) for an environment that does not "
                "retain data; its role and runtime are managed by aws-cdk-lib.",
                path_suffix="Custom::S3AutoDeleteObjectsCustomResourceProvider",
            )

        self._outputs()
        self._publisher_role(environment_plan, trusted_pipeline)
        self._add_staging(environment_plan)

    def _add_staging(self, environment_plan: EnvironmentPlan) -> None:
        """The weights staging job (stacks/weights_staging.py), except on the emulator: moto's CloudFormation has no
        CodeBuild, so there `model_build stage` runs the job's own code as a subprocess instead."""
        self.weights_staging = None
        self.recipe_build: RecipeBuild | None = None
        if environment_plan.environment.emulator:
            return
        bucket_nag = (
            f"arn:{nag_text(self.partition)}:s3:::{nag_text(self.bucket.bucket_name)}"
            if environment_plan.environment.adopt_kept_data
            else "<ArtifactBucket.Arn>"
        )
        self.weights_staging = WeightsStaging(
            self,
            "WeightsStaging",
            project_name=staging_project_name(environment_plan.project, environment_plan.environment_name),
            bucket=self.bucket,
            token_secrets=sorted({p.hub_token_secret for p in environment_plan.plans if p.hub_token_secret}),
            log_retention_days=max((p.log_retention_days for p in environment_plan.plans), default=30),
            bucket_key=self.bucket_key,
            bucket_nag=bucket_nag,
        )
        CfnOutput(self, "WeightsStagingProject", value=self.weights_staging.project_name)
        if self.publisher_role is not None:
            # The pipeline's model build plans a Hub model from its metadata and starts and follows this job, so its
            # compute never holds the weights (docs/design/staging.md "The pipeline").
            self.weights_staging.grant_start(self.publisher_role, bucket=self.bucket, bucket_nag=bucket_nag)
        if any(p.converts_hub_model for p in environment_plan.plans):
            # A converting recipe runs in the account, on compute sized for its model (stacks/recipe_build.py).
            self.recipe_build = RecipeBuild(
                self,
                "RecipeBuild",
                project_name=recipe_project_name(environment_plan.project, environment_plan.environment_name),
                bucket=self.bucket,
                token_secrets=sorted({p.hub_token_secret for p in environment_plan.plans if p.hub_token_secret}),
                log_retention_days=max((p.log_retention_days for p in environment_plan.plans), default=30),
                bucket_key=self.bucket_key,
                bucket_nag=bucket_nag,
            )
            CfnOutput(self, "RecipeBuildProject", value=self.recipe_build.project_name)
            if self.publisher_role is not None:
                # The pipeline's model build starts and follows it for such an endpoint (`build --in-account`).
                self.recipe_build.grant_start(self.publisher_role, bucket=self.bucket, bucket_nag=bucket_nag)

    def _own_auto_delete_logs(self, environment_plan: EnvironmentPlan) -> None:
        """The log group CDK's auto-delete function writes to (/aws/lambda/<function>), owned by this stack: Lambda
        would otherwise create it on the first run and `cdk destroy` leave it behind, without retention. Created
        before either auto-delete resource runs (a group Lambda made first would make its creation fail)."""
        provider = self.node.find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
        handler = provider.node.find_child("Handler")
        log_group = owned_log_group(
            self,
            "AutoDeleteObjectsLogs",
            retention_days=max((plan.log_retention_days for plan in environment_plan.plans), default=30),
            name=Fn.join("", ["/aws/lambda/", Fn.ref(Stack.of(self).get_logical_id(handler))]),  # type: ignore[arg-type]
        )
        for bucket in (self.access_logs, self.bucket):
            bucket.node.find_child("AutoDeleteObjectsCustomResource").node.add_dependency(log_group)

    def _add_access_logs(self, removal: RemovalPolicy, auto_delete: bool) -> None:
        """The bucket the artifact bucket's access logs go to."""
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Versioned (checkov CKV_AWS_21): access logs are evidence, so a deleted or overwritten log stays
            # recoverable for 30 days; the noncurrent expiry keeps that from costing more than a month of logs.
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=Duration.days(365), noncurrent_version_expiration=Duration.days(30))
            ],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This bucket is the destination of the artifact bucket's access logs; logging it would need another bucket "
            "without end.",
        )

    def _add_bucket(
        self, environment_plan: EnvironmentPlan, bucket_name: str, removal: RemovalPolicy, auto_delete: bool
    ) -> None:
        """The artifact bucket: versioned, logged, encrypted with the bucket key where there is one."""
        self.bucket = s3.Bucket(
            self,
            "ArtifactBucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.KMS if self.bucket_key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=self.bucket_key.key if self.bucket_key else None,
            # S3 Bucket Keys: S3 asks KMS for a bucket-level key now and then instead of a data key per object.
            bucket_key_enabled=True if self.bucket_key else None,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifact-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                    noncurrent_version_expiration=Duration.days(30),
                ),
                *async_lifecycle_rules(environment_plan),
            ],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        # A stable logical id: tools find the bucket by it, and a CDK refactor must not replace it.
        self.bucket.node.default_child.override_logical_id("ArtifactBucket")
        self.bucket.add_to_resource_policy(write_once_statement(self.bucket))

    def _add_repository(self, repository_name: str, removal: RemovalPolicy, retain: bool) -> None:
        """The environment's ECR repository, for the images built from this repository."""
        self.repository = ecr.Repository(
            self,
            "ImageRepository",
            # Named explicitly: deterministic for model_build, and the emulator rejects generated names.
            repository_name=repository_name,
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[ecr.LifecycleRule(max_image_count=50, description="keep the 50 newest images")],
            removal_policy=removal,
            # A native CloudFormation property (no custom resource): works on the emulator too.
            empty_on_delete=not retain,
        )

    def _preflight_role(self, environment_plan: EnvironmentPlan, trusted: TrustedPipeline | None) -> None:
        """Read-only: the endpoint stacks' templates and status, the endpoints and their configs, and the scaling
        registration the instance-type check reads (what `model_build preflight --only-updates` calls)."""
        self.preflight_role = None
        if trusted is None:
            return
        role = iam.Role(
            self,
            "PreflightRole",
            role_name=self.preflight_role_name,
            assumed_by=trusted.principal(self),
            description=f"Assumed by the pipeline's Preflight step: reads what the {environment_plan.environment_name} "
            "endpoint stacks and endpoints are now",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudformation:DescribeStacks", "cloudformation:GetTemplate"],
                resources=[
                    self.format_arn(service="cloudformation", resource="stack", resource_name=f"{p.stack_name}/*")
                    for p in environment_plan.plans
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeEndpoint"],
                resources=[
                    self.format_arn(service="sagemaker", resource="endpoint", resource_name=p.endpoint_name.lower())
                    for p in environment_plan.plans
                ],
            )
        )
        # The endpoint configs' names are CloudFormation's (the stacks name none), known only once deployed.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeEndpointConfig"],
                resources=[self.format_arn(service="sagemaker", resource="endpoint-config", resource_name="*")],
            )
        )
        # DescribeScalableTargets has no resource type (Service Authorization Reference, cfn-lint Policies.json).
        role.add_to_policy(
            iam.PolicyStatement(actions=["application-autoscaling:DescribeScalableTargets"], resources=["*"])
        )
        reserves = any(
            p.invoke_function.reserved_concurrency or (p.streaming.enabled and p.streaming.reserved_concurrency)
            for p in environment_plan.plans
        )
        if reserves:
            # The Lambda concurrency check (model_build/preflight.py lambda_concurrency_checks, F10):
            # GetAccountSettings (no resource type), ListStackResources of the endpoint stacks, and
            # GetFunctionConcurrency of their functions, whose names CloudFormation generates (Service Authorization
            # Reference via cfn-lint Policies.json: function resource type).
            role.add_to_policy(iam.PolicyStatement(actions=["lambda:GetAccountSettings"], resources=["*"]))
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["cloudformation:ListStackResources"],
                    resources=[
                        self.format_arn(service="cloudformation", resource="stack", resource_name=f"{p.stack_name}/*")
                        for p in environment_plan.plans
                    ],
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["lambda:GetFunctionConcurrency"],
                    resources=[
                        self.format_arn(
                            service="lambda",
                            resource="function",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    ],
                )
            )
        # cdk-nag names a resource as synthesized: concrete where the stack's environment is, tokens otherwise.
        where = (
            "<AWS::Partition>:{service}:<AWS::Region>:<AWS::AccountId>"
            if Token.is_unresolved(self.account) or Token.is_unresolved(self.region)
            else f"{{partition}}:{{service}}:{self.region}:{self.account}"
        )

        def arn(service: str, rest: str) -> str:
            return "arn:" + where.format(service=service, partition=self.partition) + f":{rest}"

        acknowledge(
            role,
            [
                f"AwsSolutions-IAM5[Resource::{arn('sagemaker', 'endpoint-config/*')}]",
                "AwsSolutions-IAM5[Resource::*]",
            ]
            + [
                f"AwsSolutions-IAM5[Resource::{arn('cloudformation', f'stack/{p.stack_name}/*')}]"
                for p in environment_plan.plans
            ]
            + ([f"AwsSolutions-IAM5[Resource::{arn('lambda', 'function:*')}]"] if reserves else []),
            "Read-only. Endpoint config names are generated by CloudFormation; a stack's ARN ends in its id, known "
            "only once created; application-autoscaling:DescribeScalableTargets and lambda:GetAccountSettings have no "
            "resource type; the endpoint stacks' function names (GetFunctionConcurrency) are CloudFormation's.",
        )
        self.preflight_role = role

    def _publisher_role(
        self, environment_plan: EnvironmentPlan, trusted_pipeline: TrustedPipeline | None
    ) -> iam.Role | None:
        """The role a trusted pipeline's model build assumes to publish into this bucket (none without one)."""
        self.publisher_role = None
        if trusted_pipeline is None:
            return None
        role = iam.Role(
            self,
            "ModelPublisherRole",
            role_name=self.publisher_role_name,
            assumed_by=trusted_pipeline.principal(self),
            description="Assumed by the pipeline's model build: writes models/* of the "
            f"{environment_plan.environment_name} artifact bucket",
            max_session_duration=Duration.hours(4),
        )
        self.grant_publish(role)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::<ArtifactBucket.Arn>/models/*]",
            "The model build publishes content-addressed files (models/<endpoint>/<hash>/...) whose names are known "
            "only after the build; write access is limited to the models/ prefix of this one bucket.",
        )
        self.publisher_role = role
        return role

    def _adopt(self, bucket_name: str, repository_name: str) -> None:
        """`adopt_kept_data: true`: the bucket and repository an earlier deploy kept (retain_data) exist outside any
        stack, and creating them again fails ("already exists"). Use them by name instead. They keep the settings
        they were created with (encryption, versioning, lifecycle, logging, scanning); the TLS-only bucket policy,
        which was deleted with the old stack, is put back. `cdk destroy` leaves both where they are."""
        self.access_logs = None
        self.bucket = s3.Bucket.from_bucket_name(self, "ArtifactBucket", bucket_name)
        policy = s3.BucketPolicy(self, "ArtifactBucketPolicy", bucket=self.bucket, removal_policy=RemovalPolicy.RETAIN)
        policy.document.add_statements(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:*"],
                resources=[self.bucket.bucket_arn, self.bucket.arn_for_objects("*")],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        policy.document.add_statements(write_once_statement(self.bucket))
        acknowledge(
            policy,
            "AwsSolutions-S10",
            "The policy denies every s3:* request without TLS (aws:SecureTransport false) on the bucket and its "
            "objects, as enforceSSL does; cdk-nag cannot match the ARN of a bucket referenced by name to it.",
        )
        self.repository = ecr.Repository.from_repository_name(self, "ImageRepository", repository_name)
        self._outputs()

    def _outputs(self) -> None:
        CfnOutput(self, "ArtifactBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "ImageRepositoryUri", value=self.repository.repository_uri)

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """What `python -m model_build publish` (model_build/publish.py) calls, on models/* of the artifact bucket:
        HeadBucket (s3:ListBucket), HeadObject of every file (s3:GetObject; and s3:ListBucket, without which S3
        answers 403 instead of 404 for a key not yet published), PutObject and the multipart upload calls
        (s3:PutObject), AbortMultipartUpload on a failed upload (s3:AbortMultipartUpload). Operation -> action
        from the Service Authorization Reference for Amazon S3 and the S3 API reference (HeadBucket, HeadObject).
        Explicit actions, not bucket.grant_put's s3:PutObject* / s3:Abort* groups: write nothing else.
        tests/stacks/test_iam_coverage.py runs publish and checks this grant covers every call."""
        listing = iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:ListBucket"], resource_arns=[self.bucket.bucket_arn]
        )
        objects = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            resource_arns=[self.bucket.arn_for_objects("models/*")],
        )
        grant = listing.combine(objects)
        if self.bucket_key is not None:
            # SSE-KMS: PutObject (and multipart uploads) need the bucket key (stacks/endpoint_network.py, [S3-KMS]).
            grant = grant.combine(self.bucket_key.grant_s3_use(grantee))
        return grant
