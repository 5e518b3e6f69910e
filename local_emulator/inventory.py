"""List what the app left in an AWS account (real or emulated), per service, leaving out CDK's bootstrap.

Used after `cdk destroy` to prove teardown: every list must be empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import boto3
from botocore.exceptions import ClientError

# CDK bootstrap resources (the CDKToolkit stack) are the account's, not the app's.
_BOOTSTRAP_MARK = "hnb659fds"


def _not_bootstrap(names: list[str]) -> list[str]:
    return sorted(n for n in names if _BOOTSTRAP_MARK not in n and n != "CDKToolkit")


def leftovers(session: boto3.Session | None = None, *, stack_prefix: str = "") -> dict[str, list[str]]:
    """Resources of every kind the app creates that still exist, by service. Empty lists mean a clean account."""
    session = session or boto3.Session()
    sm = session.client("sagemaker")
    found: dict[str, list[str]] = {}

    cfn = session.client("cloudformation")
    stacks = [
        s["StackName"]
        for page in cfn.get_paginator("list_stacks").paginate()
        for s in page["StackSummaries"]
        if s["StackStatus"] != "DELETE_COMPLETE" and s["StackName"].startswith(stack_prefix)
    ]
    found["cloudformation stacks"] = _not_bootstrap(stacks)
    found["sagemaker endpoints"] = sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"])
    found["sagemaker endpoint configs"] = sorted(
        c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]
    )
    found["sagemaker models"] = sorted(m["ModelName"] for m in sm.list_models()["Models"])
    found["iam roles"] = _not_bootstrap([r["RoleName"] for r in session.client("iam").list_roles()["Roles"]])
    found["s3 buckets"] = _not_bootstrap([b["Name"] for b in session.client("s3").list_buckets().get("Buckets", [])])
    found["ecr repositories"] = _not_bootstrap(
        [r["repositoryName"] for r in session.client("ecr").describe_repositories().get("repositories", [])]
    )
    found["log groups"] = sorted(
        g["logGroupName"] for g in session.client("logs").describe_log_groups().get("logGroups", [])
    )
    found["lambda functions"] = sorted(
        f["FunctionName"] for f in session.client("lambda").list_functions()["Functions"]
    )
    # The endpoints' alarms and topics, and the environment's dashboard (stacks/endpoint_alarms.py). The emulator
    # creates the topics and the dashboard; it skips AWS::CloudWatch::Alarm (moto's CloudWatch Alarm is no
    # CloudFormation model), so the alarm list shows only that nothing else left one behind.
    cloudwatch = session.client("cloudwatch")
    found["cloudwatch alarms"] = sorted(
        a["AlarmName"] for page in cloudwatch.get_paginator("describe_alarms").paginate() for a in page["MetricAlarms"]
    )
    found["cloudwatch dashboards"] = sorted(
        d["DashboardName"] for d in cloudwatch.list_dashboards().get("DashboardEntries", [])
    )
    found["sns topics"] = sorted(
        t["TopicArn"].rsplit(":", 1)[-1]
        for page in session.client("sns").get_paginator("list_topics").paginate()
        for t in page["Topics"]
    )
    # The VPCs `network: {create_vpc: true}` creates (stacks/endpoint_network.py), with their endpoints and flow logs;
    # the region's default VPC is the account's.
    ec2 = session.client("ec2")
    found["vpcs"] = sorted(v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault"))
    found["vpc endpoints"] = sorted(e["VpcEndpointId"] for e in ec2.describe_vpc_endpoints()["VpcEndpoints"])
    found["flow logs"] = sorted(f["FlowLogId"] for f in ec2.describe_flow_logs()["FlowLogs"])
    try:
        targets = session.client("application-autoscaling").describe_scalable_targets(ServiceNamespace="sagemaker")
        found["scaling targets"] = sorted(t["ResourceId"] for t in targets["ScalableTargets"])
        policies = session.client("application-autoscaling").describe_scaling_policies(ServiceNamespace="sagemaker")
        found["scaling policies"] = sorted(p["PolicyName"] for p in policies["ScalingPolicies"])
    except ClientError as err:  # pragma: no cover - a real account without the permission
        found["scaling targets"] = [f"could not list: {err}"]
    return found


@dataclass(frozen=True)
class FunctionRuns:
    """One Lambda function's runs as its log group shows them (Lambda writes a START line per invocation)."""

    name: str
    log_group: str
    runs: int
    lines: list[str]

    @property
    def last_line(self) -> str:
        # Lambda's own lines, and Node's warnings about the handler's code, say nothing of what it did
        told = [
            line for line in self.lines if not line.startswith(("START ", "END ", "REPORT ", "(node:", "(Use `node"))
        ]
        return told[-1] if told else ""


def function_runs(lambda_client, logs_client, *, prefix: str = "") -> list[FunctionRuns]:
    """Every function whose name starts with `prefix` that has run (its log group has events), oldest lines first:
    its LoggingConfig.LogGroup, else /aws/lambda/<name>."""
    found = []
    for page in lambda_client.get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            name = function["FunctionName"]
            if not name.startswith(prefix):
                continue
            group = (function.get("LoggingConfig") or {}).get("LogGroup") or f"/aws/lambda/{name}"
            try:
                lines = [
                    event["message"]
                    for page in logs_client.get_paginator("filter_log_events").paginate(logGroupName=group)
                    for event in page["events"]
                ]
            except logs_client.exceptions.ResourceNotFoundException:
                continue
            runs = sum(1 for line in lines if line.startswith("START RequestId:"))
            if runs:
                found.append(FunctionRuns(name, group, runs, lines))
    return sorted(found, key=lambda f: f.name)


__all__ = ["FunctionRuns", "function_runs", "leftovers"]
