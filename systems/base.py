"""What every serving system states about itself: image, container environment, engine options, capabilities."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, ClassVar, Generic, Literal, Self, TypeVar, get_args, get_origin

from pydantic import Field, ValidationError

from endpoint_config import EndpointSpec
from endpoint_config.base import Strict
from endpoint_config.loader import describe_error, nested_unknown_key, shown_value
from facts.instances import InstanceType

from .images import ImagePin
from .sizing import DOWNLOAD_BYTES_PER_S, LOAD_BYTES_PER_S, Sizing, size_endpoint, sized_s

REPO_ROOT = Path(__file__).resolve().parent.parent

# The engine options several systems share, with the bounds every system applies to them.
MaxBatchSize = Annotated[int, Field(ge=1, le=1024, description="rolling/continuous batch size")]
MaxModelLen = Annotated[int, Field(ge=16, le=1_048_576, description="prompt + generated tokens")]

# A system's own `engine:` options class. The plan parses an endpoint's options once (deployment/plan.py
# EndpointPlan.engine, ServingSystem.engine) and every hook that reads them is handed that instance, typed as the
# system's class: ServingSystem[VllmEngineOptions] takes only hooks written for VllmEngineOptions.
E = TypeVar("E", bound="EngineOptions")


@dataclass(frozen=True)
class Capability:
    """Whether a system offers something, and how (its source) or why not (shown in the refusal)."""

    supported: bool
    note: str

    @classmethod
    def yes(cls, how: str) -> Self:
        return cls(True, how)

    @classmethod
    def no(cls, why: str) -> Self:
        return cls(False, why)


@dataclass(frozen=True)
class ChatCapability(Capability, Generic[E]):
    """Whether and how a system serves OpenAI chat completions (chat_contract.py), or why not (the note).

    route: "native", the engine's own chat route renders the template and answers (LMI's "messages" requests);
      "handler", our handler code applies the model's chat template and answers; None: no chat.
    constrained_decoding: the engine can force JSON or a tool call (response_format json_object/json_schema,
      tool_choice "required" or a named function); without it the front doors refuse those.
    tool_calls: whether the endpoint's replies carry parsed tool calls, given its parsed `engine:` options (the
      native engines parse them only with a tool-call parser configured; our handlers always read the hermes format).
    engine_server: the engine's own OpenAI server answers (vLLM, SGLang): it takes the OpenAI fields the engines
      add (chat_contract.ENGINE_REQUEST_KEYS), and it bounds max_tokens and the prompt by its context length, so the
      front doors add no max_tokens and cap at the engine's max_model_len (deployment/plan.py
      EndpointPlan.front_door_environment)."""

    route: Literal["native", "handler"] | None = None
    constrained_decoding: bool = False
    tool_calls: Callable[[E], bool] | None = None
    engine_server: bool = False

    @classmethod
    def native(
        cls,
        how: str,
        *,
        constrained_decoding: bool,
        tool_calls: Callable[[E], bool] | None,
        engine_server: bool = False,
    ) -> ChatCapability[E]:
        return ChatCapability(True, how, "native", constrained_decoding, tool_calls, engine_server)

    @classmethod
    def handler(cls, how: str) -> ChatCapability[Any]:
        return ChatCapability(True, how, "handler", False, lambda engine: True)

    def parses_tool_calls(self, engine: E) -> bool:
        return self.supported and self.tool_calls is not None and self.tool_calls(engine)


# The request bodies a container may take on POST /invocations (where InvokeEndpoint and the response stream deliver
# them), and which every client of an endpoint builds with endpoint_runtime/bodies.py:
#   generation         {"inputs", "parameters"} (request_contract.py), answered [{"generated_text"}]
#   openai-completion  an OpenAI completion {"prompt", "max_tokens", ...}, answered choices[].text
#   openai-chat        an OpenAI chat completion {"messages", ...} (chat_contract.py), answered choices[].message
BodyKind = Literal["generation", "openai-completion", "openai-chat"]
BODY_KINDS: tuple[BodyKind, ...] = ("generation", "openai-completion", "openai-chat")
# The contract's parameters that have a value meaning "do nothing" (endpoint_runtime/bodies.py PARAMETER_NO_OP), the
# only ones a container's generation body may leave unread.
UnreadParameter = Literal["min_new_tokens", "num_beams"]


@dataclass(frozen=True)
class ContainerBodies:
    """Which request bodies a system's container takes on /invocations and how its replies read.

    accepts: the body kinds (BODY_KINDS) the container answers; "openai-chat" exactly when the system serves chat
      (ServingSystem checks it against `chat`). A client sends one prompt in `prompt_kind`: the generation contract
      where the container takes it, else an OpenAI completion, else a one-message chat.
    reasoning_field: the field of an assistant message (and of a streamed delta) that holds the model's reasoning
      when the engine separates it (a reasoning parser); None: reasoning stays in the content. A chat reply whose
      content is null while this field holds text is a model still thinking when max_tokens ran out: it answered.
    generation_reply: how the container answers a generation body: "list", the toolkit's [{"generated_text"}] (the
      Hugging Face inference toolkit, DJL's handlers, the older LMI handlers, our own servers); "object", one
      {"generated_text"} object (LMI 27's async vLLM service). A client that reads the container's own reply
      directly (boto3, the SageMaker SDK's Predictor: tests/clients/) reads it in this shape; our own readers take
      both (endpoint_runtime/bodies.py generation_outputs).
    prompts_per_body: the most prompts one generation body may carry; None: the contract's batch (MAX_BATCH_SIZE).
      A container that reads one prompt (TGI's `inputs` is a string; LMI 27 answers a list's first prompt only) says
      1, and the front doors refuse a list of more (deployment/plan.py front_door_environment).
    chat_streams_sse: a streamed chat reply is server-sent events (an engine's own OpenAI server's, TGI's router's),
      which the openai SDK reads through SageMaker's OpenAI route; the demo then streams its chat that way.
    unread_parameters: the contract's parameters the container's generation body does not read (TGI 3.3.6 has no
      min_new_tokens or num_beams field and ignores them): the front doors refuse a value that would change the
      answer and leave out the no-op one, instead of letting the container ignore it.
    Tool calls read as OpenAI's message.tool_calls wherever a chat system parses them (ChatCapability.tool_calls
    says when)."""

    accepts: frozenset[BodyKind]
    generation_reply: Literal["list", "object"] = "list"
    prompts_per_body: int | None = None
    # False: not known to be (LMI 27 streams chat as JSON lines).
    chat_streams_sse: bool = False
    unread_parameters: frozenset[UnreadParameter] = frozenset()
    reasoning_field: str | None = None
    # The chat request fields that ask the engine not to reason first, where it honours them (a check that needs
    # an answer within a few tokens sends them); None: none known.
    thinking_off: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.accepts) - set(BODY_KINDS)
        if unknown or not self.accepts:
            raise ValueError(f"body kinds {sorted(unknown) or 'none'}: give some of {BODY_KINDS}")
        if self.generation_reply not in ("list", "object"):
            raise ValueError(f"generation_reply {self.generation_reply!r}: give 'list' or 'object'")
        unread = set(self.unread_parameters) - set(get_args(UnreadParameter))
        if unread:
            raise ValueError(f"unread_parameters {sorted(unread)}: give some of {get_args(UnreadParameter)}")
        if self.prompts_per_body is not None and self.prompts_per_body < 1:
            raise ValueError(f"prompts_per_body {self.prompts_per_body}: give 1 or more, or None for the contract's")

    @property
    def prompt_kind(self) -> BodyKind:
        """The body one prompt travels in (the smoke test, the SLO gate, the invoke and stream functions' generation
        route, the demo)."""
        return next(kind for kind in BODY_KINDS if kind in self.accepts)

    @property
    def chat(self) -> bool:
        return "openai-chat" in self.accepts


GENERATION_ONLY = ContainerBodies(frozenset({"generation"}))
GENERATION_AND_CHAT = ContainerBodies(frozenset({"generation", "openai-chat"}))


@dataclass(frozen=True)
class LoraSizing:
    """A container's LoRA options for one endpoint's adapters: how many adapters it serves at once, the highest rank
    it accepts (a build refuses an adapter above it), and the container environment that sets both."""

    max_adapters: int
    max_rank: int
    environment: dict[str, str]
    # Where max_rank comes from, for refusals ("engine.max_lora_rank", or the engine's default).
    rank_source: str
    # The values the engine accepts as its max rank (a refusal names the smallest that fits); empty: any.
    allowed_ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class AdapterSupport(Capability, Generic[E]):
    """Whether a system serves LoRA adapters as SageMaker adapter inference components (endpoint_config/adapters.py),
    and `sizing`: its LoRA options for an endpoint's configured adapters (enable, max adapters, max rank), given
    the endpoint and its parsed engine options."""

    sizing: Callable[[EndpointSpec, E], LoraSizing] | None = None


class EngineOptions(Strict):
    """The `engine:` options of one serving system: each system subclasses this with exactly the keys it implements
    and the values it allows (as djl-serving's properties_manager has one class per engine); pydantic validates an
    endpoint's `engine:` mapping against it, strictly like every config block (endpoint_config.base.Strict).
    REFUSALS maps a key to the whole message after "engine.<key>: " (formatted with value and system) where a system
    words a refusal its own way; HINTS adds a reason to the default "remove the key"."""

    REFUSALS: ClassVar[dict[str, str]] = {}
    HINTS: ClassVar[dict[str, str]] = {}
    # The key that caps prompt + generated tokens, where a system's options have one (SGLang calls it context_length).
    CONTEXT_KEY: ClassVar[str] = "max_model_len"
    # The key that caps the prompt alone, below CONTEXT_KEY's total, where there is one (TGI's max_input_tokens).
    PROMPT_KEY: ClassVar[str | None] = None
    # Keys tied to the real model's GPUs (quantization, KV-cache type, parallelism): `make demo` drops them for its
    # tiny model on the CPU (local_emulator/demo_config.py).
    GPU_KEYS: ClassVar[tuple[str, ...]] = ()
    # Keys that size LoRA for the endpoint's adapters: dropped with the adapters where a demo leaves them out.
    LORA_KEYS: ClassVar[tuple[str, ...]] = ()

    @property
    def context_limit(self) -> int | None:
        """The longest sequence (prompt + generated tokens) these options cap the engine at, None where they set
        none: the rules read it here (systems/checks.py), whatever the system's options call the key."""
        value = getattr(self, self.CONTEXT_KEY, None)
        return value if isinstance(value, int) else None

    @property
    def keeps_prefix_cache(self) -> bool | None:
        """Whether the engine keeps a prompt prefix's KV cache between requests as these options set it: False where
        they turn it off, None where they do not say (the engine's default; prefix-aware routing's rule reads it)."""
        return None

    def conflicts(self) -> list[str]:
        """Rules between the accepted keys: each message after "endpoint '<name>': "."""
        return []

    @classmethod
    def parse(cls, ep: EndpointSpec) -> Self:
        """The endpoint's options as this model (the config was checked by `engine_problems` when it loaded)."""
        return cls.model_validate(ep.engine)


def engine_problems(
    ep: EndpointSpec, options: type[EngineOptions], others: dict[str, type[EngineOptions]] | None = None
) -> list[str]:
    """What is wrong with `ep`'s `engine:` mapping for its system's model, each "endpoint '<name>': engine.<key>:
    ..." naming the value and what is allowed. `others`: every system's options model, to name the systems that
    take a key this one does not."""
    try:
        parsed = options.model_validate(ep.engine)
    except ValidationError as err:
        return [
            f"endpoint {ep.name!r}: engine.{_engine_error(e, options, ep.system, others or {})}" for e in err.errors()
        ]
    return [f"endpoint {ep.name!r}: {p}" for p in parsed.conflicts()]


def _engine_error(error: Any, options: type[EngineOptions], system: str, others: dict[str, type[EngineOptions]]) -> str:
    key = str(error["loc"][0]) if error["loc"] else ""
    where = ".".join(map(str, error["loc"]))
    top_level = len(error["loc"]) == 1
    value = error.get("input")
    if top_level and error["type"] in ("extra_forbidden", "literal_error") and key in options.REFUSALS:
        return f"{where}: " + options.REFUSALS[key].format(value=value, system=system)
    if top_level and error["type"] == "extra_forbidden":
        takers = [name for name, model in others.items() if key in model.model_fields]
        why = options.HINTS.get(key) or (f"systems that take it: {', '.join(takers)}" if takers else "")
        return f"{where}: value {shown_value(value)} is not supported by system {system!r}; remove the key" + (
            f" ({why})" if why else ""
        )
    if not top_level and error["type"] == "extra_forbidden":
        return nested_unknown_key(options, tuple(error["loc"]), where)
    if top_level and error["type"] == "literal_error":
        allowed = ", ".join(map(str, _literal_values(options.model_fields[key].annotation)))
        return f"{where}: value {shown_value(value)} is not supported by system {system!r}; allowed: {allowed} (or leave it out)"
    return f"{where}: {describe_error(error)}"


def _literal_values(annotation: Any) -> list[Any]:
    """The values a Literal annotation (possibly inside `X | None`) lists, for the refusal's "allowed:" part."""
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    return [v for arg in get_args(annotation) for v in _literal_values(arg) if v is not None]


# An image reference is [REGISTRY_HOST[:PORT]/]NAME[:TAG]; without a registry host it comes from the default registry,
# Docker Hub (the `docker pull` reference, docs.docker.com/reference/cli/docker/image/pull). A first path part with
# a "." or ":" (or "localhost") is a registry host.
def docker_hub_bases(own: OwnContainer) -> list[str]:
    """The base images of an own container's Dockerfile that come from Docker Hub."""
    dockerfile = REPO_ROOT / own.dockerfile
    bases = re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", dockerfile.read_text(), re.MULTILINE)
    return [b for b in bases if not b.startswith("$") and b != "scratch" and not _has_registry(b)]


def _has_registry(image: str) -> bool:
    first, sep, _ = image.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


@dataclass(frozen=True)
class OwnContainer:
    """A container we build from this repository (CDK DockerImageAsset). The build context is the repository root
    holding only `include` (paths from the root; a directory with all it holds), so an image can take the shared
    server in systems/ and the top-level request contract. dockerfile: its path from the root."""

    dockerfile: str
    include: tuple[str, ...]
    # Left out even inside an included directory.
    never: tuple[str, ...] = ("**/__pycache__", "**/tests", "*.md")

    @property
    def exclude(self) -> list[str]:
        """CDK's exclude patterns for the context: everything but `include` (and the Dockerfile), later patterns
        overriding earlier ones. They read the same under CDK's glob strategy (the emulator's fingerprint) and
        Docker's, where re-including a folder re-includes all it holds: so each parent of a kept path is re-included,
        then emptied again (`parent/*`), before its kept child comes back. Docker's is DockerImageAsset's default:
        aws-cdk-lib 2.273.0 aws-ecr-assets/lib/image-asset.js picks IgnoreMode.DOCKER under the flag
        @aws-cdk/aws-ecr-assets:dockerIgnoreSupport, which cx-api/lib/features.js says v2 behaves as set."""
        kept = [path.strip("/") for path in (*self.include, self.dockerfile)]
        parents = {"/".join(p.split("/")[:i]) for p in kept for i in range(1, p.count("/") + 1)}
        levels = sorted(parents | set(kept), key=lambda p: (p.count("/"), p))
        patterns: list[str] = []
        for path in levels:
            patterns += [f"!{path}", f"{path}/*"] if path in parents and path not in kept else [f"!{path}"]
        patterns += [f"!{path}/**" for path in kept]
        return ["*", ".*", *patterns, *self.never]  # ".*": "*" does not match dot files


@dataclass(frozen=True)
class RequestTimeout(Generic[E]):
    """How a system's container limits the time of one request, and how a plan sets that limit.

    environment(request_s, startup_s): the container environment that lets one request run `request_s` seconds
      (`startup_s`: the startup health-check timeout, for a server whose one clock also times the model load).
    limit_s(endpoint, engine, environment): the limit the container then applies (math.inf: none), read the way
      the container's own code reads its configuration (each system cites the file and version); `engine`: the
      endpoint's parsed engine options.
    """

    environment: Callable[[int, int], dict[str, str]]
    limit_s: Callable[[EndpointSpec, E, Mapping[str, str]], float]


def no_rules(ep: EndpointSpec, instance: InstanceType, engine: EngineOptions) -> list[str]:
    return []


# Our own containers (systems/byoc_server): nginx proxies /invocations to the app and gives up on a reply after
# proxy_read_timeout ("between two successive read operations", nginx ngx_http_proxy_module; the app answers at once
# at the end, so it bounds the whole request). It is set in the image to SageMaker's longest invocation,
# InvocationTimeoutSeconds' 3600 s (botocore sagemaker-runtime InvokeEndpointAsync), so no invocation the config
# allows is cut by the proxy; SageMaker's own timeout ends the shorter ones.
BYOC_NGINX_CONF = REPO_ROOT / "systems" / "byoc_server" / "nginx.conf"


def byoc_request_timeout() -> RequestTimeout[Any]:
    def environment(request_s: int, startup_s: int) -> dict[str, str]:
        return {}  # fixed in the image

    def limit_s(endpoint: EndpointSpec, engine: EngineOptions, env: Mapping[str, str]) -> float:
        text = BYOC_NGINX_CONF.read_text()
        location = re.search(r"location ~ \^/\(ping\|invocations\)\$ \{(.*?)\}", text, re.DOTALL)
        if location is None:
            raise ValueError(f"{BYOC_NGINX_CONF}: no location for /invocations")
        timeouts = [int(t) for t in re.findall(r"proxy_(?:read|send)_timeout\s+(\d+)s;", location.group(1))]
        if len(timeouts) != 2:
            raise ValueError(f"{BYOC_NGINX_CONF}: expected proxy_read_timeout and proxy_send_timeout in seconds")
        return min(timeouts)

    return RequestTimeout(environment=environment, limit_s=limit_s)


@dataclass(frozen=True)
class EngineProfile:
    """What the compatibility checks (systems/checks.py) need to know about a system's engine for one endpoint.

    engine: the engine inside the image, "<project>==<version>" (a key of systems/engine_tables ARCHITECTURES and
      systems/precision.ENGINE_PRECISION). cuda: the image's CUDA toolkit (a key of gpus.CUDA).
    memory_fraction: the share of each GPU's memory the engine fills with weights and KV cache, and where that
      number comes from. max_model_len: the longest sequence the engine is configured for (None: the model's own).
    kv_cache_bytes: bytes of one cached K or V element (None: the activation dtype's). runtime_quantization: the
      method the engine is told to load with (its --quantization; None: the checkpoint's own), quantizes_at_load: the
      methods that quantize an unquantized checkpoint while loading. reserves_full_sequence: the
      engine refuses to start unless its KV cache holds one sequence of max_model_len (vLLM does).
    """

    engine: str
    cuda: str
    memory_fraction: float
    memory_source: str
    max_model_len: int | None = None
    kv_cache_bytes: float | None = None
    runtime_quantization: str | None = None
    quantizes_at_load: frozenset[str] = frozenset()  # the methods that quantize an unquantized checkpoint at load
    reserves_full_sequence: bool = False
    # The config key that sets max_model_len, named in refusals (SGLang calls it context_length).
    context_option: str = "engine.max_model_len"


@dataclass(frozen=True)
class LocalRun:
    """How the system's container runs on this machine (local_runtime/, `make demo`, `model_build serve`).

    kind: "engine": the engine's own server from the package registries (local_runtime/vllm_container.py; `engine`
      names which); "own-server": this repository's image, laid out from its Dockerfile and run on the handler's CPU
      path (local_runtime/byoc_container.py); "stand-in": no CPU build of the engine or its front end, so the
      stand-in answers the container's routes (local_runtime/stand_in.py, which says "stand-in" in every answer);
      "handler": the artifact's own code/inference.py under local_runtime/serve.py's ModelHost.
    note: what runs (engine, own-server) or why a stand-in (printed with its answers).
    environment: what the CPU path sets over the image's environment (own-server), each a setting the handler reads.
    dialect: the stand-in's routes and bodies (one of local_runtime.stand_in.DIALECTS).
    """

    kind: Literal["engine", "own-server", "stand-in", "handler"]
    note: str = ""
    environment: tuple[tuple[str, str], ...] = ()
    dialect: str = ""
    engine: str = ""

    @classmethod
    def handler(cls) -> LocalRun:
        return cls("handler")

    @classmethod
    def stand_in(cls, dialect: str, why: str) -> LocalRun:
        return cls("stand-in", note=why, dialect=dialect)

    @classmethod
    def own_server(cls, note: str, **environment: str) -> LocalRun:
        return cls("own-server", note=note, environment=tuple(environment.items()))

    @classmethod
    def engine_server(cls, engine: str, note: str) -> LocalRun:
        return cls("engine", note=note, engine=engine)

    @property
    def has_container(self) -> bool:
        """A container process of its own answers here (everything but the in-process handler)."""
        return self.kind != "handler"


@dataclass(frozen=True)
class EngineSeries:
    """One engine's Prometheus metric names, as the engine exports them on /metrics and SageMaker collects them
    (stacks/engine_metrics.py turns them into queries); `kv_cache` is a 0-1 fraction; `source` the engine file."""

    queue: str
    kv_cache: str
    prompt_tokens: str
    generation_tokens: str
    ttft_histogram: str
    source: str


@dataclass(frozen=True)
class StreamedWeights(Generic[E]):
    """An engine option that reads the weights from S3 itself while the container starts (vLLM's Run:ai model
    streamer). For an endpoint whose parsed engine options use it (`enabled(engine)`), SageMaker downloads only `model_data_part` of the artifact
    (a folder of it, ending in "/"), `environment(endpoint, artifact_s3_uri)` points the engine at the artifact's
    own S3 prefix, and the container needs the network (its execution role's S3 and KMS grants already cover the
    artifact: it is what SageMaker itself reads with)."""

    enabled: Callable[[E], bool]
    environment: Callable[[EndpointSpec, str], dict[str, str]]
    model_data_part: str
    # How a config turns it on (named where a model too big to download in time is refused: systems/sizing.py).
    option: str = ""


@dataclass(frozen=True, kw_only=True)
class ServingSystem(Generic[E]):
    """One `system:` value of the config file: every fact about a serving system lives here (or in its package).

    engine_options: the class of the system's `engine:` options (E). The hooks that read them (environment, rules,
      profile, checkpoint_rules, streamed_weights.enabled, chat.tool_calls, adapters.sizing,
      request_timeout.limit_s) take the endpoint's options already parsed, as an instance of that class: the plan
      parses them once (`engine`, EndpointPlan.engine) and the config load once while it checks them
      (`checked_engine`, systems/checks.py); no hook parses them again (tests/test_engine_options_parsed_once.py).

    recipe: the module that builds the artifact, `build(endpoint, out_dir, progress=True) -> manifest` (it imports
      torch, so only model_build loads it, through `load_recipe`).
    image / own_container: the pinned AWS image, or one built from this repository; exactly one.
    environment: the container's environment for one endpoint, given its parsed engine options.
    streaming / inference_components: whether the container streams tokens (InvokeEndpointWithResponseStream) and
      runs as an inference component, with how or why not.
    chat: whether and how it serves OpenAI chat completions (ChatCapability), stated by every system; an endpoint's
      `chat:` block is refused on a system without it (systems/chat.py).
    adapters: whether it loads LoRA adapters as adapter inference components, and how it sizes its LoRA options.
    network_isolation: the container works with no network (its model data comes from S3 through SageMaker).
    staged_weights_environment: for an engine that reads its weights from S3 itself, the environment pointing it at
      them (the artifact's weights/ stays in S3, code/ is the model data); such a container needs the network.
    streamed_weights: an engine option that streams the weights from S3 (StreamedWeights), per endpoint.
    profile: the engine facts the compatibility checks need for one endpoint (EngineProfile); None: not checked.
    estimate_weight_bytes: the model's weight bytes on the GPUs before a build (sizes the timeouts and the checks);
      None: parameters x the dtype's bytes, from facts.models.
    rules: the rules only this system has, on an endpoint whose schema rules passed and whose engine options parsed.
    legacy / replacement: retired upstream, kept as a pinned recipe and announced at synth with its replacement.
    bodies: which request bodies the container takes on /invocations and how its replies read (ContainerBodies).
    tensor_parallel: whether, and through what, the container splits one model copy over `tensor_parallel_degree`
      GPUs; a system that cannot refuses a degree above 1 (systems/checks.py), and each that can hands the degree
      to its container (tests/systems/test_tensor_parallel_path.py).
    request_timeout: how the container limits one request's time (RequestTimeout); the plan sets it to the
      endpoint's invocation timeout (deployment.plan EndpointPlan.invocation_timeout_s). Every registered system
      states it (tests/systems/test_request_timeouts.py).
    """

    name: str
    summary: str
    environment: Callable[[EndpointSpec, E], dict[str, str]]
    streaming: Capability
    inference_components: Capability
    chat: ChatCapability[E]
    tensor_parallel: Capability
    recipe: str | None = None
    image: ImagePin | None = None
    own_container: OwnContainer | None = None
    engine_options: type[E]
    architectures: tuple[Literal["decoder", "encoder-decoder"], ...] = ("decoder",)
    weights_formats: tuple[str, ...] = ("safetensors",)
    gpu_only: bool = False
    default_download_timeout_s: int = 600
    default_startup_timeout_s: int = 600
    legacy: bool = False
    replacement: str | None = None
    network_isolation: bool = True
    staged_weights_environment: Callable[[str], dict[str, str]] | None = None
    rules: Callable[[EndpointSpec, InstanceType, E], list[str]] = field(default=no_rules)
    engine_notes: str = ""
    # The engine starts one model copy per `tensor_parallel_degree` GPUs (DJL/LMI): 4 GPUs at degree 2 = 2 copies.
    copies_fill_gpus: bool = False
    # ProductionVariant.InferenceAmiVersion for images whose CUDA needs a newer host driver than SageMaker's
    # default AMI (driver 470 / CUDA 11.4 on ml.g5 and ml.p4d, per docs.aws.amazon.com/sagemaker/latest/dg/
    # inference-gpu-drivers.html); values: botocore's ProductionVariantInferenceAmiVersion enum. None: default AMI.
    inference_ami_version: str | None = None
    request_timeout: RequestTimeout[E] | None = None
    # The systems/engine_tables table ("<project>==<version>") of the model architectures the container's engine
    # serves, where an engine registry decides (vLLM); None: the image's transformers decides (systems/model_support.py).
    model_registry: str | None = None
    streamed_weights: StreamedWeights[E] | None = None
    profile: Callable[[EndpointSpec, E], EngineProfile] | None = None
    estimate_weight_bytes: Callable[[EndpointSpec], float | None] | None = None
    adapters: AdapterSupport[E] = AdapterSupport.no(
        "no way to load LoRA adapter inference components is established for it"
    )
    # Which request bodies the container takes and how its replies read: every client builds its bodies from this
    # (through the endpoint plan; tests/systems/test_client_bodies.py drives each client against each system).
    bodies: ContainerBodies = GENERATION_ONLY
    # The container environment that has the engine answer OpenAI requests whose `model` is one of `names` (the
    # SageMaker endpoint's name first, what callers of SageMaker's OpenAI route send; then the config's name); the
    # plan adds it (the artifact is shared by every environment, so its manifest does not hold it). None: the
    # container does not check the name.
    served_names_environment: Callable[[tuple[str, ...]], dict[str, str]] | None = None
    # Whether the container serves a Hugging Face checkpoint's own files at /opt/ml/model, configured by its
    # environment alone, so a JumpStart / private-hub model's uncompressed S3 prefix can be its model data with nothing
    # of ours beside it (endpoint_config/model_source.py; refused with the note where not: systems/model_source.py).
    plain_checkpoint: Capability = Capability.no(
        "its container needs files this project's build writes into the artifact (a handler, serving.properties or "
        "converted weights), which a hub model's S3 prefix does not hold"
    )
    # What only this system refuses about a checkpoint's own facts (its config.json's architecture): at load for a
    # local or known model (systems/checks.py), at build on the real files (systems/checkpoint_artifact.py).
    checkpoint_rules: Callable[[EndpointSpec, E, Any], list[str]] | None = None
    # The image reads the checkpoint's metadata with its own transformers/tokenizers (image.python_stack), which may
    # be older than what saved the model: the checkpoint build (systems/checkpoint_artifact.py) then refuses what the
    # image cannot read and rewrites the rest for it (tokenizer files: systems/container_tokenizer.py; config.json
    # for a transformers 4.x: recipe_common.config_for_container). False: the metadata is copied as it is.
    rewrite_metadata_for_image: bool = False
    # How its container runs on this machine (LocalRun); every system states it.
    local: LocalRun
    # The engine's metric series for the dashboard panel and alarm (stacks/engine_metrics.py); None: only for an
    # engine's own OpenAI server whose /metrics SageMaker collects.
    metrics: EngineSeries | None = None
    # Its example config under config/examples/ (the file name); "": <name>.yaml. The contract suite loads and
    # synthesizes it (tests/systems/test_system_contract.py), and the docs' tables link it.
    example: str = ""

    @property
    def example_config(self) -> Path:
        """config/examples/<its example>: every system has one."""
        return REPO_ROOT / "config" / "examples" / (self.example or f"{self.name}.yaml")

    def __post_init__(self) -> None:
        if (self.image is None) == (self.own_container is None):
            raise ValueError(f"system {self.name!r}: give exactly one of image= or own_container=")
        if self.bodies.chat != self.chat.supported:
            raise ValueError(
                f"system {self.name!r}: its container bodies ({sorted(self.bodies.accepts)}) and its chat capability "
                f"(supported: {self.chat.supported}) disagree"
            )
        if self.rewrite_metadata_for_image and (self.image is None or self.image.python_stack is None):
            raise ValueError(
                f"system {self.name!r}: rewrite_metadata_for_image needs the image's python_stack "
                "(systems/images.py PythonStack), the libraries the files are rewritten for"
            )
        if self.staged_weights_environment is not None and self.network_isolation:
            raise ValueError(f"system {self.name!r}: an engine that reads its weights from S3 needs network access")

    def streams_weights(self, engine: E) -> bool:
        """The endpoint's engine streams its weights from S3 (an engine option: `streamed_weights`)."""
        return self.streamed_weights is not None and self.streamed_weights.enabled(engine)

    def reads_weights_from_s3(self, engine: E) -> bool:
        """The container fetches the weights from S3 itself (staged or streamed), so it needs the network."""
        return self.staged_weights_environment is not None or self.streams_weights(engine)

    def network_isolation_default(self, engine: E) -> bool:
        """EnableNetworkIsolation when the config does not say: the system's, unless the engine reads S3 itself."""
        return self.network_isolation and not self.reads_weights_from_s3(engine)

    def lora_sizing(self, ep: EndpointSpec, engine: E) -> LoraSizing | None:
        """The container's LoRA options for `ep`'s adapters (None without adapters). LookupError when the system
        serves none (the config refuses adapters there first: systems/checks.py)."""
        if not ep.adapters:
            return None
        if not self.adapters.supported or self.adapters.sizing is None:
            raise LookupError(f"system {self.name!r} serves no LoRA adapters: {self.adapters.note}")
        return self.adapters.sizing(ep, engine)

    def load_recipe(self) -> ModuleType:
        """Import the build recipe. LookupError when the system has none."""
        if self.recipe is None:
            raise LookupError(f"system {self.name!r} has no build recipe")
        return importlib.import_module(self.recipe)

    def engine_problems(self, ep: EndpointSpec, others: dict[str, type[EngineOptions]] | None = None) -> list[str]:
        """What is wrong with the endpoint's `engine:` options for this system (engine_problems)."""
        return engine_problems(ep, self.engine_options, others)

    def engine(self, ep: EndpointSpec) -> E:
        """The endpoint's engine options as this system's typed model (an instance of `engine_options`), for an
        endpoint whose options the config load checked. Called where the plan is made (deployment/plan.py): every
        other reader takes EndpointPlan.engine (or PoolPlan.engine)."""
        return self.engine_options.parse(ep)

    def checked_engine(
        self, ep: EndpointSpec, others: dict[str, type[EngineOptions]] | None = None
    ) -> tuple[E | None, list[str]]:
        """Check the endpoint's `engine:` options (engine_problems) and, where they pass, parse them: (the options,
        []) or (None, the problems). For the config load (systems/checks.py), which runs the hooks on what it
        checks, and a build handed an endpoint without its plan (model_build.cli.build_endpoint)."""
        problems = self.engine_problems(ep, others)
        return (None if problems else self.engine(ep)), problems

    def model_copies(self, ep: EndpointSpec, instance: InstanceType) -> int:
        """How many copies of the model one instance serves."""
        if self.copies_fill_gpus and instance.is_gpu:
            return max(1, instance.gpu_count // ep.tensor_parallel_degree)
        return 1

    def download_timeout_s(self, ep: EndpointSpec, weight_bytes: float | None = None) -> int:
        """The config's model_data_download_timeout_s, else sized from `weight_bytes` (not clipped: the plan's
        sizing refuses what SageMaker's maximum cannot hold, systems/sizing.py)."""
        if ep.model_data_download_timeout_s:
            return ep.model_data_download_timeout_s
        return sized_s(self.default_download_timeout_s, weight_bytes, DOWNLOAD_BYTES_PER_S)

    def startup_timeout_s(self, ep: EndpointSpec, weight_bytes: float | None = None) -> int:
        if ep.container_startup_health_check_timeout_s:
            return ep.container_startup_health_check_timeout_s
        return sized_s(self.default_startup_timeout_s, weight_bytes, LOAD_BYTES_PER_S)

    def sizing(self, ep: EndpointSpec, engine: E, weight_bytes: float | None, basis: str) -> Sizing:
        """The endpoint's volume and timeouts from its model's bytes, or the refusals (systems/sizing.py). An engine
        that reads the weights from S3 itself has SageMaker download only its code part."""
        streamed = self.streamed_weights
        offer = (
            streamed.option if streamed is not None and streamed.option and not self.streams_weights(engine) else None
        )
        return size_endpoint(
            ep,
            pool_specs=ep.pool_specs(),
            weight_bytes=weight_bytes,
            basis=basis,
            weights_from_s3=self.reads_weights_from_s3(engine),
            default_download_s=self.default_download_timeout_s,
            default_startup_s=self.default_startup_timeout_s,
            streaming_option=offer,
        )
