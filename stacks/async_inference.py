"""SageMaker asynchronous inference for one endpoint: the endpoint config's AsyncInferenceConfig, its S3 locations and
SNS topics, what the execution role and the invoke function may do there, and scaling on the queue (to zero).

Sources (CloudFormation, SageMaker Developer Guide, S3 SSE-KMS): docs/design/async-inference.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from deployment.config_blocks import Autoscaling, Invocation
from deployment.plan import SCALE_FROM_ZERO_ALARM_EVALUATION_PERIODS, SCALE_FROM_ZERO_ALARM_PERIOD_S

from .endpoint_network import BucketKeyRef
from .nag import acknowledge, nag_text
from .scaling import VARIANT_INSTANCES, scalable_target, scale_from_zero_policy, target_tracking

BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"
SCALE_FROM_ZERO_METRIC = "HasBacklogWithoutCapacity"
METRIC_NAMESPACE = "AWS/SageMaker"
# The documented scale-from-zero policy and alarm (async-inference-autoscale.html), as numbers; the alarm's are the
# plan's, which sizes the smoke test's wait for a scale-up from zero with them.
SCALE_FROM_ZERO_COOLDOWN_S = 300
ALARM_PERIOD_S = SCALE_FROM_ZERO_ALARM_PERIOD_S
ALARM_EVALUATION_PERIODS = SCALE_FROM_ZERO_ALARM_EVALUATION_PERIODS


@dataclass(frozen=True)
class S3Location:
    """One S3 folder: bucket (may hold CloudFormation tokens) and key prefix without a trailing "/"."""

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def bucket_arn(self) -> str:
        return f"arn:{Aws.PARTITION}:s3:::{self.bucket}"

    @property
    def objects_arn(self) -> str:
        """Every object inside the folder (the "/" keeps a sibling folder with a longer name out)."""
        return f"{self.bucket_arn}/{self.prefix}/*"


@dataclass(frozen=True)
class AsyncKeys:
    """The KMS keys of the asynchronous folders. bucket_key: the artifact bucket's default encryption (SSE-KMS), which
    encrypts what is written into its folders (the request payloads always, the answers and failures when they are
    in the bucket and no output_key is set); output_key: encryption.async_output_key, the key SageMaker encrypts
    answers and failures with. A bucket named by output_path / failure_path keeps its own default encryption, which
    the stack cannot see: name its key as encryption.async_output_key."""

    bucket_key: BucketKeyRef | None = None
    output_key: str | None = None


@dataclass(frozen=True)
class AsyncLocations:
    """Where the invoke function puts request payloads and where SageMaker writes answers and failures."""

    input: S3Location
    output: S3Location
    failure: S3Location


class AsyncInference(Construct):
    """The asynchronous side of one endpoint.

    Keyword-only props:
      endpoint_name: the SageMaker endpoint's name (the metrics' EndpointName dimension, the prefixes' folder).
      invocation: the validated `invocation:` block; mode must be async.
      artifact_bucket: the environment's artifact bucket name, home of the default locations.
      folders: (bucket, key prefix) of the input, output and failure folders (EndpointPlan.async_folders).
      execution_role: the endpoint's execution role, granted what SageMaker does with it here (and nothing else).
      keys: the folders' KMS keys (AsyncKeys; default none: SSE-S3), which every client's grant includes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        invocation: Invocation,
        artifact_bucket: str,
        folders: Mapping[str, tuple[str, str]],
        execution_role: iam.IRole,
        keys: AsyncKeys = AsyncKeys(),
    ) -> None:
        super().__init__(scope, construct_id)
        if not invocation.is_async:
            raise ValueError(
                f"AsyncInference {endpoint_name!r}: invocation.mode must be 'async', got {invocation.mode!r}"
            )
        self.endpoint_name = endpoint_name
        self.invocation = invocation
        self.keys = keys
        self.artifact_bucket = artifact_bucket
        self.locations = AsyncLocations(**{key: S3Location(*folder) for key, folder in folders.items()})

        self.success_topic_arn = self._topic("SuccessTopic", invocation.success_topic, "answers")
        self.error_topic_arn = self._topic("ErrorTopic", invocation.error_topic, "failures")

        # What SageMaker does with the execution role for asynchronous requests: read the payload the invoke function
        # uploaded, write the answer or the failure (multipart for large answers), announce it.
        execution_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self.locations.input.objects_arn])
        )
        execution_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self.locations.output.objects_arn, self.locations.failure.objects_arn],
            )
        )
        topics = [t for t in (self.success_topic_arn, self.error_topic_arn) if t is not None]
        if topics:
            execution_role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=topics))
        acknowledge(
            execution_role,
            [
                f"AwsSolutions-IAM5[Resource::{nag_text(loc.objects_arn)}]"
                for loc in (self.locations.input, self.locations.output, self.locations.failure)
            ],
            "Asynchronous inference: SageMaker reads each request's payload from this endpoint's input folder and "
            "writes each answer or failure under a name it chooses (from the inference id) into this endpoint's output "
            "and failure folders; access is limited to those three folders.",
        )

    def _topic(self, construct_id: str, given: str | None, what: str) -> str | None:
        """The ARN of a notification topic: the one given, one created here, or None without notifications."""
        if not self.invocation.notifications:
            return None
        if given is not None:
            return given
        topic = sns.Topic(
            self,
            construct_id,
            display_name=f"{self.endpoint_name} asynchronous inference {what}",
            # TLS only (a topic policy that denies aws:SecureTransport false), cdk-nag AwsSolutions-SNS3.
            enforce_ssl=True,
        )
        acknowledge(
            topic,
            "AwsSolutions-SNS2",
            "The notifications carry the inference id and the S3 locations of the answer or failure, never the answer "
            "itself (IncludeInferenceResponseIn is not set; AsyncInferenceNotificationConfig); SNS encrypts in transit "
            "(TLS enforced by the topic policy). A KMS key would need a key policy for SageMaker's publishes.",
        )
        return topic.topic_arn

    @property
    def config(self) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        """The endpoint config's AsyncInferenceConfig."""
        notification = None
        if self.success_topic_arn is not None or self.error_topic_arn is not None:
            notification = sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                success_topic=self.success_topic_arn, error_topic=self.error_topic_arn
            )
        client = None
        if self.invocation.max_concurrent_invocations_per_instance is not None:
            client = sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                max_concurrent_invocations_per_instance=self.invocation.max_concurrent_invocations_per_instance
            )
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=self.locations.output.uri,
                s3_failure_path=self.locations.failure.uri,
                notification_config=notification,
            ),
            client_config=client,
        )

    def add_scaling(self, scaling: Autoscaling, *, variant_name: str, endpoint: IConstruct) -> None:
        """Target tracking on the queue per instance; with min_capacity 0 also the documented scale-from-zero step
        policy and its HasBacklogWithoutCapacity alarm (without it, a queue shorter than the target would wait at zero
        instances). No RoleARN: Application Auto Scaling uses its service-linked role for SageMaker."""
        target = scalable_target(
            self,
            "ScalableTarget",
            dimension=VARIANT_INSTANCES,
            resource_id=f"endpoint/{self.endpoint_name}/variant/{variant_name}",
            min_capacity=scaling.min_capacity,
            max_capacity=scaling.max_capacity,
            after=endpoint,
        )
        target_tracking(
            self,
            "BacklogScaling",
            policy_name=f"{self.endpoint_name}-backlog",
            target=target,
            # Queued requests per instance (the metric divides the queue by the instance count).
            target_value=scaling.target_value,
            customized_metric=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                metric_name=BACKLOG_METRIC,
                namespace=METRIC_NAMESPACE,
                statistic="Average",
                dimensions=[
                    appscaling.CfnScalingPolicy.MetricDimensionProperty(name="EndpointName", value=self.endpoint_name)
                ],
            ),
            scale_in_cooldown_s=scaling.scale_in_cooldown_s,
            scale_out_cooldown_s=scaling.scale_out_cooldown_s,
        )
        if scaling.min_capacity > 0:
            return
        from_zero = scale_from_zero_policy(
            self,
            policy_name=f"{self.endpoint_name}-{SCALE_FROM_ZERO_METRIC}",
            target=target,
            metric_aggregation="Average",
            cooldown_s=SCALE_FROM_ZERO_COOLDOWN_S,
        )
        cloudwatch.CfnAlarm(
            self,
            "BacklogWithoutCapacity",
            alarm_description=(
                f"Requests wait in the queue of {self.endpoint_name} while it runs no instance: scale up from zero"
            ),
            namespace=METRIC_NAMESPACE,
            metric_name=SCALE_FROM_ZERO_METRIC,
            dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name="EndpointName", value=self.endpoint_name)],
            statistic="Average",
            period=ALARM_PERIOD_S,
            evaluation_periods=ALARM_EVALUATION_PERIODS,
            datapoints_to_alarm=ALARM_EVALUATION_PERIODS,
            threshold=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            treat_missing_data="missing",
            alarm_actions=[from_zero.attr_arn],
        )

    # Grants for the function that submits requests and reads results (the endpoint's invoke function in async mode,
    # endpoint_runtime/async_invoke.py). Operation -> action: PutObject s3:PutObject, ListObjectsV2 s3:ListBucket (with the s3:prefix
    # condition key), GetObject s3:GetObject (Service Authorization Reference for Amazon S3, list_amazons3.html);
    # InvokeEndpointAsync sagemaker:InvokeEndpointAsync (the Prerequisites page above).

    def grant_submit(self, grantee: iam.IGrantable, endpoint_arn: str) -> iam.Grant:
        """Upload request payloads into the input folder (with the bucket's key under SSE-KMS) and submit them to
        this endpoint."""
        upload = iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:PutObject"], resource_arns=[self.locations.input.objects_arn]
        )
        submit = iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpointAsync"], resource_arns=[endpoint_arn]
        )
        grant = upload.combine(submit)
        if self.keys.bucket_key is not None:  # the input folder is always in the artifact bucket
            grant = grant.combine(self.keys.bucket_key.grant_s3_use(grantee))
        return grant

    def grant_read_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """Find (list with the key as prefix) and read answers and failures, in their two folders only, with the key
        that encrypts them (grant_read_key)."""
        grant: iam.Grant | None = None
        for loc in (self.locations.output, self.locations.failure):
            listing = iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["s3:ListBucket"],
                resource_arns=[loc.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{loc.prefix}/*"]}},
            )
            reading = iam.Grant.add_to_principal(
                grantee=grantee, actions=["s3:GetObject"], resource_arns=[loc.objects_arn]
            )
            both = listing.combine(reading)
            grant = both if grant is None else grant.combine(both)
        assert grant is not None
        key = self.grant_read_key(grantee)
        return grant.combine(key) if key is not None else grant

    def grant_read_key(self, grantee: iam.IGrantable) -> iam.Grant | None:
        """kms:Decrypt, through S3 in this region only, on the key the answers and failures are encrypted with:
        output_key when set (SageMaker encrypts with it), else the bucket key when a folder is in the artifact bucket;
        None when they are not KMS-encrypted as far as the stack knows."""
        if self.keys.output_key is not None:
            stack = Stack.of(grantee) if isinstance(grantee, Construct) else None
            region = stack.region if stack is not None else Aws.REGION
            return iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["kms:Decrypt"],
                resource_arns=[self.keys.output_key],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
            )
        in_bucket = any(loc.bucket == self.artifact_bucket for loc in (self.locations.output, self.locations.failure))
        if self.keys.bucket_key is not None and in_bucket:
            return self.keys.bucket_key.grant_s3_use(grantee)
        return None

    def grant_client(self, grantee: iam.IGrantable, endpoint_arn: str) -> iam.Grant:
        """What a client of this endpoint does (endpoint_runtime/async_invoke.py: submit and read results): the
        endpoint's invoke function, its smoke-test function and the pipeline's smoke role. cdk-nag's IAM5 findings of
        those grants are acknowledged on the grantee's role."""
        grant = self.grant_submit(grantee, endpoint_arn).combine(self.grant_read_results(grantee))
        role = grantee.role if isinstance(grantee, lambda_.Function) else grantee
        acknowledge(
            role,
            [
                f"AwsSolutions-IAM5[Resource::{nag_text(loc.objects_arn)}]"
                for loc in (self.locations.input, self.locations.output, self.locations.failure)
            ],
            "Asynchronous inference: request payloads are uploaded under new names (one per request) into this "
            "endpoint's input folder, and answers and failures are read from this endpoint's output and failure "
            "folders, under names SageMaker derives from each inference id; access is limited to those folders.",
        )
        if self.keys.bucket_key is not None and self.keys.bucket_key.alias_name is not None:
            acknowledge(
                role,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:kms:<AWS::Region>:<AWS::AccountId>:key/*]",
                "The artifact bucket's key is created by the artifacts stack (another stack, or another pipeline "
                f"stage); it is named by its alias {self.keys.bucket_key.alias_name} (kms:ResourceAliases), and only "
                "through S3 in this region (kms:ViaService): uploading a request payload and reading an answer "
                "under SSE-KMS need it.",
            )
        return grant

    @property
    def environment(self) -> dict[str, str]:
        """What the invoke function needs to know (endpoint_runtime/async_invoke.py reads these)."""
        env = {
            "INVOCATION_MODE": "async",
            "INPUT_LOCATION": self.locations.input.uri,
            "OUTPUT_LOCATION": self.locations.output.uri,
            "FAILURE_LOCATION": self.locations.failure.uri,
        }
        if self.invocation.invocation_timeout_s is not None:
            env["INVOCATION_TIMEOUT_S"] = str(self.invocation.invocation_timeout_s)
        if self.invocation.request_ttl_s is not None:
            env["REQUEST_TTL_S"] = str(self.invocation.request_ttl_s)
        return env


__all__ = ["AsyncInference", "AsyncKeys", "AsyncLocations", "S3Location"]
