"""Data capture, private networking and KMS keys of an endpoint (endpoint_config/security.py's blocks), and the
artifact bucket's key: `EndpointSecurity` (what one endpoint's blocks add), `PrivateNetwork` (`network.create_vpc`:
a VPC with no route to the internet), `BucketKey` (created or given by ARN, with its grants).

The short source names in the comments ([HOST-VPC], [RUNTIME], [ROLES], [LAMBDA-VPC], [S3-KMS], [KMS-ALIAS]) are
defined in docs/design/network.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment import EndpointPlan, EnvironmentPlan
from deployment.config_blocks import DataCapture

from .log_groups import owned_log_group
from .nag import acknowledge, nag_text

# The created VPC: two /20 subnets (4091 addresses each: SageMaker takes addresses per instance, Lambda per
# function scaling) in the first two Availability Zones of the region.
VPC_CIDR = "10.0.0.0/16"
SUBNET_CIDRS = ("10.0.0.0/20", "10.0.16.0/20")
HTTPS = 443

# [ROLES]
SAGEMAKER_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)
# [LAMBDA-VPC]
LAMBDA_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
# [S3-KMS]: read (Decrypt) and write (GenerateDataKey; Decrypt again for multipart) objects under SSE-KMS.
S3_KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def bucket_key_alias(project: str, environment_name: str) -> str:
    """The alias of a created artifact bucket key: deterministic, so endpoint stacks (in other stacks, or other
    pipeline stages, with no cross-stack reference) can name the key in their IAM statements by its alias."""
    return f"alias/{project}-{environment_name}-artifacts"


def _s3_via(region: str) -> dict[str, dict[str, str]]:
    """Only through S3 in this region: the key serves S3's SSE-KMS calls, not direct Decrypt by the role."""
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}


@dataclass(frozen=True)
class BucketKeyRef:
    """The artifact bucket's KMS key as another stack names it: by ARN (a given key) or by alias (a created key,
    whose ARN is known only to its own stack)."""

    key_arn: str | None = None
    alias_name: str | None = None

    def __post_init__(self) -> None:
        if (self.key_arn is None) == (self.alias_name is None):
            raise ValueError("BucketKeyRef: give exactly one of key_arn and alias_name")

    @staticmethod
    def of(environment_plan: EnvironmentPlan) -> BucketKeyRef | None:
        encryption = environment_plan.environment.encryption
        if encryption is None or encryption.bucket_key is None:
            return None
        if encryption.bucket_key == "create":
            return BucketKeyRef(
                alias_name=bucket_key_alias(environment_plan.project, environment_plan.environment_name)
            )
        return BucketKeyRef(key_arn=encryption.bucket_key)

    def grant_s3_use(self, grantee: iam.IGrantable, *, read_only: bool = False) -> iam.Grant:
        """kms:Decrypt + kms:GenerateDataKey through S3 ([S3-KMS]), or kms:Decrypt alone for a reader (`read_only`);
        a created key is matched by its alias (kms:ResourceAliases, [KMS-ALIAS]) within this account and region."""
        stack = Stack.of(grantee) if isinstance(grantee, Construct) else None
        region = stack.region if stack is not None else Aws.REGION
        actions = ["kms:Decrypt"] if read_only else list(S3_KMS_ACTIONS)
        if self.key_arn is not None:
            return iam.Grant.add_to_principal(
                grantee=grantee, actions=actions, resource_arns=[self.key_arn], conditions=_s3_via(region)
            )
        keys = f"arn:{Aws.PARTITION}:kms:{Aws.REGION}:{Aws.ACCOUNT_ID}:key/*"
        conditions = {**_s3_via(region), "ForAnyValue:StringEquals": {"kms:ResourceAliases": [self.alias_name]}}
        return iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=[keys], conditions=conditions)


class BucketKey(Construct):
    """The artifact bucket's SSE-KMS key. `create`: a customer managed key with yearly rotation and the alias
    `bucket_key_alias`; its key policy is KMS's default (the account may delegate use through IAM policies, which the
    publisher and execution roles get, each limited to S3 in this region), so no role is named in the key policy.
    Kept on destroy with the data it encrypts (retain_data), else scheduled for deletion (KMS waits 7-30 days).
    A given ARN: used as is; its key policy must let this account's IAM policies grant its use (KMS's default)."""

    def __init__(self, scope: Construct, construct_id: str, *, environment_plan: EnvironmentPlan, retain: bool) -> None:
        super().__init__(scope, construct_id)
        ref = BucketKeyRef.of(environment_plan)
        if ref is None:
            raise ValueError("BucketKey: the environment sets no encryption.bucket_key")
        self.ref = ref
        if ref.key_arn is not None:
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Key", ref.key_arn)
        else:
            self.key = kms.Key(
                self,
                "Key",
                alias=ref.alias_name,
                description=f"{environment_plan.project} ({environment_plan.environment_name}): artifact bucket (SSE-KMS)",
                enable_key_rotation=True,
                removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
                pending_window=Duration.days(30 if retain else 7),
            )

    @property
    def key_arn(self) -> str:
        return self.key.key_arn

    def grant_s3_use(self, grantee: iam.IGrantable) -> iam.Grant:
        """Decrypt + GenerateDataKey on this key through S3 ([S3-KMS]), for a principal in the key's own stack."""
        region = Stack.of(self).region
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(S3_KMS_ACTIONS), resource_arns=[self.key.key_arn], conditions=_s3_via(region)
        )


class PrivateNetwork(Construct):
    """`network.create_vpc`: a VPC for one endpoint with no internet gateway and no NAT. Two private subnets in the
    region's first two Availability Zones ([HOST-VPC]: at least two AZs); one route table with the S3 gateway
    endpoint (free; how the containers reach S3, [HOST-VPC]); the SageMaker Runtime interface endpoint with private
    DNS, so the invoke function in the VPC reaches the endpoint ([RUNTIME]); a security group for the model
    containers and the invoke function (no ingress; HTTPS out, and the only destinations are the VPC's endpoints);
    flow logs of rejected and accepted traffic to CloudWatch Logs.

    L1 resources with Fn::GetAZs, not ec2.Vpc: ec2.Vpc in a stack with a fixed account and region looks the zones up
    in the account at synth (a context lookup); these templates stay deterministic and deploy in any region.

    Keyword-only props: endpoint_name (descriptions), log_retention_days (the flow log group's retention, a
    CloudWatch Logs retention value)."""

    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, log_retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.CfnVPC(self, "Vpc", cidr_block=VPC_CIDR, enable_dns_hostnames=True, enable_dns_support=True)
        route_table = ec2.CfnRouteTable(self, "PrivateRoutes", vpc_id=self.vpc.ref)
        self._add_subnets(route_table)
        endpoint_group = self._add_security_groups(endpoint_name)
        self._add_vpc_endpoints(route_table, endpoint_group)
        self._add_flow_logs(endpoint_name, log_retention_days)

    def _add_subnets(self, route_table: ec2.CfnRouteTable) -> None:
        """Two private subnets, one per Availability Zone, on the one route table."""
        self.subnets = []
        for index, cidr in enumerate(SUBNET_CIDRS):
            subnet = ec2.CfnSubnet(
                self,
                f"Private{index + 1}",
                vpc_id=self.vpc.ref,
                cidr_block=cidr,
                availability_zone=Fn.select(index, Fn.get_azs()),
                map_public_ip_on_launch=False,
            )
            ec2.CfnSubnetRouteTableAssociation(
                self, f"Private{index + 1}Routes", subnet_id=subnet.ref, route_table_id=route_table.ref
            )
            self.subnets.append(subnet)

    def _add_security_groups(self, endpoint_name: str) -> ec2.CfnSecurityGroup:
        """The workload's group (no inbound, HTTPS out) and, returned, the SageMaker Runtime endpoint's (HTTPS from the
        workload only)."""
        self.security_group = ec2.CfnSecurityGroup(
            self,
            "Workload",
            vpc_id=self.vpc.ref,
            group_description=f"Model containers and invoke function of endpoint {endpoint_name}: no inbound",
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    cidr_ip="0.0.0.0/0",
                    description="HTTPS to the VPC endpoints (S3, SageMaker Runtime); the VPC has no internet route",
                )
            ],
        )
        return ec2.CfnSecurityGroup(
            self,
            "RuntimeEndpoint",
            vpc_id=self.vpc.ref,
            group_description=f"SageMaker Runtime interface endpoint of {endpoint_name}: HTTPS from the workload only",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    source_security_group_id=self.security_group.attr_group_id,
                    description="HTTPS from the invoke function",
                )
            ],
            # No egress: an interface endpoint answers on the connection it receives.
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="icmp",
                    from_port=252,
                    to_port=86,
                    cidr_ip="255.255.255.255/32",
                    description="no outbound traffic (an unmatchable rule replaces the default allow-all)",
                )
            ],
        )

    def _add_vpc_endpoints(self, route_table: ec2.CfnRouteTable, endpoint_group: ec2.CfnSecurityGroup) -> None:
        """The S3 gateway endpoint and the SageMaker Runtime interface endpoint."""
        ec2.CfnVPCEndpoint(
            self,
            "S3Gateway",
            vpc_id=self.vpc.ref,
            service_name=f"com.amazonaws.{Aws.REGION}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[route_table.ref],
        )
        # Service names as aws-cdk-lib's own constants give them (aws_ec2 GatewayVpcEndpointAwsService.S3,
        # InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME: com.amazonaws.<region>.s3 / .sagemaker.runtime).
        ec2.CfnVPCEndpoint(
            self,
            "SageMakerRuntime",
            vpc_id=self.vpc.ref,
            service_name=f"com.amazonaws.{Aws.REGION}.sagemaker.runtime",
            vpc_endpoint_type="Interface",
            subnet_ids=[s.ref for s in self.subnets],
            security_group_ids=[endpoint_group.attr_group_id],
            private_dns_enabled=True,
        )

    def _add_flow_logs(self, endpoint_name: str, log_retention_days: int) -> None:
        """Flow logs of the VPC's traffic, to a log group of this stack."""
        flow_logs = owned_log_group(self, "FlowLogs", retention_days=log_retention_days)
        # The delivery role as aws-cdk's own FlowLog construct makes it (aws-ec2 lib/vpc-flow-logs.ts,
        # CloudWatchLogsDestination: grantWrite + logs:DescribeLogStreams on the group); ec2.FlowLog needs an IVpc.
        delivery = iam.Role(
            self,
            "FlowLogDelivery",
            # The trust the Amazon VPC User Guide recommends ("IAM role for publishing flow logs to CloudWatch
            # Logs": aws:SourceAccount, and aws:SourceArn of the flow log, its id replaced by a wildcard since the
            # flow log is created after the role). Operations review F9.
            assumed_by=iam.ServicePrincipal(
                "vpc-flow-logs.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:vpc-flow-log/*"
                    },
                },
            ),
            description=f"VPC flow logs of endpoint {endpoint_name}: writes its flow log group only",
        )
        flow_logs.grant_write(delivery)
        delivery.add_to_policy(
            iam.PolicyStatement(actions=["logs:DescribeLogStreams"], resources=[flow_logs.log_group_arn])
        )
        flow_log = ec2.CfnFlowLog(
            self,
            "FlowLog",
            resource_id=self.vpc.ref,
            resource_type="VPC",
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_group_name=flow_logs.log_group_name,
            deliver_logs_permission_arn=delivery.role_arn,
        )
        flow_log.node.add_dependency(delivery)

    @property
    def subnet_ids(self) -> list[str]:
        return [s.ref for s in self.subnets]

    @property
    def security_group_ids(self) -> list[str]:
        return [self.security_group.attr_group_id]


@dataclass(frozen=True)
class EndpointSecurity:
    """What an endpoint's data_capture / network / encryption blocks resolve to, for LlmEndpoint.

    subnet_ids / security_group_ids: the model's VpcConfig (both empty: no VPC).
    data_capture: the `data_capture:` block (None: no capture).
    capture_bucket / capture_prefix: where data capture writes (None: no capture); the execution role may write
      s3://<bucket>/<prefix>* only.
    volume_kms_key / async_output_key: the `encryption:` block's keys (None: the default encryption).
    bucket_key: the artifact bucket's key, when it is KMS-encrypted (the role reads the model with it and writes
      captures and async results into the bucket with it).
    """

    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    data_capture: DataCapture | None = None
    capture_bucket: str | None = None
    capture_prefix: str | None = None
    volume_kms_key: str | None = None
    async_output_key: str | None = None
    bucket_key: BucketKeyRef | None = None

    @staticmethod
    def resolve(
        plan: EndpointPlan, *, artifact_bucket: str, bucket_key: BucketKeyRef | None, network: PrivateNetwork | None
    ) -> EndpointSecurity:
        subnets: tuple[str, ...] = ()
        groups: tuple[str, ...] = ()
        if network is not None:
            subnets, groups = tuple(network.subnet_ids), tuple(network.security_group_ids)
        elif plan.network is not None and plan.network.subnet_ids:
            subnets, groups = plan.network.subnet_ids, plan.network.security_group_ids
        bucket, prefix = plan.capture_destination(artifact_bucket) or (None, None)
        return EndpointSecurity(
            subnet_ids=subnets,
            security_group_ids=groups,
            data_capture=plan.data_capture,
            capture_bucket=bucket,
            capture_prefix=prefix,
            volume_kms_key=plan.volume_kms_key,
            async_output_key=plan.async_output_key,
            bucket_key=bucket_key,
        )

    def vpc_config(self) -> sagemaker.CfnModel.VpcConfigProperty | None:
        if not self.subnet_ids:
            return None
        return sagemaker.CfnModel.VpcConfigProperty(
            subnets=list(self.subnet_ids), security_group_ids=list(self.security_group_ids)
        )

    def data_capture_config(self) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        """EndpointConfig DataCaptureConfig (SageMaker API reference, DataCaptureConfig): one CaptureOption per mode,
        JSON content types captured as text."""
        capture = self.data_capture
        if capture is None:
            return None
        assert self.capture_prefix is not None, "resolve() sets the capture destination with data_capture"
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=capture.sampling_percent,
            destination_s3_uri=f"s3://{self.capture_bucket}/{self.capture_prefix.rstrip('/')}",
            kms_key_id=capture.kms_key,
            capture_options=[
                sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=mode) for mode in capture.capture_modes
            ],
            capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                json_content_types=list(capture.json_content_types)
            ),
        )

    def apply(self, *, role: iam.Role, model: sagemaker.CfnModel, endpoint_config: sagemaker.CfnEndpointConfig) -> None:
        """Add the model's VpcConfig, the endpoint config's DataCaptureConfig, KmsKeyId (and the async output's key),
        and the execution role's permissions for each."""
        model.vpc_config = self.vpc_config()
        endpoint_config.data_capture_config = self.data_capture_config()
        endpoint_config.kms_key_id = self.volume_kms_key
        if self.async_output_key is not None:
            # stacks/async_inference.py builds OutputConfig; its key is this block's.
            endpoint_config.add_property_override("AsyncInferenceConfig.OutputConfig.KmsKeyId", self.async_output_key)

        region = Stack.of(role).region
        if self.subnet_ids:
            role.add_to_policy(iam.PolicyStatement(actions=list(SAGEMAKER_VPC_ACTIONS), resources=["*"]))
        if self.capture_bucket is not None:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:PutObject"],
                    resources=[f"arn:{Aws.PARTITION}:s3:::{self.capture_bucket}/{self.capture_prefix}*"],
                )
            )
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{nag_text(self.capture_bucket)}/{self.capture_prefix}*]",
                "Data capture writes objects SageMaker names by time and request under this endpoint's capture "
                "prefix; the role may write nothing else.",
            )
        keys = [k for k in (self.data_capture.kms_key if self.data_capture else None, self.async_output_key) if k]
        if keys:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=list(S3_KMS_ACTIONS), resources=sorted(set(keys)), conditions=_s3_via(region)
                )
            )
        if self.bucket_key is not None:
            self.bucket_key.grant_s3_use(role)
            if self.bucket_key.alias_name is not None:
                acknowledge(
                    role,
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:kms:<AWS::Region>:<AWS::AccountId>:key/*]",
                    "The artifact bucket's key is created by the artifacts stack (another stack, or another pipeline "
                    f"stage); it is named by its alias {self.bucket_key.alias_name} (kms:ResourceAliases), and only "
                    "through S3 in this region (kms:ViaService).",
                )

    def place_function(self, function: lambda_.Function) -> None:
        """Run `function` in the endpoint's created VPC (its subnets and workload security group), with the ENI
        permissions Lambda documents ([LAMBDA-VPC]) on its own role."""
        if not self.subnet_ids:
            raise ValueError("EndpointSecurity.place_function: the endpoint has no VPC")
        function.role.add_to_principal_policy(iam.PolicyStatement(actions=list(LAMBDA_VPC_ACTIONS), resources=["*"]))
        acknowledge(
            function.role,
            "AwsSolutions-IAM5[Resource::*]",
            "The network interface actions Lambda needs to run a function in a VPC, as the AWS managed policy "
            "AWSLambdaVPCAccessExecutionRole grants them (on *: Lambda creates the interfaces itself).",
        )
        cfn = function.node.default_child
        cfn.add_property_override(
            "VpcConfig", {"SubnetIds": list(self.subnet_ids), "SecurityGroupIds": list(self.security_group_ids)}
        )


__all__ = ["BucketKey", "BucketKeyRef", "EndpointSecurity", "PrivateNetwork", "bucket_key_alias"]
