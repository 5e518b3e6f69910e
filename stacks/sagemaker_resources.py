"""One SageMaker resource per construct, each with flat typed props and its validation in the constructor: the
execution role, the model, the endpoint config of a model on its variant, and the endpoint with its guarded updates.
They subclass the L1 resources, so each keeps the construct id (and CloudFormation logical id) LlmEndpoint gives it:
a refactor must never make CloudFormation replace a named endpoint. The inference-component endpoint config is
stacks/inference_components.py's."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Aws, CfnDeletionPolicy, CfnResource, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment.config_blocks import Routing
from deployment.plan import ModelData

from .nag import acknowledge, nag_text

TIMEOUT_BOUNDS_S = (60, 3600)  # ModelDataDownloadTimeoutInSeconds, ContainerStartupHealthCheckTimeoutInSeconds
# cfn-lint's rule "Both UpdateReplacePolicy and DeletionPolicy are needed to protect resource from deletion".
REPLACE_ONLY_RETAIN = "W3011"


def routing_config(routing: Routing) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
    """The production variant's RoutingConfig: the strategy, and for prefix-aware its PrefixAwareRoutingConfig with
    the defaults filled in (endpoint_config/routing.py; SageMaker requires both settings with PREFIX_AWARE)."""
    settings = routing.prefix_aware
    return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
        routing_strategy=routing.api_strategy,
        prefix_aware_routing_config=sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
            prefix_length=settings[0], concurrency_threshold=settings[1]
        )
        if settings is not None
        else None,
    )


@dataclass(frozen=True)
class ContainerImage:
    """A container image and the ECR repository the execution role may pull it from."""

    uri: str
    repository_arn: str


def check_timeouts(owner: str, **timeouts_s: int) -> None:
    low, high = TIMEOUT_BOUNDS_S
    for name, value in timeouts_s.items():
        if not low <= value <= high:
            raise ValueError(f"{owner}: {name} must be between {low} and {high} s, got {value}")


# Cross-service confused deputy prevention for SageMaker inference (SageMaker Developer Guide, "Cross-service
# confused deputy prevention", section "SageMaker AI Inference"): the execution role of real-time, serverless and
# asynchronous endpoints trusts sagemaker.amazonaws.com only on behalf of this account and region, with exactly
# this ARN form ("Do not replace the aws:SourceArn in this template with the full ARN of a specific model or
# endpoint"). Reliability probe, section 4 (L11 of 2026-11-25). Unverified here: only a deploy on an account shows
# SageMaker assuming the role under it.
INFERENCE_TRUST_CONDITION = {
    "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"}
}


class ExecutionRole(iam.Role):
    """The role SageMaker runs an endpoint's containers with: read the endpoint's model prefix, pull its image, write
    its log group and the endpoint metrics namespace; nothing else until a block adds to it (async folders, data
    capture, VPC, KMS)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        model_data: ModelData,
        image: ContainerImage,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com", conditions=INFERENCE_TRUST_CONDITION),
            description=f"SageMaker execution role of endpoint {endpoint_name}: reads its model prefix, pulls its image",
        )
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{model_data.bucket_name}"
        self.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{bucket_arn}/{model_data.readable_prefix}*"])
        )
        self.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{model_data.readable_prefix}*"]}},
            )
        )
        self.add_to_policy(
            iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[image.repository_arn],
            )
        )
        self.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        # The CreateModel execution-role policy AWS documents: logs:CreateLogGroup too, since SageMaker may create
        # the group itself ("How to use SageMaker AI execution roles", CreateModel API section,
        # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html). The group ARN with the trailing
        # :* is the form IAM policies use for every CloudWatch Logs action but the tagging ones
        # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/iam-access-control-overview-cwl.html).
        self.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_group.log_group_arn],
            )
        )
        self.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}},
            )
        )
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData support no resource-level permissions; "
            "PutMetricData is limited to SageMaker's endpoint namespace by a condition. With a VPC, the network "
            "interface actions SageMaker documents for a model's VpcConfig, on * as documented (sagemaker-roles.html).",
        )
        acknowledge(
            self,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{nag_text(model_data.bucket_name)}/{model_data.readable_prefix}*]",
            "Read access to this endpoint's artifacts (models/<endpoint>/) only: the files are known only after the "
            "build, and during a blue/green update the old fleet still reads its own content-addressed prefix while "
            "the policy already names the new one.",
        )


def hub_access(model_data: ModelData) -> dict[str, object]:
    """A hub model's S3DataSource additions (endpoint_config/model_source.py): HubAccessConfig {HubContentArn}, and
    ModelAccessConfig {AcceptEula: true} only when the config accepted the EULA in so many words (botocore's
    S3ModelDataSource; cfn-lint 1.58's AWS::SageMaker::Model S3DataSource). Nothing for our own artifacts."""
    if model_data.hub_content_arn is None:
        return {}
    extra: dict[str, object] = {
        "hub_access_config": sagemaker.CfnModel.HubAccessConfigProperty(hub_content_arn=model_data.hub_content_arn)
    }
    if model_data.accept_eula:
        extra["model_access_config"] = sagemaker.CfnModel.ModelAccessConfigProperty(accept_eula=True)
    return extra


class SageMakerModel(sagemaker.CfnModel):
    """The model: one container (image, environment) on the artifact, uncompressed (S3Prefix, CompressionType None:
    no untar at start) or one model.tar.gz. SageMaker checks the role's access when it creates the model, so the
    model waits for the role's policy."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role: iam.Role,
        image: ContainerImage,
        model_data: ModelData,
        environment: dict[str, str],
        network_isolation: bool,
    ) -> None:
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
                        s3_uri=model_data.s3_uri,
                        s3_data_type="S3Prefix",
                        compression_type="None",
                        **hub_access(model_data),
                    )
                ),
            )
        super().__init__(
            scope,
            construct_id,
            execution_role_arn=role.role_arn,
            primary_container=container,
            enable_network_isolation=network_isolation,
        )
        self.node.add_dependency(role)


@dataclass(frozen=True)
class VariantPool:
    """One instance pool of the variant (priority 1 is the variant's own instance type) and, where its engine
    settings differ from the variant's, the model it runs instead (InstancePool.ModelNameOverride)."""

    instance_type: str
    priority: int
    model: sagemaker.CfnModel | None = None


@dataclass(frozen=True)
class VariantCapacity:
    """How SageMaker provisions the variant (endpoint_config/pools.py): the instance pools in priority order, the
    provisioning timeout (VariantInstanceProvisionTimeoutInSeconds, 300-3600) and an ML capacity reservation with its
    CapacityReservationPreference."""

    pools: tuple[VariantPool, ...] = ()
    provision_timeout_s: int | None = None
    reservation_arn: str | None = None
    reservation_preference: str | None = None


def capacity_properties(instance_type: str, capacity: VariantCapacity) -> dict:
    """The production variant's capacity properties (cfn-lint's AWS::SageMaker::EndpointConfig schema and aws-cdk-lib's
    L1 ProductionVariantProperty). With pools, InstanceType gives way to InstancePools ("you replace the InstanceType
    parameter in your production variant with an InstancePools list", SageMaker DG, realtime-endpoints-heterogeneous),
    instance_type first at priority 1."""
    props: dict = {"variant_instance_provision_timeout_in_seconds": capacity.provision_timeout_s}
    if capacity.reservation_arn is not None:
        props["capacity_reservation_config"] = sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
            capacity_reservation_preference=capacity.reservation_preference, ml_reservation_arn=capacity.reservation_arn
        )
    if not capacity.pools:
        props["instance_type"] = instance_type
        return props
    props["instance_pools"] = [
        sagemaker.CfnEndpointConfig.InstancePoolProperty(
            instance_type=pool.instance_type,
            priority=pool.priority,
            model_name_override=pool.model.attr_model_name if pool.model is not None else None,
        )
        for pool in capacity.pools
    ]
    return props


class VariantEndpointConfig(sagemaker.CfnEndpointConfig):
    """The endpoint config of a model on its production variant: instance type (or instance pools, each pool's model
    named by a GetAtt, so it is created first) and count, volume (None on types with local NVMe, which refuse it),
    the download and startup health-check timeouts (60-3600 s), routing, the AMI, capacity, and for an asynchronous
    endpoint its AsyncInferenceConfig."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model: sagemaker.CfnModel,
        variant_name: str,
        instance_type: str,
        instance_count: int,
        volume_size_gb: int | None,
        download_timeout_s: int,
        startup_timeout_s: int,
        routing: Routing,
        inference_ami_version: str | None,
        async_config: sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty | None = None,
        capacity: VariantCapacity = VariantCapacity(),
    ) -> None:
        check_timeouts(
            f"endpoint config of {variant_name}",
            download_timeout_s=download_timeout_s,
            startup_timeout_s=startup_timeout_s,
        )
        super().__init__(
            scope,
            construct_id,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant_name,
                    model_name=model.attr_model_name,
                    initial_instance_count=instance_count,
                    initial_variant_weight=1.0,
                    volume_size_in_gb=volume_size_gb,
                    model_data_download_timeout_in_seconds=download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=startup_timeout_s,
                    routing_config=routing_config(routing),
                    inference_ami_version=inference_ami_version,
                    **capacity_properties(instance_type, capacity),
                )
            ],
            async_inference_config=async_config,
        )


def retain_when_replaced(*resources: CfnResource) -> None:
    """UpdateReplacePolicy Retain (DeletionPolicy stays Delete) on the endpoint's Model and EndpointConfig: a new
    artifact or instance type replaces both, and CloudFormation deletes the replaced ones in its clean-up once the
    update reports success. After a failed guarded update SageMaker returns the endpoint to InService on its old
    config, possibly with no FailureReason (hashicorp/terraform-provider-aws #48997, #46663: Terraform took that for
    success and deleted the config still serving); whether CloudFormation's update handler can report that as
    success is not documented, so the old Model and EndpointConfig are kept and `python -m model_build clean`
    deletes the ones no endpoint and no stack uses (model_build/clean.py). A destroy still deletes the current ones."""
    for resource in resources:
        resource.cfn_options.update_replace_policy = CfnDeletionPolicy.RETAIN
        # cfn-lint W3011 (CDK's synth-time "CloudFormation Validate" too) asks for DeletionPolicy Retain beside it;
        # a destroy is meant to delete the current ones.
        resource.add_metadata("cfn-lint", {"config": {"ignore_checks": [REPLACE_ONLY_RETAIN]}})
        Validations.of(resource).acknowledge(
            Acknowledgment(
                id=f"CloudFormation-Validate::{REPLACE_ONLY_RETAIN}",
                reason="Kept only when replaced (a rollback may still run it); a destroy deletes the current one.",
            )
        )


class GuardedEndpoint(sagemaker.CfnEndpoint):
    """The endpoint, fixed name (clients keep it across updates), on `endpoint_config`, with its DeploymentConfig.

    An update would otherwise reset the fleet to InitialInstanceCount ("Update endpoints that use auto scaling",
    https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html): with `scaled` (autoscaling, or
    SageMaker's managed instance scaling of a component endpoint) the count SageMaker set is kept; the weights come
    from the new config, and the count too when nothing scales it. DataCaptureConfig is not excluded: botocore's
    VariantPropertyType documents it as "(Not currently supported.)" (sagemaker 2017-07-24 service model, botocore
    1.44.8), so sending it risks every UpdateEndpoint. DataCaptureConfig is an endpoint-config setting, not among
    the variant properties RetainAllVariantProperties names (instance count, weight); that an update applies the new
    config's capture settings is unverified (README, facts table)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        endpoint_config: sagemaker.CfnEndpointConfig,
        scaled: bool,
        deployment_config: sagemaker.CfnEndpoint.DeploymentConfigProperty | None,
    ) -> None:
        excluded = ["DesiredWeight"] + ([] if scaled else ["DesiredInstanceCount"])
        super().__init__(
            scope,
            construct_id,
            endpoint_name=endpoint_name,
            endpoint_config_name=endpoint_config.attr_endpoint_config_name,
            retain_all_variant_properties=True,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type=t) for t in excluded
            ],
            deployment_config=deployment_config,
        )


__all__ = [
    "ContainerImage",
    "ExecutionRole",
    "GuardedEndpoint",
    "SageMakerModel",
    "VariantCapacity",
    "VariantEndpointConfig",
    "VariantPool",
    "capacity_properties",
    "check_timeouts",
    "retain_when_replaced",
    "routing_config",
]
