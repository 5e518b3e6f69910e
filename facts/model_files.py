"""Bounded readers for the files we take from a model folder or a Hub repository: input nobody here wrote.

Every reader refuses, with UnreadableModel naming the file, the field, the value and what is allowed:
- anything that is not a regular file (a FIFO would block the read forever, a device never ends, a symlink loop):
  checked with os.stat and again on the descriptor, opened O_NONBLOCK so nothing can block;
- a file over its kind's size cap (read at most cap + 1 bytes);
- JSON nested deeper than MAX_JSON_DEPTH (measured on the bytes before parsing, so json never recurses into it),
  with duplicate keys, or with NaN/Infinity (json accepts them; no model file needs them);
- fields of the wrong type or out of bounds for the code that consumes them (config.json: CONFIG_INTS); the
  config.json fields the serving code reads are read here, once (config_fields), not again by each consumer.
Bytes fetched from the network go through the same checks: parse_model_json, parse_safetensors_header.
The classes and their sources: docs/design/untrusted-input.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple


class UnreadableModel(ValueError):
    """A local model's files cannot be read as what they claim to be (a safetensors header, a config.json): the
    message names the file and what is wrong; the config loader reports it as a problem of `model:`."""


# Size caps per kind of file. The largest of each kind on the Hub is far below these: config.json of the largest
# multimodal models is ~10 KiB; tokenizer_config.json carries the added tokens and a chat template (Qwen/DeepSeek's
# are ~100-300 KiB); a safetensors index names every tensor (~100 bytes each, DeepSeek-V3's is 8.9 MiB).
MIB = 2**20
JSON_CAPS = {
    "config.json": 4 * MIB,
    "generation_config.json": MIB,
    "tokenizer_config.json": 32 * MIB,
    "hf_quant_config.json": 4 * MIB,
    "adapter_config.json": MIB,
    "model.safetensors.index.json": 64 * MIB,
    "special_tokens_map.json": 4 * MIB,
    "chat_template.json": 16 * MIB,
}
DEFAULT_JSON_CAP = 64 * MIB
# The safetensors reader's own bound on the JSON header (huggingface/safetensors safetensors/src/tensor.rs
# MAX_HEADER_SIZE = 100_000_000, HeaderTooLarge; read at commit 000a16f, not at the pinned 0.8): a longer length
# field is a corrupt file, and reading it would allocate that much.
SAFETENSORS_MAX_HEADER = 100_000_000
# No model file needs more: config.json nests text_config > rope_parameters > a list (4); a safetensors header is
# {name: {shape: [..]}} (3). Python's json recurses per level and fails only near 1000 with a RecursionError.
MAX_JSON_DEPTH = 64
# A chat template is rendered for every chat request: the largest published ones are ~20 KiB (DeepSeek, Qwen3's
# ~4 KiB); 1 MiB leaves room for any honest one and refuses one that would make every request pay for megabytes.
MAX_CHAT_TEMPLATE_BYTES = MIB


class _Said(str):
    """A description standing for a value ("a FIFO", "1,024 bytes"): shown as is, not quoted."""

    def __repr__(self) -> str:
        return str(self)


def _refuse(name: str, field: str | None, value: Any, allowed: str) -> UnreadableModel:
    where = f"{name}: {field}" if field else name
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return UnreadableModel(f"{where} is {shown}; allowed: {allowed}")


@contextmanager
def _open_regular(path: Path, label: str) -> Iterator[tuple[BinaryIO, int]]:
    """(binary file, size) of `path` opened for reading once it is a regular file: checked with os.stat before the
    open and again on the descriptor (replaced in between), opened O_NONBLOCK so a FIFO or device never blocks. The
    one safe open of a model file; UnreadableModel naming `label` otherwise."""
    _regular_stat(path, label)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise UnreadableModel(f"{label} cannot be read: {err.strerror or err}; allowed: a regular file") from None
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(f.fileno())
        if not stat.S_ISREG(opened.st_mode):  # replaced between stat and open
            raise _refuse(label, None, _Said(_kind(opened.st_mode)), "a regular file")
        try:
            yield f, opened.st_size
        except OSError as err:
            raise UnreadableModel(f"{label} cannot be read: {err.strerror or err}") from None


def read_regular_file(path: Path, *, cap: int, name: str | None = None) -> bytes:
    """The bytes of `path`, a regular file of at most `cap` bytes (symlinks followed, as the Hub cache's are).
    Never blocks: a FIFO, a device or a socket is refused before it is read, a symlink loop by its errno."""
    label = name or str(path)
    with _open_regular(path, label) as (f, size):
        if size > cap:
            raise _refuse(label, "size", _Said(f"{size:,} bytes"), f"at most {cap:,} bytes for this kind of file")
        data = f.read(cap + 1)
    if len(data) > cap:  # grew after the fstat
        raise _refuse(label, "size", _Said(f"over {cap:,} bytes"), f"at most {cap:,} bytes for this kind of file")
    return data


def _regular_stat(path: Path, label: str) -> os.stat_result:
    """os.stat of `path` (symlinks followed) when it is a regular file; UnreadableModel naming `label` otherwise."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise UnreadableModel(f"{label} cannot be read: {err.strerror or err}; allowed: a regular file") from None
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(label, None, _Said(_kind(info.st_mode)), "a regular file (not a FIFO, device, socket or folder)")
    return info


def check_regular_file(path: Path, *, cap: int, name: str | None = None) -> int:
    """The size of `path`, a regular file of at most `cap` bytes, for a reader that opens it itself (torch.load);
    UnreadableModel as read_regular_file's otherwise."""
    label = name or str(path)
    info = _regular_stat(path, label)
    if info.st_size > cap:
        raise _refuse(label, "size", _Said(f"{info.st_size:,} bytes"), f"at most {cap:,} bytes for this kind of file")
    return info.st_size


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return word
    return "not a regular file"


# A JSON string, its loop unrolled: runs of plain bytes are taken whole, so a 10 MB string value is removed in 0.08 s
# where the per-byte alternation `"(?:[^"\\]|\\.)*"` took 4.3 s (a tokenizer.json is 10-30 MB and read at every build).
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def json_depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON `data` nests deeper than `limit`, measured without parsing: the strings removed, the brackets
    kept, then the innermost pairs removed up to `limit` times (each pass removes one level, at C speed); anything
    left is deeper. Unbalanced brackets are left to the parser, which refuses them."""
    brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        shorter = _INNERMOST.sub(b"", brackets)  # one scan: the pairs it leaves behind wait for the next pass
        if len(shorter) == len(brackets):
            return False  # unbalanced: "[}" and the like; json refuses it below
        brackets = shorter
    return bool(brackets)


def parse_model_json(data: bytes, *, name: str, cap: int | None = None) -> dict[str, Any]:
    """A model file's JSON object from its bytes (read from disk or fetched): size, depth, UTF-8, duplicate keys
    and non-finite numbers checked; UnreadableModel naming `name` otherwise."""
    limit = cap if cap is not None else JSON_CAPS.get(Path(name).name, DEFAULT_JSON_CAP)
    if len(data) > limit:
        raise _refuse(name, "size", _Said(f"{len(data):,} bytes"), f"at most {limit:,} bytes for this kind of file")
    if json_depth_exceeds(data):
        raise _refuse(
            name, "nesting", _Said(f"deeper than {MAX_JSON_DEPTH} levels"), f"at most {MAX_JSON_DEPTH} levels"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UnreadableModel(f"{name} is not UTF-8 (byte {err.start}); allowed: a UTF-8 JSON object") from None
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates(name), parse_constant=_no_constant(name))
    except UnreadableModel:
        raise
    except (ValueError, RecursionError) as err:
        raise UnreadableModel(f"{name} is not JSON ({str(err)[:80]}); allowed: a JSON object") from None
    if not isinstance(document, dict):
        raise _refuse(name, None, _Said(f"a JSON {type(document).__name__}"), "a JSON object")
    return document


def _no_duplicates(name: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise _refuse(
                    name, f"key {key!r}", _Said("given twice"), "each key once (readers differ on which wins)"
                )
            result[key] = value
        return result

    return pairs


def _no_constant(name: str) -> Any:
    def constant(word: str) -> Any:
        raise _refuse(name, "a number", _Said(word), "finite numbers (NaN and Infinity are not JSON)")

    return constant


def read_model_json(path: Path, *, name: str | None = None) -> dict[str, Any]:
    """A JSON object file of a model (config.json, tokenizer_config.json, an index, adapter_config.json), bounded by
    its kind's size cap (JSON_CAPS) and MAX_JSON_DEPTH."""
    label = name or str(path)
    cap = JSON_CAPS.get(Path(path).name, DEFAULT_JSON_CAP)
    return parse_model_json(read_regular_file(Path(path), cap=cap, name=label), name=label, cap=cap)


# ---- safetensors headers

# Bytes per element of the safetensors dtypes (the header's "dtype" strings, safetensors' format specification).
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
# More elements than any tensor of a published model (an embedding of 2^22 x 2^17 is 2^39): a shape whose product
# passes 2^53 is a lie, and the arithmetic on it would be the only cost.
MAX_TENSOR_ELEMENTS = 2**53
MAX_TENSOR_RANK = 8


def parse_safetensors_header(
    raw: bytes, *, name: str, file_size: int | None
) -> dict[str, tuple[str, list[int], int, int]]:
    """{tensor: (dtype, shape, begin, end)} from a safetensors header's JSON bytes (the bytes after the 8-byte
    length, read from disk or by a range request): depth, types and offsets checked; with `file_size`, the offsets
    must lie in the file. The dtype must be one of safetensors' (its format specification); begin <= end."""
    header = parse_model_json(raw, name=f"{name} header", cap=SAFETENSORS_MAX_HEADER)
    data_size = None if file_size is None else file_size - 8 - len(raw)
    tensors: dict[str, tuple[str, list[int], int, int]] = {}
    for tensor, info in header.items():
        if tensor == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise _refuse(name, "__metadata__", info, "an object of strings (safetensors' format)")
            continue
        field = f"tensor {tensor[:80]!r}"
        if not isinstance(info, dict):
            raise _refuse(name, field, info, "an object with dtype, shape and data_offsets")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in SAFETENSORS_DTYPE_BYTES:
            raise _refuse(name, _Said(f"{field} dtype"), dtype, ", ".join(SAFETENSORS_DTYPE_BYTES))
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_TENSOR_RANK
            or not all(type(d) is int and d >= 0 for d in shape)
        ):
            raise _refuse(
                name, _Said(f"{field} shape"), shape, f"a list of at most {MAX_TENSOR_RANK} non-negative integers"
            )
        count = math.prod(shape)
        if count > MAX_TENSOR_ELEMENTS:
            raise _refuse(name, _Said(f"{field} shape"), shape, f"at most {MAX_TENSOR_ELEMENTS:,} elements")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]
        ):
            raise _refuse(name, _Said(f"{field} data_offsets"), offsets, "[begin, end] with 0 <= begin <= end")
        if data_size is not None and offsets[1] > data_size:
            raise _refuse(
                name, f"{field} data_offsets", offsets, f"offsets within the file's {data_size:,} bytes of data"
            )
        tensors[tensor] = (dtype, shape, offsets[0], offsets[1])
    return tensors


def read_safetensors_header(
    path: Path, *, name: str | None = None
) -> tuple[dict[str, tuple[str, list[int], int, int]], int, int]:
    """(tensors, header length, file size) of a local safetensors file: a regular file, its 8-byte length within
    SAFETENSORS_MAX_HEADER and the file, then parse_safetensors_header. The tensor data is never read."""
    label = name or str(path)
    with _open_regular(path, label) as (f, size):
        if size < 8:
            raise _refuse(
                label, "size", _Said(f"{size} bytes"), "at least the 8-byte header length of a safetensors file"
            )
        (length,) = struct.unpack("<Q", f.read(8))
        if length > min(SAFETENSORS_MAX_HEADER, size - 8):
            raise _refuse(
                label,
                "header length",
                _Said(f"{length:,} bytes"),
                f"at most {min(SAFETENSORS_MAX_HEADER, size - 8):,} (the file's bytes after it, and safetensors' own"
                " MAX_HEADER_SIZE); re-download or re-save the model",
            )
        raw = f.read(length)
    return parse_safetensors_header(raw, name=label, file_size=size), length, size


# ---- config.json: each field typed and in bounds

# Integer fields of config.json (and text_config), under every name transformers' config classes use for them, with
# the bounds any published model lies in and the code that needs them. The largest published models: 126 layers
# (Llama 3.1 405B), hidden 16384 (405B) / 25600 (intermediate), vocab 262144 (Gemma 3), experts 512 (Qwen3-Next),
# positions 10M (Llama 4 Scout). The upper bounds leave an order of magnitude above those and stop a lie (10^12
# layers) before any loop or allocation over it (checkpoint_facts' per-layer count, transformers' meta model).
_LAYERS = (1, 4096)
_WIDTH = (1, 2**20)
CONFIG_INTS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": _LAYERS,
    "n_layer": _LAYERS,
    "num_layers": _LAYERS,
    "num_decoder_layers": _LAYERS,
    "num_attention_heads": (1, 4096),
    "n_head": (1, 4096),
    "num_heads": (1, 4096),
    "num_key_value_heads": (1, 4096),
    "hidden_size": _WIDTH,
    "n_embd": _WIDTH,
    "d_model": _WIDTH,
    "intermediate_size": _WIDTH,
    "moe_intermediate_size": _WIDTH,
    "n_inner": _WIDTH,
    "d_ff": _WIDTH,
    "d_kv": (1, 2**16),
    "head_dim": (1, 2**16),
    "vocab_size": (1, 2**24),
    "max_position_embeddings": (1, 2**30),
    "n_positions": (1, 2**30),
    "n_ctx": (1, 2**30),
    "num_local_experts": (1, 2**16),
    "num_experts": (0, 2**16),
    "num_experts_per_tok": (1, 2**16),
    "experts_per_token": (1, 2**16),
    "decoder_sparse_step": (1, 4096),
    "sliding_window": (1, 2**30),
}
_OPTIONAL_NULL = {"sliding_window", "head_dim", "num_key_value_heads", "n_inner", "moe_intermediate_size"}
_BOOLS = ("tie_word_embeddings", "is_encoder_decoder", "use_sliding_window", "attention_bias")
_OBJECTS = ("text_config", "quantization_config", "rope_scaling", "rope_parameters")
MAX_ROPE_FACTOR = 1024.0  # YaRN / linear factors of published models are <= 64 (Qwen 4, Llama 3.1 8, DeepSeek 40)


def check_model_config(config: Any, *, name: str = "config.json") -> dict[str, Any]:
    """`config` (config.json as parsed) with each field the serving code reads typed and in bounds; text_config
    (multimodal configs keep the decoder's shape there) checked the same way. UnreadableModel naming the field,
    its value and what is allowed."""
    config_fields(config, name=name)
    return config


class Named(NamedTuple):
    """An integer field of config.json and the key the file gives it under: transformers' families name one field
    differently (hidden_size; GPT-2's n_embd; T5's d_model), and a message quotes the file's own key."""

    key: str
    value: int


@dataclass(frozen=True)
class ConfigFields:
    """The fields of a config.json that the serving code reads, read here once, after each is typed and in bounds
    (check_model_config). Multimodal configs keep the decoder's shape under text_config: the shape fields are read
    from `decoder`, text_config over the top level."""

    architecture: str | None  # architectures[0]
    model_type: str | None  # the top level's (a multimodal config's own kind)
    dtype: str | None  # `dtype` (transformers 5 writes it) or `torch_dtype` (4.x), the top level's first
    decoder: dict[str, Any]  # the decoder's fields: text_config over the top level, or the config itself
    decoder_type: str | None  # the decoder's model_type (text_config's where there is one)
    hidden: Named | None  # hidden_size, n_embd or d_model
    layers: Named | None  # num_hidden_layers, n_layer or num_layers
    heads: Named | None  # num_attention_heads, n_head or num_heads
    kv_heads: int | None  # num_key_value_heads; without it every query head has its own (= heads)
    head_dim: int | None  # head_dim; without it hidden // heads
    vocab_size: int | None
    max_position_embeddings: int | None
    layer_types: list[Any] | None  # one kind of attention per layer ("sliding_attention", "full_attention")
    scaled_rope: bool  # rope_scaling / a non-default rope_parameters: the engines may derive a longer context


def config_fields(config: Any, *, name: str = "config.json") -> ConfigFields:
    """The fields of `config` (config.json as parsed) that the serving code reads: each typed and in bounds, with
    text_config checked the same way, and the relations between them that the consuming code relies on.
    UnreadableModel naming the field, its value and what is allowed."""
    if not isinstance(config, dict):
        raise _refuse(name, None, _Said(f"a JSON {type(config).__name__}"), "a JSON object")
    _check_fields(config, name, "")
    text = config.get("text_config")
    if text is not None:
        _check_fields(text, name, "text_config.")
    return _read_fields(config, name)


def _check_fields(c: dict[str, Any], name: str, prefix: str) -> None:
    architectures = c.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list)
        or not architectures
        or not all(isinstance(a, str) and a.isidentifier() for a in architectures)
    ):
        raise _refuse(name, _Said(f"{prefix}architectures"), architectures, "a non-empty list of class names")
    for key in ("model_type", "torch_dtype", "dtype"):
        if c.get(key) is not None and not isinstance(c[key], str):
            raise _refuse(name, _Said(f"{prefix}{key}"), c[key], "a string")
    for key, (low, high) in CONFIG_INTS.items():
        if key not in c or (c[key] is None and key in _OPTIONAL_NULL):
            continue
        value = c[key]
        if type(value) is not int or not low <= value <= high:
            raise _refuse(name, _Said(f"{prefix}{key}"), value, f"an integer from {low:,} to {high:,}")
    for key in _BOOLS:
        if key in c and not isinstance(c[key], bool):
            raise _refuse(name, _Said(f"{prefix}{key}"), c[key], "true or false")
    for key in _OBJECTS:
        if c.get(key) is not None and not isinstance(c[key], dict):
            raise _refuse(name, _Said(f"{prefix}{key}"), c[key], "a JSON object or null")
    for key in ("rope_scaling", "rope_parameters"):
        rope = c.get(key)
        if isinstance(rope, dict) and "factor" in rope:
            factor = rope["factor"]
            if type(factor) not in (int, float) or not 0 < factor <= MAX_ROPE_FACTOR:
                raise _refuse(
                    name, _Said(f"{prefix}{key}.factor"), factor, f"a number above 0 and at most {MAX_ROPE_FACTOR}"
                )
        if isinstance(rope, dict) and "rope_theta" in rope:
            theta = rope["rope_theta"]
            if type(theta) not in (int, float) or not 0 < theta < 1e12:
                raise _refuse(name, _Said(f"{prefix}{key}.rope_theta"), theta, "a positive number below 1e12")
    quant = c.get("quantization_config")
    if isinstance(quant, dict):
        for key in ("bits", "w_bit"):
            if key in quant and (type(quant[key]) is not int or not 1 <= quant[key] <= 64):
                raise _refuse(name, _Said(f"{prefix}quantization_config.{key}"), quant[key], "an integer from 1 to 64")
        method = quant.get("quant_method")
        if method is not None and not isinstance(method, str):
            raise _refuse(name, _Said(f"{prefix}quantization_config.quant_method"), method, "a string")
    for key in ("mlp_only_layers", "layer_types"):
        if key in c and c[key] is not None and not isinstance(c[key], list):
            raise _refuse(name, _Said(f"{prefix}{key}"), c[key], "a list")


def _first(c: dict[str, Any], *keys: str) -> Named | None:
    for key in keys:
        if c.get(key) is not None:
            return Named(key, c[key])
    return None


def rope_is_scaled(c: dict[str, Any]) -> bool:
    """Whether rope_scaling or rope_parameters names a rope type other than the default (linear, yarn, llama3, ...)."""
    rope = c.get("rope_scaling") or c.get("rope_parameters")
    return isinstance(rope, dict) and rope.get("rope_type", rope.get("type", "default")) != "default"


def _read_fields(config: dict[str, Any], name: str) -> ConfigFields:
    """The fields of a config whose types _check_fields has checked, and the relations the consuming code relies on:
    the head size is hidden_size // heads unless head_dim is given (checkpoint_facts, transformers' attention
    modules), so heads must divide hidden_size; grouped-query attention shares each KV head among heads // kv_heads
    query heads (vLLM's attention asserts num_heads % num_kv_heads == 0); layer_types lists one kind per layer
    (transformers' layer_type_validation)."""
    text = config.get("text_config")
    c, prefix = ({**config, **text}, "text_config.") if text is not None else (config, "")
    hidden = _first(c, "hidden_size", "n_embd", "d_model")
    heads = _first(c, "num_attention_heads", "n_head", "num_heads")
    head_dim = c.get("head_dim")
    if head_dim is None and hidden is not None and heads is not None:
        if hidden.value % heads.value and c.get("d_kv") is None:
            raise _refuse(
                name,
                f"{prefix}{heads.key}",
                heads.value,
                f"a divisor of {hidden.key} {hidden.value} (the head size is {hidden.key} // {heads.key} without"
                " head_dim)",
            )
        head_dim = hidden.value // heads.value
    kv = c.get("num_key_value_heads")
    if heads is not None and kv is not None and heads.value % kv:
        raise _refuse(name, _Said(f"{prefix}num_key_value_heads"), kv, f"a divisor of {heads.key} {heads.value}")
    layers = _first(c, "num_hidden_layers", "n_layer", "num_layers")
    kinds = c.get("layer_types")
    if isinstance(kinds, list) and layers is not None and len(kinds) != layers.value:
        raise _refuse(
            name,
            _Said(f"{prefix}layer_types"),
            _Said(f"{len(kinds)} entries"),
            f"one per layer ({layers.key} {layers.value})",
        )
    top_k, experts = c.get("num_experts_per_tok"), c.get("num_local_experts") or c.get("num_experts")
    if type(top_k) is int and type(experts) is int and experts and top_k > experts:
        raise _refuse(name, _Said(f"{prefix}num_experts_per_tok"), top_k, f"at most the {experts} experts")
    only = c.get("mlp_only_layers")
    if isinstance(only, list) and not all(type(i) is int for i in only):
        raise _refuse(name, _Said(f"{prefix}mlp_only_layers"), only, "a list of layer indices")
    return ConfigFields(
        architecture=(config.get("architectures") or [None])[0],
        model_type=config.get("model_type"),
        dtype=config.get("dtype") or config.get("torch_dtype") or c.get("dtype") or c.get("torch_dtype"),
        decoder=c,
        decoder_type=c.get("model_type"),
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv or (heads.value if heads is not None else None),
        head_dim=head_dim,
        vocab_size=c.get("vocab_size"),
        max_position_embeddings=c.get("max_position_embeddings"),
        layer_types=kinds if isinstance(kinds, list) else None,
        scaled_rope=rope_is_scaled(c),
    )


def read_model_config(path: Path, *, name: str | None = None) -> dict[str, Any]:
    """config.json read bounded (read_model_json) and checked (check_model_config)."""
    label = name or str(path)
    return check_model_config(read_model_json(path, name=label), name=label)


def parse_model_config(data: bytes, *, name: str) -> dict[str, Any]:
    """config.json from bytes (fetched from the Hub): the same checks as read_model_config."""
    return check_model_config(parse_model_json(data, name=name), name=name)


# ---- generation_config.json, tokenizer_config.json and its chat template

_GENERATION_NUMBERS = {
    "temperature": (0.0, 100.0),
    "top_p": (0.0, 1.0),
    "repetition_penalty": (0.0, 100.0),
}
_GENERATION_INTS = {"top_k": (-1, 2**24), "max_new_tokens": (1, 2**30), "max_length": (1, 2**30)}


def check_generation_config(config: Any, *, name: str = "generation_config.json") -> dict[str, Any]:
    """generation_config.json: the sampling defaults vLLM applies from it (--generation-config auto) typed and in
    range, and the token ids integers (or lists of them)."""
    if not isinstance(config, dict):
        raise _refuse(name, None, _Said(f"a JSON {type(config).__name__}"), "a JSON object")
    for key, (low, high) in _GENERATION_NUMBERS.items():
        value = config.get(key)
        if value is not None and (type(value) not in (int, float) or not low <= value <= high):
            raise _refuse(name, key, value, f"a number from {low} to {high}")
    for key, (ilow, ihigh) in _GENERATION_INTS.items():
        value = config.get(key)
        if value is not None and (type(value) is not int or not ilow <= value <= ihigh):
            raise _refuse(name, key, value, f"an integer from {ilow:,} to {ihigh:,}")
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        value = config.get(key)
        ids = value if isinstance(value, list) else [value]
        if value is not None and not all(type(i) is int and i >= 0 for i in ids):
            raise _refuse(name, key, value, "a non-negative token id or a list of them")
    return config


def read_generation_config(path: Path, *, name: str | None = None) -> dict[str, Any]:
    label = name or str(path)
    return check_generation_config(read_model_json(path, name=label), name=label)


def chat_templates_of(config: dict[str, Any], *, name: str) -> dict[str, str]:
    """{template name: source} of a tokenizer_config.json's `chat_template` (a string, or a list of {name,
    template} as transformers writes several), each a string of at most MAX_CHAT_TEMPLATE_BYTES."""
    value = config.get("chat_template")
    if value is None:
        return {}
    if isinstance(value, str):
        templates = {"default": value}
    elif isinstance(value, list) and all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str) for t in value
    ):
        templates = {t["name"]: t["template"] for t in value}
    else:
        raise _refuse(name, "chat_template", value, "a string or a list of {name, template}")
    for key, text in templates.items():
        check_chat_template_size(text, name=f"{name} chat_template" + ("" if key == "default" else f" {key!r}"))
    return templates


def check_chat_template_size(text: str, *, name: str) -> str:
    size = len(text.encode("utf-8"))
    if size > MAX_CHAT_TEMPLATE_BYTES:
        raise _refuse(
            name,
            "size",
            _Said(f"{size:,} bytes"),
            f"at most {MAX_CHAT_TEMPLATE_BYTES:,} bytes (every chat request renders it)",
        )
    return text


def read_tokenizer_config(path: Path, *, name: str | None = None) -> dict[str, Any]:
    """tokenizer_config.json bounded, its chat template(s) checked for type and size."""
    label = name or str(path)
    config = read_model_json(path, name=label)
    chat_templates_of(config, name=label)
    for key in ("model_max_length",):
        value = config.get(key)
        if value is not None and (type(value) not in (int, float) or value <= 0 or value != value):
            raise _refuse(label, key, value, "a positive number")
    return config


def read_chat_template_file(path: Path, *, name: str | None = None) -> str:
    """chat_template.jinja: a regular UTF-8 file of at most MAX_CHAT_TEMPLATE_BYTES."""
    label = name or str(path)
    data = read_regular_file(path, cap=MAX_CHAT_TEMPLATE_BYTES, name=label)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UnreadableModel(f"{label} is not UTF-8 (byte {err.start}); allowed: a UTF-8 Jinja template") from None


# ---- adapters (PEFT adapter_config.json)

MAX_LORA_RANK = 4096


def check_adapter_config(config: Any, *, name: str = "adapter_config.json") -> dict[str, Any]:
    """adapter_config.json's fields a LoRA server reads (PEFT LoraConfig: r, lora_alpha, target_modules,
    base_model_name_or_path): r a positive integer, lora_alpha a finite positive number, target_modules a
    non-empty list of names or a regex string."""
    if not isinstance(config, dict):
        raise _refuse(name, None, _Said(f"a JSON {type(config).__name__}"), "a JSON object")
    rank = config.get("r")
    if type(rank) is not int or not 1 <= rank <= MAX_LORA_RANK:
        raise _refuse(name, "r", rank, f"an integer from 1 to {MAX_LORA_RANK}")
    pattern = config.get("rank_pattern")
    if pattern is not None and (
        not isinstance(pattern, dict) or not all(type(v) is int and 1 <= v <= MAX_LORA_RANK for v in pattern.values())
    ):
        raise _refuse(name, "rank_pattern", pattern, f"a mapping of module names to ranks from 1 to {MAX_LORA_RANK}")
    alpha = config.get("lora_alpha", 8)
    if type(alpha) not in (int, float) or not math.isfinite(alpha) or alpha <= 0:
        raise _refuse(name, "lora_alpha", alpha, "a finite number above 0")
    targets = config.get("target_modules")
    if not (
        (isinstance(targets, str) and targets)
        or (isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets))
    ):
        raise _refuse(name, "target_modules", targets, "a non-empty list of module names or a regex string")
    base = config.get("base_model_name_or_path")
    if base is not None and not isinstance(base, str):
        raise _refuse(name, "base_model_name_or_path", base, "a string")
    return config


def read_adapter_config(path: Path, *, name: str | None = None) -> dict[str, Any]:
    label = name or str(path)
    return check_adapter_config(read_model_json(path, name=label), name=label)


# ---- a whole model folder

_FOLDER_READERS = {
    "config.json": read_model_config,
    "generation_config.json": read_generation_config,
    "tokenizer_config.json": read_tokenizer_config,
    "chat_template.jinja": read_chat_template_file,
    "hf_quant_config.json": read_model_json,
    "special_tokens_map.json": read_model_json,
    "added_tokens.json": read_model_json,
    "chat_template.json": read_model_json,
    "model.safetensors.index.json": read_model_json,
    "adapter_config.json": read_adapter_config,
}
MAX_SHARDS = 10_000  # DeepSeek-V3 has 163 shards; a folder of more is not a checkpoint


def check_model_folder(folder: Path) -> int:
    """Every file of a local model folder that a build or an engine reads as metadata, read through its bounded
    reader, and every safetensors header: what a build runs before any library (transformers, safetensors) opens
    them without bounds. UnreadableModel naming the file and field; returns how many files were read."""
    try:
        info = os.stat(folder)
    except OSError as err:
        raise UnreadableModel(f"{folder} cannot be read: {err.strerror or err}; allowed: a model folder") from None
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(str(folder), None, _Said(_kind(info.st_mode)), "a model folder")
    # Every other file a library opens by name (tokenizer.json, vocab.json, merges.txt, tokenizer.model...): a regular
    # file or a folder, so that nothing blocks or loops when transformers reads it.
    try:
        entries = sorted(folder.iterdir())
    except OSError as err:
        raise UnreadableModel(f"{folder} cannot be listed: {err.strerror or err}") from None
    for entry in entries[: MAX_SHARDS * 2]:
        try:
            mode = os.stat(entry).st_mode
        except OSError as err:
            raise UnreadableModel(f"{entry} cannot be read: {err.strerror or err}; allowed: a regular file") from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise _refuse(str(entry), None, _Said(_kind(mode)), "a regular file (not a FIFO, device or socket)")
    read = 0
    for name, reader in _FOLDER_READERS.items():
        path = folder / name
        if os.path.lexists(path):
            reader(path)
            read += 1
    shards = [p for p in entries if p.name.endswith(".safetensors")]
    if len(shards) > MAX_SHARDS:
        raise _refuse(str(folder), "safetensors files", _Said(f"{len(shards):,}"), f"at most {MAX_SHARDS:,}")
    for shard in shards:
        read_safetensors_header(shard)
        read += 1
    return read


__all__ = [
    "SAFETENSORS_DTYPE_BYTES",
    "ConfigFields",
    "Named",
    "check_model_folder",
    "check_regular_file",
    "UnreadableModel",
    "check_adapter_config",
    "check_generation_config",
    "check_model_config",
    "config_fields",
    "json_depth_exceeds",
    "parse_model_config",
    "parse_model_json",
    "parse_safetensors_header",
    "read_adapter_config",
    "read_chat_template_file",
    "read_generation_config",
    "read_model_config",
    "read_model_json",
    "read_regular_file",
    "read_safetensors_header",
    "read_tokenizer_config",
    "rope_is_scaled",
]
