"""The build recipe of the engine systems (vllm, sglang): the checkpoint's own files, copied unchanged and verified.

`metadata/` holds a copy of the small files (what SageMaker downloads when the engine streams the weights itself).
A CPU verifies files, headers, index, parameters, tokenizer and fit (the manifest's `verification`); only the GPU
shows that the engine accepts the weights. Each check in full: docs/design/engines.md.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from artifact import BuildError
from endpoint_config import EndpointSpec
from facts.model_files import read_safetensors_header
from facts.models import read_json_object

from .base import E, ServingSystem
from .checkpoint_facts import SAFETENSORS_DTYPE_BYTES, Checkpoint, read_local_checkpoint

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
    file, the length within the file and safetensors' own cap, depth, types and offsets), then checked here for the
    layout: each tensor's bytes match its dtype and shape, the tensors tile the data with no gap or overlap."""
    tensors, length, size = read_safetensors_header(path, name=path.name)
    shapes, spans, elements = {}, [], 0
    for name, (dtype, shape, begin, end) in tensors.items():
        count = math.prod(shape)
        if end - begin != count * SAFETENSORS_DTYPE_BYTES[dtype]:
            raise ValueError(
                f"{path.name}: tensor {name!r} {dtype}{shape} spans {end - begin} bytes, not "
                f"{count * SAFETENSORS_DTYPE_BYTES[dtype]}"
            )
        shapes[name], elements = list(shape), elements + count
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(
                f"{path.name}: tensor {name!r} starts at byte {begin} of the data, expected {position} "
                "(overlapping or a gap)"
            )
        position = end
    if 8 + length + position != size:
        raise ValueError(
            f"{path.name}: {size} bytes, but header and tensors take {8 + length + position} (truncated or padded)"
        )
    return shapes, elements


def check_weights(source: Path) -> tuple[list[Path], dict[str, list[int]], int]:
    """The shards, {tensor: shape} over all of them and the element count; ValueError on any inconsistency."""
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        pickles = sorted(p.name for p in source.glob("*.bin")) + sorted(p.name for p in source.glob("*.pt"))
        extra = (
            f" (it has {', '.join(pickles[:3])}: pickled weights, which this project does not publish)"
            if pickles
            else ""
        )
        raise ValueError(f"no *.safetensors weights in {source}{extra}; allowed: a checkpoint with safetensors weights")
    shapes: dict[str, list[int]] = {}
    where: dict[str, str] = {}
    elements = 0
    for shard in shards:
        found, count = check_safetensors(shard)
        for name in found:
            if name in where:
                raise ValueError(f"tensor {name!r} is in both {where[name]} and {shard.name}")
            where[name] = shard.name
        shapes.update(found)
        elements += count
    index_path = source / INDEX_FILE
    if index_path.is_file():
        weight_map = read_json_object(index_path).get("weight_map", {})
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
    return shards, shapes, elements


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


def build_checkpoint_artifact(
    endpoint: EndpointSpec, engine: E, out_dir: Path, progress: bool, system: ServingSystem[E]
) -> dict[str, Any]:
    """Resolve the model, check it (layout, parameters, tokenizer, compatibility), copy it, write the manifest."""
    from tqdm.auto import tqdm

    from artifact.manifest import write_manifest
    from artifact.source import resolve_model_source

    out_dir = Path(out_dir)
    steps = tqdm(total=5, desc=f"build {endpoint.name}", unit="step", disable=not progress)
    steps.set_postfix_str("resolve")
    source = resolve_model_source(endpoint.model, endpoint.revision, allow_patterns=SOURCE_PATTERNS)
    if not (source / "config.json").is_file():
        raise _fail(endpoint, f"{source} has no config.json; allowed: a Hugging Face model directory or Hub id")
    steps.update()

    steps.set_postfix_str("check")
    shards, elements, checkpoint, verification = _check_checkpoint(endpoint, engine, source, system)
    steps.update()

    steps.set_postfix_str("copy")
    copied, written = _copy_checkpoint(endpoint, source, shards, out_dir)
    steps.update()

    steps.set_postfix_str("hash")
    fields = _manifest_fields(endpoint, engine, system, checkpoint, elements)
    # Checked right below: a mismatch fails the build, and the build directory is discarded (model_build's atomic build).
    verification["files"] = (
        f"{len(copied)} files byte-identical to the source (sha256 read while copying and again)"
        + (f"; {', '.join(written)} with chat.template written in" if written else "")
    )
    manifest = write_manifest(out_dir, progress=progress, **fields, verification=verification)
    steps.update()

    steps.set_postfix_str("verify")
    hashed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    differ = sorted(path for path, digest in copied.items() if hashed.get(path) != digest)
    if differ or set(hashed) != set(copied):
        unexpected = sorted(set(hashed) - set(copied))
        raise _fail(endpoint, f"the written files differ from the source: {', '.join(differ + unexpected)}")
    steps.update()
    steps.close()
    return manifest


def _check_checkpoint(
    endpoint: EndpointSpec, engine: E, source: Path, system: ServingSystem[E]
) -> tuple[list[Path], int, Checkpoint, dict[str, Any]]:
    """The checkpoint's shards, parameter count and facts, checked (weights, parameters, tokenizer, the endpoint's
    rules on its files), and what was verified; BuildError naming the first thing that fails."""
    from . import all_systems
    from .checks import checkpoint_problems_on_every_pool

    try:
        shards, _, elements = check_weights(source)
        checkpoint = read_local_checkpoint(source, endpoint.model)
    except ValueError as err:
        raise _fail(endpoint, str(err)) from None
    verification: dict[str, Any] = {"safetensors_headers": f"{len(shards)} file(s), {elements:,} elements"}
    # The model's own chat template(s) rendered under a time, output and memory budget before transformers renders
    # them without one (check_tokenizer): a refusal names the file.
    from .chat_template import check_model_chat_templates

    try:
        check_model_chat_templates(source, VERIFY_MESSAGES)
    except BuildError as err:
        raise _fail(endpoint, str(err)) from None
    verification["parameters"] = _parameter_verification(endpoint, source, checkpoint, elements)
    try:
        verification["tokenizer"] = check_tokenizer(source)
    except Exception as err:
        raise _fail(endpoint, f"the tokenizer does not load or work: {type(err).__name__}: {err}") from None
    problems = checkpoint_problems_on_every_pool(endpoint, system, engine, checkpoint, all_systems())
    if system.checkpoint_rules is not None:
        problems += system.checkpoint_rules(endpoint, engine, checkpoint)
    if problems:
        raise BuildError(
            "the checkpoint's own files refuse this endpoint; nothing was written:\n  - " + "\n  - ".join(problems)
        )
    return shards, elements, checkpoint, verification


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
    endpoint: EndpointSpec, source: Path, shards: list[Path], out_dir: Path
) -> tuple[dict[str, str], list[str]]:
    """Copy the shards, index and metadata files (and the metadata again under METADATA_DIR, with a chat template
    written in); their sha256 by artifact path, and the files written rather than copied."""
    copied: dict[str, str] = {}
    names = [p.name for p in shards] + [n for n in (INDEX_FILE, *METADATA_FILES) if (source / n).is_file()]
    for name in names:
        copied[name] = _copy(source / name, out_dir / name)
    written: list[str] = []
    if endpoint.chat:
        written = _write_chat_template(endpoint, out_dir, copied)
    for name in METADATA_FILES:
        if (out_dir / name).is_file():  # the copies, with a chat template written in
            copied[f"{METADATA_DIR}/{name}"] = _copy(out_dir / name, out_dir / METADATA_DIR / name)
    return copied, written


def _manifest_fields(
    endpoint: EndpointSpec, engine: E, system: ServingSystem[E], checkpoint: Checkpoint, elements: int
) -> dict[str, Any]:
    """The manifest's fields besides its files and verification: the endpoint, the model's facts, image, environment."""
    facts = checkpoint.facts
    return {
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
