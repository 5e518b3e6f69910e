"""The `slo:` block of an endpoint: service level objectives, the load the gate drives to judge them, the instance
price that turns throughput into $ per million tokens, and SageMaker's managed benchmark as an option.

One model serves the config file and `python -m model_build loadtest --slo FILE` (load_testing/report.py
evaluates it; load_testing/gate.py runs the gate after `make deploy`'s and the pipeline's smoke test).

The managed benchmark (`managed_benchmark: true`) is an AWS::SageMaker::AIWorkloadConfig holding the same workload as
an AIPerf document, and `python -m model_build benchmark` starting a CreateAIBenchmarkJob with it. Sources:
  cfn-lint 1.58.0's registry schema of AWS::SageMaker::AIWorkloadConfig (cfnlint/data/schemas/resources/
    56f1c0811a9d24bf.json, schema_date 2026-10-20): AIWorkloadConfigName "^[a-z0-9](-*[a-z0-9]){0,62}$",
    AIWorkloadConfigs.WorkloadSpec.Inline "must declare a benchmark object whose type member matches ^(aiperf)$",
    AIWorkloadConfigs and DatasetConfig are create-only (a change replaces the resource); the provider schemas
    (cfnlint/data/schemas/providers/<region>.json) list the resource in AI_WORKLOAD_CONFIG_REGIONS only.
  SageMaker Developer Guide, "Set up a workload configuration for generative AI inference recommendations"
    (generative-ai-inference-recommendations-workload-config): the document's keys (benchmark.type aiperf;
    parameters prompt_input_tokens_mean/_stddev, output_tokens_mean/_stddev, concurrency, request_count,
    warmup_request_count, streaming, tokenizer; tooling.api_standard openai); "Unknown keys are rejected".
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from .base import Strict

if TYPE_CHECKING:
    from .schema import EndpointSpec

MAX_LEVEL = 1024  # the load test's highest concurrency level (load_testing/loadtest.py)
# The regions whose CloudFormation registry has AWS::SageMaker::AIWorkloadConfig, per cfn-lint 1.58.0's provider
# schemas (tests/config/test_slo_config.py reads them again and compares).
AI_WORKLOAD_CONFIG_REGIONS = (
    "ap-northeast-1",
    "ap-southeast-1",
    "eu-central-1",
    "eu-isoe-west-1",
    "eu-west-1",
    "eusc-de-east-1",
    "us-east-1",
    "us-east-2",
    "us-iso-east-1",
    "us-iso-west-1",
    "us-isob-east-1",
    "us-isob-west-1",
    "us-isof-east-1",
    "us-isof-south-1",
    "us-west-2",
)
# AIWorkloadConfigName's pattern and length (the registry schema above; CreateAIWorkloadConfig allows 63 as well).
WORKLOAD_CONFIG_NAME = re.compile(r"^[a-z0-9](-*[a-z0-9]){0,62}$")
# A Hugging Face Hub repo id: "name" or "org/name" (letters, digits, '-', '_', '.'), what AIPerf's tokenizer takes.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9_.-]{1,96})?$")


class TokenDistribution(Strict):
    """Tokens per request: a mean and a standard deviation (0: every request the same)."""

    mean: int = Field(ge=1, le=1_000_000)
    stddev: float = Field(default=0.0, ge=0)

    def sample(self, rng: random.Random) -> int:
        return self.mean if not self.stddev else max(1, round(rng.gauss(self.mean, self.stddev)))


class SloWorkload(Strict):
    """What the gate sends: synthetic prompts of `input_tokens`, each asking for `output_tokens`, at each of the
    `concurrency` levels (default: the objectives' concurrency, else 1), `requests` per level (default max(10,
    2 x concurrency), AIPerf's), after `warmup_requests` not measured (a freshly deployed endpoint's first
    requests pay one-time costs)."""

    concurrency: list[int] | None = Field(default=None, min_length=1)
    requests: int | None = Field(default=None, ge=1, le=100_000)
    input_tokens: TokenDistribution = TokenDistribution(mean=128)
    output_tokens: TokenDistribution = TokenDistribution(mean=64)
    warmup_requests: int = Field(default=2, ge=0, le=10_000)

    @model_validator(mode="after")
    def _levels(self) -> SloWorkload:
        levels = self.concurrency or []
        if bad := [c for c in levels if not 1 <= c <= MAX_LEVEL]:
            raise ValueError(f"concurrency: every level must be 1-{MAX_LEVEL}, got {bad}")
        if len(set(levels)) != len(levels):
            raise ValueError(f"concurrency: levels must be distinct, got {levels}")
        return self


OBJECTIVES = (
    "p95_ttft_ms",
    "p95_itl_ms",
    "p95_e2e_ms",
    "min_output_tokens_per_s",
    "max_usd_per_million_tokens",
    "max_error_rate",
)
# The error budget when `max_error_rate` is not given: latency and throughput are computed on successful requests
# only, so without one an endpoint failing 3 requests in 4 passed a throughput or latency gate (reliability probes
# F1). 1 %: in a gate of fewer than 100 requests, any failed request misses.
DEFAULT_MAX_ERROR_RATE = 0.01
# The gate's whole run (warm-up and every level) ends by its deadline: a hung endpoint held a gate ~12 min per
# 6 requests (probes F3). The pipeline's SloGate step has 60 minutes (stacks/pipeline_stack.py SLO_GATE_TIMEOUT);
# the longest deadline leaves 5 of them for installing the deploy set.
DEFAULT_DEADLINE_S, MAX_DEADLINE_S = 1800, 3300


class Slo(Strict):
    """Service level objectives of one endpoint, judged by load_testing/report.evaluate_slo: latency, error and
    cost limits at `concurrency` when it is given, else at every level measured; the throughput floor needs
    `concurrency`. `workload`: what the gate sends. `usd_per_hour`: the instance's on-demand price, which $ per
    million output tokens is computed from (x instance_count). `managed_benchmark`: also create the workload as an
    AWS::SageMaker::AIWorkloadConfig for `python -m model_build benchmark` (module docstring)."""

    concurrency: int | None = Field(default=None, ge=1, le=MAX_LEVEL)
    p95_ttft_ms: float | None = Field(default=None, gt=0)
    p95_itl_ms: float | None = Field(default=None, gt=0)
    # request sent -> reply complete, p95: the latency objective of every system, streaming or not (a system that
    # does not stream has no TTFT or ITL, so without it a 3 s/request endpoint passed any latency gate: probe F5).
    p95_e2e_ms: float | None = Field(default=None, gt=0)
    min_output_tokens_per_s: float | None = Field(default=None, gt=0)
    max_usd_per_million_tokens: float | None = Field(default=None, gt=0)
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    workload: SloWorkload = SloWorkload()
    usd_per_hour: float | None = Field(default=None, gt=0, le=10_000)
    managed_benchmark: bool = False
    deadline_s: int = Field(default=DEFAULT_DEADLINE_S, ge=10, le=MAX_DEADLINE_S)

    @property
    def error_budget(self) -> float:
        """The error rate the gate allows: max_error_rate, else DEFAULT_MAX_ERROR_RATE."""
        return DEFAULT_MAX_ERROR_RATE if self.max_error_rate is None else self.max_error_rate

    @model_validator(mode="after")
    def _consistent(self) -> Slo:
        if all(getattr(self, key) is None for key in OBJECTIVES):
            raise ValueError(
                f"no objective given: a gate with none passes everything; give at least one of {', '.join(OBJECTIVES)}"
            )
        if self.min_output_tokens_per_s is not None and self.concurrency is None:
            raise ValueError(
                "min_output_tokens_per_s needs concurrency: the aggregate throughput is judged at one concurrency level"
            )
        levels = self.workload.concurrency
        if self.concurrency is not None and levels is not None and self.concurrency not in levels:
            raise ValueError(
                f"concurrency: value {self.concurrency} is not among workload.concurrency {levels}: the "
                "objectives would be judged at a level the gate never runs"
            )
        return self

    @property
    def levels(self) -> list[int]:
        """The concurrency levels the gate runs."""
        return list(self.workload.concurrency or [self.concurrency or 1])


def slo_problems(ep: EndpointSpec) -> list[str]:
    """The rules an `slo:` block adds to its endpoint (schema.endpoint_problems runs them)."""
    slo = ep.slo
    if slo is None:
        return []
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: slo.{key}: {message}")

    if ep.invocation.is_async:
        bad(
            "(block)",
            "an asynchronous endpoint is not load-tested (its answers come through S3, not a stream); "
            "remove slo: or use invocation.mode real-time",
        )
    if slo.max_usd_per_million_tokens is not None and slo.usd_per_hour is None:
        bad(
            "usd_per_hour",
            f"required key is missing: max_usd_per_million_tokens is computed from the hourly price of "
            f"{ep.instance_type}; give its on-demand price in your region (`python -m model_build "
            f"loadtest --price-list-api --instance-type {ep.instance_type} --region ...` looks it up)",
        )
    if slo.managed_benchmark and len(slo.levels) != 1:
        bad(
            "managed_benchmark",
            f"an AIPerf workload runs one concurrency, the gate's workload has {slo.levels}: set "
            "slo.concurrency, or give workload.concurrency one level",
        )
    return problems


def slo_region_problems(ep: EndpointSpec, region: str | None) -> list[str]:
    """The managed benchmark against the environment's region, when it names one (without one, the stack's template
    rule refuses the deploy: stacks/benchmark.py). Checked at load, so `cdk synth` writes nothing and `model_build`
    refuses the file too."""
    if ep.slo is None or not ep.slo.managed_benchmark or region is None or region in AI_WORKLOAD_CONFIG_REGIONS:
        return []
    return [
        f"endpoint {ep.name!r}: slo.managed_benchmark: value true: AWS::SageMaker::AIWorkloadConfig is not offered "
        f"in {region}; regions with it: {', '.join(AI_WORKLOAD_CONFIG_REGIONS)} (or set managed_benchmark: false)"
    ]


# ---------------------------------------------------------------------------------------------------------------
# The managed benchmark's AIWorkloadConfig


def hub_tokenizer(model: str) -> str | None:
    """The tokenizer AIPerf counts with: the model's Hugging Face Hub id; None for a local model directory (the
    benchmark cannot read this machine's files)."""
    if Path(model).expanduser().is_dir() or not HUB_ID.match(model):
        return None
    return model


def aiperf_workload(slo: Slo, *, streaming: bool, tokenizer: str | None) -> dict[str, Any]:
    """The WorkloadSpec.Inline document of the gate's workload (keys: the Developer Guide page in the module
    docstring)."""
    workload = slo.workload
    [concurrency] = slo.levels  # slo_problems: one level
    parameters: dict[str, Any] = {
        "prompt_input_tokens_mean": workload.input_tokens.mean,
        "prompt_input_tokens_stddev": workload.input_tokens.stddev,
        "output_tokens_mean": workload.output_tokens.mean,
        "output_tokens_stddev": workload.output_tokens.stddev,
        "concurrency": concurrency,
        "request_count": workload.requests if workload.requests is not None else max(10, 2 * concurrency),
        "warmup_request_count": workload.warmup_requests,
        "streaming": streaming,
    }
    if tokenizer is not None:
        parameters["tokenizer"] = tokenizer
    return {"benchmark": {"type": "aiperf"}, "parameters": parameters, "tooling": {"api_standard": "openai"}}


@dataclass(frozen=True)
class ManagedBenchmark:
    """The AIWorkloadConfig of an endpoint's gate workload: its name and its WorkloadSpec.Inline document."""

    workload_config_name: str
    document: dict[str, Any]

    @property
    def inline(self) -> str:
        return json.dumps(self.document, sort_keys=True)

    @property
    def offered_regions(self) -> tuple[str, ...]:
        """The regions that offer AWS::SageMaker::AIWorkloadConfig (AI_WORKLOAD_CONFIG_REGIONS)."""
        return AI_WORKLOAD_CONFIG_REGIONS


def managed_benchmark(slo: Slo | None, *, endpoint_name: str, streaming: bool, model: str) -> ManagedBenchmark | None:
    """The endpoint's managed benchmark when its `slo:` asks for one (`managed_benchmark: true`), else None."""
    if slo is None or not slo.managed_benchmark:
        return None
    document = aiperf_workload(slo, streaming=streaming, tokenizer=hub_tokenizer(model))
    return ManagedBenchmark(workload_config_name(endpoint_name, document), document)


def workload_config_name(endpoint_name: str, document: dict[str, Any]) -> str:
    """`<endpoint>-<8 hex of the document>`: a changed workload replaces the resource (its AIWorkloadConfigs is
    create-only), which CloudFormation creates before it deletes the old one, so the name must change with it."""
    digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:8]
    name = f"{endpoint_name[:54].rstrip('-')}-{digest}"
    if not WORKLOAD_CONFIG_NAME.match(name):
        raise ValueError(f"AIWorkloadConfigName {name!r} does not match {WORKLOAD_CONFIG_NAME.pattern}")
    return name


def benchmark_role_name(project: str, environment: str, endpoint: str) -> str:
    """The fixed name of the role SageMaker assumes for an endpoint's managed benchmark, <project>-<env>-<endpoint>-
    benchmark, cut to IAM's 64 characters with a digest of the whole, as stacks/trusted_pipeline.role_name cuts
    every fixed role name (the stack creates the role by this name; `python -m model_build benchmark` passes its ARN)."""
    name = f"{project}-{environment}-{endpoint}-benchmark"
    return name if len(name) <= 64 else f"{name[:55]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def results_prefix(endpoint: str) -> str:
    """The artifact bucket's key prefix of an endpoint's kept load-test results: loadtest/<endpoint>/<artifact
    content hash>/<UTC time>.json (the same layout as build/loadtest/ on the machine that ran it)."""
    return f"loadtest/{endpoint}/"


__all__ = [
    "AI_WORKLOAD_CONFIG_REGIONS",
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_ERROR_RATE",
    "OBJECTIVES",
    "ManagedBenchmark",
    "Slo",
    "SloWorkload",
    "TokenDistribution",
    "aiperf_workload",
    "benchmark_role_name",
    "hub_tokenizer",
    "managed_benchmark",
    "results_prefix",
    "slo_problems",
    "slo_region_problems",
    "workload_config_name",
]
