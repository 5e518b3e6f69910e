"""The build recipe of the checkpoint systems (vllm, sglang, tgi, lmi-vllm, lmi-trtllm): the checkpoint's own files,
copied unchanged (the metadata files rewritten for an image's older transformers, where the system says its image
reads them with one: ServingSystem.rewrite_metadata_for_image) and verified.

`metadata/` holds a copy of the small files (what SageMaker downloads when the engine streams the weights itself).
A CPU verifies files, headers, index, parameters, tokenizer and fit (the manifest's `verification`); only the GPU
shows that the engine accepts the weights. Each check in full: docs/design/engines.md.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from artifact import BuildError
from artifact.hub_source import HubError, HubModel, open_hub_model
from endpoint_config import EndpointSpec
from facts.model_files import SAFETENSORS_DTYPE_BYTES, read_safetensors_header
from facts.models import read_json_object

from .base import E, ServingSystem
from .checkpoint_facts import Checkpoint, read_local_checkpoint, read_metadata_checkpoint

# What a build fetches from the Hub: weights as safetensors only (no pickles), configs, tokenizer, chat template.
SOURCE_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*", "*.jinja")
# The small files the engines read besides the weights (transformers' names; vLLM also reads hf_quant_config.json).
METADATA_FILES = (
    "config.json",
    "generation_config.json",
    "hf_quant_config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
INDEX_FILE = "model.safetensors.index.json"
METADATA_DIR = "metadata"
CHUNK = 8 * 2**20
VERIFY_MESSAGES = [
    {"role": "system", "content": "You are brief."},
    {"role": "user", "content": "The capital of France?"},
]


def _fail(endpoint: EndpointSpec, message: str) -> BuildError:
    return BuildError(f"endpoint {endpoint.name!r}: model {endpoint.model!r}: {message}")


def check_safetensors(path: Path) -> tuple[dict[str, list[int]], int]:
    """{tensor: shape} of one safetensors file and its element count, after checking its layout (docs/design/engines.md);
    ValueError saying what is wrong. The header is read bounded (facts.model_files.read_safetensors_header: a regular
    file, the length within the file and safetensors' own cap, depth, types and offsets), then its layout checked."""
    tensors, length, size = read_safetensors_header(path, name=path.name)
    return check_safetensors_header(path.name, size, length, tensors)


def check_safetensors_header(
    name: str, size: int, length: int, tensors: dict[str, tuple[str, list[int], int, int]]
) -> tuple[dict[str, list[int]], int]:
    """The layout check of one safetensors file from its parsed header ({tensor: (dtype, shape, begin, end)},
    facts.model_files.parse_safetensors_header) and the file's size (a local file's, or the Hub API's): every
    tensor's span matches its dtype and shape, the spans tile the data, and header + data is the file. {tensor: shape}
    and the element count; ValueError saying what is wrong."""
    shapes, spans, elements = {}, [], 0
    for tensor, (dtype, shape, begin, end) in tensors.items():
        count = math.prod(shape)
        if end - begin != count * SAFETENSORS_DTYPE_BYTES[dtype]:
            raise ValueError(
                f"{name}: tensor {tensor!r} {dtype}{shape} spans {end - begin} bytes, not "
                f"{count * SAFETENSORS_DTYPE_BYTES[dtype]}"
            )
        shapes[tensor], elements = list(shape), elements + count
        spans.append((begin, end, tensor))
    position = 0
    for begin, end, tensor in sorted(spans):
        if begin != position:
            raise ValueError(
                f"{name}: tensor {tensor!r} starts at byte {begin} of the data, expected {position} "
                "(overlapping or a gap)"
            )
        position = end
    if 8 + length + position != size:
        raise ValueError(
            f"{name}: {size} bytes, but header and tensors take {8 + length + position} (truncated or padded)"
        )
    return shapes, elements


def check_weights(source: Path) -> tuple[list[Path], dict[str, list[int]], int]:
    """The shards, {tensor: shape} over all of them and the element count; ValueError on any inconsistency."""
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        pickles = sorted(p.name for p in source.glob("*.bin")) + sorted(p.name for p in source.glob("*.pt"))
        raise ValueError(_no_safetensors(str(source), pickles))
    found = {shard.name: check_safetensors(shard) for shard in shards}
    index_path = source / INDEX_FILE
    index = read_json_object(index_path) if index_path.is_file() else None
    shapes, elements = _check_shards(found, index)
    return shards, shapes, elements


def _no_safetensors(where: str, pickles: list[str]) -> str:
    extra = (
        f" (it has {', '.join(pickles[:3])}: pickled weights, which this project does not publish)" if pickles else ""
    )
    return f"no *.safetensors weights in {where}{extra}; allowed: a checkpoint with safetensors weights"


def _check_shards(
    found: dict[str, tuple[dict[str, list[int]], int]], index: dict[str, Any] | None
) -> tuple[dict[str, list[int]], int]:
    """Each tensor in one shard only, and the index (when there is one) placing each where it is."""
    shapes: dict[str, list[int]] = {}
    where: dict[str, str] = {}
    elements = 0
    for shard, (tensors, count) in found.items():
        for name in tensors:
            if name in where:
                raise ValueError(f"tensor {name!r} is in both {where[name]} and {shard}")
            where[name] = shard
        shapes.update(tensors)
        elements += count
    if index is not None:
        weight_map = index.get("weight_map", {})
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"{INDEX_FILE}: weight_map is not an object of tensor -> shard file name")
        missing = sorted(set(where) - set(weight_map))
        absent = sorted(set(weight_map) - set(where))
        misplaced = sorted(n for n in set(where) & set(weight_map) if weight_map[n] != where[n])
        for label, names in (
            ("not in the index", missing),
            ("in the index but in no shard", absent),
            ("in another shard than the index says", misplaced),
        ):
            if names:
                raise ValueError(f"{INDEX_FILE}: {len(names)} tensor(s) {label}, e.g. {names[0]!r}")
    return shapes, elements


def architecture_parameters(config_path: Path) -> int | None:
    """The parameters transformers builds for a config.json (on the meta device: no memory); None when transformers
    has no causal-LM class for it."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(config_path.parent)
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config)
    except ValueError:
        return None
    return sum(p.numel() for p in model.parameters())


def check_tokenizer(source: Path) -> dict[str, Any]:
    """Load the tokenizer as the engines do (transformers AutoTokenizer), round-trip a prompt, render the chat
    template when there is one."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    prompt = "The capital of France is Paris."
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    if decoded.strip() != prompt:
        raise ValueError(f"the tokenizer does not round-trip {prompt!r}: decodes to {decoded!r}")
    record: dict[str, Any] = {"class": type(tokenizer).__name__, "round_trip": True, "chat_template": False}
    if getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(VERIFY_MESSAGES, tokenize=False, add_generation_prompt=True)
        if VERIFY_MESSAGES[-1]["content"] not in rendered:
            raise ValueError("the chat template renders a conversation without its last message")
        record["chat_template"] = True
    return record


def _copy(source: Path, target: Path) -> str:
    """Copy one file, returning the sha256 of what was read."""
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def _write_chat_template(endpoint: EndpointSpec, out_dir: Path, copied: dict[str, str]) -> list[str]:
    """An endpoint that serves chat: chat.template written into the artifact's tokenizer_config.json (a
    chat_template.jinja beside it goes), where both engines read it: vLLM 0.30.0 renders with the tokenizer's chat
    template unless a request or --chat-template gives one (renderers/hf.py resolve_chat_template), SGLang 0.5.20
    takes the processor's or the tokenizer's (srt/parser/template_manager.py _resolve_hf_chat_template); then a
    sample conversation rendered with it. BuildError when the endpoint serves chat and the artifact has no template.
    The rewritten files' digests replace the copies' in `copied`; returns their names."""
    from .chat_template import write_chat_template

    before = {name: (out_dir / name).is_file() for name in ("tokenizer_config.json", "chat_template.jinja")}
    source = write_chat_template(endpoint, out_dir)
    if source != "config":
        return []
    for name, existed in before.items():
        path = out_dir / name
        if path.is_file():
            copied[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif existed:
            copied.pop(name, None)
    return ["tokenizer_config.json"]


def _nothing_rewritten(metadata_dir: Path, out_dir: Path) -> list[str]:
    return []


@dataclass(frozen=True)
class ContainerFiles:
    """What a system's image adds to the checkpoint build: `check(metadata_dir)` refuses the model from its metadata
    before anything is written (BuildError); `rewrite(metadata_dir, out_dir)` rewrites the copied metadata files so
    the image reads them and returns their names; `fields` are added to the manifest. Weights are never rewritten, so
    a Hub model still plans from its metadata and the staging job moves the Hub's own files. Where a system opts in
    (ServingSystem.rewrite_metadata_for_image), image_metadata_files gives its image's; a recipe may add its own
    checks and fields (the LMI systems, systems/djl_common/lmi.py)."""

    check: Callable[[Path], None]
    rewrite: Callable[[Path, Path], list[str]] = _nothing_rewritten
    fields: dict[str, Any] = field(default_factory=dict)

    def then(self, other: ContainerFiles) -> ContainerFiles:
        """Both: this one's checks and rewrites first, then `other`'s; `other`'s fields win."""

        def check(metadata_dir: Path) -> None:
            self.check(metadata_dir)
            other.check(metadata_dir)

        def rewrite(metadata_dir: Path, out_dir: Path) -> list[str]:
            return sorted({*self.rewrite(metadata_dir, out_dir), *other.rewrite(metadata_dir, out_dir)})

        return ContainerFiles(check, rewrite, {**self.fields, **other.fields})


def image_metadata_files(endpoint: EndpointSpec, system: ServingSystem[Any]) -> ContainerFiles:
    """The metadata files as the system's image reads them with its own transformers/tokenizers (ImagePin.python_stack):
    the tokenizer files it cannot read rewritten, or refused where nothing it reads is equivalent
    (container_tokenizer.plan_tokenizer), and config.json for a transformers 4.x (recipe_common.config_for_container:
    `dtype` -> `torch_dtype`, `rope_parameters` -> `rope_theta`, without which 4.x silently takes its default RoPE
    base). The manifest's `target_container` names the image and its libraries."""
    from . import recipe_common as common
    from .container_tokenizer import image_python_stack, plan_tokenizer

    image = system.image
    if image is None:  # ServingSystem refuses the facet without an image
        raise LookupError(f"system {system.name!r} runs no AWS image")
    stack = image_python_stack(image)
    target = f"transformers {stack.transformers} ({image.repository}:{image.gpu_tag})"
    floor = stack.transformers_floor
    transformers4 = floor is not None and floor[0] < 5

    def check(metadata_dir: Path) -> None:
        plan_tokenizer(metadata_dir, stack, target)

    def rewrite(metadata_dir: Path, out_dir: Path) -> list[str]:
        export = plan_tokenizer(metadata_dir, stack, target)
        names = sorted(name for name, text in export.files.items() if text is not None)
        for name in names:
            (out_dir / name).write_text(export.files[name] or "", encoding="utf-8")
        if transformers4:
            common.config_for_container(out_dir, endpoint.dtype)
            names.append("config.json")
        return sorted(set(names))

    fields = {
        "target_container": {
            "image_repository": image.repository,
            "image_tag_gpu": image.gpu_tag,
            "transformers": stack.transformers,
            "tokenizers": stack.tokenizers,
        }
    }
    return ContainerFiles(check=check, rewrite=rewrite, fields=fields)


@dataclass
class CheckpointSource:
    """What a checkpoint build reads: a local directory (the files themselves) or a Hub model at a pinned commit (its
    metadata files downloaded into a temporary folder, the shards' headers read by range, sizes and sha256 from the
    Hub's API). The checks run the same on both (_check_checkpoint); only the writing differs."""

    model: str
    metadata_dir: Path  # config.json, tokenizer files, the index: the model directory itself, or the download
    shards: list[str]  # the weight files' names, sorted
    hub: HubModel | None = None
    headers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # Hub: shard -> (length, header)

    def metadata_names(self) -> list[str]:
        return [n for n in (INDEX_FILE, *METADATA_FILES) if (self.metadata_dir / n).is_file()]

    def check_weights(self) -> tuple[dict[str, list[int]], int]:
        """The layout of every shard and the index: {tensor: shape} and the element count; ValueError."""
        if self.hub is None:
            _, shapes, elements = check_weights(self.metadata_dir)
            return shapes, elements
        found = {
            name: check_safetensors_header(name, self.hub.files[name].size, *self.headers[name]) for name in self.shards
        }
        index_path = self.metadata_dir / INDEX_FILE
        return _check_shards(found, read_json_object(index_path) if index_path.is_file() else None)

    def checkpoint(self) -> Checkpoint:
        if self.hub is None:
            return read_local_checkpoint(self.metadata_dir, self.model)
        data_bytes = sum(self.hub.files[name].size - 8 - self.headers[name][0] for name in self.shards)
        return read_metadata_checkpoint(self.metadata_dir, self.model, data_bytes)


def hub_checkpoint_source(endpoint: EndpointSpec, metadata_dir: Path, progress: bool) -> CheckpointSource:
    """Read a Hub model's metadata only: its commit, file list, the metadata files (into `metadata_dir`) and every
    shard's header; a bar counts the files read (and the bytes)."""
    from tqdm.auto import tqdm

    try:
        hub = open_hub_model(endpoint.model, endpoint.revision)
        shards = sorted(p for p in hub.files if p.endswith(".safetensors") and "/" not in p)
        if not shards:
            pickles = sorted(p for p in hub.files if p.endswith((".bin", ".pt")) and "/" not in p)
            raise _fail(endpoint, _no_safetensors(hub.where(), pickles))
        wanted = [n for n in (INDEX_FILE, *METADATA_FILES) if n in hub.files]
        if "config.json" not in wanted:
            raise _fail(endpoint, f"{hub.where()} has no config.json; allowed: a transformers model repository")
        with tqdm(
            total=len(wanted) + len(shards), desc=f"plan {endpoint.model}", unit="file", disable=not progress
        ) as bar:
            for name in wanted:
                hub.download(name, metadata_dir / name)
                bar.set_postfix_str(f"{name}, {hub.bytes_read:,} B read")
                bar.update()
            headers = {}
            for name in shards:
                headers[name] = hub.safetensors_header(name)
                bar.set_postfix_str(f"{name} header, {hub.bytes_read:,} B read")
                bar.update()
    except HubError as err:
        raise _fail(endpoint, str(err)) from None
    return CheckpointSource(endpoint.model, metadata_dir, shards, hub, headers)


def build_checkpoint_artifact(
    endpoint: EndpointSpec,
    engine: E,
    out_dir: Path,
    progress: bool,
    system: ServingSystem[E],
    container: ContainerFiles | None = None,
) -> dict[str, Any]:
    """Resolve the model, check it (layout, parameters, tokenizer, compatibility), write the artifact and manifest.

    A local directory is copied whole. A Hub model is planned from its metadata (docs/design/weights.md): the
    artifact folder gets the metadata files only, and the manifest lists every file (the weights with the Hub's
    sizes and LFS sha256, so its content hash is the one a full copy gives) and the `staging` block the job that
    moves the weights Hub -> S3 reads."""
    from tqdm.auto import tqdm

    from artifact.source import hub_model_id

    if system.rewrite_metadata_for_image:  # the system's own checks first, then what its image reads
        image_files = image_metadata_files(endpoint, system)
        container = image_files if container is None else container.then(image_files)
    out_dir = Path(out_dir)
    if hub_model_id(endpoint.model) is not None:
        with tempfile.TemporaryDirectory(prefix="hub-metadata-") as downloaded:
            return _build_from_hub(endpoint, engine, out_dir, progress, system, Path(downloaded), container)
    from artifact.manifest import write_manifest
    from artifact.source import resolve_model_source

    steps = tqdm(total=5, desc=f"build {endpoint.name}", unit="step", disable=not progress)
    steps.set_postfix_str("resolve")
    directory = resolve_model_source(endpoint.model, endpoint.revision, allow_patterns=SOURCE_PATTERNS)
    if not (directory / "config.json").is_file():
        raise _fail(endpoint, f"{directory} has no config.json; allowed: a Hugging Face model directory or Hub id")
    source = CheckpointSource(endpoint.model, directory, [p.name for p in sorted(directory.glob("*.safetensors"))])
    steps.update()

    steps.set_postfix_str("check")
    elements, checkpoint, verification = _check_checkpoint(endpoint, engine, source, system, container)
    steps.update()

    steps.set_postfix_str("copy")
    copied, written = _copy_checkpoint(endpoint, source, out_dir, container, verification)
    steps.update()

    steps.set_postfix_str("hash")
    fields = _manifest_fields(endpoint, engine, system, checkpoint, elements, container)
    # Checked right below: a mismatch fails the build, and the build directory is discarded (model_build's atomic build).
    verification["files"] = (
        f"{len(copied)} files byte-identical to the source (sha256 read while copying and again)"
        + (f"; {', '.join(written)} with chat.template written in" if written else "")
    )
    manifest = write_manifest(out_dir, progress=progress, **fields, verification=verification)
    steps.update()

    steps.set_postfix_str("verify")
    _verify_written(endpoint, manifest, copied)
    steps.update()
    steps.close()
    return manifest


def _build_from_hub(
    endpoint: EndpointSpec,
    engine: E,
    out_dir: Path,
    progress: bool,
    system: ServingSystem[E],
    downloaded: Path,
    container: ContainerFiles | None,
) -> dict[str, Any]:
    """The metadata-only build of a Hub model (build_checkpoint_artifact)."""
    from tqdm.auto import tqdm

    from artifact.manifest import write_manifest

    source = hub_checkpoint_source(endpoint, downloaded, progress)
    hub = source.hub
    assert hub is not None
    steps = tqdm(total=3, desc=f"build {endpoint.name}", unit="step", disable=not progress)
    # The architecture on the meta device and the tokenizer take seconds for a 30 B model: say so.
    steps.set_postfix_str("check layout, parameters, tokenizer, fit")
    elements, checkpoint, verification = _check_checkpoint(endpoint, engine, source, system, container)
    steps.update()
    steps.set_postfix_str("write metadata")
    copied, written = _copy_checkpoint(endpoint, source, out_dir, container, verification)
    steps.update()
    steps.set_postfix_str("manifest")
    weights: list[dict[str, Any]] = []
    for name in source.shards:
        file = hub.files[name]
        weights.append({"path": name, "size": file.size, "sha256": file.sha256 or _git_sha256(endpoint, hub, name)})
    fields = _manifest_fields(endpoint, engine, system, checkpoint, elements, container)
    fields["model"]["commit"] = hub.commit
    fields["staging"] = {
        "hub": {"endpoint": hub.endpoint, "repo_id": hub.repo_id, "commit": hub.commit},
        "files": [w["path"] for w in weights],
        "token_secret": endpoint.hub_token_secret,
    }
    weight_bytes = sum(w["size"] for w in weights)
    verification["files"] = (
        f"{len(copied)} metadata files as the Hub lists them (size, sha256) at commit {hub.commit}; "
        f"{len(weights)} weight files ({weight_bytes:,} bytes) listed with the Hub's size and LFS sha256, staged by "
        f"the job; {hub.bytes_read:,} bytes read to plan"
        + (f"; {', '.join(written)} with chat.template written in" if written else "")
    )
    manifest = write_manifest(out_dir, progress=progress, remote_files=weights, **fields, verification=verification)
    _verify_written(endpoint, manifest, {**copied, **{w["path"]: w["sha256"] for w in weights}})
    steps.update()
    steps.close()
    return manifest


def _git_sha256(endpoint: EndpointSpec, hub: HubModel, name: str) -> str:
    try:
        return hub.sha256_of_git_file(name)
    except HubError as err:
        raise _fail(endpoint, str(err)) from None


def _verify_written(endpoint: EndpointSpec, manifest: dict[str, Any], copied: dict[str, str]) -> None:
    hashed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    differ = sorted(path for path, digest in copied.items() if hashed.get(path) != digest)
    if differ or set(hashed) != set(copied):
        unexpected = sorted(set(hashed) - set(copied))
        raise _fail(endpoint, f"the written files differ from the source: {', '.join(differ + unexpected)}")


def _check_checkpoint(
    endpoint: EndpointSpec,
    engine: E,
    source: CheckpointSource,
    system: ServingSystem[E],
    container: ContainerFiles | None = None,
) -> tuple[int, Checkpoint, dict[str, Any]]:
    """The checkpoint's parameter count and facts, checked (weights, parameters, tokenizer, the endpoint's rules on
    its files), and what was verified; BuildError naming the first thing that fails. The same for a local directory
    and a Hub model's metadata."""
    from . import all_systems
    from .checks import built_weights_problem, checkpoint_problems_on_every_pool

    if container is not None:
        container.check(source.metadata_dir)
    try:
        _, elements = source.check_weights()
        checkpoint = source.checkpoint()
    except ValueError as err:
        raise _fail(endpoint, str(err)) from None
    where = "" if source.hub is None else " (headers read by range)"
    verification: dict[str, Any] = {
        "safetensors_headers": f"{len(source.shards)} file(s), {elements:,} elements{where}"
    }
    # The model's own chat template(s) rendered under a time, output and memory budget before transformers renders
    # them without one (check_tokenizer): a refusal names the file.
    from .chat_template import check_model_chat_templates

    try:
        check_model_chat_templates(source.metadata_dir, VERIFY_MESSAGES)
    except BuildError as err:
        raise _fail(endpoint, str(err)) from None
    verification["parameters"] = _parameter_verification(endpoint, source.metadata_dir, checkpoint, elements)
    try:
        verification["tokenizer"] = check_tokenizer(source.metadata_dir)
    except Exception as err:
        raise _fail(endpoint, f"the tokenizer does not load or work: {type(err).__name__}: {err}") from None
    # The engine systems' rules need their profile (vllm, sglang); a system without one (LMI, tgi: no engine table of
    # its image) gets the fit check every converting recipe runs on the weights it reads (recipe_common.load_source),
    # on every pool.
    if system.profile is not None:
        problems = checkpoint_problems_on_every_pool(endpoint, system, engine, checkpoint, all_systems())
    else:
        problem = built_weights_problem(endpoint, checkpoint.facts.total_parameters or elements)
        problems = [problem] if problem is not None else []
    if system.checkpoint_rules is not None:
        problems += system.checkpoint_rules(endpoint, engine, checkpoint)
    if problems:
        raise BuildError(
            "the checkpoint's own files refuse this endpoint; nothing was written:\n  - " + "\n  - ".join(problems)
        )
    return elements, checkpoint, verification


def _parameter_verification(endpoint: EndpointSpec, source: Path, checkpoint: Checkpoint, elements: int) -> str:
    """The safetensors' element count against config.json's architecture (BuildError where they differ), or why it
    was not checked."""
    facts = checkpoint.facts
    if facts.quantization is not None:
        return (
            f"not verified: {facts.quantization.method} packs elements and scales, so the "
            "tensors cannot be matched to the unquantized architecture on a CPU"
        )
    expected = architecture_parameters(source / "config.json")
    if expected is not None and expected != elements:
        raise _fail(
            endpoint,
            f"the safetensors hold {elements:,} parameters, but config.json's "
            f"{facts.architecture} has {expected:,} (transformers on the meta device): a truncated or "
            "mismatched checkpoint; nothing was written",
        )
    return (
        f"{elements:,} = config.json's {facts.architecture}"
        if expected is not None
        else "not checked: transformers has no causal-LM class for this config"
    )


def _copy_checkpoint(
    endpoint: EndpointSpec,
    source: CheckpointSource,
    out_dir: Path,
    container: ContainerFiles | None = None,
    verification: dict[str, Any] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """Copy the shards (a local directory's), index and metadata files (the container's rewrites applied, and the
    metadata again under METADATA_DIR, with a chat template written in); their sha256 by artifact path, and the
    files written rather than copied."""
    copied: dict[str, str] = {}
    shards = source.shards if source.hub is None else []
    for name in shards + source.metadata_names():
        copied[name] = _copy(source.metadata_dir / name, out_dir / name)
    if container is not None:
        rewritten = container.rewrite(source.metadata_dir, out_dir)
        for name in rewritten:
            copied[name] = hashlib.sha256((out_dir / name).read_bytes()).hexdigest()
        if verification is not None:
            verification["container_files"] = f"rewritten for the image's transformers: {', '.join(rewritten)}"
    written: list[str] = []
    if endpoint.chat:
        written = _write_chat_template(endpoint, out_dir, copied)
    for name in METADATA_FILES:
        if (out_dir / name).is_file():  # the copies, with a chat template written in
            copied[f"{METADATA_DIR}/{name}"] = _copy(out_dir / name, out_dir / METADATA_DIR / name)
    return copied, written


def _manifest_fields(
    endpoint: EndpointSpec,
    engine: E,
    system: ServingSystem[E],
    checkpoint: Checkpoint,
    elements: int,
    container: ContainerFiles | None = None,
) -> dict[str, Any]:
    """The manifest's fields besides its files and verification: the endpoint, the model's facts, image, environment."""
    facts = checkpoint.facts
    return {
        **(container.fields if container is not None else {}),
        "system": endpoint.system,
        "endpoint": endpoint.name,
        "dtype": endpoint.dtype,
        "model": {
            "source": endpoint.model,
            "revision": endpoint.revision,
            "architecture": facts.architecture,
            "model_type": facts.model_type,
            "checkpoint_dtype": facts.dtype,
            "quantization": None
            if facts.quantization is None
            else {
                "method": facts.quantization.method,
                "detail": facts.quantization.detail,
                "weight_bits": facts.quantization.weight_bits,
            },
            "parameter_count": facts.total_parameters or elements,
            "active_parameter_count": facts.active_parameters,
            "weight_bytes": checkpoint.file_bytes,
        },
        "image": {"repository": system.image.repository, "tag": system.image.gpu_tag} if system.image else None,
        "environment": system.environment(endpoint, engine),
        "parts": {"model_data": "", "streamed_model_data": f"{METADATA_DIR}/"},
    }
