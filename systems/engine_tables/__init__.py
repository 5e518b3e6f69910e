"""The engines' generated tables: the model architectures each pinned engine serves (class names as config.json
`architectures` lists them), the long flags its server accepts, and transformers' causal-LM mappings.

The tables are data, in the JSON files beside this module; tools/generate_architectures.py writes them from the
engines' release wheels (`make engine-tables`) and `make engine-tables-check` compares them with the wheels. Each file
names its wheel (file name and sha256), the file inside the wheel each table was read from, and `content_sha256`, the
hash of the rest of the file: a file edited by hand is refused by name. Keys are "<project>==<version>" of the engine
inside each image.

The files are read once, on the first use of one of the names below (module __getattr__), so importing `systems`
reads nothing and the generator can rewrite a file this module refuses.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

DATA_DIR = Path(__file__).resolve().parent


class EngineTableError(RuntimeError):
    """A data file of this folder that is missing, unreadable or not what the generator wrote."""


@dataclasses.dataclass(frozen=True)
class EngineTables:
    # engine -> "<wheel file> sha256:<hex> <file(s) in the wheel the architectures were read from>"
    sources: dict[str, str]
    architectures: dict[str, frozenset[str]]
    # The long flags each engine's server accepts (what an SM_VLLM_/SM_SGLANG_ variable must name).
    cli_flags: dict[str, frozenset[str]]
    # vLLM's _PREVIOUSLY_SUPPORTED_MODELS: architecture -> the last vLLM release that served it.
    vllm_removed: dict[str, dict[str, str]]
    # transformers version -> MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (config.json model_type -> class).
    transformers_causal_lm: dict[str, dict[str, str]]
    # causal-LM class the oldest pinned transformers lacks -> the first minor release that maps it.
    transformers_first_release: dict[str, str]


if TYPE_CHECKING:  # what __getattr__ below gives: load()'s field of the same name, lower-cased
    SOURCES: dict[str, str]
    ARCHITECTURES: dict[str, frozenset[str]]
    CLI_FLAGS: dict[str, frozenset[str]]
    VLLM_REMOVED: dict[str, dict[str, str]]
    TRANSFORMERS_CAUSAL_LM: dict[str, dict[str, str]]
    TRANSFORMERS_FIRST_RELEASE: dict[str, str]

_NAMES = {field.name.upper(): field.name for field in dataclasses.fields(EngineTables)}
_TABLE_NAMES = ("architectures", "cli_flags", "removed", "causal_lm", "first_release")


def content_hash(data: dict[str, Any]) -> str:
    """sha256 of a data file's content but `content_sha256`, as canonical JSON (sorted keys, no spaces)."""
    body = {key: value for key, value in data.items() if key != "content_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read(path: Path) -> dict[str, Any]:
    """One data file, refused (EngineTableError naming it) when unreadable or its content_sha256 does not match."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise EngineTableError(
            f"{path}: not a readable engine table ({err}); rewrite it with `make engine-tables`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("tables"), dict) or not data.get("wheels"):
        raise EngineTableError(f"{path}: no `tables` and `wheels`; rewrite it with `make engine-tables`")
    recorded, actual = data.get("content_sha256"), content_hash(data)
    if recorded != actual:
        raise EngineTableError(
            f"{path}: content_sha256 {recorded} does not match its content (sha256 {actual}): the file was changed "
            "after tools/generate_architectures.py wrote it; rewrite it with `make engine-tables`, never by hand"
        )
    return data


@functools.cache
def load(folder: Path = DATA_DIR) -> EngineTables:
    """Every table of the folder's *.json files (read once per folder)."""
    tables = EngineTables({}, {}, {}, {}, {}, {})
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise EngineTableError(f"{folder}: no engine table files (*.json); write them with `make engine-tables`")
    for path in paths:
        data = read(path)
        engine, wheel = data["engine"], data["wheels"][0]
        for name, table in data["tables"].items():
            values = table["values"]
            if name == "architectures":
                tables.architectures[engine] = frozenset(values)
                tables.sources[engine] = f"{wheel['file']} sha256:{wheel['sha256']} {table['read_from']}"
            elif name == "cli_flags":
                tables.cli_flags[engine] = frozenset(values)
            elif name == "removed":
                tables.vllm_removed[engine] = dict(values)
            elif name == "causal_lm":
                tables.transformers_causal_lm[engine.split("==")[1]] = dict(values)
            elif name == "first_release":
                tables.transformers_first_release.update(values)
            else:
                raise EngineTableError(f"{path}: unknown table {name!r}; this module reads {', '.join(_TABLE_NAMES)}")
    return tables


def __getattr__(name: str) -> object:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(load(), _NAMES[name])
