"""What one endpoint becomes on AWS, resolved once from its config entry, its serving system and its built artifact.

Stacks, preflight, publish, smoke, clean, the pipeline and the CLI read an EndpointPlan instead of deriving from the
raw config again. Account and region stay late-bound: the bucket is a function of them (CDK tokens at synth, real
values in the CLI). Why a plan and how `instance_type` travels from YAML to CloudFormation: docs/design/plan.md.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import request_contract
from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError
from chat_contract import ChatFeatures
from endpoint_config import (
    BYTES_PER_PARAM,
    ConfigError,
    EndpointSpec,
    artifact_bucket_name,
    artifact_prefix,
    artifact_root,
)
from endpoint_config.hosting import (
    ComputeRequirements,
    InstanceScaling,
    accelerators_per_copy,
    component_name,
    copy_range,
)
from endpoint_config.invocation import INPUT_RETENTION_DAYS, async_location_uris, async_prefixes, split_s3_path
from endpoint_config.operations import (
    AlarmsSpec,
    Rolling,
    UpdatePolicySpec,
    component_deployment_warning,
    resolved_alarms,
    resolved_update_policy,
)
from endpoint_config.schema import for_pool
from endpoint_config.security import network_isolation
from endpoint_config.slo import ManagedBenchmark, benchmark_role_name, managed_benchmark, results_prefix
from endpoint_runtime import bodies
from facts.instances import InstanceType
from facts.models import model_facts
from systems import ServingSystem
from systems.base import EngineOptions, OwnContainer
from systems.checks import unsized_model_warning
from systems.images import ImagePin
from systems.sizing import Sizing

if TYPE_CHECKING:
    from endpoint_config import Autoscaling
    from endpoint_config.chat import ChatSpec, OpenAIRouteSpec
    from endpoint_config.engine_metrics import EngineAlarm, EngineMetrics
    from endpoint_config.hosting import CopyScaling
    from endpoint_config.invocation import Invocation
    from endpoint_config.model_source import HubModelSource
    from endpoint_config.pools import Capacity
    from endpoint_config.routing import Routing
    from endpoint_config.schema import InvokeFunctionSpec
    from endpoint_config.security import DataCapture, Network
    from endpoint_config.slo import Slo
    from endpoint_config.streaming import StreamingSpec

    from .adapters import AdapterPlan

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where `model_build build` writes each endpoint's artifact (build/<endpoint>/), and where synth and the CLI read it.
BUILD_ROOT = REPO_ROOT / "build"
UNBUILT_HASH = "0" * 64
# How long SageMaker lets one request run in the container (botocore sagemaker-runtime 2017-05-13): InvokeEndpoint
# "A customer's model containers must respond to requests within 60 seconds"; InvokeEndpointAsync
# InvocationTimeoutSeconds "The default is 15 minutes, or 900 seconds" (1-3600).
REAL_TIME_INVOCATION_TIMEOUT_S = 60
ASYNC_DEFAULT_INVOCATION_TIMEOUT_S = 900
# The documented scale-from-zero alarm of an asynchronous endpoint (SageMaker DG "Autoscale an asynchronous endpoint",
# async-inference-autoscale.html: HasBacklogWithoutCapacity, Period 60, EvaluationPeriods 2); stacks/async_inference.py
# builds it with these.
SCALE_FROM_ZERO_ALARM_PERIOD_S = 60
SCALE_FROM_ZERO_ALARM_EVALUATION_PERIODS = 2


@dataclass(frozen=True)
class ArtifactRef:
    """Which published artifact an endpoint serves: its content hash (which names its S3 prefix), where that came
    from ("config": the artifact_hash pin, "manifest": the local build, "unbuilt": none, a placeholder for review;
    "unusable": a local build that cannot be deployed), and its size when the manifest is at hand (it sizes the
    timeouts). `problem`: why there is nothing to deploy. The plan resolves either way, so that `model_build build`
    can (re)build it; what deploys the artifact asks `EndpointPlan.deployable_artifact`."""

    content_hash: str
    source: str
    total_bytes: int | None = None
    problem: str | None = None

    @property
    def is_placeholder(self) -> bool:
        return self.source == "unbuilt"

    @property
    def from_hub(self) -> bool:
        """A JumpStart / private-hub model: nothing of ours to build, publish or check in the artifact bucket."""
        return self.source == "hub"


def resolve_artifact(spec: EndpointSpec, build_root: Path) -> ArtifactRef:
    """From the config's `artifact_hash`, else `<build_root>/<name>/manifest.json`, else the unbuilt placeholder. A
    hub model (`model_source:`) has no artifact of ours: source "hub", named by a hash of its ARN and S3 prefix (which
    keys the load-test results and the like as a content hash would)."""
    if spec.model_source is not None:
        identity = f"hub\0{spec.model_source.hub_content_arn}\0{spec.model_source.s3_uri}".encode()
        return ArtifactRef(hashlib.sha256(identity).hexdigest(), "hub")
    if spec.artifact_hash:
        return ArtifactRef(spec.artifact_hash, "config")
    manifest_path = build_root / spec.name / MANIFEST_NAME
    if not manifest_path.is_file():
        return ArtifactRef(
            UNBUILT_HASH,
            "unbuilt",
            problem=(
                f"endpoint {spec.name!r}: no built artifact ({manifest_path} does not exist). Build it with "
                f"`python -m model_build build --config CONFIG --endpoint {spec.name}`, pin a published one with "
                "`artifact_hash:`, or synthesize for review only with `-c allow_unbuilt=true`"
            ),
        )
    try:
        manifest = Manifest.load(manifest_path)
    except ManifestError as err:
        return ArtifactRef(UNBUILT_HASH, "unusable", problem=f"endpoint {spec.name!r}: {err}; rebuild it")
    for key, have, want in (("system", manifest.system, spec.system), ("dtype", manifest.dtype, spec.dtype)):
        if have != want:
            return ArtifactRef(
                manifest.content_hash,
                "unusable",
                manifest.total_bytes,
                problem=(
                    f"endpoint {spec.name!r}: the built artifact in {manifest_path.parent} has {key} {have!r} but the "
                    f"config says {want!r}; rebuild with `python -m model_build build --config ... --endpoint {spec.name}`"
                ),
            )
    if len(manifest.content_hash) != 64:
        return ArtifactRef(
            UNBUILT_HASH, "unusable", problem=f"endpoint {spec.name!r}: {manifest_path} has no content_hash; rebuild it"
        )
    return ArtifactRef(manifest.content_hash, "manifest", manifest.total_bytes)


@dataclass(frozen=True)
class ModelData:
    """Where the artifact is: an uncompressed S3 prefix (default) or one model.tar.gz under that prefix.
    read_prefix: what the execution role may read, the endpoint's whole artifact root (models/<endpoint>/): during a
    blue/green update the old fleet still reads its own content-addressed prefix while the role's policy already
    names the new model, and the DJL S3 recipes' engines read staged weights beside the model data."""

    bucket_name: str
    prefix: str  # ends with "/"
    compressed: bool = False
    read_prefix: str | None = None
    # A hub model's (model_source:): S3DataSource.HubAccessConfig.HubContentArn, and ModelAccessConfig.AcceptEula
    # (rendered only when the config says accept_eula: true).
    hub_content_arn: str | None = None
    accept_eula: bool = False

    def __post_init__(self) -> None:
        if not self.prefix.endswith("/"):
            raise ValueError(f"model data prefix {self.prefix!r} must end with '/'")
        if not self.prefix.startswith(self.readable_prefix):
            raise ValueError(
                f"model data prefix {self.prefix!r} lies outside the readable prefix {self.readable_prefix!r}"
            )

    @property
    def readable_prefix(self) -> str:
        return self.read_prefix or self.prefix

    @property
    def s3_uri(self) -> str:
        key = f"{self.prefix}model.tar.gz" if self.compressed else self.prefix
        return f"s3://{self.bucket_name}/{key}"


def system_endpoint_body(system: ServingSystem) -> bodies.EndpointBody:
    """How a system's container takes a prompt and answers (its ContainerBodies): one prompt's body kind, the
    assistant message's reasoning field, the contract's parameters it does not read."""
    facet = system.bodies
    return bodies.EndpointBody(facet.prompt_kind, facet.reasoning_field, facet.unread_parameters)


@dataclass(frozen=True)
class SmokeSettings:
    """What the post-deploy smoke test sends and how long the answer may take (smoke_test:, by invocation mode).
    wake_budget_ms: an asynchronous endpoint that scales to zero (autoscaling.min_capacity 0) keeps 0 instances
    across an update (RetainAllVariantProperties keeps the scaled DesiredInstanceCount), so right after a deploy the
    prompt may wait for a scale-up from zero: the time the smoke test allows then (None: it never runs 0)."""

    prompt: str
    max_new_tokens: int
    latency_budget_ms: int
    wake_budget_ms: int | None = None
    # The chat check (endpoint_runtime/smoke.py chat_check): through the route the endpoint's clients use,
    # "openai" (SageMaker's OpenAI route, chat.openai_route) or "invoke" (InvokeEndpoint, as the invoke function
    # sends it); None: the endpoint serves no chat. chat_tools: also a tool call (a tool-call parser is configured).
    chat_route: str | None = None
    chat_tools: bool = False
    # How the container takes the prompt and answers (EndpointPlan.endpoint_body): its body kind, the assistant
    # message's reasoning field (a chat reply that is all reasoning still shows the model answered), what it ignores.
    body: bodies.EndpointBody = bodies.EndpointBody()
    # The chat check's extra request fields: the engine's way to answer without reasoning first (ContainerBodies).
    chat_extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class QuotaNeed:
    """Endpoint instances of one type the account must be allowed at once: `steady`, the most the endpoint runs
    (instance_count, autoscaling's max_capacity, or an inference-component endpoint's max_instances), plus `update`,
    what an update adds while both fleets run. `basis` says how each was found."""

    instance_type: str
    steady: int
    update: int
    basis: str

    @property
    def peak(self) -> int:
        return self.steady + self.update


def quota_need(spec: EndpointSpec) -> QuotaNeed:
    """The one computation of an endpoint's instance peak (preflight's quota check and the docs use it).

    Inference components: managed instance scaling never runs more than hosting.instance_scaling.max_instances, model
    updates included (they replace copies within that fleet). Otherwise the steady fleet is autoscaling's
    max_capacity (or instance_count), and an update adds: blue/green (the default, also with `deployment: null`),
    a whole new fleet ("SageMaker AI provisions a new fleet with the updates (the green fleet)", SageMaker DG,
    "Blue/Green Deployments"); rolling, one batch ("Batch size for each rolling step to provision capacity ... on the
    new endpoint fleet"), or on rollback the rollback batch, by default the whole old fleet at once
    (RollingUpdatePolicy.RollbackMaximumBatchSize: "If this field is absent, the default value will be set to 100% of
    total capacity", botocore's SageMaker service model and the CloudFormation reference)."""
    if spec.hosting.uses_components:
        scaling = spec.hosting.instance_scaling or InstanceScaling()
        return QuotaNeed(
            spec.instance_type,
            scaling.max_instances,
            0,
            "hosting.instance_scaling.max_instances; updates stay within it",
        )
    steady = spec.autoscaling.max_capacity if spec.autoscaling is not None else spec.instance_count
    where = "autoscaling.max_capacity" if spec.autoscaling is not None else "instance_count"
    policy = spec.deployment.policy if spec.deployment is not None else None
    if isinstance(policy, Rolling):
        forward = policy.maximum_batch_size.instances_of(steady)
        rollback = (
            policy.rollback_maximum_batch_size.instances_of(steady)
            if policy.rollback_maximum_batch_size is not None
            else steady
        )
        update = max(forward, rollback)
        how = f"a rolling batch of {forward}, or {rollback} on rollback" + (
            ""
            if policy.rollback_maximum_batch_size is not None
            else " (rollback_maximum_batch_size unset: the whole fleet)"
        )
        return QuotaNeed(spec.instance_type, steady, update, f"{where} {steady} + {how}")
    return QuotaNeed(
        spec.instance_type, steady, steady, f"{where} {steady} + a blue/green update's new fleet of {steady}"
    )


def pool_quota_need(primary: QuotaNeed, instance_type: str, priority: int) -> QuotaNeed:
    """An instance pool's quota need: the primary's whole peak. SageMaker falls back to a pool "until the required
    number of instances is provisioned" (SageMaker DG, "Deploy to multiple instance types with instance pools"), so
    the whole fleet, and an update's new fleet, may land on any one pool."""
    return replace(
        primary,
        instance_type=instance_type,
        basis=f"{primary.basis}; instance pool priority {priority}: the whole fleet may fall back to it",
    )


@dataclass(frozen=True)
class PoolPlan:
    """One of instance_pools, resolved as the endpoint on that instance type alone (EndpointSpec.pool_specs): its
    priority (2-5: instance_type is 1), tensor-parallel degree, engine options, model copies per instance, machine
    image and quota need. `own_model`: the container environment the engine reads its settings from (the
    tensor-parallel degree, ...) or the image differs from the primary's, so the pool gets its own SageMaker model
    (InstancePool.ModelNameOverride); otherwise it runs the variant's model."""

    priority: int
    spec: EndpointSpec
    engine: EngineOptions
    model_copies: int
    inference_ami_version: str | None
    image_tag: str | None  # the pinned image's tag on this type (None: an own container)
    own_model: bool
    quota: QuotaNeed

    @property
    def instance_type(self) -> str:
        return self.spec.instance_type

    @property
    def tensor_parallel_degree(self) -> int:
        return self.spec.tensor_parallel_degree


@dataclass(frozen=True)
class EndpointPlan:
    """One endpoint in one environment, resolved. `spec` keeps the config entry; every derived fact is a field or
    property here, and what the stacks render (a config block as it is, or a value derived from several) is a named
    property of the group "what the stacks render" (the stacks never read `spec`: tests/test_architecture.py)."""

    spec: EndpointSpec
    system: ServingSystem
    project: str
    environment_name: str
    endpoint_name: str  # the SageMaker endpoint's name
    stack_name: str
    emulator: bool
    artifact: ArtifactRef
    engine: EngineOptions  # an instance of the system's own options class (ServingSystem.engine_options)
    model_copies: int
    download_timeout_s: int
    startup_timeout_s: int
    network_isolation: bool
    inference_ami_version: str | None
    component_name: str | None  # hosting.mode inference-components: the one component's name
    quota: QuotaNeed
    unsized_warning: str | None
    # config.json's max_position_embeddings for an engine's own server (None: unknown or not one), read while the
    # config loads: a Hub model planned from its metadata is known only then (facts/models.py planning_with).
    model_positions: int | None = None
    # LoRA adapters, each an adapter inference component on `component_name` (deployment/adapters.py).
    adapters: tuple[AdapterPlan, ...] = ()
    # instance_pools, in priority order after instance_type (endpoint_config/pools.py).
    pools: tuple[PoolPlan, ...] = ()
    # The volume and timeouts from the model's bytes, and what SageMaker's limits refuse (systems/sizing.py).
    sizing: Sizing | None = None

    @property
    def instance_types(self) -> tuple[tuple[str, int], ...]:
        """With instance pools, each instance type the variant may run, instance_type first, with its NVIDIA GPUs
        (the alarms and dashboard per instance type); () without pools."""
        if not self.pools:
            return ()
        return ((self.spec.instance_type, self.instance.gpu_count),) + tuple(
            (p.instance_type, p.spec.instance.gpu_count) for p in self.pools
        )

    @property
    def fewest_copies(self) -> int:
        """The fewest model copies an instance of the variant serves, over its pools: the scaling target's multiplier
        (a fleet fallen back to a type of fewer copies would otherwise run each copy above its target)."""
        return min([self.model_copies, *(p.model_copies for p in self.pools)])

    @property
    def quotas(self) -> tuple[QuotaNeed, ...]:
        """The instances the account must be allowed of each instance type the variant may run: instance_type's and
        every pool's (preflight's quota check)."""
        return (self.quota, *(pool.quota for pool in self.pools))

    @property
    def name(self) -> str:
        """The endpoint's name in the config (the stack's and the artifact's key)."""
        return self.spec.name

    def deployable_artifact(self, *, allow_unbuilt: bool = False) -> ArtifactRef:
        """The artifact to deploy; ConfigError when there is none to deploy (unbuilt, or built for another system or
        dtype). `allow_unbuilt`: an unbuilt one is the placeholder, for reviewing a template (synth warns)."""
        artifact = self.artifact
        if artifact.problem is not None and not (allow_unbuilt and artifact.is_placeholder):
            raise ConfigError(artifact.problem)
        return artifact

    @property
    def instance(self) -> InstanceType:
        return self.spec.instance

    @property
    def is_async(self) -> bool:
        return self.spec.invocation.is_async

    @property
    def image(self) -> ImagePin | None:
        """The pinned AWS image (None for an image built from this repository: `own_container`)."""
        return self.system.image

    @property
    def own_container(self) -> OwnContainer | None:
        return self.system.own_container

    @property
    def image_tag(self) -> str | None:
        """The pinned image's tag for this instance (GPU or CPU build); None for an own container."""
        pin = self.system.image
        if pin is None:
            return None
        tag = pin.gpu_tag if self.instance.is_gpu else pin.cpu_tag
        if tag is None:
            raise ConfigError(
                f"endpoint {self.name!r}: system {self.system.name!r} offers no CPU image; choose a GPU instance type"
            )
        return tag

    # ---- the artifact in S3 ------------------------------------------------------------------------------------

    @property
    def artifact_root(self) -> str:
        """Key prefix of every artifact of this endpoint (models/<endpoint>/)."""
        return artifact_root(self.name)

    @property
    def artifact_prefix(self) -> str:
        """Key prefix of the artifact this plan deploys (models/<endpoint>/<content hash>/)."""
        return artifact_prefix(self.name, self.artifact.content_hash)

    @property
    def manifest_key(self) -> str:
        """The published manifest's key: its presence marks a complete artifact (written last by publish)."""
        return self.artifact_prefix + MANIFEST_NAME

    def artifact_bucket(self, account: str, region: str) -> str:
        return artifact_bucket_name(self.project, self.environment_name, account, region)

    @property
    def model_data_mode(self) -> str:
        """model_data: how the artifact is published, "s3-prefix" (its files) or "tar-gz" (one model.tar.gz)."""
        return self.spec.model_data

    def model_data(self, bucket: str) -> ModelData:
        """SageMaker's model data: the artifact's prefix (or its code/ part, for an engine that reads its weights
        from S3 itself), readable up to the endpoint's artifact root; a hub model's S3 prefix (model_source:)."""
        source = self.spec.model_source
        if source is not None:
            return ModelData(
                source.bucket, source.prefix, hub_content_arn=source.hub_content_arn, accept_eula=source.accept_eula
            )
        if self.system.staged_weights_environment is not None:
            return ModelData(bucket, f"{self.artifact_prefix}code/", read_prefix=self.artifact_root)
        if self.system.streamed_weights is not None and self.system.streams_weights(self.engine):
            part = self.system.streamed_weights.model_data_part
            return ModelData(bucket, f"{self.artifact_prefix}{part}", read_prefix=self.artifact_root)
        return ModelData(
            bucket, self.artifact_prefix, compressed=self.spec.model_data == "tar-gz", read_prefix=self.artifact_root
        )

    @property
    def served_model_names(self) -> tuple[str, ...]:
        """The `model` values the endpoint's engine answers: the SageMaker endpoint's name (what clients of SageMaker's
        OpenAI route send, the name in its URL) and the config's name."""
        return tuple(dict.fromkeys((self.endpoint_name, self.spec.name)))

    def container_environment(self, bucket: str, pool: PoolPlan | None = None) -> dict[str, str]:
        """The model container's environment on instance_type, or on `pool`'s instance type (its own engine
        settings: the tensor-parallel degree, ...)."""
        spec, engine = (pool.spec, pool.engine) if pool is not None else (self.spec, self.engine)
        environment = self.system.environment(spec, engine)
        if self.system.served_names_environment is not None:
            environment = {**environment, **self.system.served_names_environment(self.served_model_names)}
        if self.system.staged_weights_environment is not None:
            environment = {
                **environment,
                **self.system.staged_weights_environment(f"s3://{bucket}/{self.artifact_prefix}weights/"),
            }
        if self.system.request_timeout is not None:  # the container's own request timeout, tied to the invocation's
            environment = {
                **environment,
                **self.system.request_timeout.environment(self.invocation_timeout_s, self.startup_timeout_s),
            }
        if self.system.streamed_weights is not None and self.system.streams_weights(engine):
            environment = {
                **environment,
                **self.system.streamed_weights.environment(spec, f"s3://{bucket}/{self.artifact_prefix}"),
            }
        return environment

    @property
    def invocation_timeout_s(self) -> int:
        """The longest one request may run in the container: an asynchronous endpoint's invocation_timeout_s (which
        the invoke function sends) or SageMaker's 900 s default; a real-time one SageMaker's 60 s, or the streaming
        function's timeout when it streams (the longest a stream lasts through the front door)."""
        if self.is_async:
            return self.spec.invocation.invocation_timeout_s or ASYNC_DEFAULT_INVOCATION_TIMEOUT_S
        if self.spec.streaming.enabled:
            return max(REAL_TIME_INVOCATION_TIMEOUT_S, self.spec.streaming.timeout_s)
        return REAL_TIME_INVOCATION_TIMEOUT_S

    # ---- how clients and checks reach it ------------------------------------------------------------------------

    def async_locations(self, bucket: str) -> dict[str, str] | None:
        """An asynchronous endpoint's s3:// input, output and failure folders (None for a real-time endpoint)."""
        if not self.is_async:
            return None
        return async_location_uris(self.spec.invocation, endpoint_name=self.endpoint_name, artifact_bucket=bucket)

    def async_folders(self, bucket: str) -> dict[str, tuple[str, str]] | None:
        """async_locations as (bucket, key prefix) pairs, the form the stack grants and configures (None: real-time)."""
        uris = self.async_locations(bucket)
        return None if uris is None else {key: split_s3_path(uri) for key, uri in uris.items()}

    @property
    def smoke(self) -> SmokeSettings:
        smoke = self.spec.smoke_test
        budget = smoke.budget_ms(self.spec.invocation.mode)
        wake = None
        if self.is_async and self.spec.autoscaling is not None and self.spec.autoscaling.min_capacity == 0:
            # The scale-from-zero alarm, then the longest SageMaker lets the new instance take to download the model
            # and pass its health check (the endpoint's own timeouts), then the latency budget itself (instance
            # launch, queueing, the generation; how long a launch takes is not documented).
            alarm_s = SCALE_FROM_ZERO_ALARM_PERIOD_S * SCALE_FROM_ZERO_ALARM_EVALUATION_PERIODS
            wake = budget + 1000 * (alarm_s + self.download_timeout_s + self.startup_timeout_s)
        chat = self.spec.chat
        route = None if not chat else ("openai" if chat.openai_route is not None else "invoke")
        tools = bool(chat) and self.system.chat.route == "native" and self.chat_features.tool_calls
        return SmokeSettings(
            smoke.prompt,
            smoke.max_new_tokens,
            budget,
            wake,
            chat_route=route,
            chat_tools=tools,
            body=self.endpoint_body,
            chat_extra=self.system.bodies.thinking_off,
        )

    @property
    def prompt_body(self) -> str:
        """The body kind one prompt travels in to this endpoint's container (ContainerBodies.prompt_kind): every
        client that sends a prompt (smoke test, SLO gate, load test, invoke and stream functions, demo) builds it
        with endpoint_runtime/bodies.py."""
        return self.system.bodies.prompt_kind

    @property
    def endpoint_body(self) -> bodies.EndpointBody:
        """How this endpoint's container takes a prompt and answers (the system's ContainerBodies): what every
        workstation client passes to the front doors' code, and what the stack renders for the functions."""
        return system_endpoint_body(self.system)

    @property
    def chat_features(self) -> ChatFeatures:
        """What the front doors know of the endpoint's chat (chat_contract.CHAT_ENV): nothing without a chat: block,
        else the system's route, whether tool calls are parsed (the engine's parser) and constrained decoding."""
        if not self.spec.chat:
            return ChatFeatures()
        chat = self.system.chat
        return ChatFeatures(
            chat.route,
            chat.parses_tool_calls(self.engine),
            chat.constrained_decoding,
            engine_keys=chat.engine_server,
            engine_limits=chat.engine_server,
        )

    @property
    def engine_context_length(self) -> int | None:
        """For an engine's own OpenAI server (ChatCapability.engine_server), the longest sequence it serves: its
        max_model_len option, else the model's max_position_embeddings (config.json); None when unknown or when
        the container is not an engine's server. The front doors cap max_tokens at it (front_door_environment)."""
        if not self.system.chat.engine_server:
            return None
        context = self.system.profile(self.spec, self.engine).max_model_len if self.system.profile is not None else None
        if context is None:
            context = self.model_positions
        return context

    @property
    def front_door_environment(self) -> dict[str, str]:
        """What the invoke and stream functions need (the stack sets it): the request limits the container applies
        (request_contract.LIMIT_ENV in its environment) or, for an engine's own OpenAI server, its context length's,
        and a batch no larger than the prompts its container reads from one body (ContainerBodies.prompts_per_body);
        the endpoint's chat features (chat_contract.CHAT_ENV); and the body a prompt travels in with its reasoning
        field (endpoint_runtime/bodies.py reads them back)."""
        container = self.system.environment(self.spec, self.engine)
        limits = {k: v for k, v in container.items() if k in request_contract.LIMIT_ENV}
        if self.system.chat.engine_server:
            high = 1_000_000  # request_contract.limits()'s highest MAX_NEW_TOKENS
            limits[request_contract.ENV_MAX_NEW_TOKENS] = str(min(self.engine_context_length or high, high))
            limits[request_contract.ENV_MAX_INPUT_CHARS] = str(bodies.ENGINE_MAX_INPUT_CHARS)
        one_body = self.system.bodies.prompts_per_body
        if one_body is not None:  # a container that reads fewer prompts a body than the contract's batch
            batch = int(limits.get(request_contract.ENV_MAX_BATCH_SIZE, request_contract.DEFAULT_MAX_BATCH_SIZE))
            limits[request_contract.ENV_MAX_BATCH_SIZE] = str(min(batch, one_body))
        return {
            **limits,
            **self.chat_features.environment(),
            **self.endpoint_body.environment(),
        }

    @property
    def copy_range(self) -> tuple[int, int]:
        """The fewest and most copies of the inference component (the dashboard's range); (0, 0) without one."""
        return copy_range(self.spec.hosting) if self.component_name is not None else (0, 0)

    @property
    def alarms(self) -> AlarmsSpec | None:
        """`alarms:` as the stack creates them (operations.resolved_alarms: async latency, data capture's disk)."""
        return resolved_alarms(self.spec)

    @property
    def update_policy(self) -> UpdatePolicySpec | None:
        """`deployment:` as the stack applies it (operations.resolved_update_policy): on an inference-component endpoint
        the component's rolling update, or None when none applies (update_policy_warning says why)."""
        return resolved_update_policy(self.spec)

    @property
    def update_policy_warning(self) -> str | None:
        return component_deployment_warning(self.spec)

    @property
    def loadtest_prefix(self) -> str:
        """Where the SLO gate keeps its results in the artifact bucket: loadtest/<endpoint>/<content hash>/."""
        return results_prefix(self.name)

    @property
    def managed_benchmark(self) -> ManagedBenchmark | None:
        """slo.managed_benchmark: the AIWorkloadConfig of the gate's workload (endpoint_config/slo.py)."""
        return managed_benchmark(
            self.spec.slo,
            endpoint_name=self.endpoint_name,
            streaming=self.system.streaming.supported,
            model=self.spec.model,
        )

    @property
    def benchmark_role_name(self) -> str:
        """The fixed name of the role SageMaker assumes for the managed benchmark (endpoint_config.slo
        benchmark_role_name: <project>-<env>-<endpoint>-benchmark, cut to IAM's 64 characters)."""
        return benchmark_role_name(self.project, self.environment_name, self.name)

    @property
    def async_expiry(self) -> tuple[tuple[str, str, int], ...]:
        """An asynchronous endpoint's expiring folders of the artifact bucket, each (what, key prefix ending in "/",
        days): its request payloads after INPUT_RETENTION_DAYS, its answers and failures after
        invocation.result_retention_days when set; () for a real-time endpoint. The trailing "/" keeps another
        endpoint whose name starts the same out."""
        if not self.is_async:
            return ()
        prefixes = async_prefixes(self.endpoint_name)
        expiry = [("input", f"{prefixes['input']}/", INPUT_RETENTION_DAYS)]
        days = self.spec.invocation.result_retention_days
        if days is not None:
            expiry += [(key, f"{prefixes[key]}/", days) for key in ("output", "failure")]
        return tuple(expiry)

    @property
    def instance_range(self) -> tuple[int, int]:
        """The fewest and most instances the endpoint can run (the dashboard's scaling range)."""
        if self.spec.hosting.uses_components:
            scaling = self.spec.hosting.instance_scaling or InstanceScaling()
            return scaling.min_instances, scaling.max_instances
        if self.spec.autoscaling is not None:
            return self.spec.autoscaling.min_capacity, self.spec.autoscaling.max_capacity
        return self.spec.instance_count, self.spec.instance_count

    # ---- what the stacks render: the config's blocks and values, and the facts derived from them -----------------
    # stacks/ and app.py read these, never `spec` (tests/test_architecture.py): a block as the config gives it (chat
    # as served: chat_by_default), a value the stacks compute from several once here.

    @property
    def instance_type(self) -> str:
        return self.spec.instance_type

    @property
    def instance_count(self) -> int:
        """The instances a model on the variant starts with (InitialInstanceCount)."""
        return self.spec.instance_count

    @property
    def model_source(self) -> HubModelSource | None:
        """model_source: a JumpStart / private-hub model SageMaker reads from the hub's S3 prefix (None: our artifact)."""
        return self.spec.model_source

    @property
    def model(self) -> str:
        """model: a Hugging Face Hub id or a local directory."""
        return self.spec.model

    @property
    def revision(self) -> str | None:
        """revision: the Hub revision the model is read at (None: the default branch)."""
        return self.spec.revision

    @property
    def converts_hub_model(self) -> bool:
        """Whether its recipe converts weights it downloads from the Hub (a system that does not serve the
        checkpoint's own files, a Hub id for a model): `model_build build --in-account` runs it in the account
        (stacks/recipe_build.py)."""
        from artifact.source import hub_model_id

        return (
            self.spec.model_source is None
            and not self.system.plain_checkpoint.supported
            and hub_model_id(self.spec.model) is not None
        )

    @property
    def hub_token_secret(self) -> str | None:
        """The Secrets Manager secret holding the Hub token the staging job reads for a gated model, or None."""
        return self.spec.hub_token_secret

    @property
    def volume_size_gb(self) -> int | None:
        """VolumeSizeInGB: the config's, else sized from the model data on a type without local NVMe (None:
        SageMaker's own, or the instance's NVMe storage)."""
        return self.sizing.volume_gb if self.sizing is not None else self.spec.volume_size_gb

    @property
    def tensor_parallel_degree(self) -> int:
        return self.spec.tensor_parallel_degree

    @property
    def log_retention_days(self) -> int:
        """The retention of every log group of the endpoint (its own, its functions', its VPC's flow log)."""
        return self.spec.log_retention_days

    @property
    def routing(self) -> Routing:
        return self.spec.routing

    @property
    def invocation(self) -> Invocation:
        return self.spec.invocation

    @property
    def autoscaling(self) -> Autoscaling | None:
        return self.spec.autoscaling

    @property
    def scales_instances(self) -> bool:
        """Whether something other than the template changes the instance count once deployed: autoscaling, or the
        managed instance scaling of an inference-component endpoint (an update then keeps the count it has)."""
        return self.spec.autoscaling is not None or self.component_name is not None

    @property
    def capacity(self) -> Capacity | None:
        return self.spec.capacity

    @property
    def engine_metrics(self) -> EngineMetrics:
        return self.spec.engine_metrics

    @property
    def engine_alarm(self) -> EngineAlarm | None:
        """engine_metrics.engine_alarm: the engine saturation alarm's thresholds (None: no alarm)."""
        return self.spec.engine_metrics.engine_alarm

    @property
    def streaming(self) -> StreamingSpec:
        return self.spec.streaming

    @property
    def invoke_function(self) -> InvokeFunctionSpec:
        return self.spec.invoke_function

    @property
    def chat(self) -> ChatSpec | None:
        """`chat:` as served (chat_by_default resolved an unset or false one): None, the endpoint serves no chat."""
        return self.spec.chat or None

    @property
    def openai_route(self) -> OpenAIRouteSpec | None:
        """chat.openai_route: who may call SageMaker's OpenAI route (None: no such block, or no chat)."""
        return self.spec.chat.openai_route if self.spec.chat else None

    @property
    def slo(self) -> Slo | None:
        return self.spec.slo

    @property
    def network(self) -> Network | None:
        return self.spec.network

    @property
    def creates_vpc(self) -> bool:
        """network.create_vpc: the endpoint stack creates the VPC the endpoint (and its functions) run in."""
        return self.spec.network is not None and self.spec.network.create_vpc

    @property
    def data_capture(self) -> DataCapture | None:
        return self.spec.data_capture

    def capture_destination(self, bucket: str) -> tuple[str, str] | None:
        """data_capture's bucket and key prefix: its destination, else under `bucket` (None: no data capture)."""
        capture = self.spec.data_capture
        return capture.destination_parts(bucket, self.name) if capture is not None else None

    @property
    def volume_kms_key(self) -> str | None:
        """encryption.volume_key: the key of the instances' storage volumes (EndpointConfig KmsKeyId)."""
        return self.spec.encryption.volume_key if self.spec.encryption is not None else None

    @property
    def async_output_key(self) -> str | None:
        """encryption.async_output_key: the key of an asynchronous endpoint's results."""
        return self.spec.encryption.async_output_key if self.spec.encryption is not None else None

    @property
    def copy_compute(self) -> ComputeRequirements:
        """hosting.compute: what one copy of the inference component asks for (the defaults when not given)."""
        return self.spec.hosting.compute or ComputeRequirements()

    @property
    def accelerators_per_copy(self) -> int:
        """The GPUs one copy of the inference component gets (endpoint_config/hosting.py accelerators_per_copy)."""
        return accelerators_per_copy(self.spec, self.instance)

    @property
    def component_copies(self) -> int:
        """hosting.copies: the inference component's copies at deploy time."""
        return self.spec.hosting.copies

    @property
    def copy_scaling(self) -> CopyScaling | None:
        return self.spec.hosting.copy_scaling

    # ---- end of what the stacks render ----------------------------------------------------------------------------


# The longest bucket name S3 allows ("Bucket names can be between 3 and 63 characters long", S3 User Guide, "General
# purpose bucket naming rules"): a plan's environment is measured with it, since the real name is late-bound.
LONGEST_BUCKET_NAME = "b" * 63


@functools.lru_cache(maxsize=1)
def container_environment_limits() -> dict[str, int]:
    """CreateModel's limits on a container's environment, read from botocore's SageMaker service model (the one the
    CLI and the stacks' SDK call with): EnvironmentKey and EnvironmentValue max (bytes), EnvironmentMap max
    entries; and the combined size its documentation gives ("The maximum length of all keys and values in the map,
    combined, is 32 KB": ContainerDefinition.Environment)."""
    import re

    import botocore.loaders

    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    shapes = model["shapes"]
    documented = shapes["ContainerDefinition"]["members"]["Environment"]["documentation"]
    combined = re.search(r"combined, is (\d+) KB", documented)
    return {
        "key": shapes["EnvironmentKey"]["max"],
        "value": shapes["EnvironmentValue"]["max"],
        "entries": shapes["EnvironmentMap"]["max"],
        "combined": int(combined.group(1)) * 1024 if combined else 32 * 1024,
    }


def container_environment_problems(plan: EndpointPlan) -> list[str]:
    """Every variable the plan renders into the container's environment against CreateModel's limits, each naming
    the variable, its size and the limit: an engine option of any system, an inline chat template, a path. A value
    over the limit synthesizes and is refused only by CreateModel, mid-deploy (the CloudFormation schema of
    AWS::SageMaker::Model sets no length, so cfn-lint cannot see it). The model of every instance pool that has one
    too."""
    primary = _environment_problems(plan, None)
    problems = list(primary)
    for i, pool in enumerate(plan.pools):
        if pool.own_model:  # what the primary's model already shows is said once
            problems += [for_pool(plan.spec, i, p) for p in _environment_problems(plan, pool) if p not in primary]
    return problems


def _environment_problems(plan: EndpointPlan, pool: PoolPlan | None) -> list[str]:
    limits = container_environment_limits()
    environment = plan.container_environment(LONGEST_BUCKET_NAME, pool)
    where = f"endpoint {plan.name!r}: "
    problems = []
    for key, value in environment.items():
        for what, text in (("name", key), ("value", value)):
            size = len(text.encode("utf-8"))
            if size > limits[what if what == "value" else "key"]:
                hint = (
                    "; give a long chat template as chat.template (model_build writes it into the artifact)"
                    if key.endswith("CHAT_TEMPLATE")
                    else "; shorten it, or give it as a file in the artifact where the option takes a path"
                )
                problems.append(
                    f"{where}the container environment {what} of {key[:80]} is {size} bytes; CreateModel takes at "
                    f"most {limits['value' if what == 'value' else 'key']} bytes per {what} (botocore sagemaker "
                    f"Environment{'Value' if what == 'value' else 'Key'}){hint}"
                )
    total = sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in environment.items())
    if total > limits["combined"]:
        problems.append(
            f"{where}the container environment holds {total} bytes of names and values; CreateModel takes at most "
            f"{limits['combined']} combined (ContainerDefinition.Environment); shorten the engine options"
        )
    if len(environment) > limits["entries"]:
        problems.append(
            f"{where}the container environment has {len(environment)} variables; CreateModel takes at most "
            f"{limits['entries']} (botocore sagemaker EnvironmentMap)"
        )
    return problems


def chat_by_default(spec: EndpointSpec, system: ServingSystem, artifact_dir: Path | None) -> EndpointSpec:
    """The endpoint with its chat as it is served: the `chat:` block as given; `chat: false`, none; unset, on (an
    empty block) where the system serves chat, the endpoint is real-time (the asynchronous doors take generation
    requests only) and the model has a chat template: a local model directory's own, or, for a Hub model, the built
    artifact's (read once it is built). A model without one stays without chat; asked for (a chat: block), it is
    refused with the reason (systems/chat.py chat_problems at load, the recipes at build)."""
    from endpoint_config.chat import ChatSpec
    from systems.chat import has_chat_template

    if spec.chat is False:
        return spec.model_copy(update={"chat": None})
    if spec.chat is not None or not system.chat.supported or spec.invocation.is_async:
        return spec
    model_dir = Path(spec.model)
    where = model_dir if model_dir.is_dir() else artifact_dir
    if where is None or not has_chat_template(where):
        return spec
    return spec.model_copy(update={"chat": ChatSpec()})


def plan_endpoint(
    spec: EndpointSpec,
    system: ServingSystem,
    *,
    project: str,
    environment_name: str,
    endpoint_name: str,
    stack_name: str,
    emulator: bool,
    build_root: Path,
) -> EndpointPlan:
    """Resolve one endpoint whose rules (the schema's and its system's) passed."""
    from .adapters import plan_adapters  # it imports ArtifactRef from here

    instance = spec.instance
    artifact = resolve_artifact(spec, build_root)
    spec = chat_by_default(spec, system, build_root / spec.name if artifact.source == "manifest" else None)
    # The volume and timeouts grow with the artifact: its size from the build's manifest, else estimated from the
    # model; a size SageMaker's limits cannot hold is refused, never clipped (systems/sizing.py, resolve).
    estimated = system.estimate_weight_bytes(spec) if system.estimate_weight_bytes is not None else None
    basis = f"estimated by system {system.name!r} from the checkpoint's files"
    if estimated is None:
        facts = model_facts(spec.model, spec.model_parameters)
        estimated = facts.parameters * BYTES_PER_PARAM[spec.dtype] if facts else None
        if facts is not None:
            basis = (
                f"{facts.parameters:,} parameters ({facts.source}) x {BYTES_PER_PARAM[spec.dtype]} bytes ({spec.dtype})"
            )
    weight_bytes = artifact.total_bytes or estimated
    if artifact.total_bytes:
        basis = f"the built artifact's manifest ({artifact.source})"
    quota = quota_need(spec)
    inference_ami_version = system.inference_ami_version if instance.is_gpu else None
    engine = system.engine(spec)  # the one parse of the endpoint's engine options: every reader takes plan.engine
    # The variant's timeouts hold on every pool: the longest any pool's engine needs.
    sizing = system.sizing(spec, engine, weight_bytes, basis)
    plan = EndpointPlan(
        spec=spec,
        system=system,
        project=project,
        environment_name=environment_name,
        endpoint_name=endpoint_name,
        stack_name=stack_name,
        emulator=emulator,
        artifact=artifact,
        engine=engine,
        model_copies=system.model_copies(spec, instance),
        download_timeout_s=sizing.download_timeout_s,
        startup_timeout_s=sizing.startup_timeout_s,
        network_isolation=network_isolation(spec, system.network_isolation_default(engine)),
        inference_ami_version=inference_ami_version,
        component_name=component_name(endpoint_name) if spec.hosting.uses_components else None,
        quota=quota,
        unsized_warning=unsized_model_warning(spec, built_bytes=artifact.total_bytes, estimated_bytes=estimated),
        model_positions=model_positions(spec) if system.chat.engine_server else None,
        adapters=plan_adapters(spec, endpoint_name, build_root),
        sizing=sizing,
    )
    return replace(plan, pools=plan_pools(plan, quota, inference_ami_version))


def model_positions(spec: EndpointSpec) -> int | None:
    """The model's max_position_embeddings from its facts (a local directory, a planned Hub model, the table)."""
    from systems.checkpoint_facts import checkpoint_of

    checkpoint = checkpoint_of(spec.model)
    return checkpoint.facts.max_position_embeddings if checkpoint is not None else None


def plan_pools(plan: EndpointPlan, quota: QuotaNeed, inference_ami_version: str | None) -> tuple[PoolPlan, ...]:
    """Each of instance_pools resolved (PoolPlan), priority 2 onwards in the order given."""
    system, pools = plan.system, []
    primary_environment = plan.container_environment(LONGEST_BUCKET_NAME)
    for priority, pool_spec in enumerate(plan.spec.pool_specs(), start=2):
        instance = pool_spec.instance
        ami = system.inference_ami_version if instance.is_gpu else None
        pin = system.image
        tag = None if pin is None else pin.gpu_tag if instance.is_gpu else pin.cpu_tag
        # endpoint_config/schema.py each_pool_problems refuses other hardware, so neither differs; one variant has one
        # InferenceAmiVersion, and the stack gives every pool's model the variant's image.
        if ami != inference_ami_version or (pin is not None and tag != plan.image_tag):
            raise ConfigError(
                f"endpoint {plan.name!r}: instance pool {pool_spec.instance_type} needs machine image {ami!r} and "
                f"image tag {tag!r}, instance_type {plan.spec.instance_type} {inference_ami_version!r} and "
                f"{plan.image_tag!r}; one variant has one of each"
            )
        pool = PoolPlan(
            priority=priority,
            spec=pool_spec,
            engine=plan.engine,  # a pool changes the instance type and degree, never engine: (EndpointSpec.pool_specs)
            model_copies=system.model_copies(pool_spec, instance),
            inference_ami_version=ami,
            image_tag=tag,
            own_model=False,
            quota=pool_quota_need(quota, pool_spec.instance_type, priority),
        )
        # The image is the same on every pool (above), so the engine's settings in the environment decide.
        own = plan.container_environment(LONGEST_BUCKET_NAME, pool) != primary_environment
        pools.append(replace(pool, own_model=own))
    return tuple(pools)


__all__ = [
    "ASYNC_DEFAULT_INVOCATION_TIMEOUT_S",
    "ArtifactRef",
    "BUILD_ROOT",
    "EndpointPlan",
    "ModelData",
    "PoolPlan",
    "QuotaNeed",
    "REAL_TIME_INVOCATION_TIMEOUT_S",
    "SCALE_FROM_ZERO_ALARM_EVALUATION_PERIODS",
    "SCALE_FROM_ZERO_ALARM_PERIOD_S",
    "SmokeSettings",
    "system_endpoint_body",
    "UNBUILT_HASH",
    "chat_by_default",
    "container_environment_limits",
    "container_environment_problems",
    "plan_endpoint",
    "quota_need",
    "resolve_artifact",
]
