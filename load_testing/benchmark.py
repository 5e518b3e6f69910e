"""`python -m model_build benchmark`: SageMaker's managed benchmark of a deployed endpoint (SageMaker runs NVIDIA
AIPerf against it), with the workload its stack created as AWS::SageMaker::AIWorkloadConfig (`slo.managed_benchmark:
true`, stacks/benchmark.py).

CreateAIBenchmarkJob (botocore 1.44.8 sagemaker service model): required AIBenchmarkJobName (1-63 characters,
[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}), BenchmarkTarget.Endpoint.Identifier (with InferenceComponents for an endpoint
whose model runs as one: "the job fails ... indicating that no model is deployed directly on the endpoint"
otherwise, SageMaker Developer Guide, generative-ai-inference-recommendations-benchmark), OutputConfig.
S3OutputLocation, AIWorkloadConfigIdentifier, RoleArn (the role SageMaker assumes: the stack's benchmark role, whose
ARN the caller may pass, iam:PassRole). DescribeAIBenchmarkJob polls AIBenchmarkJobStatus (InProgress, Completed,
Failed, Stopping, Stopped). Results land under the artifact bucket's loadtest/<endpoint>/<content hash>/managed/<job>/
beside the SLO gate's own results (load_testing/gate.py).

Exit status: 0 started (or, with --wait, Completed), 1 Failed or Stopped, 3 still running after --wait seconds,
2 for a user or AWS error.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifact import BuildError

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

JOB_PENDING = 3
TERMINAL = {"Completed": 0, "Failed": 1, "Stopped": 1}
POLL_S = 30.0


def job_name(plan: EndpointPlan, now: datetime | None = None) -> str:
    """<endpoint>-<12 hex of the artifact hash>-<UTC time>, at most 63 characters."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d%H%M%S")
    return f"{plan.endpoint_name[:35].rstrip('-')}-{plan.artifact.content_hash[:12]}-{stamp}"


def benchmark_request(plan: EndpointPlan, *, account: str, region: str, partition: str, name: str) -> dict[str, Any]:
    """The CreateAIBenchmarkJob parameters for one endpoint of a resolved config."""
    managed = plan.managed_benchmark
    if managed is None:
        raise BuildError(
            f"endpoint {plan.name!r} has no managed benchmark: set slo.managed_benchmark: true (and deploy "
            "the endpoint stack, which creates its AIWorkloadConfig and role)"
        )
    plan.deployable_artifact()  # ConfigError without one: results land under the artifact's hash
    if region not in managed.offered_regions:
        raise BuildError(
            f"region {region}: SageMaker's AIWorkloadConfig is not offered there; regions with it: "
            f"{', '.join(managed.offered_regions)}"
        )
    endpoint: dict[str, Any] = {"Identifier": plan.endpoint_name}
    if plan.component_name is not None:
        endpoint["InferenceComponents"] = [{"Identifier": plan.component_name}]
    bucket = plan.artifact_bucket(account, region)
    role = plan.benchmark_role_name
    return {
        "AIBenchmarkJobName": name,
        "BenchmarkTarget": {"Endpoint": endpoint},
        "OutputConfig": {
            "S3OutputLocation": f"s3://{bucket}/{plan.loadtest_prefix}{plan.artifact.content_hash}/managed/{name}/"
        },
        "AIWorkloadConfigIdentifier": managed.workload_config_name,
        "RoleArn": f"arn:{partition}:iam::{account}:role/{role}",
    }


def start_benchmark(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    *,
    session: Any = None,
    wait_s: float = 0.0,
    echo: Callable[[str], None] = print,
) -> tuple[str, dict[str, Any]]:
    """Start the job; with `wait_s`, poll it until it ends or the time is up. Returns (its status, the last
    DescribeAIBenchmarkJob answer, or the request when not waiting)."""
    import botocore.exceptions

    from deployment.aws import checked_account, session_for

    env = environment_plan.environment
    session = session or session_for(env)
    region = env.region or session.region_name
    if not region:
        raise BuildError(
            f"no AWS region: set `region:` on environment {environment_plan.environment_name!r} or AWS_DEFAULT_REGION"
        )
    account = checked_account(environment_plan, session, region)
    name = job_name(plan)
    request = benchmark_request(
        plan, account=account, region=region, name=name, partition=session.get_partition_for_region(region)
    )
    sagemaker = session.client("sagemaker", region_name=region)
    try:
        arn = sagemaker.create_ai_benchmark_job(**request)["AIBenchmarkJobArn"]
        echo(
            f"started {arn}\n    workload {request['AIWorkloadConfigIdentifier']}, results "
            f"{request['OutputConfig']['S3OutputLocation']}"
        )
        status, described = "InProgress", request
        deadline = time.monotonic() + wait_s
        while wait_s > 0:
            described = sagemaker.describe_ai_benchmark_job(AIBenchmarkJobName=name)
            status = described["AIBenchmarkJobStatus"]
            if status in TERMINAL or time.monotonic() >= deadline:
                break
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
    except botocore.exceptions.ClientError as err:
        error = err.response.get("Error", {})
        raise BuildError(f"benchmark of endpoint {plan.name!r}: {error.get('Code')}: {error.get('Message')}") from None
    return status, described


def cmd_benchmark(args: argparse.Namespace) -> int:
    from deployment import load_config

    environment_plan = load_config(args.config, args.env, build_root=Path(args.build_root))
    plan = environment_plan.plan(args.endpoint)
    status, described = start_benchmark(environment_plan, plan, wait_s=args.wait)
    if args.wait <= 0:
        return 0
    print(
        json.dumps(
            {
                k: described.get(k)
                for k in ("AIBenchmarkJobName", "AIBenchmarkJobStatus", "FailureReason", "OutputConfig")
            },
            indent=1,
            default=str,
        )
    )
    return TERMINAL.get(status, JOB_PENDING)


def add_parser(subparsers: Any, endpoint_args: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """`python -m model_build benchmark`: one line in model_build/cli.py's parser()."""
    p = subparsers.add_parser("benchmark", help="SageMaker's managed benchmark (AIPerf) of a deployed endpoint")
    endpoint_args(p)
    p.add_argument("--wait", type=float, default=0.0, help="poll the job this many seconds (default: start it only)")
    p.set_defaults(run=cmd_benchmark)
    return p


__all__ = ["add_parser", "benchmark_request", "job_name", "start_benchmark"]
