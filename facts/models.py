"""How big a model is and what kind it is, known before any download: from `model_parameters`, a local
directory's safetensors headers, or a short table of the reference models. Used to refuse configs whose model
cannot fit the instance; a model none of these sizes (model_facts returns None) is not silent: its endpoint
stack gets a synth warning (systems.checks.unsized_model_warning) and the build checks the weights it reads
(systems.checks.built_weights_problem)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from facts import model_files


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


# The bounded readers (facts/model_files.py): every model file is input nobody here wrote.
UnreadableModel = model_files.UnreadableModel
SAFETENSORS_MAX_HEADER = model_files.SAFETENSORS_MAX_HEADER


def safetensors_header_sizes(path: Path) -> tuple[int, int]:
    """(elements, bytes) of every tensor in one safetensors file, from its header alone (8-byte little-endian
    length + JSON: {name: {dtype, shape, data_offsets}}), without reading the tensors. UnreadableModel when the
    file is not one (not a regular file, empty, a length past the end, a header that is not bounded JSON or lacks
    a tensor's shape): model_files.read_safetensors_header."""
    tensors, _, _ = model_files.read_safetensors_header(path)
    elements = size = 0
    for _dtype, shape, start, end in tensors.values():
        elements += math.prod(shape)
        size += end - start
    return elements, size


def read_json_object(path: Path) -> dict:
    """A JSON object file of a local model (config.json, tokenizer_config.json, an index), read bounded
    (model_files.read_model_json: a regular file, its kind's size cap, depth, no duplicate keys); a config.json is
    also checked field by field (model_files.check_model_config). UnreadableModel naming the file otherwise."""
    if Path(path).name == "config.json":
        return model_files.read_model_config(path)
    return model_files.read_model_json(path)


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
        if os.path.lexists(config):  # a FIFO or a symlink loop is refused by the reader, not skipped
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
