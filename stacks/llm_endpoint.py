"""One SageMaker real-time endpoint for an LLM: role, model, endpoint config, endpoint, logs, autoscaling."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

import request_contract
from endpoint_config import Autoscaling, EndpointSpec, parse_instance_type
from endpoint_config.schema import LOG_RETENTION, TIMEOUT_BOUNDS

from .async_inference import AsyncInference
from .endpoint_alarms import EndpointAlarms, RollbackAlarms, deployment_config
from .endpoint_network import EndpointSecurity
from .inference_components import InferenceComponent, component_endpoint_config
from .lambda_asset import function_code
from .nag import acknowledge

VARIANT_NAME = "AllTraffic"
# Config value -> ProductionVariant RoutingConfig.RoutingStrategy (botocore's sagemaker RoutingStrategy enum).
ROUTING_STRATEGIES = {"random": "RANDOM", "least-outstanding-requests": "LEAST_OUTSTANDING_REQUESTS"}
# Concurrency, not invocations, tracks LLM load: one request holds a model copy for seconds.
SCALING_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


@dataclass(frozen=True)
class ModelData:
    """Where the artifact is: an uncompressed S3 prefix (default) or one model.tar.gz under that prefix."""

    bucket_name: str
    prefix: str  # ends with "/"
    compressed: bool = False
    # What the execution role may read; defaults to `prefix`. The stacks pass the endpoint's whole artifact root
    # (models/<endpoint>/): during a blue/green update the old fleet still reads its own content-addressed prefix
    # (a replaced instance, a scale-out) while the role's policy already serves the new model; and the DJL S3
    # recipes' engines read staged weights beside the model data. Never another endpoint's artifacts.
    read_prefix: str | None = None

    def __post_init__(self) -> None:
        if not self.prefix.startswith(self.readable_prefix):
            raise ValueError(f"model data prefix {self.prefix!r} lies outside the readable prefix {self.readable_prefix!r}")

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
      spec: the validated endpoint config (instance type and count, volume, timeouts, autoscaling; its `deployment:`
        and `alarms:` blocks become the DeploymentConfig, rollback alarms and health alarms: stacks/endpoint_alarms.py).
      image: the container image and the repository ARN the execution role may pull from.
      model_data: the artifact location; the execution role may read only its `readable_prefix`.
      environment: the container environment.
      download_timeout_s / startup_timeout_s: ModelDataDownloadTimeoutInSeconds and
        ContainerStartupHealthCheckTimeoutInSeconds (60-3600, validated with the config).
      network_isolation: no outbound network from the container (default True; the artifact comes from S3).
      model_copies: copies of the model one instance serves (default 1): SageMaker's concurrency metric counts per
        instance, so the scaling target is the per-copy target times this.
      inference_ami_version: the variant's InferenceAmiVersion (default None: SageMaker's default AMI), for images
        whose CUDA needs a newer driver than the default AMI's.
      security: the endpoint's data capture, VPC placement and KMS keys (stacks/endpoint_network.py; default None:
        none of them).
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
        model_copies: int = 1,
        inference_ami_version: str | None = None,
        security: EndpointSecurity | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if model_copies < 1:
            raise ValueError(f"LlmEndpoint {endpoint_name!r}: model_copies must be at least 1, got {model_copies}")
        self.model_copies = model_copies
        low, high = TIMEOUT_BOUNDS
        for name, value in (("download_timeout_s", download_timeout_s), ("startup_timeout_s", startup_timeout_s)):
            if not low <= value <= high:
                raise ValueError(f"LlmEndpoint {endpoint_name!r}: {name} must be between {low} and {high} s, got {value}")
        if not model_data.prefix.endswith("/"):
            raise ValueError(f"LlmEndpoint {endpoint_name!r}: model_data.prefix must end with '/', got {model_data.prefix!r}")
        self.endpoint_name = endpoint_name
        self.environment = dict(environment)  # the container's; InvokeFunction copies the request limits from it
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
        # The CreateModel execution-role policy AWS documents: logs:CreateLogGroup too, since SageMaker may create
        # the group itself ("How to use SageMaker AI execution roles", CreateModel API section,
        # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html). The group ARN with the trailing
        # :* is the form IAM policies use for every CloudWatch Logs action but the tagging ones
        # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/iam-access-control-overview-cwl.html).
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
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
            "PutMetricData is limited to SageMaker's endpoint namespace by a condition. With a VPC, the network "
            "interface actions SageMaker documents for a model's VpcConfig, on * as documented (sagemaker-roles.html).",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{_nag_text(model_data.bucket_name)}/{model_data.readable_prefix}*]",
            "Read access to this endpoint's artifacts (models/<endpoint>/) only: the files are known only after the "
            "build, and during a blue/green update the old fleet still reads its own content-addressed prefix while "
            "the policy already names the new one.",
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

        # invocation.mode async: AsyncInferenceConfig, its S3 folders and topics, the role's grants (stacks/async_inference.py).
        self.async_inference = (
            AsyncInference(self, "AsyncInference", endpoint_name=endpoint_name, invocation=spec.invocation,
                           artifact_bucket=model_data.bucket_name, execution_role=self.role)
            if spec.invocation.is_async else None
        )
        volume = spec.volume_size_gb
        # hosting.mode inference-components: a variant without a model (stacks/inference_components.py).
        self.endpoint_config = component_endpoint_config(
            self, "EndpointConfig", spec=spec, role=self.role, variant_name=VARIANT_NAME,
            routing_strategy=ROUTING_STRATEGIES[spec.routing], inference_ami_version=inference_ami_version,
        ) if spec.hosting.uses_components else sagemaker.CfnEndpointConfig(
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
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=ROUTING_STRATEGIES[spec.routing]
                    ),
                    inference_ami_version=inference_ami_version,
                )
            ],
            async_inference_config=self.async_inference.config if self.async_inference else None,
        )

        if security is not None:
            security.apply(role=self.role, model=self.model, endpoint_config=self.endpoint_config)

        # An update would otherwise reset the fleet to InitialInstanceCount ("Update endpoints that use auto scaling",
        # https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html): keep what autoscaling
        # set; take weights and data capture from the new config, and the count too when nothing scales it.
        # With inference components SageMaker's managed instance scaling sets the count: keep it too.
        scaled = spec.autoscaling is not None or spec.hosting.uses_components
        excluded = ["DesiredWeight", "DataCaptureConfig"] + ([] if scaled else ["DesiredInstanceCount"])
        # deployment: guarded updates; the rollback alarms watch the new fleet (stacks/endpoint_alarms.py).
        self.rollback_alarms = None
        if spec.deployment is not None and spec.deployment.auto_rollback is not None:
            self.rollback_alarms = RollbackAlarms(
                self, "RollbackAlarms", endpoint_name=endpoint_name, variant_name=VARIANT_NAME,
                endpoint_config_name=self.endpoint_config.attr_endpoint_config_name, spec=spec.deployment.auto_rollback,
            )
            self.rollback_alarms.grant_describe(self.role)
        guarded = (
            deployment_config(
                spec.deployment, endpoint_name=endpoint_name,
                rollback_alarm_names=self.rollback_alarms.alarm_names if self.rollback_alarms else [],
                variant_count=len(self.endpoint_config.production_variants),
            )
            if spec.deployment is not None else None
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            retain_all_variant_properties=True,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type=t) for t in excluded
            ],
            deployment_config=guarded,
        )
        self.endpoint.node.add_dependency(self.log_group)
        # hosting.mode inference-components: the model as an inference component, with its copy scaling.
        self.component = InferenceComponent(
            self, "InferenceComponent", endpoint=self.endpoint, endpoint_name=endpoint_name, model=self.model,
            role=self.role, spec=spec, variant_name=VARIANT_NAME, download_timeout_s=download_timeout_s,
            startup_timeout_s=startup_timeout_s,
        ) if spec.hosting.uses_components else None
        if self.rollback_alarms is not None:
            # The alarms name the new config: they must move to it (and the role may read them) before the update.
            self.endpoint.node.add_dependency(self.rollback_alarms, self.role)
        # alarms: the endpoint's health alarms and their topic (stacks/endpoint_alarms.py).
        self.alarms = (
            EndpointAlarms(
                self, "Alarms", endpoint_name=endpoint_name, variant_name=VARIANT_NAME, spec=spec.alarms,
                gpu_count=parse_instance_type(spec.instance_type).gpu_count, asynchronous=spec.invocation.is_async,
            )
            if spec.alarms is not None else None
        )

        if spec.autoscaling is not None and self.async_inference is not None:
            self.async_inference.add_scaling(spec.autoscaling, variant_name=VARIANT_NAME, endpoint=self.endpoint)
        elif spec.autoscaling is not None:
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
                # The metric counts concurrent requests per instance; the config's target is per model copy.
                target_value=scaling.target_value * self.model_copies,
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

    @property
    def component_environment(self) -> dict[str, str]:
        """INFERENCE_COMPONENT_NAME for the functions that invoke an inference-component endpoint (InvokeEndpoint's
        InferenceComponentName names the model to run); empty for a model on the variant."""
        return {"INFERENCE_COMPONENT_NAME": self.component.component_name} if self.component is not None else {}

    # Grants, as aws-cdk's aws-sagemaker-alpha `Endpoint.grantInvoke` does (packages/@aws-cdk/aws-sagemaker-alpha/
    # lib/endpoint.ts: iam.Grant.addToPrincipal, sagemaker:InvokeEndpoint on the endpoint ARN). Every principal that
    # calls this endpoint gets its permissions here, so no two hand-written action lists can drift apart.

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint. It also authorizes InvokeEndpointWithResponseStream, which has no IAM action of its own
        ("your IAM permissions must allow the sagemaker:InvokeEndpoint action",
        https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html)."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=[self.endpoint_arn]
        )
        # A call naming an inference component is authorized on the component too (InferenceComponent.grant_invoke).
        return grant.combine(self.component.grant_invoke(grantee)) if self.component is not None else grant

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """DescribeEndpoint: status, failure reason and the endpoint config it runs."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeEndpoint"], resource_arns=[self.endpoint_arn]
        )

    def grant_smoke_test(self, grantee: iam.IGrantable) -> iam.Grant:
        """What lambda/smoke/handler.py `smoke_test` calls (also run by `python -m model_build smoke`):
        cloudformation DescribeStacks + ListStackResources on this endpoint's stack, then DescribeEndpoint and
        InvokeEndpoint on the endpoint; an asynchronous endpoint is invoked as its clients do instead (the payload into
        its input folder, InvokeEndpointAsync, the answer read from its output or failure folder:
        AsyncInference.grant_client). tests/stacks/test_iam_coverage.py runs that code and checks this grant covers it."""
        stack = Stack.of(self)
        # stack_id, not Aws.STACK_ID: a scoped token, so a grantee in another stack gets this stack's id
        # (exported), never its own.
        on_stack = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["cloudformation:DescribeStacks", "cloudformation:ListStackResources"],
            resource_arns=[stack.stack_id],
        )
        invoking = (
            self.async_inference.grant_client(grantee, self.endpoint_arn)
            if self.async_inference is not None
            else self.grant_invoke(grantee)
        )
        granted = on_stack.combine(self.grant_describe(grantee)).combine(invoking)
        # hosting.mode inference-components: the `component` check describes the component.
        return granted.combine(self.component.grant_describe(grantee)) if self.component is not None else granted


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
        reserved_concurrency: int | None = None,
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
            reserved_concurrent_executions=reserved_concurrency,
            environment=environment,
            description=description,
        )
        self.function.node.add_dependency(role)


class InvokeFunction(_PythonFunction):
    """The Lambda function in lambda/invoke: validates a request and invokes one endpoint (name from env only)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: LlmEndpoint,
        code_path: str,
        log_retention_days: int,
        reserved_concurrency: int | None = None,
    ) -> None:
        """reserved_concurrency: Lambda reserved concurrency (default None: the account's unreserved pool)."""
        super().__init__(
            scope,
            construct_id,
            # invoke/handler.py and what it imports: endpoint_runtime/ and request_contract.py (at the asset's root).
            code=function_code(Path(code_path) / "handler.py"),
            handler="invoke/handler.handler",
            # The request limits the container enforces (request_contract.limits()), so that the function refuses
            # what the model would: the same values, or neither sets them and both use the module's defaults.
            environment={"ENDPOINT_NAME": endpoint.endpoint_name, "READ_TIMEOUT_S": "55",
                         **{k: v for k, v in endpoint.environment.items() if k in request_contract.LIMIT_ENV},
                         **endpoint.component_environment,
                         # invocation.mode async: INVOCATION_MODE and the S3 folders (endpoint_runtime/async_invoke.py).
                         **(endpoint.async_inference.environment if endpoint.async_inference else {})},
            # Above the client's 5 s connect + 55 s read timeouts; the read timeout stays below SageMaker's
            # 60 s InvokeEndpoint limit, so the function answers 504 itself instead of being killed.
            timeout=Duration.seconds(65),
            statements=[],
            description=f"Validates a generation request and invokes SageMaker endpoint {endpoint.endpoint_name}",
            log_retention_days=log_retention_days,
            reserved_concurrency=reserved_concurrency,
        )
        if endpoint.async_inference is not None:  # it takes InvokeEndpointAsync only: submit and fetch instead
            endpoint.async_inference.grant_client(self.function, endpoint.endpoint_arn)
        else:
            endpoint.grant_invoke(self.function)


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
        budget_ms = smoke.budget_ms(spec.invocation.mode)
        super().__init__(
            scope,
            construct_id,
            # smoke/handler.py and the endpoint_runtime modules it imports (the checks, lambda/invoke's request code).
            code=function_code(Path(lambda_root) / "smoke" / "handler.py"),
            handler="smoke/handler.handler",
            environment={
                "STACK_NAME": Aws.STACK_NAME,
                "ENDPOINT_NAME": endpoint.endpoint_name,
                **endpoint.component_environment,
                # invocation.mode async: INVOCATION_MODE and the S3 folders, as the invoke function gets them.
                **(endpoint.async_inference.environment if endpoint.async_inference else {}),
                "PROMPT": smoke.prompt,
                "MAX_NEW_TOKENS": str(smoke.max_new_tokens),
                "LATENCY_BUDGET_MS": str(budget_ms),
                "EMULATOR": "true" if emulator else "false",
            },
            timeout=Duration.seconds(smoke_timeout_s(budget_ms)),
            statements=[],
            description=f"Smoke test of SageMaker endpoint {endpoint.endpoint_name} and its stack",
            log_retention_days=spec.log_retention_days,
        )
        endpoint.grant_smoke_test(self.function)




# The smoke function's Lambda timeout: its other checks take a few seconds; a real-time invocation is bounded by the
# invoke client's 5 s connect + 55 s read timeouts, an asynchronous one by the budget it polls for. Lambda allows at
# most 900 s ("up to a maximum value of 900 seconds", https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html),
# which the async budget's 840 s maximum leaves room under.
SMOKE_TIMEOUT_MARGIN_S, SMOKE_REAL_TIME_TIMEOUT_S, LAMBDA_MAX_TIMEOUT_S = 60, 90, 900


def smoke_timeout_s(budget_ms: int) -> int:
    """The smoke function's timeout for a latency budget: never below the real-time 90 s, never above 900 s."""
    return min(LAMBDA_MAX_TIMEOUT_S, max(SMOKE_REAL_TIME_TIMEOUT_S, -(-budget_ms // 1000) + SMOKE_TIMEOUT_MARGIN_S))


def _nag_text(value: str) -> str:
    """How cdk-nag writes a string holding pseudo parameters in its finding ids (e.g. <AWS::AccountId>)."""
    for token, text in ((Aws.ACCOUNT_ID, "<AWS::AccountId>"), (Aws.REGION, "<AWS::Region>"), (Aws.PARTITION, "<AWS::Partition>")):
        value = value.replace(token, text)
    return value


def _retention(days: int) -> logs.RetentionDays:
    if days not in LOG_RETENTION:
        raise ValueError(f"log retention {days} days is not one CloudWatch Logs offers")
    return logs.RetentionDays[LOG_RETENTION[days]]


__all__ = ["ContainerImage", "InvokeFunction", "LlmEndpoint", "ModelData", "SmokeTestFunction"]
