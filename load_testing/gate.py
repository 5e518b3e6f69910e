"""`python -m model_build slo-gate`: the load test an endpoint's `slo:` asks for, judged against its objectives; what
`make deploy` and the pipeline run after the smoke test, refusing promotion (exit 1) when an objective is missed.

Each result is kept beside the artifact it measured: build/loadtest/<endpoint>/<content hash>/<UTC time>.json here,
and loadtest/<endpoint>/<content hash>/<UTC time>.json in the environment's artifact bucket, so a pipeline's results
outlive its build. A miss names the newest kept result that met the same objectives, with its artifact hash: the
change between that artifact and this one is where to look (the same hash: the artifact did not change, the
endpoint's load or configuration did).

AWS calls: sagemaker-runtime InvokeEndpointWithResponseStream (InvokeEndpoint for a system that does not stream) on
the endpoint; S3 ListObjectsV2 under loadtest/<endpoint>/, GetObject of kept results, PutObject of the new one; STS
GetCallerIdentity (the bucket's name carries the account). stacks/benchmark.py grants exactly these to the pipeline's
gate role; tests/stacks/test_iam_coverage.py runs this code and checks the grant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from endpoint_runtime.bodies import EndpointBody
from load_testing.report import evaluate_slo, save_result

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

EXIT_SLO_MISSED = 1
EXIT_USER_ERROR = 2
HISTORY_READS = 20  # kept results read back, newest first, looking for one that met the objectives


@dataclass(frozen=True)
class KeptResult:
    artifact_hash: str
    stamp: str  # the UTC time its file is named by (load_testing/report.save_result)
    where: str  # path or s3:// URI
    result: dict[str, Any]


@dataclass
class GateResult:
    endpoint: str
    artifact_hash: str
    misses: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    kept: list[str] = field(default_factory=list)
    last_met: KeptResult | None = None  # the newest earlier result that met these objectives
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.misses

    def lines(self) -> list[str]:
        """What the gate says: the measured numbers, each miss, the last result that met the objectives."""
        if self.skipped:
            return [f"    SKIP  {self.skipped}"]
        assert self.result is not None
        slo = self.result["slo"]
        out = [f"    now   artifact {self.artifact_hash[:12]}: {headline(self.result, slo)}"]
        out += [f"    MISS  {m}" for m in self.misses] or ["    PASS  every objective met"]
        if not self.result.get("workload", {}).get("exact_output_tokens", True):
            out.append(
                "    note  output lengths were not fixed (the container reads no min_new_tokens): a reply may end "
                "before its asked length"
            )
        if self.misses and self.last_met is not None:
            same = self.last_met.artifact_hash == self.artifact_hash
            out.append(
                f"    regressed since artifact {self.last_met.artifact_hash[:12]} ({self.last_met.stamp}, "
                f"{self.last_met.where}), which met these objectives: {headline(self.last_met.result, slo)}"
                + (
                    "; the same artifact, so the endpoint's load, instances or configuration changed"
                    if same
                    else f"; the change is between artifact {self.last_met.artifact_hash[:12]} and "
                    f"{self.artifact_hash[:12]}"
                )
            )
        elif self.misses:
            out.append("    no earlier result met these objectives")
        out += [f"    kept  {where}" for where in self.kept]
        return out

    def message(self) -> str:
        return f"load test of {self.endpoint} missed its SLO:\n" + "\n".join(self.lines())


def _fmt(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def headline(result: dict[str, Any], slo: dict[str, Any]) -> str:
    """The objectives' numbers at each level they are judged at, e.g. "concurrency 4: p95 TTFT 41 ms, ..."."""
    wanted = slo.get("concurrency")
    parts = []
    for level in result.get("levels", []):
        if wanted is not None and level["concurrency"] != wanted:
            continue
        parts.append(
            f"concurrency {level['concurrency']}: p95 TTFT {_fmt(level['ttft_ms'].get('p95'), ' ms')}, "
            f"p95 ITL {_fmt(level['itl_ms'].get('p95'), ' ms')}, {_fmt(level['output_tokens_per_s'])} output "
            f"tokens/s, error rate {_fmt(level['error_rate'])}, $ per M output tokens "
            f"{_fmt(level.get('usd_per_million_output_tokens'))}"
        )
    return "; ".join(parts) or "no level measured"


# ---------------------------------------------------------------------------------------------------------------
# Where results are kept


class ResultStore:
    """Results of one endpoint: always under `root` on this machine; also in S3 (`s3` client, `bucket`, `prefix`)
    when given, where earlier results are then read from (a pipeline's build/ does not outlive its build)."""

    def __init__(self, root: Path, endpoint: str, s3: Any = None, bucket: str | None = None, prefix: str = "") -> None:
        self.root, self.endpoint = Path(root), endpoint
        self.s3, self.bucket, self.prefix = s3, bucket, prefix

    def history(self) -> list[KeptResult]:
        """Kept results, newest first (at most HISTORY_READS)."""
        if self.s3 is None:
            folder = self.root / self.endpoint
            files = sorted(folder.glob("*/*.json"), key=lambda p: p.name, reverse=True) if folder.is_dir() else []
            return [KeptResult(p.parent.name, p.stem, str(p), json.loads(p.read_text())) for p in files[:HISTORY_READS]]
        keys = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        # <prefix><hash>/<stamp>.json only (the managed benchmark writes its own folders under <hash>/managed/)
        results = []
        for key in keys:
            parts = key[len(self.prefix) :].split("/")
            if len(parts) == 2 and parts[1].endswith(".json"):
                results.append((key, parts[0], parts[1]))
        out = []
        for key, artifact_hash, name in sorted(results, key=lambda r: r[2], reverse=True)[:HISTORY_READS]:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            out.append(KeptResult(artifact_hash, name[:-5], f"s3://{self.bucket}/{key}", json.loads(body)))
        return out

    def keep(self, result: dict[str, Any], artifact_hash: str) -> list[str]:
        path = save_result(result, self.root, self.endpoint, artifact_hash)
        kept = [str(path)]
        if self.s3 is not None:
            key = f"{self.prefix}{artifact_hash}/{path.name}"
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes(), ContentType="application/json")
            kept.append(f"s3://{self.bucket}/{key}")
        return kept


def last_met(history: list[KeptResult], slo: Any) -> KeptResult | None:
    return next((kept for kept in history if not evaluate_slo(kept.result, slo)), None)


# ---------------------------------------------------------------------------------------------------------------
# The gate


def gate_workload(slo: Any, request_timeout_s: float | None = None, body: EndpointBody | None = None) -> Any:
    """The load test's Workload for an `slo:` block: its levels, requests, token distributions and warm-up.
    `request_timeout_s`: how long one request may take (the gate passes the endpoint's own invocation timeout).
    `body`: the container's (EndpointPlan.endpoint_body; None: one that reads every parameter): each request's output
    length is asked as its least too (min_new_tokens) only where the container reads it
    (loadtest.fit_workload_to_body); where not, replies may end early and the result says so."""
    from load_testing.loadtest import Workload, fit_workload_to_body

    w = slo.workload
    workload = Workload(
        input_tokens=w.input_tokens,
        output_tokens=w.output_tokens,
        concurrency=slo.levels,
        requests=w.requests,
        warmup_requests=w.warmup_requests,
        deadline_s=slo.deadline_s,
        # no single request outlives the gate's deadline, nor the endpoint's own invocation timeout when given
        request_timeout_s=min(request_timeout_s or 120.0, float(slo.deadline_s)),
    )
    # the gate says it under its result (GateResult), not as the load test's own line
    return fit_workload_to_body(workload, body or EndpointBody(), echo=lambda _line: None)


def gate_price(plan: EndpointPlan) -> Any:
    """slo.usd_per_hour x the endpoint's instance_count (None: no price, no $ per million tokens)."""
    from load_testing.loadtest import Price

    slo = plan.slo
    if slo is None or slo.usd_per_hour is None:
        return Price(instance_count=plan.instance_count, instance_type=plan.instance_type)
    return Price(
        usd_per_hour=slo.usd_per_hour,
        instance_count=plan.instance_count,
        instance_type=plan.instance_type,
        source="the config's slo.usd_per_hour",
    )


def gate_target(plan: EndpointPlan, region: str | None, endpoint_url: str | None = None, session: Any = None) -> Any:
    """The load test's target for an endpoint's gate: sagemaker-runtime, streamed where the system streams, each
    prompt in the body the container takes, replies read with its reasoning field (the system's ContainerBodies)."""
    from load_testing.loadtest import SageMakerRuntimeTarget

    return SageMakerRuntimeTarget(
        plan.endpoint_name,
        region,
        endpoint_url,
        plan.component_name,
        stream=plan.system.streaming.supported,
        session=session,
        body=plan.endpoint_body,
    )


def run_gate(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    *,
    session: Any = None,
    endpoint_url: str | None = None,
    results_root: Path | None = None,
    keep_in_s3: bool = True,
    progress: bool = False,
) -> GateResult:
    """Load-test one deployed endpoint (`deployment.EndpointPlan`) as its `slo:` says and judge the objectives.
    `endpoint_url`: another sagemaker-runtime URL (the local server). `keep_in_s3`: keep and read results in the
    environment's artifact bucket too. AWS and user errors raise (AccountError, LoadTestError, botocore's)."""
    from deployment.aws import checked_account, session_for
    from load_testing.loadtest import LoadTestError, run

    slo = plan.slo
    gate = GateResult(plan.name, plan.artifact.content_hash)
    if slo is None:
        gate.skipped = f"endpoint {plan.name!r} has no slo: block"
        return gate
    plan.deployable_artifact()  # ConfigError without one: results are kept under the artifact's hash
    env = environment_plan.environment
    session = session or session_for(env)
    region = env.region or session.region_name
    if not region:
        raise LoadTestError(
            f"no AWS region: set `region:` on environment {environment_plan.environment_name!r} or AWS_DEFAULT_REGION"
        )
    if results_root is None:
        from deployment.plan import BUILD_ROOT

        results_root = BUILD_ROOT / "loadtest"
    store = ResultStore(results_root, plan.name)
    if keep_in_s3:
        bucket = plan.artifact_bucket(checked_account(environment_plan, session, region), region)
        store = ResultStore(
            results_root, plan.name, session.client("s3", region_name=region), bucket, plan.loadtest_prefix
        )
    history = store.history()  # before the load test: a bucket we may not read fails fast
    target = gate_target(plan, region, endpoint_url, session)
    # One request waits no longer than SageMaker lets it run (60 s real-time, the stream's timeout when it streams):
    # a hung endpoint ends the gate in (warm-up + requests) / concurrency x that, not the load test's 120 s each
    # (probe F3).
    # TGI and LMI 27 have no min_new_tokens (systems' unread_parameters): the front doors would refuse it, so the gate
    # does not send it, and its result's workload says exact_output_tokens false.
    workload = gate_workload(slo, plan.invocation_timeout_s, plan.endpoint_body)
    result = run(target, workload, gate_price(plan), progress=progress)
    result["slo"] = slo.model_dump(mode="json")
    result["slo_misses"] = gate.misses = evaluate_slo(result, slo)
    result["endpoint"] = {
        "name": plan.name,
        "endpoint_name": plan.endpoint_name,
        "environment": environment_plan.environment_name,
        "instance_type": plan.instance_type,
        "instance_count": plan.instance_count,
    }
    gate.result = result
    gate.kept = store.keep(result, plan.artifact.content_hash)
    if gate.misses:
        gate.last_met = last_met(history, slo)
    return gate


# ---------------------------------------------------------------------------------------------------------------
# Command line


def cmd_slo_gate(args: argparse.Namespace) -> int:
    import botocore.exceptions

    from deployment import load_config
    from load_testing.loadtest import LoadTestError

    environment_plan = load_config(args.config, args.env, build_root=Path(args.build_root))
    plan = environment_plan.plan(args.endpoint)
    try:
        gate = run_gate(
            environment_plan,
            plan,
            endpoint_url=args.endpoint_url,
            keep_in_s3=not args.local_only,
            results_root=Path(args.results) if args.results else None,
            progress=not args.quiet,
        )
    except (LoadTestError, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        print(f"error: SLO gate of endpoint {plan.name!r}: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    if not gate.ok:
        print(gate.message(), file=sys.stderr)
        return EXIT_SLO_MISSED
    print(f"SLO gate of {plan.name}:\n" + "\n".join(gate.lines()))
    return 0


def add_parser(subparsers: Any, endpoint_args: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """`python -m model_build slo-gate`: one line in model_build/cli.py's parser()."""
    p = subparsers.add_parser(
        "slo-gate", help="after a deploy: the load test of the endpoint's slo:, exit 1 when missed"
    )
    endpoint_args(p)
    p.add_argument("--endpoint-url", default=None, help="another sagemaker-runtime URL (the local server)")
    p.add_argument("--results", default=None, help="where results are kept on this machine (default: build/loadtest)")
    p.add_argument(
        "--local-only",
        action="store_true",
        help="keep and compare results on this machine only, not in the artifact bucket",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_slo_gate)
    return p


__all__ = ["GateResult", "KeptResult", "ResultStore", "add_parser", "gate_workload", "headline", "run_gate"]
