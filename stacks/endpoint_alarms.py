"""CloudWatch alarms, the alarm topic and the environment dashboard of the SageMaker endpoints, and the endpoint's
DeploymentConfig (guarded updates with automatic rollback). Config: endpoint_config/operations.py.

Every metric is one SageMaker publishes for the endpoint's hosting mode (stacks/sagemaker_metrics.py, from
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html):
  model on the variant: AWS/SageMaker with EndpointName + VariantName (Invocations, Invocation4XXErrors and
    Invocation5XXErrors: 1 per 4xx/5xx response, else 0, so the Average is the error rate; InvocationModelErrors
    likewise for every non-2xx answer, timeout or socket error; ModelLatency in microseconds), and
    /aws/sagemaker/Endpoints with the same dimensions (DiskUtilization 0-100, GPUMemoryUtilization 0-100 x GPUs).
    During an update the new fleet's metrics also carry EndpointConfigName (deployment guardrails, "Monitor model
    latency on the new fleet").
  inference components: the invocation metrics with InferenceComponentName, and GPU memory per copy in
    /aws/sagemaker/InferenceComponents (GPUMemoryUtilizationNormalized, 0-100 %, "reported by each copy"); the
    instances' disk stays in /aws/sagemaker/Endpoints.
  asynchronous: no Invocations and no InvocationModelErrors ("exhaustive list", async-inference-monitor).
ModelSetupTime gets no alarm: SageMaker publishes it for serverless endpoints ("the time it takes to launch new
compute resources for a serverless endpoint", same page), and these endpoints run on instances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from deployment import EnvironmentPlan
from deployment.config_blocks import (
    MAX_ROLLBACK_ALARMS,
    AlarmsSpec,
    AutoRollback,
    BlueGreen,
    UpdatePolicySpec,
)

from .engine_metrics import engine_panel, has_engine_metrics
from .nag import acknowledge
from .sagemaker_metrics import (
    ASYNC,
    COMPONENT_COPIES,
    COMPONENTS,
    ENDPOINT_INSTANCES,
    INVOCATIONS,
    hosting_mode,
    published_metric,
)

INVOCATION_NAMESPACE = INVOCATIONS
INSTANCE_NAMESPACE = ENDPOINT_INSTANCES
MICROSECONDS_PER_MS = 1000
# The share of invocations that failed other than with a 4xx: InvocationModelErrors counts every non-2xx answer,
# timeout and socket error, Invocation4XXErrors the client errors among them (both 1 per request, so their Averages
# are shares of the same requests).
NON_CLIENT_ERRORS = "model_errors - errors_4xx"


def _dimensions(endpoint_name: str, variant_name: str) -> dict[str, str]:
    return {"EndpointName": endpoint_name, "VariantName": variant_name}


def _invocation_dimensions(endpoint_name: str, variant_name: str, component_name: str | None) -> dict[str, str]:
    """Whose invocations: the component's (InferenceComponentName) or the variant's (EndpointName, VariantName)."""
    return {"InferenceComponentName": component_name} if component_name else _dimensions(endpoint_name, variant_name)


def _non_client_errors(mode: str, dimensions: dict[str, str], period_s: int) -> cloudwatch.MathExpression:
    def average(name: str) -> cloudwatch.Metric:
        return published_metric(mode, INVOCATIONS, name, dimensions, "Average", period_s)

    return cloudwatch.MathExpression(
        expression=NON_CLIENT_ERRORS,
        label="non-4xx error rate",
        period=Duration.seconds(period_s),
        using_metrics={"model_errors": average("InvocationModelErrors"), "errors_4xx": average("Invocation4XXErrors")},
    )


class RollbackAlarms(Construct):
    """The alarms SageMaker watches during an update (AutoRollbackConfiguration). No actions: SageMaker reads their
    state itself.

    Keyword-only props:
      endpoint_name: the endpoint (the alarms' name prefix).
      rollback: the `deployment.auto_rollback` block (thresholds, period, evaluation periods, existing alarm names).
      variant_name, endpoint_config_name: a model on the variant: the alarms watch the NEW fleet only, each metric
        carrying the EndpointConfigName of the config being deployed (a token: CloudFormation names the config), so
        an old fleet that already errs does not stop every update.
      component_name: an inference component instead: its invocation metrics (InferenceComponentName), as AWS's own
        rolling-update example alarms on them (aws-samples/sagemaker-genai-hosting-examples, 03-features/
        deployment-guardrails/enhance-deployment-guardrails-with-inference-component-rolling-deployment.ipynb);
        SageMaker publishes no dimension that tells a component's new copies from its old ones.
      asynchronous: the endpoint takes InvokeEndpointAsync (no InvocationModelErrors: the model-errors alarm is left
        out).

    Alarm names are fixed (`<endpoint>-rollback-...`), so the endpoint names them without a reference; the endpoint
    (or component) must depend on this construct, so each update moves the alarms before SageMaker starts.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        rollback: AutoRollback,
        variant_name: str | None = None,
        endpoint_config_name: str | None = None,
        component_name: str | None = None,
        asynchronous: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        if not rollback.alarm_keys() and not rollback.extra_alarm_names:
            raise ValueError(f"RollbackAlarms {endpoint_name!r}: no alarm to create or watch")
        if component_name is not None and (variant_name is None or endpoint_config_name is None):
            dimensions, fleet = {"InferenceComponentName": component_name}, f"component {component_name}"
        elif component_name is None and variant_name is not None and endpoint_config_name is not None:
            dimensions = {**_dimensions(endpoint_name, variant_name), "EndpointConfigName": endpoint_config_name}
            fleet = "the new fleet"
        else:
            raise ValueError(
                f"RollbackAlarms {endpoint_name!r}: give either component_name or variant_name and endpoint_config_name"
            )
        mode = hosting_mode(component=component_name is not None, asynchronous=asynchronous)
        # (construct id, alarm name, metric, threshold, description)
        wanted: list[tuple[str, str, cloudwatch.IMetric, float, str]] = []
        if rollback.errors_5xx_rate is not None:
            wanted.append(
                (
                    "Errors5xx",
                    f"{endpoint_name}-rollback-5xx-rate",
                    published_metric(
                        mode, INVOCATIONS, "Invocation5XXErrors", dimensions, "Average", rollback.period_s
                    ),
                    rollback.errors_5xx_rate,
                    f"5xx rate of {fleet} above {rollback.errors_5xx_rate:g}",
                )
            )
            if mode != ASYNC:
                wanted.append(
                    (
                        "ModelErrors",
                        f"{endpoint_name}-rollback-model-errors",
                        _non_client_errors(mode, dimensions, rollback.period_s),
                        rollback.errors_5xx_rate,
                        f"share of requests to {fleet} failing other than 4xx (5xx, timeouts, socket errors) "
                        f"above {rollback.errors_5xx_rate:g}",
                    )
                )
        if rollback.latency_p99_ms is not None:
            wanted.append(
                (
                    "LatencyP99",
                    f"{endpoint_name}-rollback-latency-p99",
                    published_metric(mode, INVOCATIONS, "ModelLatency", dimensions, "p99", rollback.period_s),
                    rollback.latency_p99_ms * MICROSECONDS_PER_MS,  # ModelLatency is in microseconds
                    f"p99 model latency of {fleet} above {rollback.latency_p99_ms} ms",
                )
            )
        self.alarms: list[cloudwatch.Alarm] = [
            cloudwatch.Alarm(
                self,
                cid,
                alarm_name=name,
                alarm_description=f"Rolls back an update of {endpoint_name}: {what}",
                metric=metric,
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=rollback.evaluation_periods,
                datapoints_to_alarm=rollback.evaluation_periods,
                # No traffic on the new fleet yet is not a failure.
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            for cid, name, metric, threshold, what in wanted
        ]
        # Plain strings, not the alarms' Ref: SageMaker takes names, and the caller orders the endpoint after this.
        self.alarm_names: list[str] = [name for _, name, *_ in wanted] + list(rollback.extra_alarm_names)
        if len(self.alarm_names) > MAX_ROLLBACK_ALARMS:
            raise ValueError(
                f"RollbackAlarms {endpoint_name!r}: {len(self.alarm_names)} alarms; SageMaker watches at most {MAX_ROLLBACK_ALARMS}"
            )

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """cloudwatch:DescribeAlarms on these alarms: what the endpoint's execution role needs ("Ensure that your IAM
        execution role has permission to perform the cloudwatch:DescribeAlarms action on the auto-rollback alarms you
        specify", https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html). Scoped to
        the alarms' ARNs: DescribeAlarms takes alarm resources (only composite alarms need "*", per the DescribeAlarms
        API reference, https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_DescribeAlarms.html)."""
        stack = Stack.of(self)
        # arn:<partition>:cloudwatch:<region>:<account>:alarm:<name>, the "alarm" resource type of the Service
        # Authorization Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
        arns = [
            stack.format_arn(
                service="cloudwatch", resource="alarm", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
            )
            for name in self.alarm_names
        ]
        return iam.Grant.add_to_principal(grantee=grantee, actions=["cloudwatch:DescribeAlarms"], resource_arns=arns)


def deployment_config(
    update_policy: UpdatePolicySpec, *, rollback_alarm_names: list[str]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    """CfnEndpoint DeploymentConfig from the `deployment:` block (the stacks create one variant, which rolling
    deployments need: deployment guardrails, Exclusions,
    https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-exclusions.html)."""
    policy = update_policy.policy
    rollback = None
    if rollback_alarm_names:
        rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=n) for n in rollback_alarm_names]
        )
    if isinstance(policy, BlueGreen):
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=policy.traffic.upper(),  # ALL_AT_ONCE | CANARY | LINEAR
            wait_interval_in_seconds=policy.wait_interval_s,
            canary_size=_capacity(policy.canary_size),
            linear_step_size=_capacity(policy.linear_step),
        )
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=routing,
                termination_wait_in_seconds=policy.termination_wait_s,
                maximum_execution_timeout_in_seconds=policy.maximum_execution_timeout_s,
            ),
            auto_rollback_configuration=rollback,
        )
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
            maximum_batch_size=_capacity(policy.maximum_batch_size),
            wait_interval_in_seconds=policy.wait_interval_s,
            rollback_maximum_batch_size=_capacity(policy.rollback_maximum_batch_size),
            maximum_execution_timeout_in_seconds=policy.maximum_execution_timeout_s,
        ),
        auto_rollback_configuration=rollback,
    )


def _capacity(size) -> sagemaker.CfnEndpoint.CapacitySizeProperty | None:
    if size is None:
        return None
    return sagemaker.CfnEndpoint.CapacitySizeProperty(type=size.api_type, value=size.api_value)


# (construct id, name suffix, metric, threshold, description) of one alarm above a threshold
_Wanted = tuple[str, str, cloudwatch.IMetric, float, str]
_Series = Callable[[str, str, dict[str, str], str], cloudwatch.Metric]


def _error_rate(status: str, rate: float, calls: dict[str, str], series: _Series) -> _Wanted:
    """The alarm on the share of invocations answered `status` ("4xx", "5xx")."""
    metric = series(INVOCATIONS, f"Invocation{status.upper()}Errors", calls, "Average")
    return f"Errors{status}", f"{status}-rate", metric, rate, f"share of invocations answered {status} above {rate:g}"


def _invocation_alarms(alarms: AlarmsSpec, mode: str, calls: dict[str, str], series: _Series) -> list[_Wanted]:
    """The alarms on invocations: 5xx rate, model errors (not on an asynchronous endpoint), 4xx rate, p99 latency."""
    wanted: list[_Wanted] = []
    if alarms.errors_5xx_rate is not None:
        wanted.append(_error_rate("5xx", alarms.errors_5xx_rate, calls, series))
        if mode != ASYNC:
            wanted.append(
                (
                    "ModelErrors",
                    "model-errors",
                    _non_client_errors(mode, calls, alarms.period_s),
                    alarms.errors_5xx_rate,
                    "share of invocations failing other than 4xx (5xx, timeouts, socket errors, malformed "
                    f"answers) above {alarms.errors_5xx_rate:g}",
                )
            )
    if alarms.errors_4xx_rate is not None:
        wanted.append(_error_rate("4xx", alarms.errors_4xx_rate, calls, series))
    if alarms.latency_p99_ms is not None:
        wanted.append(
            (
                "LatencyP99",
                "latency-p99",
                series(INVOCATIONS, "ModelLatency", calls, "p99"),
                alarms.latency_p99_ms * MICROSECONDS_PER_MS,
                f"p99 model latency above {alarms.latency_p99_ms} ms",
            )
        )
    return wanted


def _gpu_memory_alarms(
    alarms: AlarmsSpec,
    mode: str,
    calls: dict[str, str],
    dims: dict[str, str],
    gpu_count: int,
    instance_types: tuple[tuple[str, int], ...],
    series: _Series,
) -> list[_Wanted]:
    """The GPU memory alarm: per copy (inference components), per instance type (pools of different GPU counts), or
    on the fullest instance."""
    if alarms.gpu_memory_percent is None or not gpu_count:
        return []
    if mode == COMPONENTS:
        # Per copy, 0-100 %: the fullest copy, whatever the instance's other GPUs hold.
        return [
            (
                "GpuMemory",
                "gpu-memory",
                series(COMPONENT_COPIES, "GPUMemoryUtilizationNormalized", calls, "Maximum"),
                alarms.gpu_memory_percent,
                f"GPU memory above {alarms.gpu_memory_percent:g} % in a copy",
            )
        ]
    if len({n for _, n in instance_types}) > 1:
        # Pools of different GPU counts: the fullest instance of each type against that type's summed threshold.
        return [
            (
                f"GpuMemory{priority}",
                f"gpu-memory-{instance_type}",
                series(INSTANCE_NAMESPACE, "GPUMemoryUtilization", {**dims, "InstanceType": instance_type}, "Maximum"),
                alarms.gpu_memory_percent * gpus,
                f"GPU memory above {alarms.gpu_memory_percent:g} % per GPU on {instance_type} ({gpus} GPUs)",
            )
            for priority, (instance_type, gpus) in enumerate(instance_types, start=1)
        ]
    # The fullest instance, not the average: one instance out of GPU memory fails its requests.
    return [
        (
            "GpuMemory",
            "gpu-memory",
            series(INSTANCE_NAMESPACE, "GPUMemoryUtilization", dims, "Maximum"),
            alarms.gpu_memory_percent * gpu_count,
            f"GPU memory above {alarms.gpu_memory_percent:g} % per GPU ({gpu_count} GPUs per instance)",
        )
    ]


class EndpointAlarms(Construct):
    """Alarms on one endpoint's health, notifying an SNS topic: the stack's own (TLS-only publishing, CloudWatch
    allowed to publish) or the existing `alarms.topic_arn`.

    Keyword-only props:
      endpoint_name, variant_name: the endpoint and its variant.
      alarms: the `alarms:` block as the stack applies it (EndpointPlan.alarms; null thresholds create no alarm).
      gpu_count: NVIDIA GPUs per instance (0: no GPU alarm); on a model on the variant GPUMemoryUtilization sums the
        GPUs, so the per-GPU threshold is multiplied by it.
      asynchronous: the endpoint takes InvokeEndpointAsync only; SageMaker then publishes no Invocations metric, so
        the no-invocations alarm is refused (the config refuses it first), and no InvocationModelErrors.
      component_name: the endpoint's inference component: invocation alarms on InferenceComponentName and GPU memory
        per copy (GPUMemoryUtilizationNormalized, 0-100 %: the threshold as given), the fullest copy.
      instance_types: with instance pools, each instance type the variant may run (instance_type first) and its GPUs.
        Where their GPU counts differ, one summed threshold cannot hold for every instance, so GPU memory is alarmed
        per instance type (the InstanceType dimension SageMaker adds for pools: stacks/sagemaker_metrics.py [POOLS]).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        alarms: AlarmsSpec,
        gpu_count: int,
        asynchronous: bool = False,
        component_name: str | None = None,
        instance_types: tuple[tuple[str, int], ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        if gpu_count < 0:
            raise ValueError(f"EndpointAlarms {endpoint_name!r}: gpu_count must be 0 or more, got {gpu_count}")
        if asynchronous and alarms.no_invocations_periods is not None:
            raise ValueError(
                f"EndpointAlarms {endpoint_name!r}: no_invocations_periods on an asynchronous endpoint (no Invocations metric)"
            )
        mode = hosting_mode(component=component_name is not None, asynchronous=asynchronous)
        if alarms.topic_arn is not None:
            self.topic: sns.ITopic = sns.Topic.from_topic_arn(self, "Topic", alarms.topic_arn)
        else:
            self.topic = self._topic(endpoint_name)
        CfnOutput(self, "TopicArn", value=self.topic.topic_arn, description=f"Alarm notifications of {endpoint_name}")

        dims = _dimensions(endpoint_name, variant_name)  # the instances (a component endpoint's too)
        calls = _invocation_dimensions(endpoint_name, variant_name, component_name)
        period = alarms.period_s

        def series(namespace: str, name: str, dimensions: dict[str, str], statistic: str) -> cloudwatch.Metric:
            return published_metric(mode, namespace, name, dimensions, statistic, period)

        wanted = [
            *_invocation_alarms(alarms, mode, calls, series),
            *_gpu_memory_alarms(alarms, mode, calls, dims, gpu_count, instance_types, series),
        ]
        if alarms.disk_percent is not None:
            wanted.append(
                (
                    "Disk",
                    "disk",
                    series(INSTANCE_NAMESPACE, "DiskUtilization", dims, "Maximum"),
                    alarms.disk_percent,
                    f"disk above {alarms.disk_percent:g} % on an instance",
                )
            )
        self.alarms: list[cloudwatch.Alarm] = []
        self._add_alarms(endpoint_name, alarms, wanted, series=series, calls=calls)

    def _add_alarms(
        self, endpoint_name: str, alarms: AlarmsSpec, wanted: list[_Wanted], *, series: _Series, calls: dict[str, str]
    ) -> None:
        """The alarms above their thresholds, then (no_invocations_periods) the one on missing invocations, each
        notifying the topic."""
        action = cw_actions.SnsAction(self.topic)
        for cid, suffix, metric, threshold, what in wanted:
            alarm = cloudwatch.Alarm(
                self,
                cid,
                alarm_name=f"{endpoint_name}-{suffix}",
                alarm_description=f"{endpoint_name}: {what}",
                metric=metric,
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                evaluation_periods=alarms.evaluation_periods,
                datapoints_to_alarm=alarms.datapoints_to_alarm,
            )
            alarm.add_alarm_action(action)
            self.alarms.append(alarm)
        if alarms.no_invocations_periods is not None:
            # SageMaker publishes no datapoint in a minute without invocations: missing data is the signal.
            alarm = cloudwatch.Alarm(
                self,
                "NoInvocations",
                alarm_name=f"{endpoint_name}-no-invocations",
                alarm_description=f"{endpoint_name}: no invocations for {alarms.no_invocations_periods} x {alarms.period_s} s",
                metric=series(INVOCATIONS, "Invocations", calls, "Sum"),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=alarms.no_invocations_periods,
                datapoints_to_alarm=alarms.no_invocations_periods,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            )
            alarm.add_alarm_action(action)
            self.alarms.append(alarm)

    def _topic(self, endpoint_name: str) -> sns.Topic:
        topic = sns.Topic(
            self,
            "Topic",
            display_name=f"SageMaker endpoint {endpoint_name} alarms",
            # A TopicPolicy denying publish and subscribe without TLS (aws:SecureTransport): cdk-nag AwsSolutions-SNS3.
            enforce_ssl=True,
        )
        # The TopicPolicy replaces the topic's default policy, so CloudWatch's right to publish is stated, limited to
        # this account's alarms (the statement of "Allow CloudWatch alarms ... to publish to a topic",
        # https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html).
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
                    },
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                },
            )
        )
        acknowledge(
            topic,
            "AwsSolutions-SNS2",
            "Alarm notifications carry alarm names, states and metric values, no request data. Encrypting the topic needs "
            "a customer managed KMS key whose policy admits cloudwatch.amazonaws.com: CloudWatch cannot publish to a topic "
            "under the AWS managed key (SNS Developer Guide, 'Enable compatibility between event sources from AWS services "
            "and encrypted topics', sns-key-management.html). Set alarms.topic_arn to an encrypted topic of your own to "
            "use one.",
        )
        return topic


# ----------------------------------------------------------------------------------------------- the dashboard


@dataclass(frozen=True)
class DashboardEndpoint:
    """One endpoint's row on the environment dashboard: its instance range and, with an inference component, the
    component's name and copy range."""

    endpoint_name: str
    variant_name: str
    gpu_count: int
    min_capacity: int
    max_capacity: int
    asynchronous: bool = False
    component_name: str | None = None
    min_copies: int = 0
    max_copies: int = 0
    # The engine panel (stacks/engine_metrics.py): the serving system, whether SageMaker's detailed observability is
    # on, and whether the engine alarm exists.
    system: str = ""
    detailed_observability: bool = False
    engine_alarm: bool = False
    # With instance pools: each instance type the variant may run (instance_type first) and its GPUs.
    instance_types: tuple[tuple[str, int], ...] = ()

    @property
    def mode(self) -> str:
        return hosting_mode(component=self.component_name is not None, asynchronous=self.asynchronous)


def dashboard_endpoints(environment_plan: EnvironmentPlan, variant_name: str) -> list[DashboardEndpoint]:
    """The rows of `deployment`'s dashboard: every endpoint of the environment, with its scaling ranges."""
    rows = []
    for plan in environment_plan.plans:
        low, high = plan.instance_range
        fewest_copies, most_copies = plan.copy_range
        rows.append(
            DashboardEndpoint(
                endpoint_name=plan.endpoint_name,
                variant_name=variant_name,
                gpu_count=plan.instance.gpu_count,
                min_capacity=low,
                max_capacity=high,
                asynchronous=plan.is_async,
                component_name=plan.component_name,
                min_copies=fewest_copies,
                max_copies=most_copies,
                system=plan.system.name,
                detailed_observability=plan.engine_metrics.detailed_observability,
                engine_alarm=plan.engine_alarm is not None,
                instance_types=plan.instance_types,
            )
        )
    return rows


def _expression(
    expression: str, label: str, period_s: int, metrics: dict[str, cloudwatch.Metric]
) -> cloudwatch.MathExpression:
    """A dashboard line computed from `metrics` each period."""
    return cloudwatch.MathExpression(
        expression=expression, label=label, using_metrics=metrics, period=Duration.seconds(period_s)
    )


def _range_annotations(low: int, high: int, what: str) -> list[cloudwatch.HorizontalAnnotation]:
    return [
        cloudwatch.HorizontalAnnotation(value=low, label=f"min {what}"),
        cloudwatch.HorizontalAnnotation(value=high, label=f"max {what}"),
    ]


@dataclass(frozen=True)
class _RowMetrics:
    """The metrics of one endpoint's dashboard row, and its widgets: traffic, capacity, GPU."""

    mode: str
    dims: dict[str, str]  # the instances (a component endpoint's too)
    calls: dict[str, str]  # whose invocations: the component's or the variant's
    period_s: int

    @classmethod
    def of(cls, row: DashboardEndpoint, period_s: int) -> _RowMetrics:
        return cls(
            mode=row.mode,
            dims=_dimensions(row.endpoint_name, row.variant_name),
            calls=_invocation_dimensions(row.endpoint_name, row.variant_name, row.component_name),
            period_s=period_s,
        )

    def inv(self, name: str, statistic: str, label: str) -> cloudwatch.Metric:
        return published_metric(self.mode, INVOCATIONS, name, self.calls, statistic, self.period_s, label)

    def per_period(self, expression: str, label: str, **metrics: cloudwatch.Metric) -> cloudwatch.MathExpression:
        return _expression(expression, label, self.period_s, metrics)

    def traffic(self) -> list[cloudwatch.IWidget]:
        """Invocations and errors, latency percentiles, error rates."""
        mode, inv = self.mode, self.inv
        rates = [inv("Invocation4XXErrors", "Average", "4xx rate"), inv("Invocation5XXErrors", "Average", "5xx rate")]
        if mode != ASYNC:
            rates.append(_non_client_errors(mode, self.calls, self.period_s))
        return [
            cloudwatch.GraphWidget(
                title="Invocations",
                width=6,
                left=[inv("Invocations", "Sum", "invocations")] if mode != ASYNC else [],
                right=[inv("Invocation4XXErrors", "Sum", "4xx"), inv("Invocation5XXErrors", "Sum", "5xx")],
            ),
            cloudwatch.GraphWidget(
                title="Model latency (ms)",
                width=6,
                left=[
                    self.per_period(
                        f"p{p}us / {MICROSECONDS_PER_MS}", f"p{p}", **{f"p{p}us": inv("ModelLatency", f"p{p}", f"p{p}")}
                    )
                    for p in (50, 90, 99)
                ],
            ),
            cloudwatch.GraphWidget(title="Error rate", width=6, left=rates),
        ]

    def from_invocations(
        self, one: str, many: str, annotations: list[cloudwatch.HorizontalAnnotation]
    ) -> cloudwatch.GraphWidget:
        """A count of `many` ("copies", "instances") computed from invocations: Sum(Invocations) /
        Sum(InvocationsPer<One>), which sends 1/count per request."""
        per = f"per_{one}"
        return cloudwatch.GraphWidget(
            title=f"{many.capitalize()} (from invocations)",
            width=6,
            left_annotations=annotations,
            left=[
                self.per_period(
                    f"invocations / {per}",
                    many,
                    invocations=self.inv("Invocations", "Sum", "invocations"),
                    **{per: self.inv(f"InvocationsPer{one.capitalize()}", "Sum", f"per {one}")},
                )
            ],
        )

    def capacity(self, row: DashboardEndpoint) -> list[cloudwatch.IWidget]:
        """Instances (and an inference component's copies) against the scaling range."""
        if self.mode == ASYNC:
            return [
                cloudwatch.TextWidget(
                    markdown=f"Instances: scaling range {row.min_capacity}-{row.max_capacity}; no invocation count is "
                    "published for asynchronous endpoints.",
                    width=6,
                    height=6,
                )
            ]
        if self.mode == COMPONENTS:
            return [
                self.from_invocations("copy", "copies", _range_annotations(row.min_copies, row.max_copies, "copies")),
                cloudwatch.GraphWidget(
                    title="Instances (CPU samples per minute)",
                    width=6,
                    left_annotations=_range_annotations(row.min_capacity, row.max_capacity, "instances"),
                    left=[
                        published_metric(
                            self.mode, INSTANCE_NAMESPACE, "CPUUtilization", self.dims, "SampleCount", 60, "instances"
                        )
                    ],
                ),
            ]
        capacity = _range_annotations(row.min_capacity, row.max_capacity, "capacity")
        return [self.from_invocations("instance", "instances", capacity)]

    def gpu(self, row: DashboardEndpoint) -> list[cloudwatch.IWidget]:
        """GPU utilization and memory: per copy (inference components), or summed over an instance's GPUs."""
        mode = self.mode
        if row.gpu_count and mode == COMPONENTS:

            def copy(name: str, label: str) -> cloudwatch.Metric:
                return published_metric(mode, COMPONENT_COPIES, name, self.calls, "Average", self.period_s, label)

            return [
                cloudwatch.GraphWidget(
                    title="GPU utilization and memory per copy (%)",
                    width=12,
                    left_annotations=[cloudwatch.HorizontalAnnotation(value=100, label="a copy's GPUs full")],
                    left=[
                        copy("GPUUtilizationNormalized", "GPU utilization"),
                        copy("GPUMemoryUtilizationNormalized", "GPU memory"),
                    ],
                )
            ]
        if row.gpu_count:

            def inst(name: str, label: str) -> cloudwatch.Metric:
                return published_metric(mode, INSTANCE_NAMESPACE, name, self.dims, "Average", self.period_s, label)

            top = cloudwatch.HorizontalAnnotation(value=100 * row.gpu_count, label=f"{row.gpu_count} GPUs full")
            return [
                cloudwatch.GraphWidget(
                    title=f"GPU utilization and memory (% summed over {row.gpu_count} GPUs)",
                    width=12,
                    left_annotations=[top],
                    left=[inst("GPUUtilization", "GPU utilization"), inst("GPUMemoryUtilization", "GPU memory")],
                )
            ]
        return []


class EnvironmentDashboard(Construct):
    """One CloudWatch dashboard for an environment's endpoints: per endpoint a row of invocations, latency
    percentiles, errors, capacity against the scaling range and, on GPU instances, GPU and GPU memory utilization.

    Keyword-only props:
      dashboard_name: fixed, so operators find it (letters, digits, '-' and '_'; the region may be a token).
      endpoints: the rows, in order.
      period_s: the charts' period (default 300).

    Capacity is not a published metric. A model on the variant: instances = Sum(Invocations) /
    Sum(InvocationsPerInstance) (InvocationsPerInstance sends 1/instances per request), so it shows only while requests
    arrive, and not at all for asynchronous endpoints (SageMaker publishes neither metric for them). An inference
    component: copies = Sum(Invocations) / Sum(InvocationsPerCopy) likewise, and instances as the SampleCount of
    CPUUtilization per minute, one datapoint per running instance ("check the sample count statistic for a 1 minute
    period. The count should be equal to the number of active instances", SageMaker Developer Guide,
    async-inference-troubleshooting.html), which shows zero instances as no data.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        endpoints: list[DashboardEndpoint],
        period_s: int = 300,
    ) -> None:
        super().__init__(scope, construct_id)
        if not endpoints:
            raise ValueError(f"EnvironmentDashboard {dashboard_name!r}: no endpoint to show")
        if period_s % 60:
            raise ValueError(
                f"EnvironmentDashboard {dashboard_name!r}: period_s must be a multiple of 60, got {period_s}"
            )
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        for row in endpoints:
            self.dashboard.add_widgets(cloudwatch.TextWidget(markdown=f"### {row.endpoint_name}", width=24, height=1))
            self.dashboard.add_widgets(*self._row(row, period_s))
            if row.instance_types and row.mode != COMPONENTS:
                self.dashboard.add_widgets(*self._pools(row, period_s))
            if row.detailed_observability and has_engine_metrics(row.system, asynchronous=row.asynchronous):
                self.dashboard.add_widgets(
                    *engine_panel(
                        self,
                        system=row.system,
                        endpoint_name=row.endpoint_name,
                        component_name=row.component_name,
                        alarmed=row.engine_alarm,
                        pooled=bool(row.instance_types),
                    )
                )

    @staticmethod
    def _pools(row: DashboardEndpoint, period_s: int) -> list[cloudwatch.IWidget]:
        """With instance pools, the variant's metrics per instance type (the InstanceType dimension, [POOLS]): where
        the fleet runs, how fast each type answers, and its GPU memory per GPU (comparable across GPU counts)."""
        mode = row.mode

        def metric(namespace: str, name: str, instance_type: str, statistic: str) -> cloudwatch.Metric:
            dims = {**_dimensions(row.endpoint_name, row.variant_name), "InstanceType": instance_type}
            return published_metric(mode, namespace, name, dims, statistic, period_s, instance_type)

        def per_type(expression: str, label: str, **metrics: cloudwatch.Metric) -> cloudwatch.MathExpression:
            return _expression(expression, label, period_s, metrics)

        types = row.instance_types
        # Instances of each type: one CPUUtilization sample per running instance per minute (as the component row).
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="Instances by instance type (CPU samples per minute)",
                width=8,
                left=[
                    published_metric(
                        mode,
                        INSTANCE_NAMESPACE,
                        "CPUUtilization",
                        {**_dimensions(row.endpoint_name, row.variant_name), "InstanceType": t},
                        "SampleCount",
                        60,
                        t,
                    )
                    for t, _ in types
                ],
            ),
            cloudwatch.GraphWidget(
                title="Model latency p90 by instance type (ms)",
                width=8,
                left=[
                    per_type(
                        f"t{i} / {MICROSECONDS_PER_MS}", t, **{f"t{i}": metric(INVOCATIONS, "ModelLatency", t, "p90")}
                    )
                    for i, (t, _) in enumerate(types)
                ],
            ),
        ]
        gpu_types = [(i, t, n) for i, (t, n) in enumerate(types) if n]
        if gpu_types:
            widgets.append(
                cloudwatch.GraphWidget(
                    title="GPU memory per GPU by instance type (%)",
                    width=8,
                    left_annotations=[cloudwatch.HorizontalAnnotation(value=100, label="full")],
                    left=[
                        per_type(
                            f"m{i} / {n}",
                            f"{t} ({n} GPUs)",
                            **{f"m{i}": metric(INSTANCE_NAMESPACE, "GPUMemoryUtilization", t, "Maximum")},
                        )
                        for i, t, n in gpu_types
                    ],
                )
            )
        return widgets

    @staticmethod
    def _row(row: DashboardEndpoint, period_s: int) -> list[cloudwatch.IWidget]:
        metrics = _RowMetrics.of(row, period_s)
        return [*metrics.traffic(), *metrics.capacity(row), *metrics.gpu(row)]


__all__ = [
    "DashboardEndpoint",
    "EndpointAlarms",
    "EnvironmentDashboard",
    "RollbackAlarms",
    "dashboard_endpoints",
    "deployment_config",
]
