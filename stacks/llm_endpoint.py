"""One SageMaker real-time endpoint for an LLM: role, model, endpoint config, endpoint, logs, autoscaling."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from endpoint_config import Autoscaling, EndpointSpec

from .nag import acknowledge

VARIANT_NAME = "AllTraffic"
# Concurrency, not invocations, tracks LLM load: one request holds a model copy for seconds.
SCALING_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


@dataclass(frozen=True)
class ModelData:
    """Where the artifact is: an uncompressed S3 prefix (default) or one model.tar.gz under that prefix."""

    bucket_name: str
    prefix: str  # ends with "/"
    compressed: bool = False
    # What the execution role may read; defaults to `prefix`. Wider when the engine itself reads staged
    # weights beside the model data (the DJL S3 recipes): still one artifact's prefix.
    read_prefix: str | None = None

    @property
    def readable_prefix(self) -> str:
        return self.read_prefix or self.prefix

    @property
    def s3_uri(self) -> str:
        key = f"{self.prefix}model.tar.gz" if self.compressed else self.prefix
        return f"s3://{self.bucket_name}/{key}"


@dataclass(frozen=True)
class ContainerImage:
    uri: str
    repository_arn: str


class LlmEndpoint(Construct):
    """A SageMaker endpoint serving one model, with everything it needs and nothing more.

    Keyword-only props:
      endpoint_name: the SageMaker endpoint name (fixed, so clients keep it across updates). Model and
        endpoint config names are left to CloudFormation, so any change to them replaces them cleanly.
      spec: the validated endpoint config (instance type and count, volume, timeouts, autoscaling).
      image: the container image and the repository ARN the execution role may pull from.
      model_data: the artifact location; the execution role may read only this prefix.
      environment: the container environment.
      download_timeout_s / startup_timeout_s: ModelDataDownloadTimeoutInSeconds and
        ContainerStartupHealthCheckTimeoutInSeconds (60-3600, validated with the config).
      network_isolation: no outbound network from the container (default True; the artifact comes from S3).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        spec: EndpointSpec,
        image: ContainerImage,
        model_data: ModelData,
        environment: dict[str, str],
        download_timeout_s: int,
        startup_timeout_s: int,
        network_isolation: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        for name, value in (("download_timeout_s", download_timeout_s), ("startup_timeout_s", startup_timeout_s)):
            if not 60 <= value <= 3600:
                raise ValueError(f"LlmEndpoint {endpoint_name!r}: {name} must be between 60 and 3600 s, got {value}")
        if not model_data.prefix.endswith("/"):
            raise ValueError(f"LlmEndpoint {endpoint_name!r}: model_data.prefix must end with '/', got {model_data.prefix!r}")
        self.endpoint_name = endpoint_name
        Stack.of(self)

        # SageMaker writes to this group itself; owning it gives it a retention and lets destroy remove it.
        # It must exist before the endpoint, or SageMaker creates it first and the stack cannot.
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/sagemaker/Endpoints/{endpoint_name}",
            retention=_retention(spec.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of endpoint {endpoint_name}: reads its model prefix, pulls its image",
        )
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{model_data.bucket_name}"
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{bucket_arn}/{model_data.readable_prefix}*"])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{model_data.readable_prefix}*"]}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[image.repository_arn],
            )
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}},
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData support no resource-level permissions; "
            "PutMetricData is limited to SageMaker's endpoint namespace by a condition.",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{_nag_text(model_data.bucket_name)}/{model_data.readable_prefix}*]",
            "Read access to the objects of one content-addressed artifact prefix: the files are only known "
            "after the build, and the prefix changes with every artifact.",
        )

        if model_data.compressed:
            container = sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri, environment=environment, model_data_url=model_data.s3_uri
            )
        else:
            container = sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                environment=environment,
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=model_data.s3_uri, s3_data_type="S3Prefix", compression_type="None"
                    )
                ),
            )
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=container,
            enable_network_isolation=network_isolation,
        )
        # SageMaker checks the role's access when it creates the model: the policy must be attached first.
        self.model.node.add_dependency(self.role)

        volume = spec.volume_size_gb
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    initial_instance_count=spec.instance_count,
                    instance_type=spec.instance_type,
                    initial_variant_weight=1.0,
                    volume_size_in_gb=volume,
                    model_data_download_timeout_in_seconds=download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=startup_timeout_s,
                )
            ],
        )

        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )
        self.endpoint.node.add_dependency(self.log_group)

        if spec.autoscaling is not None:
            self._add_autoscaling(spec.autoscaling)

    def _add_autoscaling(self, scaling: Autoscaling) -> None:
        # No RoleARN: Application Auto Scaling uses its service-linked role for SageMaker endpoints.
        target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
            min_capacity=scaling.min_capacity,
            max_capacity=scaling.max_capacity,
        )
        target.node.add_dependency(self.endpoint)
        appscaling.CfnScalingPolicy(
            self,
            "ConcurrencyScaling",
            policy_name=f"{self.endpoint_name}-concurrency",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=scaling.target_value,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=SCALING_METRIC
                ),
                scale_in_cooldown=scaling.scale_in_cooldown_s,
                scale_out_cooldown=scaling.scale_out_cooldown_s,
            ),
        )

    @property
    def endpoint_arn(self) -> str:
        # SageMaker ARNs carry the endpoint name in lower case.
        return Stack.of(self).format_arn(service="sagemaker", resource="endpoint", resource_name=self.endpoint_name.lower())


class _PythonFunction(Construct):
    """A Python Lambda function with its own log group (retention, deleted with the stack) and a role that may
    write only those logs plus the given statements."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        environment: dict[str, str],
        timeout: Duration,
        statements: list[iam.PolicyStatement],
        description: str,
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        log_group = logs.LogGroup(
            self, "Logs", retention=_retention(log_retention_days), removal_policy=RemovalPolicy.DESTROY
        )
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
        for statement in statements:
            role.add_to_policy(statement)
        role.add_to_policy(
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn])
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=code,
            role=role,
            log_group=log_group,
            timeout=timeout,
            memory_size=256,
            environment=environment,
            description=description,
        )
        self.function.node.add_dependency(role)


class InvokeFunction(_PythonFunction):
    """The Lambda function in lambda/invoke: validates a request and invokes one endpoint (name from env only)."""

    def __init__(self, scope: Construct, construct_id: str, *, endpoint: LlmEndpoint, code_path: str, log_retention_days: int) -> None:
        super().__init__(
            scope,
            construct_id,
            code=lambda_.Code.from_asset(code_path),
            handler="handler.handler",
            environment={"ENDPOINT_NAME": endpoint.endpoint_name, "READ_TIMEOUT_S": "55"},
            # Above the client's 5 s connect + 55 s read timeouts; the read timeout stays below SageMaker's
            # 60 s InvokeEndpoint limit, so the function answers 504 itself instead of being killed.
            timeout=Duration.seconds(65),
            statements=[iam.PolicyStatement(actions=["sagemaker:InvokeEndpoint"], resources=[endpoint.endpoint_arn])],
            description=f"Validates a generation request and invokes SageMaker endpoint {endpoint.endpoint_name}",
            log_retention_days=log_retention_days,
        )


class SmokeTestFunction(_PythonFunction):
    """The Lambda function in lambda/smoke: after a deploy, checks the stack's endpoint serves (state, the
    deployed endpoint config, one prompt's answer and latency). The same code runs as `model_build smoke`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: LlmEndpoint,
        lambda_root: str,
        spec: EndpointSpec,
        emulator: bool,
    ) -> None:
        smoke = spec.smoke_test
        super().__init__(
            scope,
            construct_id,
            # The whole lambda/ folder: the smoke handler reuses lambda/invoke's request code.
            code=lambda_.Code.from_asset(lambda_root, exclude=["**/__pycache__"]),
            handler="smoke/handler.handler",
            environment={
                "STACK_NAME": Aws.STACK_NAME,
                "ENDPOINT_NAME": endpoint.endpoint_name,
                "PROMPT": smoke.prompt,
                "MAX_NEW_TOKENS": str(smoke.max_new_tokens),
                "LATENCY_BUDGET_MS": str(smoke.latency_budget_ms),
                "EMULATOR": "true" if emulator else "false",
            },
            timeout=Duration.seconds(90),
            statements=[
                iam.PolicyStatement(
                    actions=["cloudformation:DescribeStacks", "cloudformation:ListStackResources"],
                    resources=[Aws.STACK_ID],
                ),
                iam.PolicyStatement(
                    actions=["sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint"], resources=[endpoint.endpoint_arn]
                ),
            ],
            description=f"Smoke test of SageMaker endpoint {endpoint.endpoint_name} and its stack",
            log_retention_days=spec.log_retention_days,
        )


_RETENTION_BY_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}  # fmt: skip


def _nag_text(value: str) -> str:
    """How cdk-nag writes a string holding pseudo parameters in its finding ids (e.g. <AWS::AccountId>)."""
    for token, text in ((Aws.ACCOUNT_ID, "<AWS::AccountId>"), (Aws.REGION, "<AWS::Region>"), (Aws.PARTITION, "<AWS::Partition>")):
        value = value.replace(token, text)
    return value


def _retention(days: int) -> logs.RetentionDays:
    if days not in _RETENTION_BY_DAYS:
        raise ValueError(f"log retention {days} days is not one CloudWatch Logs offers")
    return logs.RetentionDays[_RETENTION_BY_DAYS[days]]


__all__ = ["ContainerImage", "InvokeFunction", "LlmEndpoint", "ModelData", "SmokeTestFunction"]
