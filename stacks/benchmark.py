"""An endpoint's `slo:` in its stack: the role the pipeline's SLO gate assumes, and SageMaker's managed benchmark
(the gate's workload as AWS::SageMaker::AIWorkloadConfig, the role SageMaker assumes for CreateAIBenchmarkJob, and
a managed policy for whoever runs `python -m model_build benchmark`). endpoint_config/slo.py has the sources.

Grants, each exactly what its code or service calls (tests/stacks/test_iam_coverage.py runs the gate and the
benchmark command and checks them):
  SloGateRole           load_testing/gate.py: InvokeEndpoint (it authorizes the response stream too) on the
                        endpoint (and its component); ListBucket under loadtest/<endpoint>/, Get/PutObject of
                        loadtest/<endpoint>/* in the artifact bucket; the bucket key through S3 when there is one.
  BenchmarkRole         what the Developer Guide says the job needs, "an IAM execution role that grants SageMaker AI
                        access to your endpoint and output bucket": InvokeEndpoint on the endpoint (and component),
                        PutObject under loadtest/<endpoint>/<hash>/managed/; trusted by sagemaker.amazonaws.com.
  BenchmarkCallerPolicy CreateAIBenchmarkJob and DescribeAIBenchmarkJob on this endpoint's jobs, iam:PassRole of the
                        BenchmarkRole.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, CfnRule, CfnRuleAssertion, Fn, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment import ConfigError, EndpointPlan

from .endpoint_network import BucketKeyRef
from .llm_endpoint import LlmEndpoint
from .nag import acknowledge, nag_text
from .trusted_pipeline import TrustedPipeline, role_name

# The principal SageMaker assumes roles as (the benchmark job's RoleArn: "an IAM role that enables Amazon SageMaker AI
# to perform tasks on your behalf", botocore sagemaker CreateAIBenchmarkJob.RoleArn).
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"


def _objects_arn(bucket_name: str, pattern: str) -> str:
    return f"arn:{Aws.PARTITION}:s3:::{bucket_name}/{pattern}"


def grant_results(
    role: iam.Role, actions: list[str], objects: str, bucket_key: BucketKeyRef | None, *, why: str
) -> None:
    """`actions` on `objects` (an endpoint's results, named when they are written: a wildcard cdk-nag is told `why`
    of) and, with a bucket key, its use through S3."""
    role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[objects]))
    if bucket_key is not None:
        bucket_key.grant_s3_use(role)
    acknowledge(role, f"AwsSolutions-IAM5[Resource::{nag_text(objects)}]", why)
    if bucket_key is not None and bucket_key.alias_name is not None:
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:kms:<AWS::Region>:<AWS::AccountId>:key/*]",
            "The created bucket key is named by its alias (kms:ResourceAliases) and used only through S3 "
            "(kms:ViaService): its key id is known only to the artifact stack.",
        )


def gate_role_name(plan: EndpointPlan) -> str:
    return role_name(plan.project, plan.environment_name, plan.name, "slo")


class SloGateRole(Construct):
    """`<project>-<env>-<endpoint>-slo`, which only the pipeline's SLO gate step role may assume."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: EndpointPlan,
        endpoint: LlmEndpoint,
        bucket_name: str,
        bucket_key: BucketKeyRef | None,
        trusted_pipeline: TrustedPipeline,
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = plan.loadtest_prefix
        self.role = iam.Role(
            self,
            "Role",
            role_name=gate_role_name(plan),
            assumed_by=trusted_pipeline.principal(Stack.of(self)),
            description=f"Assumed by the pipeline's SLO gate: load-tests endpoint {plan.endpoint_name}, keeps results "
            f"under {prefix}",
        )
        endpoint.grant_invoke(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[f"arn:{Aws.PARTITION}:s3:::{bucket_name}"],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        grant_results(
            self.role,
            ["s3:GetObject", "s3:PutObject"],
            _objects_arn(bucket_name, f"{prefix}*"),
            bucket_key,
            why="The gate keeps each result under its artifact hash and time (loadtest/<endpoint>/<hash>/<time>.json) "
            "and reads earlier ones back: names known only when it runs, within this endpoint's prefix of one bucket.",
        )


class ManagedBenchmark(Construct):
    """The AIWorkloadConfig of the gate's workload, the role a benchmark job runs as, and the caller's policy."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: EndpointPlan,
        endpoint: LlmEndpoint,
        bucket_name: str,
        bucket_key: BucketKeyRef | None,
    ) -> None:
        super().__init__(scope, construct_id)
        benchmark = plan.managed_benchmark
        assert benchmark is not None
        stack = Stack.of(self)
        self._refuse_unoffered_region(stack, plan, benchmark.offered_regions)
        self.workload_config = sagemaker.CfnAIWorkloadConfig(
            self,
            "WorkloadConfig",
            ai_workload_config_name=benchmark.workload_config_name,
            ai_workload_configs=sagemaker.CfnAIWorkloadConfig.AIWorkloadConfigsProperty(
                workload_spec=sagemaker.CfnAIWorkloadConfig.WorkloadSpecProperty(inline=benchmark.inline)
            ),
        )
        self.role = iam.Role(
            self,
            "Role",
            role_name=plan.benchmark_role_name,
            # Only on behalf of this account and region: the SageMaker Developer Guide's "Cross-service confused
            # deputy prevention" ("Limit Permissions With Global Condition Keys": aws:SourceArn and
            # aws:SourceAccount; with the job's ARN unknown, a wildcard ARN of the account). Operations review F9.
            assumed_by=iam.ServicePrincipal(
                SAGEMAKER_PRINCIPAL,
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"},
                },
            ),
            description=f"Assumed by SageMaker for AI benchmark jobs of endpoint {plan.endpoint_name}",
        )
        endpoint.grant_invoke(self.role)
        grant_results(
            self.role,
            ["s3:PutObject"],
            _objects_arn(bucket_name, f"{plan.loadtest_prefix}*/managed/*"),
            bucket_key,
            why="A benchmark job writes its results under loadtest/<endpoint>/<artifact hash>/managed/<job>/, "
            "named when the job starts: within this endpoint's prefix of one bucket.",
        )

        jobs = stack.format_arn(
            service="sagemaker", resource="ai-benchmark-job", resource_name=f"{plan.endpoint_name}-*"
        )
        workload = stack.format_arn(
            service="sagemaker", resource="ai-workload-config", resource_name=benchmark.workload_config_name
        )
        self.caller_policy = iam.ManagedPolicy(
            self,
            "CallerPolicy",
            description=f"Run `python -m model_build benchmark` for endpoint {plan.endpoint_name}",
            statements=[
                # The job's ARN; and the workload config's, in case IAM also authorizes the call on the resource it
                # names (the Service Authorization Reference's resource types for this action were not read here).
                iam.PolicyStatement(actions=["sagemaker:CreateAIBenchmarkJob"], resources=[jobs, workload]),
                iam.PolicyStatement(actions=["sagemaker:DescribeAIBenchmarkJob"], resources=[jobs]),
                iam.PolicyStatement(actions=["iam:PassRole"], resources=[self.role.role_arn]),
            ],
        )
        acknowledge(
            self.caller_policy,
            f"AwsSolutions-IAM5[Resource::{nag_text(jobs)}]",
            "Each benchmark run is a new job named <endpoint>-<artifact hash>-<time>: this endpoint's jobs only.",
        )
        CfnOutput(self, "WorkloadConfigName", value=benchmark.workload_config_name)
        CfnOutput(self, "RoleArn", value=self.role.role_arn)
        CfnOutput(self, "CallerPolicyArn", value=self.caller_policy.managed_policy_arn)

    @staticmethod
    def _refuse_unoffered_region(stack: Stack, plan: EndpointPlan, regions: tuple[str, ...]) -> None:
        """Where the region is known, refuse it at synth; where it is not, a template rule refuses the deploy."""
        where = f"endpoint {plan.name!r}: slo.managed_benchmark"
        if not Token.is_unresolved(stack.region):
            if stack.region not in regions:
                raise ConfigError(
                    f"{where}: AWS::SageMaker::AIWorkloadConfig is not offered in {stack.region}; regions "
                    f"with it: {', '.join(regions)}"
                )
            return
        CfnRule(
            stack,
            "ManagedBenchmarkRegion",
            assertions=[
                CfnRuleAssertion(
                    assert_=Fn.condition_contains(list(regions), Aws.REGION),
                    assert_description=f"{where}: AWS::SageMaker::AIWorkloadConfig is offered in "
                    f"{', '.join(regions)} only",
                )
            ],
        )


__all__ = ["ManagedBenchmark", "SAGEMAKER_PRINCIPAL", "SloGateRole", "gate_role_name"]
