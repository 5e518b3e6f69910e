"""How big a model is and what kind it is, known before any download: from `model_parameters`, a local
directory's safetensors headers, or a short table of the reference models. Used to refuse configs whose model
cannot fit the instance; a model none of these sizes (model_facts returns None) is not silent: its endpoint
stack gets a synth warning (systems.checks.unsized_model_warning) and the build checks the weights it reads
(systems.checks.built_weights_problem)."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


@dataclass(frozen=True)
class ModelFacts:
    parameters: int
    encoder_decoder: bool
    source: str  # where the facts came from, for messages
    # The positions the model was trained for (config.json max_position_embeddings / n_positions) where known: the
    # longest sequence (prompt + generated tokens) an engine may be configured for. None: not recorded.
    positions: int | None = None


# Reference models of the serving systems, from their model cards / config files.
KNOWN_MODELS: dict[str, ModelFacts] = {
    # Positions: transformers' GPTJConfig and GPT2Config, whose defaults are these checkpoints' (configuration_gptj.py
    # `@auto_docstring(checkpoint="EleutherAI/gpt-j-6B")`, n_positions = 2048; configuration_gpt2.py n_positions = 1024).
    "EleutherAI/gpt-j-6B": ModelFacts(6_053_381_344, False, "known model", positions=2048),
    "google/flan-t5-xxl": ModelFacts(11_266_992_128, True, "known model"),
    "google/flan-t5-xl": ModelFacts(2_849_757_184, True, "known model"),
    "openai-community/gpt2": ModelFacts(124_439_808, False, "known model", positions=1024),
    "gpt2": ModelFacts(124_439_808, False, "known model", positions=1024),
    "openai-community/gpt2-large": ModelFacts(774_030_080, False, "known model"),
    "meta-llama/Llama-3.1-8B-Instruct": ModelFacts(8_030_261_248, False, "known model"),
    "mistralai/Mistral-7B-Instruct-v0.3": ModelFacts(7_248_023_552, False, "known model"),
}


class UnreadableModel(ValueError):
    """A local model's files cannot be read as what they claim to be (a safetensors header, a config.json): the
    message names the file and what is wrong; the config loader reports it as a problem of `model:`."""


# The safetensors reader's own bound on the JSON header (huggingface/safetensors safetensors/src/tensor.rs
# MAX_HEADER_SIZE = 100_000_000, HeaderTooLarge; read at commit 000a16f, not at the pinned 0.8): a longer length
# field is a corrupt file, and reading it would allocate that much.
SAFETENSORS_MAX_HEADER = 100_000_000


def safetensors_header_sizes(path: Path) -> tuple[int, int]:
    """(elements, bytes) of every tensor in one safetensors file, from its header alone (8-byte little-endian
    length + JSON: {name: {dtype, shape, data_offsets}}), without reading the tensors. UnreadableModel when the
    file is not one (empty, a length past the end, a header that is not JSON or lacks a tensor's shape)."""

    def broken(why: str) -> UnreadableModel:
        return UnreadableModel(f"{path} is not a readable safetensors file: {why}; re-download or re-save the model")

    try:
        with open(path, "rb") as f:
            size_on_disk = os.fstat(f.fileno()).st_size
            if size_on_disk < 8:
                raise broken(f"it is {size_on_disk} bytes, shorter than the 8-byte header length")
            (length,) = struct.unpack("<Q", f.read(8))
            if length > min(SAFETENSORS_MAX_HEADER, size_on_disk - 8):
                raise broken(
                    f"its header length field says {length:,} bytes, the file has {size_on_disk - 8:,} after it"
                )
            header = json.loads(f.read(length).decode("utf-8"))
    except UnreadableModel:
        raise
    except OSError as err:
        raise broken(err.strerror or str(err)) from None
    except (UnicodeDecodeError, ValueError) as err:
        raise broken(f"its header is not UTF-8 JSON ({type(err).__name__})") from None
    if not isinstance(header, dict):
        raise broken("its header is not a JSON object")
    elements = size = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, (start, end) = info["shape"], info["data_offsets"]
            count = 1
            for dim in shape:
                if not isinstance(dim, int) or dim < 0:
                    raise TypeError
                count *= dim
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
                raise TypeError
        except (KeyError, TypeError, ValueError):
            raise broken(f"tensor {name[:80]!r} has no valid shape and data_offsets") from None
        elements += count
        size += end - start
    return elements, size


def read_json_object(path: Path) -> dict:
    """A JSON object file of a local model (config.json); UnreadableModel naming the file otherwise."""
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as err:
        raise UnreadableModel(f"{path} cannot be read: {err.strerror or err}") from None
    except ValueError as err:  # UnicodeDecodeError and JSONDecodeError
        raise UnreadableModel(f"{path} is not UTF-8 JSON ({type(err).__name__}: {str(err)[:80]})") from None
    if not isinstance(document, dict):
        raise UnreadableModel(f"{path} is not a JSON object")
    return document


@dataclass(frozen=True)
class PlannedModel:
    """A Hub model planned from its metadata (`model_build build` of a checkpoint system): its build folder holds
    the metadata files (config.json, tokenizer, ...) and its manifest the weights' bytes and parameter count."""

    directory: Path
    commit: str
    weight_bytes: int | None
    parameters: int | None


# The planned Hub models the config being loaded may read, by model id (set around a load by planning_with).
_PLANNED: ContextVar[Mapping[str, PlannedModel]] = ContextVar("planned_hub_models", default=MappingProxyType({}))


def planned_model_in(build_dir: Path, model: str, revision: str | None) -> PlannedModel | None:
    """The plan of Hub model `model` at `revision` in `build_dir` (its manifest.json names that model and revision
    and a commit, and config.json is there), or None. Reads local files only: synth never calls the network."""
    try:
        document = json.loads((build_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    entry = document.get("model") if isinstance(document, dict) else None
    if (
        not isinstance(entry, dict)
        or entry.get("source") != model
        or entry.get("revision") != revision
        or not isinstance(entry.get("commit"), str)
        or not (build_dir / "config.json").is_file()
    ):
        return None
    weight_bytes, parameters = entry.get("weight_bytes"), entry.get("parameter_count")
    return PlannedModel(
        build_dir,
        entry["commit"],
        weight_bytes if isinstance(weight_bytes, int) else None,
        parameters if isinstance(parameters, int) else None,
    )


@contextmanager
def planning_with(build_root: Path, endpoints: Iterable[tuple[str, str, str | None]]) -> Iterator[None]:
    """While a config loads: each (endpoint name, model, revision) whose build in `build_root` is a plan of that Hub
    model makes its facts readable by model_facts and systems.checkpoint_facts.checkpoint_of, as a local directory's
    are (the known-model tables are only a cache of the same facts)."""
    planned: dict[str, PlannedModel] = {}
    for name, model, revision in endpoints:
        found = planned_model_in(Path(build_root) / name, model, revision)
        if found is not None:
            planned.setdefault(model, found)
    token = _PLANNED.set(MappingProxyType({**_PLANNED.get(), **planned}))
    try:
        yield
    finally:
        _PLANNED.reset(token)


def planned_metadata(model: str) -> PlannedModel | None:
    return _PLANNED.get().get(model)


def model_facts(model: str, declared_parameters: int | None = None) -> ModelFacts | None:
    """Facts about `model` (a local directory, a planned Hub model or a known Hub id), or None when nothing is known
    before a build."""
    path = Path(model)
    encoder_decoder = None
    if path.is_dir():
        config = path / "config.json"
        if config.is_file():
            encoder_decoder = bool(read_json_object(config).get("is_encoder_decoder", False))
        shards = sorted(path.glob("*.safetensors"))
        if declared_parameters is not None:
            return ModelFacts(declared_parameters, bool(encoder_decoder), "model_parameters")
        if shards:
            return ModelFacts(sum(safetensors_header_sizes(p)[0] for p in shards), bool(encoder_decoder), "local files")
    planned = planned_metadata(model)
    if planned is not None and planned.parameters is not None:
        planned_config = read_json_object(planned.directory / "config.json")
        source = f"the Hub's metadata planned into {planned.directory} (commit {planned.commit[:12]})"
        return ModelFacts(
            declared_parameters or planned.parameters, bool(planned_config.get("is_encoder_decoder", False)), source
        )
    known = KNOWN_MODELS.get(model)
    if known is not None:
        return ModelFacts(declared_parameters or known.parameters, known.encoder_decoder, known.source)
    if declared_parameters is not None:
        return ModelFacts(declared_parameters, bool(encoder_decoder), "model_parameters")
    return None
