"""Rebuild the data files of systems/engine_tables/: the model architectures each pinned engine serves and the flags
its server accepts, read from the engines' own release wheels (PyPI, `pip download --no-deps`), and check the option
value sets in systems/vllm/options.py and systems/sglang/options.py against the same wheels.

    python tools/generate_architectures.py             # download the wheels, rewrite systems/engine_tables/*.json
    python tools/generate_architectures.py --check     # exit 1 if a committed data file or option set differs

The wheels are read as zip files (nothing is imported or installed). Each data file (one per engine release, and
one for the first transformers release of each class) names its wheels' file names and sha256 and the file each
table was read from, so a regenerated file that differs shows which release changed; its content_sha256 lets the
loader (systems/engine_tables/__init__.py) refuse a file edited by hand.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from systems.engine_tables import DATA_DIR, content_hash  # after the path: reads no data file
from systems.images_current import SGLANG_DLC, SGLANG_ENGINE, VLLM_DLC, VLLM_ENGINE

# The engine releases the pinned images ship (systems/images.py, systems/images_current.py say why each): the AWS
# vLLM and SGLang DLCs' (their pins' release: vllm/vllm-openai:v<version>, lmsysorg/sglang:v<version>), LMI
# 0.36.0-lmi27's (vLLM 0.23.1.dev4+gcd87ce883, a build four commits after v0.23.0: 0.23.0 is the nearest release on
# PyPI) and the Hugging Face PyTorch inference images' (transformers 4.49.0, 4.51.3, 5.5.3).
VLLM_RELEASES = (VLLM_DLC.sdk_version, "0.23.0")
SGLANG_RELEASES = (SGLANG_DLC.sdk_version,)
TRANSFORMERS_RELEASES = ("4.49.0", "4.51.3", "5.5.3")
# Minor releases probed to find the first transformers release that maps each architecture added after
# 4.49.0 (the oldest pinned image): the answer is exact to the minor release.
TRANSFORMERS_PROBES = (
    "4.50.0",
    "4.51.0",
    "4.52.1",
    "4.53.0",
    "4.54.0",
    "4.55.0",
    "4.56.0",
    "4.57.1",
    "5.0.0",
    "5.1.0",
    "5.2.0",
    "5.3.0",
    "5.4.0",
    "5.5.0",
)


@dataclass(frozen=True)
class Wheel:
    project: str
    version: str
    path: Path

    @property
    def key(self) -> str:
        return f"{self.project}=={self.version}"

    @functools.cached_property
    def record(self) -> dict[str, str]:
        """What a data file says of the wheel it was read from."""
        return {"file": self.path.name, "sha256": hashlib.sha256(self.path.read_bytes()).hexdigest()}

    def read(self, member: str) -> str:
        with zipfile.ZipFile(self.path) as archive:
            return archive.read(member).decode()

    def members(self, prefix: str, suffix: str) -> list[str]:
        with zipfile.ZipFile(self.path) as archive:
            return sorted(n for n in archive.namelist() if n.startswith(prefix) and n.endswith(suffix))


def download(project: str, version: str, into: Path) -> Wheel:
    """One wheel of one release, without its dependencies (`pip download`, the ordinary client)."""
    found = sorted(into.glob(f"{project}-{version}-*.whl")) + sorted(into.glob(f"{project}-{version}.*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(into),
                f"{project}=={version}",
            ],
            check=True,
        )
        found = sorted(into.glob(f"{project}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip downloaded no wheel named {project}-{version}-*.whl into {into}")
    return Wheel(project, version, found[0])


def module_dicts(source: str) -> dict[str, dict]:
    """Every module-level `NAME = {literal dict}` (or annotated) of a Python file, evaluated literally."""
    found = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:  # a dict built with ** or names: not a table
                continue
    return found


def vllm_architectures(wheel: Wheel) -> tuple[frozenset[str], dict[str, str]]:
    """Text-generating architectures of vLLM's registry, and those it lists as removed (with the last release).

    vllm/model_executor/models/registry.py: _TEXT_GENERATION_MODELS and _MULTIMODAL_MODELS (multimodal models
    generate text), plus the _TRANSFORMERS_SUPPORTED_MODELS entries served by a *ForCausalLM Transformers
    backend class; _PREVIOUSLY_SUPPORTED_MODELS maps removed architectures to the last release that had them.
    """
    tables = module_dicts(wheel.read("vllm/model_executor/models/registry.py"))
    served = set(tables["_TEXT_GENERATION_MODELS"]) | set(tables["_MULTIMODAL_MODELS"])
    served |= {
        arch for arch, (_module, cls) in tables["_TRANSFORMERS_SUPPORTED_MODELS"].items() if "ForCausalLM" in cls
    }
    return frozenset(served), dict(tables.get("_PREVIOUSLY_SUPPORTED_MODELS", {}))


def sglang_architectures(wheel: Wheel) -> frozenset[str]:
    """The class names SGLang's ModelRegistry registers: every `EntryClass` of sglang/srt/models/*.py, keyed by
    the class's __name__ (sglang/srt/models/registry.py, import_model_classes)."""
    served = set()
    for member in wheel.members("sglang/srt/models/", ".py"):
        tree = ast.parse(wheel.read(member))
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        imported = {
            a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
        }
        aliases, entry = {}, None
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id == "EntryClass":
                    entry = node.value
                elif isinstance(node.value, ast.Name):
                    aliases[node.targets[0].id] = node.value.id
        if entry is None:
            continue
        for element in entry.elts if isinstance(entry, (ast.List, ast.Tuple)) else [entry]:
            if not isinstance(element, ast.Name):
                raise SystemExit(f"{wheel.key} {member}: EntryClass element {ast.unparse(element)} is not a name")
            name = element.id
            while name in aliases and name not in classes:
                name = aliases[name]
            if name not in classes and name not in imported:
                raise SystemExit(f"{wheel.key} {member}: EntryClass names {name}, which the module does not define")
            served.add(name if name in classes else imported[name])
    return frozenset(served)


def _flag_strings(source: str) -> set[str]:
    """Every string constant of a file that is a long command-line flag ("--max-model-len")."""
    return {
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value.startswith("--")
        and n.value[2:].replace("-", "").isalnum()
    }


def _annotated_fields(source: str, classes: set[str] | None = None) -> dict[str, str]:
    """name -> annotation text of the annotated fields in the class bodies of a file (all classes, or `classes`)."""
    fields = {}
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        if classes is None or cls.name in classes:
            for node in cls.body:
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and not node.target.id.startswith("_")
                ):
                    fields[node.target.id] = ast.unparse(node.annotation)
    return fields


def vllm_cli_flags(wheel: Wheel) -> tuple[frozenset[str], str]:
    """The flags `vllm serve` / the OpenAI API server accept: the literal flags of vllm/engine/arg_utils.py (with
    --no-<flag> for the EngineArgs fields typed bool, which get argparse.BooleanOptionalAction there, get_kwargs),
    and the fields of BaseFrontendArgs/FrontendArgs (vllm/entrypoints/launchers/cli_args.py adds each as
    --<field>, bool fields with BooleanOptionalAction too). Also the files read."""
    engine = wheel.read("vllm/engine/arg_utils.py")
    flags = _flag_strings(engine)
    engine_fields = _annotated_fields(engine, {"EngineArgs"})
    flags |= {f"--no-{f[2:]}" for f in list(flags) if "bool" in engine_fields.get(f[2:].replace("-", "_"), "")}
    # The frontend arguments moved from entrypoints/openai/ (0.23) to entrypoints/launchers/ (0.30).
    frontend_file = next(
        m
        for m in ("vllm/entrypoints/launchers/cli_args.py", "vllm/entrypoints/openai/cli_args.py")
        if wheel.members(m, ".py")
    )
    frontend = wheel.read(frontend_file)
    for name, annotation in _annotated_fields(frontend, {"BaseFrontendArgs", "FrontendArgs"}).items():
        flags.add("--" + name.replace("_", "-"))
        if "bool" in annotation:
            flags.add("--no-" + name.replace("_", "-"))
    return frozenset(flags | _flag_strings(frontend)), f"vllm/engine/arg_utils.py {frontend_file}"


def sglang_cli_flags(wheel: Wheel) -> frozenset[str]:
    """The flags sglang.launch_server accepts: each annotated field of sglang/srt/arg_groups/fields/*.py becomes
    --<field> (server_args.py, add_cli_args_from_dataclass) plus its `aliases`, and the flags server_args.py adds
    by hand."""
    flags = set()
    for member in wheel.members("sglang/srt/arg_groups/fields/", ".py"):
        source = wheel.read(member)
        flags |= {"--" + name.replace("_", "-") for name in _annotated_fields(source)}
        flags |= _flag_strings(source)  # aliases=["--tensor-parallel-size", ...]
    return frozenset(flags | _flag_strings(wheel.read("sglang/srt/server_args.py")))


def transformers_causal_lm(wheel: Wheel) -> dict[str, str]:
    """MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (model_type -> class) of transformers/models/auto/modeling_auto.py."""
    for node in ast.parse(wheel.read("transformers/models/auto/modeling_auto.py")).body:
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"
            and isinstance(node.value, ast.Call)  # OrderedDict([...])
        ):
            return dict(ast.literal_eval(node.value.args[0]))
    raise SystemExit(f"{wheel.key}: no MODEL_FOR_CAUSAL_LM_MAPPING_NAMES in modeling_auto.py")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def first_transformers_release(probes: list[Wheel], oldest: dict[str, str]) -> dict[str, str]:
    """For each causal-LM class absent from the oldest pinned table: the first probed release that maps it."""
    first: dict[str, str] = {}
    for wheel in sorted(probes, key=lambda w: _version(w.version)):
        for cls in transformers_causal_lm(wheel).values():
            if cls not in oldest.values():
                first.setdefault(cls, wheel.version)
    return first


GENERATED_BY = "tools/generate_architectures.py (make engine-tables); the loader refuses a file edited by hand"
REGISTRY_FILE = "vllm/model_executor/models/registry.py"
CAUSAL_LM_MAPPING = "transformers/models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"


def data_file(engine: str, wheels: list[Wheel], tables: dict[str, tuple[str, Any]]) -> str:
    """One data file's text: its wheels, each table as the file it was read from and its values (sets as sorted
    lists), and the content hash. Sorted keys and a fixed layout: the same wheels give the same bytes."""
    data: dict[str, Any] = {
        "engine": engine,
        "generated_by": GENERATED_BY,
        "wheels": [wheel.record for wheel in wheels],
        "tables": {
            name: {"read_from": read_from, "values": sorted(values) if isinstance(values, frozenset) else values}
            for name, (read_from, values) in tables.items()
        },
    }
    data["content_sha256"] = content_hash(data)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def build(wheel_dir: Path) -> dict[str, str]:
    """file name -> text of every data file of systems/engine_tables/."""
    files = {}
    for version in VLLM_RELEASES:
        wheel = download("vllm", version, wheel_dir)
        served, removed = vllm_architectures(wheel)
        flags, flags_from = vllm_cli_flags(wheel)
        files[f"vllm-{version}.json"] = data_file(
            wheel.key,
            [wheel],
            {
                "architectures": (REGISTRY_FILE, served),
                "removed": (f"{REGISTRY_FILE} _PREVIOUSLY_SUPPORTED_MODELS", removed),
                "cli_flags": (flags_from, flags),
            },
        )
    for version in SGLANG_RELEASES:
        wheel = download("sglang", version, wheel_dir)
        files[f"sglang-{version}.json"] = data_file(
            wheel.key,
            [wheel],
            {
                "architectures": ("sglang/srt/models/*.py EntryClass", sglang_architectures(wheel)),
                "cli_flags": (
                    "sglang/srt/arg_groups/fields/*.py sglang/srt/server_args.py",
                    sglang_cli_flags(wheel),
                ),
            },
        )
    oldest: dict[str, str] = {}
    for version in TRANSFORMERS_RELEASES:
        wheel = download("transformers", version, wheel_dir)
        mapping = transformers_causal_lm(wheel)
        oldest = oldest or mapping
        files[f"transformers-{version}.json"] = data_file(
            wheel.key,
            [wheel],
            {
                "architectures": (CAUSAL_LM_MAPPING, frozenset(mapping.values())),
                "causal_lm": (CAUSAL_LM_MAPPING, mapping),
            },
        )
    probes = sorted(
        (download("transformers", v, wheel_dir) for v in set(TRANSFORMERS_PROBES) | set(TRANSFORMERS_RELEASES)),
        key=lambda w: _version(w.version),
    )
    files["transformers-first-release.json"] = data_file(
        "transformers",
        probes,
        {
            "first_release": (
                f"{CAUSAL_LM_MAPPING} of each wheel: the first release mapping each class that "
                f"{TRANSFORMERS_RELEASES[0]} (the oldest pinned image) lacks",
                first_transformers_release(probes, oldest),
            )
        },
    )
    return files


def literal_values(source: str, name: str) -> frozenset:
    """The values of a module-level `name = Literal[...]`, with nested Literal names of the same module spelled out."""
    assigned = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    def values(node: ast.expr) -> set:
        if isinstance(node, ast.Subscript):  # Literal[...]
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return set().union(*(values(element) for element in inner))
        if isinstance(node, ast.Constant):
            return {node.value}
        if isinstance(node, ast.Name):
            return values(assigned[node.id])
        raise SystemExit(f"{name}: cannot read {ast.unparse(node)} as a Literal value")

    return frozenset(values(assigned[name]))


def dict_keys(source: str, name: str, in_class: str | None = None) -> frozenset:
    """The string keys of a dict literal assigned to `name` at module level or in the body of class `in_class`."""
    tree = ast.parse(source)
    bodies = (
        [tree.body]
        if in_class is None
        else [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == in_class]
    )
    for body in bodies:
        for node in body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Dict):
                keys = [key.value for key in value.keys if isinstance(key, ast.Constant)]
                if len(keys) != len(value.keys):
                    raise SystemExit(f"dict {name}: a key is not a literal (a name or a ** spread)")
                return frozenset(keys)
    raise SystemExit(f"no dict {name} found" + (f" in class {in_class}" if in_class else ""))


def list_values(source: str, name: str) -> frozenset:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return frozenset(ast.literal_eval(node.value))
    raise SystemExit(f"no list {name} found")


def field_choices(source: str, field: str) -> frozenset:
    """The `choices=[...]` literal of the annotated field `field` (SGLang's arg_groups/fields style)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == field:
            for keyword in (k for k in ast.walk(node.annotation) if isinstance(k, ast.keyword)):
                if keyword.arg == "choices":
                    return frozenset(ast.literal_eval(keyword.value))
    raise SystemExit(f"no choices for field {field}")


def enum_members(source: str, cls: str) -> frozenset:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return frozenset(
                t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            )
    raise SystemExit(f"no class {cls}")


# Each option value set, the wheel file that defines it upstream, and how to read it there.
_SGLANG_SPEC = "sglang/srt/speculative/"
OPTION_SOURCES = {
    "vllm": {
        "ToolCallParser": ("vllm/tool_parsers/__init__.py", lambda s: dict_keys(s, "_TOOL_PARSERS_TO_REGISTER")),
        "ReasoningParser": ("vllm/reasoning/__init__.py", lambda s: dict_keys(s, "_REASONING_PARSERS_TO_REGISTER")),
        "KvCacheDtype": ("vllm/config/cache.py", lambda s: literal_values(s, "CacheDType")),
        "QuantizationMethod": (
            "vllm/model_executor/layers/quantization/__init__.py",
            lambda s: literal_values(s, "QuantizationMethods"),
        ),
        "RUNTIME_QUANTIZATION": ("vllm/config/quantization.py", lambda s: dict_keys(s, "_ONLINE_SHORTHANDS") | {"fp8"}),
        "LoadFormat": ("vllm/model_executor/model_loader/__init__.py", lambda s: literal_values(s, "LoadFormats")),
        "SpeculativeMethod": ("vllm/config/speculative.py", lambda s: literal_values(s, "SpeculativeMethod")),
        "MaxLoraRank": ("vllm/config/lora.py", lambda s: literal_values(s, "MaxLoRARanks")),
    },
    "sglang": {
        "ToolCallParser": (
            "sglang/srt/function_call/function_call_parser.py",
            lambda s: dict_keys(s, "ToolCallParserEnum", "FunctionCallParser") | {"auto"},
        ),
        "ReasoningParser": (
            "sglang/srt/parser/reasoning_parser.py",
            lambda s: dict_keys(s, "DetectorMap", "ReasoningParser") | {"auto"},
        ),
        "KvCacheDtype": ("sglang/srt/arg_groups/fields/model.py", lambda s: field_choices(s, "kv_cache_dtype")),
        "QuantizationMethod": ("sglang/srt/arg_groups/choices.py", lambda s: list_values(s, "QUANTIZATION_CHOICES")),
        "LoadFormat": ("sglang/srt/arg_groups/choices.py", lambda s: list_values(s, "LOAD_FORMAT_CHOICES")),
        "SpeculativeAlgorithm": (
            _SGLANG_SPEC + "spec_info.py",
            lambda s: (enum_members(s, "SpeculativeAlgorithm") - {"NONE"}) | {"NEXTN"},
        ),
        "LoraTargetModule": (
            "sglang/srt/utils/common.py",
            lambda s: list_values(s, "SUPPORTED_LORA_TARGET_MODULES") | {"all"},
        ),
    },
}


def check_options(wheel_dir: Path) -> list[str]:
    """Differences between the option value sets of systems/{vllm,sglang}/options.py and the engines' source."""
    from typing import get_args

    from systems.sglang import options as sglang_options
    from systems.vllm import options as vllm_options

    problems = []
    for module in (vllm_options, sglang_options):
        wheel = download(module.ENGINE_PROJECT, module.ENGINE_VERSION, wheel_dir)
        for name, (member, extract) in OPTION_SOURCES[module.ENGINE_PROJECT].items():
            upstream = extract(wheel.read(member))
            value = getattr(module, name)
            ours = frozenset(value) if isinstance(value, frozenset) else frozenset(get_args(value))
            if ours != upstream:
                problems.append(
                    f"{module.__name__}.{name} differs from {wheel.key} {member}: "
                    f"only ours {sorted(ours - upstream, key=str)}, only upstream {sorted(upstream - ours, key=str)}"
                )
    return problems


# Where each quantization method of systems/precision.py ENGINE_PRECISION is implemented: the class whose
# get_min_capability the engine compares with the GPU (vllm/config/vllm.py, sglang/srt/model_loader/loader.py).
PRECISION_CLASSES = {
    VLLM_ENGINE: {
        "fp8": ("vllm/model_executor/layers/quantization/fp8.py", "Fp8Config"),
        "modelopt": ("vllm/model_executor/layers/quantization/modelopt.py", "ModelOptFp8Config"),
        "compressed-tensors": (
            "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py",
            "CompressedTensorsConfig",
        ),
        "mxfp4": ("vllm/model_executor/layers/quantization/mxfp4.py", "Mxfp4Config"),
        "modelopt_fp4": ("vllm/model_executor/layers/quantization/modelopt.py", "ModelOptNvFp4Config"),
        "awq": ("vllm/model_executor/layers/quantization/auto_awq.py", "AutoAWQConfig"),
        "gptq": ("vllm/model_executor/layers/quantization/auto_gptq.py", "AutoGPTQConfig"),
    },
    SGLANG_ENGINE: {
        "fp8": ("sglang/srt/layers/quantization/fp8.py", "Fp8Config"),
        "modelopt_fp8": ("sglang/srt/layers/quantization/modelopt_quant.py", "ModelOptFp8Config"),
        "w8a8_fp8": ("sglang/srt/layers/quantization/w8a8_fp8.py", "W8A8Fp8Config"),
        "compressed-tensors": (
            "sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py",
            "CompressedTensorsConfig",
        ),
        "mxfp4": ("sglang/srt/layers/quantization/mxfp4.py", "Mxfp4Config"),
        "modelopt_fp4": ("sglang/srt/layers/quantization/modelopt_quant.py", "ModelOptFp4Config"),
        "nvfp4_online": ("sglang/srt/layers/quantization/nvfp4_online.py", "NvFp4OnlineConfig"),
        "awq": ("sglang/srt/layers/quantization/awq/awq.py", "AWQConfig"),
        "gptq": ("sglang/srt/layers/quantization/gptq/gptq.py", "GPTQConfig"),
        "bitsandbytes": ("sglang/srt/layers/quantization/bitsandbytes.py", "BitsAndBytesConfig"),
    },
}


def min_capabilities(source: str, cls: str) -> set[int]:
    """Every integer a class's get_min_capability can return (a conditional return gives several)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "get_min_capability":
                    return {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and type(n.value) is int}
    raise SystemExit(f"{cls} has no get_min_capability")


def check_precision(wheel_dir: Path) -> list[str]:
    """systems/precision.py ENGINE_PRECISION minimums against the engines' get_min_capability."""
    from systems.precision import ENGINE_PRECISION

    problems = []
    for engine, classes in PRECISION_CLASSES.items():
        project, version = engine.split("==")
        wheel = download(project, version, wheel_dir)
        if set(classes) != set(ENGINE_PRECISION[engine]):
            problems.append(
                f"ENGINE_PRECISION[{engine}] names {sorted(ENGINE_PRECISION[engine])}, the tool {sorted(classes)}"
            )
        for method, (member, cls) in classes.items():
            support = ENGINE_PRECISION[engine].get(method)
            found = min_capabilities(wheel.read(member), cls)
            if support is not None and support.minimum not in found:
                problems.append(
                    f"ENGINE_PRECISION[{engine}][{method}].minimum {support.minimum}: {cls} returns {sorted(found)}"
                )
    return problems


def compare(files: dict[str, str]) -> list[str]:
    """Each committed data file that differs from, lacks or is not in what the wheels give."""
    committed = {path.name: path.read_text() for path in sorted(DATA_DIR.glob("*.json"))}
    where = DATA_DIR.relative_to(REPO_ROOT)
    return [
        f"{where / name} "
        + ("is missing" if name not in committed else "differs from what the wheels give")
        + ": regenerate it (make engine-tables)"
        for name, text in files.items()
        if committed.get(name) != text
    ] + [f"{where / name} comes from no wheel the tool reads: remove it" for name in committed if name not in files]


def write(files: dict[str, str]) -> None:
    """Write every data file and remove those of releases no longer read."""
    for stale in sorted(set(p.name for p in DATA_DIR.glob("*.json")) - set(files)):
        (DATA_DIR / stale).unlink()
        print(f"removed {(DATA_DIR / stale).relative_to(REPO_ROOT)}")
    for name, text in files.items():
        (DATA_DIR / name).write_text(text)
        print(f"wrote {(DATA_DIR / name).relative_to(REPO_ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--wheel-dir", type=Path, help="where wheels are (or are downloaded to); default a temp dir")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel_dir = args.wheel_dir or Path(tmp)
        wheel_dir.mkdir(parents=True, exist_ok=True)
        files = build(wheel_dir)
        problems = compare(files) if args.check else []
        if not args.check:
            write(files)  # before the checks below import systems: they read the tables
        problems += check_options(wheel_dir) + check_precision(wheel_dir)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
