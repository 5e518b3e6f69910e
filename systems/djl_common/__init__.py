"""Shared pieces of the DJL Serving / LMI systems (djl-deepspeed, djl-accelerate, djl-fastertransformer,
lmi-vllm, lmi-trtllm): serving.properties writing and parsing, the engine options each system accepts, and
how many model copies one instance runs. No torch import: the CDK app imports the systems' packages.

DJL reads its configuration from `serving.properties` in the model directory and from the container
environment: `OPTION_<NAME>` becomes `option.<name>` (upper case to lower case; OPTION_ENTRYPOINT becomes
option.entryPoint), and serving.properties wins over the environment: DJL adds the environment's values with
`prop.putIfAbsent(...)` after loading the file (deepjavalibrary/djl-serving
wlm/src/main/java/ai/djl/serving/wlm/ModelInfo.java, the "load default settings from env" loop, the same in the
0.24.0-dlc, 0.27.0-dlc, 0.33.0-dlc and 0.36.0-lmi27-dlc branches). So an OPTION_* variable only fills in what
serving.properties leaves out; it cannot override it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

from artifact import BuildError
from endpoint_config import EndpointSpec
from facts.instances import InstanceType
from systems.base import Capability, E, EngineOptions, RequestTimeout, ServingSystem, no_rules
from systems.chat import LEGACY_DJL_NO_CHAT

SERVING_PROPERTIES = "serving.properties"
# Where SageMaker mounts the model data (an uncompressed S3 prefix, or the extracted model.tar.gz).
SAGEMAKER_MODEL_DIR = "/opt/ml/model"
# option.model_loading_timeout: DJL kills a worker whose model takes longer to load (240 s by default in older
# DJL). Set to SageMaker's own upper limit on the startup health check, so SageMaker's (configured, sized)
# ContainerStartupHealthCheckTimeoutInSeconds is the one limit that applies.
MODEL_LOADING_TIMEOUT_S = 3600
_KEY = re.compile(r"^(?:engine|job_queue_size|batch_size|max_batch_delay|max_idle_time|option\.[A-Za-z0-9_.]+)$")


def format_properties(properties: Mapping[str, str | int | float | bool]) -> str:
    """serving.properties text: `engine` first, then the other keys sorted (stable bytes, stable hash).

    Values are written as DJL reads them (booleans lower case); keys and values are checked so the file
    parses back to exactly `properties` (no newlines, no leading/trailing blanks, no escapes needed).
    """
    lines = []
    for key in sorted(properties, key=lambda k: (k != "engine", k)):
        value = properties[key]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not _KEY.match(key):
            raise ValueError(f"serving.properties key {key!r} is not a DJL key (engine, batch_size, option.*)")
        if text != text.strip() or any(c in text for c in "\n\r\\") or not text:
            raise ValueError(f"serving.properties {key}: value {text!r} must be one non-empty line without backslashes")
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"


def write_properties(directory: Path, properties: Mapping[str, str | int | float | bool]) -> Path:
    path = Path(directory) / SERVING_PROPERTIES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_properties(properties))
    return path


def parse_properties(text: str) -> dict[str, str]:
    """Parse java-properties style `key=value` / `key: value` lines (comments `#`/`!`, blank lines skipped).

    Enough of java.util.Properties for what DJL users write: no line continuations or escapes.
    """
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            raise ValueError(f"serving.properties line {number}: {raw!r} is not key=value")
        result[match.group(1)] = match.group(2)
    return result


def read_properties(directory: Path) -> dict[str, str]:
    return parse_properties((Path(directory) / SERVING_PROPERTIES).read_text())


def option_environment(options: Mapping[str, str | int | bool]) -> dict[str, str]:
    """{"rolling_batch": "vllm"} -> {"OPTION_ROLLING_BATCH": "vllm"}: DJL maps OPTION_X onto option.x."""
    env = {}
    for name, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"OPTION_{name.upper()}"] = text
    return env


# option.predict_timeout: how long DJL's Python engine waits for the Python worker's answer to one request (standard
# and rolling-batch paths: PyProcess.predictStandard, RollingBatch), 120 s unless set (PyEnv.getPredictTimeout reads
# the PREDICT_TIMEOUT environment variable as its default). The same in the 0.24.0-dlc, 0.27.0-dlc, 0.33.0-dlc and
# 0.36.0-lmi27-dlc branches of deepjavalibrary/djl-serving (engines/python/src/main/java/ai/djl/python/engine/).
# In async mode (option.async_mode true, rolling batch off: the LMI systems) requests go to AsyncRequestManager,
# which waits without a timeout (PyProcess.predict); the option is set there too, so a mode change stays covered.
PREDICT_TIMEOUT_DEFAULT_S = 120


def djl_request_timeout(
    properties: Callable[[EndpointSpec, E], Mapping[str, str]] | None = None,
) -> RequestTimeout[E]:
    """The request timeout of a DJL system whose serving.properties (if any) `properties` gives: set through
    OPTION_PREDICT_TIMEOUT, which fills option.predict_timeout when serving.properties leaves it out (putIfAbsent)."""

    def environment(request_s: int, startup_s: int) -> dict[str, str]:
        return {"OPTION_PREDICT_TIMEOUT": str(request_s)}

    def limit_s(endpoint: EndpointSpec, engine: E, env: Mapping[str, str]) -> float:
        props = dict(properties(endpoint, engine)) if properties is not None else {}
        for key, value in env.items():  # ModelInfo's "load default settings from env" loop: putIfAbsent
            if key.startswith("OPTION_"):
                props.setdefault("option." + key.removeprefix("OPTION_").lower(), value)
        if props.get("option.async_mode") == "true" and props.get("option.rolling_batch") == "disable":
            return math.inf
        given = props.get("option.predict_timeout") or env.get("PREDICT_TIMEOUT")
        return int(given) if given else PREDICT_TIMEOUT_DEFAULT_S

    return RequestTimeout(environment=environment, limit_s=limit_s)


# Dynamic batching wait when engine.max_batch_size is set (ms): requests arriving within it share a batch.
MAX_BATCH_DELAY_MS = 100


class HandlerOptions(Protocol):
    """The engine options a DJL 0.27 system with a djl_python handler reads into serving.properties."""

    @property
    def entry_point(self) -> str | None: ...
    @property
    def custom_handler(self) -> bool: ...
    @property
    def max_batch_size(self) -> int | None: ...


def handler_serving_properties(
    endpoint: EndpointSpec,
    options: HandlerOptions,
    *,
    engine: str,
    entry_point: str,
    placement: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """serving.properties of a DJL 0.27 system that runs a djl_python handler (djl-accelerate, djl-deepspeed), in
    this order: DJL's `engine` with `entry_point` (engine.entry_point overrides it, engine.custom_handler puts our
    model.py in its place), the weights at SAGEMAKER_MODEL_DIR, text generation in the endpoint's dtype over its
    tensor_parallel_degree GPUs, the system's `placement` keys, no rolling batch, MODEL_LOADING_TIMEOUT_S; then its
    `limits` and, with engine.max_batch_size, DJL's dynamic batching (batch_size, max_batch_delay)."""
    props = {
        "engine": engine,
        "option.entryPoint": options.entry_point or entry_point,
        "option.model_id": SAGEMAKER_MODEL_DIR,
        "option.task": "text-generation",
        "option.dtype": endpoint.dtype,
        "option.tensor_parallel_degree": str(endpoint.tensor_parallel_degree),
        **(placement or {}),
        "option.rolling_batch": "disable",
        "option.model_loading_timeout": str(MODEL_LOADING_TIMEOUT_S),
    }
    if options.custom_handler:
        props["option.entryPoint"] = "model.py"
    props.update(limits or {})
    if options.max_batch_size is not None:
        props["batch_size"] = str(options.max_batch_size)
        props["max_batch_delay"] = str(MAX_BATCH_DELAY_MS)
    return props


def djl_system(
    *,
    engine_options: type[E],
    environment: Callable[[EndpointSpec, E], dict[str, str]],
    request_timeout: RequestTimeout[E] | None = None,
    rules: Callable[[EndpointSpec, InstanceType, E], list[str]] = no_rules,
    **fields: Any,
) -> ServingSystem[E]:
    """A DJL Serving / LMI system: GPU images that start one model copy per `tensor_parallel_degree` GPUs
    (ml.g5.12xlarge, 4 GPUs, at degree 2 serves 2 copies; autoscaling targets are per copy). `fields` are the
    system's own ServingSystem fields (the hooks that read its engine options named, so they are typed against
    them); these defaults are what every DJL/LMI system shares (a system with a serving.properties passes its own
    request_timeout, which reads it)."""
    shared: dict[str, Any] = dict(
        architectures=("decoder",),
        gpu_only=True,
        default_download_timeout_s=600,
        copies_fill_gpus=True,
    )
    return ServingSystem(
        engine_options=engine_options,
        environment=environment,
        request_timeout=request_timeout or djl_request_timeout(),
        rules=rules,
        **{**shared, **fields},
    )


def legacy_djl_system(
    *,
    djl_version: str,
    maintained_replacement: str,
    engine_options: type[E],
    environment: Callable[[EndpointSpec, E], dict[str, str]],
    serving_properties: Callable[[EndpointSpec, E], Mapping[str, str]],
    **fields: Any,
) -> ServingSystem[E]:
    """A djl_system pinned to a retired DJL image (`djl_version`) and configured by the `serving_properties` this
    project writes: no streaming, no chat, and no inference components (which `maintained_replacement` runs as)."""
    return djl_system(
        engine_options=engine_options,
        environment=environment,
        request_timeout=djl_request_timeout(serving_properties),
        streaming=Capability.no(
            f"it runs a retired DJL image ({djl_version}) with this project's non-streaming handler configuration; "
            "use lmi-vllm or lmi-trtllm"
        ),
        chat=LEGACY_DJL_NO_CHAT,
        tensor_parallel=Capability.yes(
            "option.tensor_parallel_degree in the artifact's serving.properties, written at build (a new degree needs a "
            "rebuild); DJL starts one model copy per that many GPUs"
        ),
        inference_components=Capability.no(
            f"a legacy system pinned to a retired DJL {djl_version} image, not documented for inference components; "
            f"its maintained replacement {maintained_replacement} runs as one"
        ),
        **fields,
    )


def copies_per_instance(endpoint: EndpointSpec) -> int:
    """The system's own count of model copies on the endpoint's instance type (for the manifest)."""
    from systems import get_system

    return get_system(endpoint.system).model_copies(endpoint, endpoint.instance)


def refuse(endpoint: EndpointSpec, key: str, value: object, allowed: str) -> BuildError:
    """The one error form: endpoint, key, value, what is allowed."""
    return BuildError(
        f"endpoint {endpoint.name!r}: {key}: value {value!r} is not supported by system {endpoint.system!r}; {allowed}"
    )


class DjlEngineOptions(EngineOptions):
    """What every DJL Serving / LMI system's engine options share: how a refusal reads. Each system subclasses it
    with the keys it accepts (its __init__.py), custom_handler first: `Literal[False]` unless the system ships our
    model.py, `bool` where it does (declared per system, so no subclass narrows a field it inherits)."""

    REFUSALS: ClassVar[dict[str, str]] = {
        "custom_handler": "value True is not supported by system {system!r}; allowed: false (the engine's own handler serves)",
    }

    def conflicts(self) -> list[str]:
        entry_point = getattr(self, "entry_point", None)
        if getattr(self, "custom_handler", False) and entry_point is not None:
            return [
                f"engine.entry_point: value {entry_point!r} conflicts with engine.custom_handler: true (the "
                "artifact's model.py is the entry point); set only one of them"
            ]
        return []


def check_weights_format(endpoint: EndpointSpec) -> None:
    """Refuse, before any heavy work, weights the DJL recipes do not write (their engine options were checked when
    the config loaded, or by model_build.cli.build_endpoint for an endpoint given without its plan)."""
    if endpoint.weights_format != "safetensors":
        raise refuse(endpoint, "weights_format", endpoint.weights_format, "allowed: safetensors")
