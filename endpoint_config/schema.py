"""The endpoint config file: typed models with bounds, and the cross-field rules SageMaker enforces.

Every rule here fails with a message that names the endpoint, the key, the value and what is allowed,
so `cdk synth` and `model_build` can print it as is and exit non-zero.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from facts.instances import InstanceType, hosting_instance_types, parse_instance_type

from .adapters import AdapterSpec, adapter_problems
from .base import Strict
from .chat import ChatSpec, chat_problems
from .engine_metrics import EngineMetrics
from .hosting import Hosting, hosting_problems
from .invocation import SMOKE_BUDGET_DEFAULT_MS, SMOKE_BUDGET_MAX_MS, Invocation, invocation_problems
from .model_reference import ModelReference, Revision, is_directory, is_hub_id
from .operations import AlarmsSpec, UpdatePolicySpec, operations_problems
from .pools import Capacity, InstancePool, pool_problems
from .routing import Routing, routing_problems
from .security import (
    DataCapture,
    EndpointEncryption,
    EnvironmentEncryption,
    Network,
    adopted_bucket_key_problem,
    security_problems,
)
from .slo import Slo, slo_problems
from .streaming import StreamingSpec

DTYPES = ("fp16", "bf16", "fp32")
BYTES_PER_PARAM = {"fp16": 2, "bf16": 2, "fp32": 4}

# CloudWatch Logs accepts only these retention periods (days; PutRetentionPolicy), named as aws-cdk-lib's
# aws_logs.RetentionDays members, which the stacks use.
LOG_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
LOG_RETENTION_DAYS = tuple(LOG_RETENTION)

TIMEOUT_BOUNDS = (60, 3600)  # SageMaker's limits for both container timeouts
NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$"
Timeout = Annotated[int, Field(ge=TIMEOUT_BOUNDS[0], le=TIMEOUT_BOUNDS[1])]


class Autoscaling(Strict):
    """Target tracking on concurrent requests per model copy.

    SageMaker's metric (SageMakerVariantConcurrentRequestsPerModelHighResolution) counts concurrent requests per
    instance, not per model copy: on systems that run several copies per instance (the DJL/LMI systems at a tensor
    parallel degree below the GPU count) the stack sets the policy's target to target_value x copies.

    With invocation.mode async the policy tracks the queue instead: target_value is queued requests per instance
    (ApproximateBacklogSizePerInstance), and min_capacity may be 0 (stacks/async_inference.py)."""

    # 0 only for an asynchronous endpoint (invocation.mode: async; endpoint_config/invocation.py says why).
    min_capacity: int = Field(1, ge=0, le=100)
    max_capacity: int = Field(ge=1, le=100)
    target_value: float = Field(gt=0, le=1000, description="concurrent requests per model copy")
    scale_in_cooldown_s: int = Field(300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(60, ge=0, le=3600)


class InvokeFunctionSpec(Strict):
    """The invoke Lambda in front of the endpoint."""

    # Caps how many requests the function forwards at once (and reserves that share of the account's Lambda
    # concurrency): a GPU endpoint serves a handful of concurrent generations; more only queue and time out.
    # None: unreserved, the account's shared pool (Lambda's default).
    reserved_concurrency: int | None = Field(None, ge=1, le=1000)


# A Secrets Manager secret: its name or full ARN (CodeBuild's `secrets-manager` environment-variable syntax).
SECRET_ID_PATTERN = r"^(?:arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:)?[A-Za-z0-9/_+=.@-]{1,512}$"


class SmokeTest(Strict):
    """What the post-deploy smoke test sends and how long it may take.

    latency_budget_ms: from sending the prompt to its answer (100-60000 for a real-time endpoint, default 30000;
      up to 840000 for an asynchronous one, default 300000: submit, queue, generate and the answer in S3).
    """

    prompt: str = Field("The capital of France is", min_length=1, max_length=2000)
    max_new_tokens: int = Field(16, ge=1, le=256)
    latency_budget_ms: int | None = Field(None, ge=100, le=SMOKE_BUDGET_MAX_MS["async"])

    def budget_ms(self, invocation_mode: str) -> int:
        """The budget in force for an endpoint invoked in this mode ("real-time" or "async")."""
        return (
            self.latency_budget_ms if self.latency_budget_ms is not None else SMOKE_BUDGET_DEFAULT_MS[invocation_mode]
        )


class EndpointSpec(Strict):
    """One SageMaker endpoint: what model, which serving system, on what hardware."""

    name: str = Field(pattern=NAME_PATTERN, min_length=1, max_length=40)
    # A registered serving system (systems.REGISTRY), checked where the systems are known (deployment).
    system: str
    model: ModelReference
    revision: Revision | None = None
    # A Hub model's token for the staging job that moves its weights Hub -> S3 in the account: the name or ARN of a
    # Secrets Manager secret holding it (a gated or private model needs one; the plan on the workstation reads
    # HF_TOKEN instead). Only for a Hub id: a local directory has nothing to fetch (docs/design/weights.md).
    hub_token_secret: str | None = Field(None, pattern=SECRET_ID_PATTERN)
    dtype: Literal["fp16", "bf16", "fp32"] = "fp16"
    instance_type: str
    # Fallback instance types in priority order after instance_type, and how SageMaker provisions the instances
    # (endpoint_config/pools.py); each pool is checked as instance_type is.
    instance_pools: list[InstancePool] = Field(default_factory=list)
    capacity: Capacity | None = None
    instance_count: int = Field(1, ge=1, le=100)
    tensor_parallel_degree: int = Field(1, ge=1, le=64)
    volume_size_gb: int | None = Field(None, ge=1, le=512)
    model_data_download_timeout_s: Timeout | None = None
    container_startup_health_check_timeout_s: Timeout | None = None
    autoscaling: Autoscaling | None = None
    # How the artifact reaches the container: an uncompressed S3 prefix (fast, no untar) or one model.tar.gz.
    model_data: Literal["s3-prefix", "tar-gz"] = "s3-prefix"
    # torch-save is the seed recipe's pickled whole model: opt-in only (runs code on load, slower to load).
    weights_format: Literal["safetensors", "torch-save"] = "safetensors"
    max_shard_size: str = Field("2GB", pattern=r"^[0-9]+(?:\.[0-9]+)?(?:KB|MB|GB)$")
    log_retention_days: int = 30
    # Parameter count, when neither a local model directory nor the known-model table tells it.
    model_parameters: int | None = Field(None, ge=1)
    # Engine options: each system's own typed model (ServingSystem.engine_options) validates them when the config loads.
    engine: dict[str, Any] = Field(default_factory=dict)
    smoke_test: SmokeTest = SmokeTest()
    invoke_function: InvokeFunctionSpec = InvokeFunctionSpec()
    # real-time (default) or asynchronous inference (endpoint_config/invocation.py).
    invocation: Invocation = Invocation()
    # The streaming front door (endpoint_config/streaming.py; off by default).
    streaming: StreamingSpec = StreamingSpec()
    # OpenAI chat completions and who may use SageMaker's OpenAI route (endpoint_config/chat.py). Unset: on where the
    # system serves chat and the model has a chat template (deployment/plan.py chat_by_default); false: off.
    chat: ChatSpec | Literal[False] | None = None
    # How SageMaker spreads requests over the instances (ProductionVariant RoutingConfig): random (SageMaker's
    # default), least-outstanding-requests or prefix-aware with its two settings (endpoint_config/routing.py).
    routing: Routing = Routing()
    # Pin an already published artifact (its manifest content hash) instead of reading build/<name>/manifest.json.
    artifact_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    # The model on the variant (default) or as an inference component, scaling to zero (endpoint_config/hosting.py).
    hosting: Hosting = Hosting()
    # LoRA adapters, each an adapter inference component on the base component (endpoint_config/adapters.py).
    adapters: list[AdapterSpec] = Field(default_factory=list)
    # Guarded updates and alarms (endpoint_config/operations.py), on by default; null turns one off.
    deployment: UpdatePolicySpec | None = UpdatePolicySpec()
    alarms: AlarmsSpec | None = AlarmsSpec()
    # Data capture, private networking and KMS keys (endpoint_config/security.py); all off by default.
    data_capture: DataCapture | None = None
    network: Network | None = None
    encryption: EndpointEncryption | None = None
    # Service level objectives, judged by a load test after every deploy's smoke test (endpoint_config/slo.py).
    slo: Slo | None = None
    # SageMaker detailed observability and the engine alarm and panel on it (endpoint_config/engine_metrics.py).
    engine_metrics: EngineMetrics = EngineMetrics()

    @property
    def instance(self) -> InstanceType:
        """The instance type's facts (GPUs, their memory, local NVMe): the one place the type's name is parsed."""
        return parse_instance_type(self.instance_type)

    def pool_specs(self) -> list[EndpointSpec]:
        """Each of instance_pools as the endpoint it would be on that instance type alone (its tensor-parallel
        degree, the endpoint's by default): every rule and every derived fact of instance_type applies to it as is."""
        return [
            self.model_copy(
                update={
                    "instance_type": pool.instance_type,
                    "tensor_parallel_degree": pool.tensor_parallel_degree or self.tensor_parallel_degree,
                    "instance_pools": [],
                }
            )
            for pool in self.instance_pools
        ]


class EndpointOverride(Strict):
    """Per-environment changes to one endpoint (capacity and timeouts; the model stays the same)."""

    instance_type: str | None = None
    # Each replaces the endpoint's whole list or block (capacity reservations belong to one account).
    instance_pools: list[InstancePool] | None = None
    capacity: Capacity | None = None
    instance_count: int | None = Field(None, ge=1, le=100)
    volume_size_gb: int | None = Field(None, ge=1, le=512)
    model_data_download_timeout_s: Timeout | None = None
    container_startup_health_check_timeout_s: Timeout | None = None
    autoscaling: Autoscaling | None = None
    log_retention_days: int | None = None
    # Each replaces the endpoint's whole block in this environment (null turns it off).
    deployment: UpdatePolicySpec | None = None
    alarms: AlarmsSpec | None = None


class EnvironmentSpec(Strict):
    """A deployment target (dev, prod, ...). Account and region default to the CLI's, as `cdk deploy` does."""

    account: str | None = Field(None, pattern=r"^[0-9]{12}$")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(?:-[a-z]+)+-[0-9]$")
    # True keeps the artifact bucket, its logs and the image repository on destroy (CDK's own default).
    retain_data: bool = True
    # After `cdk destroy` of a retaining environment its bucket and repository live on outside any stack, and
    # deploying again would fail ("already exists"). true: use them by name (preflight says when this is needed).
    adopt_kept_data: bool = False
    # The local AWS emulator (moto): names ECR repositories explicitly and leaves out Lambda-backed custom
    # resources, which the emulator cannot run.
    emulator: bool = False
    overrides: dict[str, EndpointOverride] = Field(default_factory=dict)
    # The artifact bucket's KMS key (endpoint_config/security.py); default SSE-S3.
    encryption: EnvironmentEncryption | None = None

    @model_validator(mode="after")
    def _adopt_needs_retain(self) -> EnvironmentSpec:
        if self.adopt_kept_data and not self.retain_data:
            raise ValueError(
                "adopt_kept_data: true uses a bucket and repository kept by an earlier deploy, which only "
                "retain_data: true keeps (and keeps again on destroy); set retain_data: true or drop adopt_kept_data"
            )
        if problem := adopted_bucket_key_problem(self.adopt_kept_data, self.encryption):
            raise ValueError(problem)
        return self


class SecretRef(Strict):
    """A value read from AWS Secrets Manager by CodeBuild when the build starts (never written into the template).

    secret: the secret's name or ARN, in the pipeline's account. json_key: the key when the secret is a JSON object
    (a plain-text secret needs none)."""

    secret: str = Field(pattern=SECRET_ID_PATTERN)
    json_key: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")


# CodeBuild's Linux GPU fleet offers two sizes only: small (1 x A10G/T4 class) and large (multi-GPU).
CODEBUILD_GPU_COMPUTE = ("SMALL", "LARGE")


class PipelineBuild(Strict):
    """The CodeBuild project that builds and publishes model artifacts."""

    compute: Literal["SMALL", "MEDIUM", "LARGE", "X2_LARGE"] = "LARGE"
    # A GPU build image (CodeBuild's Linux GPU fleet), for artifacts built on the GPU family they run on.
    gpu: bool = False
    # Gated or private Hugging Face models: the token huggingface_hub reads from HF_TOKEN.
    hf_token: SecretRef | None = None
    timeout_minutes: int = Field(240, ge=5, le=2160, description="CodeBuild allows 5-2160 minutes")


class PipelineImages(Strict):
    """CDK Pipelines' asset-publishing projects, which `docker build` our own containers (an own image may compile
    DeepSpeed's CUDA kernels while its image builds: large compute, long timeout)."""

    compute: Literal["SMALL", "MEDIUM", "LARGE", "X2_LARGE"] = "LARGE"
    timeout_minutes: int = Field(120, ge=5, le=2160, description="CodeBuild allows 5-2160 minutes")
    # Docker Hub rate-limits anonymous pulls per IP, and CodeBuild shares IPs: base images on Docker Hub need a login.
    # A Secrets Manager secret with the JSON keys `username` and `secret` (CDK's DockerCredential.dockerHub format).
    docker_hub_secret: str | None = Field(None, pattern=SECRET_ID_PATTERN)


class PipelineSpec(Strict):
    """Deploy through CodePipeline (CDK Pipelines): source, synth + tests, then one stage per environment."""

    connection_arn: str = Field(
        pattern=r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:[0-9]{12}:connection/[A-Za-z0-9_-]+$"
    )
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", description="owner/name")
    branch: str = Field("main", min_length=1)
    account: str | None = Field(None, pattern=r"^[0-9]{12}$")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(?:-[a-z]+)+-[0-9]$")
    stages: list[str] = Field(min_length=1, description="environments, deployed in this order")
    manual_approval_before: list[str] = Field(default_factory=list)
    build: PipelineBuild = PipelineBuild()
    images: PipelineImages = PipelineImages()


class AppConfig(Strict):
    project: str = Field("llm-endpoints", pattern=NAME_PATTERN, max_length=20)
    environments: dict[str, EnvironmentSpec] = Field(default_factory=dict)
    endpoints: list[EndpointSpec] = Field(min_length=1)
    pipeline: PipelineSpec | None = None

    @model_validator(mode="after")
    def _names(self) -> AppConfig:
        seen: set[str] = set()
        for ep in self.endpoints:
            if ep.name in seen:
                raise ValueError(f"endpoint name {ep.name!r} is used twice; endpoint names must be unique")
            seen.add(ep.name)
        for env_name, env in self.environments.items():
            if not re.match(NAME_PATTERN, env_name) or len(env_name) > 12:
                raise ValueError(
                    f"environment name {env_name!r} is not allowed: use 1-12 characters of a-z, 0-9 and '-'"
                )
            for target in env.overrides:
                if target not in seen:
                    raise ValueError(
                        f"environment {env_name!r}: overrides name endpoint {target!r}, which is not defined "
                        f"(defined: {', '.join(sorted(seen))})"
                    )
        if self.pipeline is not None:
            for key in ("stages", "manual_approval_before"):
                for env_name in getattr(self.pipeline, key):
                    if env_name not in self.environments:
                        raise ValueError(
                            f"pipeline.{key}: environment {env_name!r} is not defined "
                            f"(defined: {', '.join(self.environments) or 'none'})"
                        )
            if problems := pipeline_problems(self):
                raise ValueError("\n  - ".join(problems))
        return self


def pipeline_problems(config: AppConfig) -> list[str]:
    """The rules a `pipeline:` section adds that need no resolved environment (the pipeline's region is resolved
    at synth: deployment.pipeline_region_problems). One message per problem."""
    pipeline = config.pipeline
    if pipeline is None:
        return []
    problems = []
    if pipeline.build.gpu and pipeline.build.compute not in CODEBUILD_GPU_COMPUTE:
        problems.append(
            f"pipeline.build.compute: value {pipeline.build.compute!r} is not offered on CodeBuild's GPU fleet; "
            f"allowed with gpu: true: {', '.join(CODEBUILD_GPU_COMPUTE)}"
        )
    # Overrides cannot change artifact_hash, so every stage deploys the file's pin.
    for env_name in pipeline.stages:
        for ep in config.endpoints:
            if not ep.artifact_hash:
                problems.append(
                    f"environment {env_name!r}: endpoint {ep.name!r}: artifact_hash: required key is missing: the "
                    "pipeline synthesizes the endpoint stacks before its model build runs, so each endpoint pins its "
                    "artifact's content hash (`python -m model_build build --config ... --endpoint "
                    f"{ep.name}` prints it)"
                )
            problems += [
                f"environment {env_name!r}: endpoint {ep.name!r}: adapters[{i}].artifact_hash: required key is missing: "
                "the pipeline synthesizes before its model build runs, so each adapter pins its artifact's content hash "
                "too (`python -m model_build build` prints it)"
                for i, adapter in enumerate(ep.adapters)
                if not adapter.artifact_hash
            ]
    return problems


def pool_where(ep: EndpointSpec, index: int) -> str:
    """How a message names pool `index`: its key and instance type."""
    return f"instance_pools[{index}] ({ep.instance_pools[index].instance_type})"


def for_pool(ep: EndpointSpec, index: int, problem: str) -> str:
    """A problem found on pool `index`'s endpoint (EndpointSpec.pool_specs), said of that pool."""
    head = f"endpoint {ep.name!r}: "
    return f"{head}{pool_where(ep, index)}: {problem.removeprefix(head)}"


def each_pool_problems(ep: EndpointSpec) -> list[str]:
    """The primary's rules on every pool (the instance type, its facts, volume, tensor-parallel degree, ...), and
    that every pool runs the primary's kind of hardware: one variant has one InferenceAmiVersion (GPU, Neuron or
    none) and its model one image build (GPU or CPU)."""
    problems: list[str] = []
    for i, pool_spec in enumerate(ep.pool_specs()):
        found = endpoint_problems(pool_spec)
        problems += [for_pool(ep, i, p) for p in found]
        if not found and _hardware(pool_spec.instance) != _hardware(ep.instance):
            problems.append(
                for_pool(
                    ep,
                    i,
                    f"instance_type: value {pool_spec.instance_type!r} has {_hardware(pool_spec.instance)}, "
                    f"instance_type {ep.instance_type!r} has {_hardware(ep.instance)}; a variant's pools share one "
                    "machine image (InferenceAmiVersion) and one container build: pick a type of the same kind",
                )
            )
    return problems


def _hardware(instance: InstanceType) -> str:
    if instance.accelerators is None:
        return "no accelerator"
    return instance.non_gpu_accelerator or "NVIDIA GPUs"


def endpoint_problems(ep: EndpointSpec) -> list[str]:
    """Cross-field rules for one endpoint after environment overrides are applied. Empty list means valid."""
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    known = hosting_instance_types()
    if ep.instance_type not in known:
        close = sorted(t for t in known if t.split(".")[1:2] == ep.instance_type.split(".")[1:2])[:6]
        hint = f"; types in that family: {', '.join(close)}" if close else "; e.g. ml.g5.2xlarge, ml.m5.xlarge"
        bad("instance_type", f"value {ep.instance_type!r} is not a SageMaker hosting instance type{hint}")
        return problems  # the rules below need a real instance type

    instance = ep.instance
    if instance.unknown_reason is not None:
        # A hosting type without complete facts: guessing "CPU only" would pick the wrong image and skip the checks.
        bad("instance_type", f"value {ep.instance_type!r} is refused: {instance.unknown_reason}")
        return problems  # the rules below need the instance's facts
    if ep.volume_size_gb is not None and instance.has_local_nvme:
        bad(
            "volume_size_gb",
            f"value {ep.volume_size_gb} is not allowed on {ep.instance_type}: it has local NVMe storage, so "
            "SageMaker refuses VolumeSizeInGB; remove the key (or set null)",
        )
    tp = ep.tensor_parallel_degree
    if tp > 1 and not instance.is_gpu:
        bad("tensor_parallel_degree", f"value {tp} needs a GPU instance; {ep.instance_type} has no GPU (use 1)")
    elif instance.is_gpu and instance.gpu_count % tp:
        divisors = [d for d in range(1, instance.gpu_count + 1) if instance.gpu_count % d == 0]
        bad(
            "tensor_parallel_degree",
            f"value {tp} does not divide the {instance.gpu_count} GPUs of {ep.instance_type}; "
            f"allowed: {', '.join(map(str, divisors))}",
        )
    if ep.log_retention_days not in LOG_RETENTION_DAYS:
        bad(
            "log_retention_days",
            f"value {ep.log_retention_days} is not a CloudWatch Logs retention; allowed: "
            f"{', '.join(map(str, LOG_RETENTION_DAYS))}",
        )
    if ep.autoscaling is not None:
        a = ep.autoscaling
        if a.min_capacity > a.max_capacity:
            bad("autoscaling", f"min_capacity {a.min_capacity} is above max_capacity {a.max_capacity}")
        elif not a.min_capacity <= ep.instance_count <= a.max_capacity:
            bad(
                "instance_count",
                f"value {ep.instance_count} is outside autoscaling's range "
                f"{a.min_capacity}-{a.max_capacity}; the initial count must lie within it",
            )
    if ep.hub_token_secret is not None and (not is_hub_id(ep.model) or is_directory(ep.model)):
        bad(
            "hub_token_secret",
            f"value {ep.hub_token_secret!r} is for a Hugging Face Hub model, whose weights a staging job fetches; "
            f"model {ep.model!r} is a local directory, built from the workstation: remove hub_token_secret",
        )
    problems.extend(invocation_problems(ep))
    problems.extend(operations_problems(ep, instance))
    problems.extend(security_problems(ep, instance))
    problems.extend(hosting_problems(ep, instance))
    problems.extend(slo_problems(ep))
    problems.extend(chat_problems(ep))
    problems.extend(adapter_problems(ep))
    problems.extend(routing_problems(ep))
    problems.extend(pool_problems(ep))
    if not problems:
        problems.extend(each_pool_problems(ep))
    # The rules that need the serving system's facts (what it serves, on what hardware) are systems.checks';
    # deployment.load_config runs them after these pass.
    return problems
