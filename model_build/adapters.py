"""Build and publish an endpoint's LoRA adapters (`adapters:`), each under its own content hash.

A build reads the adapter (a local directory or a Hub snapshot: adapter_config.json + adapter_model.safetensors, or
adapter_model.bin, converted), refuses what the container would refuse when SageMaker loads it, and checks that it
fits the endpoint's base model before anything is deployed:
  - peft's LoRA format as vLLM reads it (vLLM 0.23.0 vllm/lora/peft_helper.py: `r`, `lora_alpha` and `target_modules`
    required; bias "none", no modules_to_save, no DoRA, rank <= max_lora_rank);
  - a rank within the container's max LoRA rank (ServingSystem.lora_sizing: engine.max_lora_rank or its default);
  - the base: when both the adapter's `base_model_name_or_path` and the endpoint's model are Hub ids they must name
    the same model; and always, every LoRA tensor must fit a weight of the base, read from its safetensors headers
    (lora_A [r, in], lora_B [out, r] against the base's [out, in]; peft's fan_in_fan_out layers store [in, out]), so
    an adapter trained on another architecture or size is refused by shape.
The artifact is the adapter's two files, unchanged (or the .bin as safetensors), plus manifest.json; `publish` packs
them into the model.tar.gz SageMaker takes as the adapter component's ArtifactUrl (deployment/adapters.py).
What only a GPU shows: that vLLM has LoRA layers for every target module of the base's architecture (vLLM refuses
"unexpected modules" at load, vllm/lora/lora_model.py), and the adapter's effect on the generated text.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifact import BuildError
from artifact.manifest import MANIFEST_NAME, write_manifest
from artifact.source import _looks_like_path, resolve_model_source
from endpoint_config.adapters import ADAPTER_CONFIG, adapter_rank
from facts.model_files import (
    UnreadableModel,
    check_regular_file,
    read_adapter_config,
    read_model_json,
    read_safetensors_header,
)
from systems.checks import rank_refusal

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_PICKLE = "adapter_model.bin"
SOURCE_PATTERNS = (ADAPTER_CONFIG, ADAPTER_WEIGHTS, ADAPTER_PICKLE)
# A LoRA adapter's weights are megabytes (rank 64 on every projection of a 70B model: ~1.7 GB in fp16); a pickle past
# this is not an adapter.
MAX_ADAPTER_PICKLE_BYTES = 8 * 2**30
# peft's saved names: base_model.model.<module>.lora_A.weight / .lora_B.weight (Linear, Conv1D) and
# .lora_embedding_A / .lora_embedding_B (Embedding); the adapter's own name is dropped when peft saves.
_TENSOR = re.compile(
    r"^base_model\.model\.(?P<module>.+)\.(?P<kind>lora_A|lora_B|lora_embedding_A|lora_embedding_B)(?:\.weight)?$"
)


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from a safetensors header (8-byte length + JSON), without reading the weights; read
    bounded (facts.model_files.read_safetensors_header): BuildError naming the file and what is wrong."""
    try:
        tensors, _, _ = read_safetensors_header(path)
    except UnreadableModel as err:
        raise BuildError(str(err)) from None
    return {name: list(shape) for name, (_dtype, shape, _begin, _end) in tensors.items()}


def base_shapes(base_dir: Path) -> dict[str, list[int]]:
    """Every weight's shape in the base model's safetensors files."""
    shapes: dict[str, list[int]] = {}
    for shard in sorted(base_dir.glob("*.safetensors")):
        shapes.update(safetensors_shapes(shard))
    return shapes


def config_problems(config: dict[str, Any]) -> list[str]:
    """What vLLM (0.23.0 vllm/lora/peft_helper.py PEFTHelper.from_dict, _validate_features, validate_legal) and peft's
    LoRA format refuse in an adapter_config.json, each naming the key, the value and what is allowed."""
    problems = []
    if config.get("peft_type", "LORA") != "LORA":
        problems.append(f"peft_type: value {config.get('peft_type')!r} is not a LoRA adapter; allowed: 'LORA'")
    if adapter_rank(config) is None:
        problems.append(f"r: value {config.get('r')!r} is not a positive integer rank")
    for key in ("lora_alpha", "target_modules"):
        if key not in config:
            problems.append(f"{key}: required key is missing (vLLM reads it)")
    if config.get("bias", "none") != "none":
        problems.append(f"bias: value {config.get('bias')!r} is not supported by vLLM; allowed: 'none'")
    if config.get("modules_to_save"):
        problems.append(f"modules_to_save: value {config['modules_to_save']!r} is not supported by vLLM; allowed: null")
    if config.get("use_dora"):
        problems.append("use_dora: value True is not supported by vLLM (no DoRA); allowed: false")
    if config.get("task_type") not in (None, "CAUSAL_LM"):
        problems.append(
            f"task_type: value {config.get('task_type')!r} is not a text-generation adapter; allowed: 'CAUSAL_LM'"
        )
    return problems


def fit_problems(
    adapter: dict[str, list[int]], base: dict[str, list[int]], fan_in_fan_out: bool
) -> tuple[list[str], int]:
    """(every way the adapter's tensors do not fit the base's weights, the highest rank its tensors carry)."""
    problems: list[str] = []
    highest = 0
    for name, shape in sorted(adapter.items()):
        match = _TENSOR.match(name)
        if match is None:
            problems.append(f"tensor {name!r} is not a LoRA weight (lora_A, lora_B, lora_embedding_A/B)")
            continue
        module, kind = match["module"], match["kind"]
        weight = base.get(f"{module}.weight") or base.get(f"{module.partition('.')[2]}.weight")
        if weight is None:
            problems.append(f"tensor {name!r}: the base model has no weight {module}.weight")
            continue
        if len(shape) != 2 or len(weight) != 2:
            problems.append(f"tensor {name!r}: shape {shape} against the base's {weight}: both must be matrices")
            continue
        if kind == "lora_embedding_A":  # [r, num_embeddings] against the embedding's [num_embeddings, dim]
            rank, fits = shape[0], shape[1] == weight[0]
        elif kind == "lora_embedding_B":  # [dim, r]
            rank, fits = shape[1], shape[0] == weight[1]
        else:
            out_features, in_features = (weight[1], weight[0]) if fan_in_fan_out else (weight[0], weight[1])
            rank, fits = (
                (shape[0], shape[1] == in_features) if kind == "lora_A" else (shape[1], shape[0] == out_features)
            )
        highest = max(highest, rank)
        if not fits:
            problems.append(f"tensor {name!r}: shape {shape} does not fit the base's {module}.weight {weight}")
    return problems, highest


def read_adapter_source(source: Path, where: str) -> dict[str, Any]:
    """A source adapter's adapter_config.json, read bounded and checked (facts.model_files.read_adapter_config: a
    regular file, its size and depth, r a positive integer, lora_alpha a finite number above 0, target_modules not
    empty), and the other checks vLLM makes (config_problems); BuildError naming the file, key and value."""
    path = source / ADAPTER_CONFIG
    if not os.path.lexists(path):
        raise BuildError(
            f"{where}: {source} has no {ADAPTER_CONFIG}: not a PEFT adapter (peft's save_pretrained writes it)"
        )
    try:
        config = read_adapter_config(path)
    except UnreadableModel as err:
        raise BuildError(f"{where}: {err}") from None
    if problems := config_problems(config):
        raise BuildError(f"{where}: {ADAPTER_CONFIG}:\n  - " + "\n  - ".join(problems))
    return config


def check_adapter_sources(plan: EndpointPlan) -> None:
    """Every adapter of `plan` read and checked before anything is built (read_adapter_source, and a local
    adapter's weights header), so a bad adapter fails `model_build build` before the endpoint's artifact is written."""
    for index, adapter in enumerate(plan.adapters):
        spec = adapter.spec
        where = f"endpoint {plan.name!r}: adapters[{index}] ({spec.name!r}, {spec.model!r})"
        source = Path(spec.model).expanduser()
        if not source.is_dir():
            continue  # a Hub adapter: read when the build downloads it
        read_adapter_source(source, where)
        if os.path.lexists(source / ADAPTER_WEIGHTS):
            safetensors_shapes(source / ADAPTER_WEIGHTS)
        elif os.path.lexists(source / ADAPTER_PICKLE):
            pickled_tensors(source / ADAPTER_PICKLE, where)


def pickled_tensors(path: Path, where: str) -> dict[str, Any]:
    """{name: tensor} of a pickled adapter_model.bin: a regular file of at most MAX_ADAPTER_PICKLE_BYTES read with
    torch.load(weights_only=True) (tensors only: a pickle that would run code is refused by torch's own unpickler);
    BuildError naming the file otherwise."""
    import torch

    try:
        check_regular_file(path, cap=MAX_ADAPTER_PICKLE_BYTES)
        tensors = torch.load(path, map_location="cpu", weights_only=True)
    except UnreadableModel as err:
        raise BuildError(f"{where}: {err}") from None
    except Exception as err:  # weights_only's UnpicklingError (a pickle that is more than tensors), a corrupt file
        raise BuildError(
            f"{where}: {path} is not a file of tensors torch.load(weights_only=True) reads "
            f"({type(err).__name__}: {str(err)[:200]}); allowed: {ADAPTER_WEIGHTS}, or a .bin of tensors only"
        ) from None
    if not isinstance(tensors, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()
    ):
        raise BuildError(f"{where}: {path} is not a mapping of names to tensors")
    return tensors


def _source_files(source: Path, out: Path, where: str) -> None:
    """adapter_config.json and the weights into `out`: safetensors copied unchanged; a pickled .bin read with
    torch.load(weights_only=True) (tensors only, no code runs) and written as safetensors."""
    if not (source / ADAPTER_CONFIG).is_file():
        raise BuildError(
            f"{where}: {source} has no {ADAPTER_CONFIG}: not a PEFT adapter (peft's save_pretrained writes it)"
        )
    shutil.copyfile(source / ADAPTER_CONFIG, out / ADAPTER_CONFIG)
    if (source / ADAPTER_WEIGHTS).is_file():
        shutil.copyfile(source / ADAPTER_WEIGHTS, out / ADAPTER_WEIGHTS)
    elif os.path.lexists(source / ADAPTER_PICKLE):
        from safetensors.torch import save_file

        tensors = pickled_tensors(source / ADAPTER_PICKLE, where)
        save_file({k: v.contiguous() for k, v in tensors.items()}, out / ADAPTER_WEIGHTS)
    else:
        raise BuildError(f"{where}: {source} has neither {ADAPTER_WEIGHTS} nor {ADAPTER_PICKLE}")


def build_adapter(
    plan: EndpointPlan, adapter: Any, out_dir: Path, progress: bool = False, base_dir: Path | None = None
) -> dict[str, Any]:
    """Check adapter `adapter` (deployment.adapters.AdapterPlan) of endpoint `plan` against its base and its
    container's LoRA limits, and write its artifact into `out_dir` atomically. Raises BuildError naming what is wrong.
    `base_dir`: a directory with the base's safetensors (its built artifact); default: the base model's source."""
    ep, spec = plan.spec, adapter.spec
    index = next(i for i, a in enumerate(ep.adapters) if a.name == spec.name)
    where = f"endpoint {ep.name!r}: adapters[{index}] ({spec.name!r}, {spec.model!r})"
    sizing = plan.system.lora_sizing(ep, plan.engine)
    if sizing is None:  # the config load refuses adapters on such a system; a build says so too
        raise BuildError(f"{where}: system {ep.system!r} serves no LoRA adapters")
    source = resolve_model_source(spec.model, spec.revision, allow_patterns=SOURCE_PATTERNS)

    def fill(out: Path) -> dict[str, Any]:
        config = read_adapter_source(source, where)
        _source_files(source, out, where)
        if problems := config_problems(config):
            raise BuildError(f"{where}: {ADAPTER_CONFIG}:\n  - " + "\n  - ".join(problems))
        rank = adapter_rank(config)
        assert rank is not None  # config_problems refused it otherwise
        if rank > sizing.max_rank:
            raise BuildError(rank_refusal(ep, index, rank, sizing))
        trained_on = config.get("base_model_name_or_path")
        if (
            isinstance(trained_on, str)
            and _is_hub_id(trained_on)
            and _is_hub_id(ep.model)
            and trained_on.lower() != ep.model.lower()
        ):
            raise BuildError(
                f"{where}: it was trained on {trained_on!r} (adapter_config.json base_model_name_or_path), but the "
                f"endpoint serves {ep.model!r}; use an adapter of {ep.model!r}, or serve {trained_on!r}"
            )
        base = base_dir or resolve_model_source(ep.model, ep.revision)
        tensors = safetensors_shapes(out / ADAPTER_WEIGHTS)
        problems, tensor_rank = fit_problems(tensors, base_shapes(base), bool(config.get("fan_in_fan_out")))
        if not tensors:
            problems.append(f"{ADAPTER_WEIGHTS} holds no tensors")
        if problems:
            shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
            raise BuildError(f"{where}: does not fit the base model {ep.model!r}:\n  - " + "\n  - ".join(shown))
        if tensor_rank > sizing.max_rank:
            raise BuildError(rank_refusal(ep, index, tensor_rank, sizing))
        # peft's LoraConfig: every module's rank is `r` unless rank_pattern gives it another; the tensors carry the
        # rank the engine will use (lora_A is [r, in]), so a config that says otherwise is refused.
        if (tensor_rank != rank) if not config.get("rank_pattern") else (tensor_rank > rank):
            raise BuildError(
                f"{where}: {ADAPTER_CONFIG} r: value {config.get('r')!r} is contradicted by the tensors, whose "
                f"highest rank is {tensor_rank}; allowed: the rank the tensors carry (peft LoraConfig.r, rank_pattern)"
            )
        base_config = _json_or_empty(base / "config.json")
        return write_manifest(
            out,
            progress=progress,
            kind="lora-adapter",
            endpoint=ep.name,
            adapter=spec.name,
            model=spec.model,
            revision=spec.revision,
            system=ep.system,
            base={
                "model": ep.model,
                "revision": ep.revision,
                "trained_on": trained_on,
                "architectures": base_config.get("architectures"),
                "model_type": base_config.get("model_type"),
            },
            lora={
                "r": config.get("r"),
                "rank": max(rank, tensor_rank),
                "lora_alpha": config.get("lora_alpha"),
                "target_modules": config.get("target_modules"),
            },
            container={"max_rank": sizing.max_rank, "max_adapters": sizing.max_adapters},
            verification={
                "tensors": len(tensors),
                "fit": "every LoRA tensor's shape matches the base's weight",
                "base_name": "compared"
                if _is_hub_id(str(trained_on)) and _is_hub_id(ep.model)
                else "not compared (a local path)",
            },
        )

    return write_atomically(Path(out_dir), fill)


def _is_hub_id(model: str) -> bool:
    return bool(model) and not _looks_like_path(model) and not Path(model).expanduser().exists()


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        document = read_model_json(path)
    except UnreadableModel:
        return {}
    return document if isinstance(document, dict) else {}


def write_atomically(out_dir: Path, fill: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """fill(a temporary sibling directory), then rename it into place: a failure leaves `out_dir` as it was."""
    out_dir = out_dir.absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        manifest = fill(tmp)
        tmp.chmod(0o755)
        for path in tmp.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / out_dir.name)
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_adapters(plan: EndpointPlan, build_root: Path, progress: bool = False) -> list[tuple[Any, dict[str, Any]]]:
    """Build every adapter of `plan` into <build root>/<endpoint>.adapters/<adapter>/: [(AdapterPlan, manifest)]."""
    from deployment.adapters import adapter_build_dir

    built = Path(build_root) / plan.name  # the base's artifact, when built: its safetensors hold the same shapes
    base_dir = built if any(built.glob("*.safetensors")) else None
    return [
        (a, build_adapter(plan, a, adapter_build_dir(build_root, plan.name, a.name), progress, base_dir))
        for a in plan.adapters
    ]


def publish_adapters(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    build_root: Path,
    *,
    session: Any = None,
    progress: bool | None = None,
) -> list[Any]:
    """Publish every adapter of `plan` from its local build as model.tar.gz under its own content hash
    (models/<endpoint>/adapters/<adapter>/<hash>/; publish.publish_artifact: manifest.json last, unchanged archives
    skipped). A pinned adapter must be the build's."""
    from deployment.adapters import adapter_build_dir, adapter_root
    from model_build.publish import PublishError, artifact_bucket_client, load_manifest, publish_artifact

    if not plan.adapters:
        return []
    bucket, s3 = artifact_bucket_client(environment_plan, session=session)
    reports = []
    for adapter in plan.adapters:
        build_dir = adapter_build_dir(build_root, plan.name, adapter.name)
        if not (build_dir / MANIFEST_NAME).is_file():
            raise PublishError(
                f"endpoint {plan.name!r}: adapter {adapter.name!r} is not built ({build_dir} has no {MANIFEST_NAME}); run "
                f"`python -m model_build build --config {environment_plan.config_path} --env {environment_plan.environment_name} "
                f"--endpoint {plan.name}` first"
            )
        manifest = load_manifest(build_dir)
        pin = adapter.pinned_hash
        if pin and pin != manifest.content_hash:
            raise PublishError(
                f"endpoint {plan.name!r}: adapter {adapter.name!r} pins artifact_hash {pin[:12]}..., but {build_dir} "
                f"holds {manifest.content_hash[:12]}...; remove the pin to publish this build, or publish the pinned build"
            )
        prefix = f"{adapter_root(plan.name, adapter.name)}{manifest.content_hash}/"
        reports.append(
            publish_artifact(
                build_dir,
                bucket,
                prefix,
                s3_client=s3,
                model_data="tar-gz",
                progress=progress,
                manifest=manifest,
                bucket_checked=True,
            )
        )
    return reports


__all__ = [
    "build_adapter",
    "build_adapters",
    "config_problems",
    "fit_problems",
    "publish_adapters",
    "safetensors_shapes",
    "write_atomically",
]
