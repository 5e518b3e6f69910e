"""Model files are read only through the bounded readers of facts/model_files.py.

A model folder or Hub repository is input nobody here wrote: config.json, generation_config.json, the tokenizer
files, chat templates, safetensors headers and adapter_config.json go through read_regular_file / read_model_json /
read_model_config / read_safetensors_header / config_fields (a regular file, a size cap per kind, bounded JSON, each
field typed; docs/design/untrusted-input.md). A plain `json.loads(path.read_text())` of one skips all of it: a FIFO
blocks the build, a 10 GB config.json fills the memory, a mistyped field fails deep in the code that reads it.

The scan parses every .py file of ours outside tests/ and facts/model_files.py and finds each read of a file
(open(), os.open(), io.open(), Path.open(), .read_text(), .read_bytes()) whose path is a model file's: a string in
the path naming one (config.json, tokenizer..., generation_config, adapter_config, chat_template, safetensors,
vocab.json, merges.txt, ...), a name that says so (config_path, tokenizer_..., model_dir, metadata_dir), or a
parameter of the enclosing function that is a model folder (model_dir, source, location, checkpoint_path ...),
following the names the path is built from through the function's and the module's assignments. What is ours (our
own manifest.json, the config YAML, which endpoint_config/yaml_reader.py bounds) or written by our own code a moment
before is listed in ALLOWED with the reason; anything else fails naming file:line.
"""

from __future__ import annotations

import ast
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import HAND_MADE_CONFIG, ROOT, repository_python_files, write_hand_made_model

# A string in a path that names a model file.
MODEL_FILE = re.compile(
    r"config\.json|tokenizer|generation_config|adapter_config|chat_template|safetensors|special_tokens|vocab\.json"
    r"|merges\.txt|preprocessor_config",
    re.IGNORECASE,
)
# A variable or attribute whose name says it holds a model file or folder.
MODEL_NAME = re.compile(
    r"config_path|config_file|tokenizer|adapter_config|generation_config|chat_template|safetensors|model_config"
    r"|metadata_dir|model_dir",
    re.IGNORECASE,
)
# A function parameter that is a model folder (or a file in one).
MODEL_PARAMETER = re.compile(
    r"^(model|source|checkpoint|location)(_dir|_path|_folder|_directory)?$|^(model|source|checkpoint)_", re.IGNORECASE
)
# Calls that build a path from their arguments, or from their receiver and arguments, or list a folder.
PATH_FUNCTIONS = {"Path", "PurePath", "PosixPath", "str", "join", "fspath", "sorted", "list", "reversed"}
PATH_METHODS = {"joinpath", "with_name", "with_suffix", "expanduser", "resolve", "absolute", "glob", "rglob", "iterdir"}
# Modules whose .open(path) is a read of `path` (os.open, io.open); tarfile.open & co. open archives of ours.
OPENING_MODULES = {"os", "io", "builtins"}
NOT_A_RECEIVER = {"os", "io", "builtins", "tarfile", "gzip", "zipfile", "codecs", "urllib", "webbrowser"}

# "path::function" -> why that function may read the file itself. Each entry is a read of a file we wrote, or code
# that cannot import facts/ (a handler shipped into a container on its own, reading the artifact our build wrote
# after check_model_folder read the source through the bounded readers).
ALLOWED: dict[str, str] = {
    # bench/: the benchmark's own fixtures, written by the lines above the read.
    "bench/gpu_ready.py::make_checkpoint": "vocab.json that write_gpt2_tokenizer wrote into tmp a line before",
    "bench/loadtest.py::text_vocab_checkpoint": "vocab.json that write_gpt2_tokenizer wrote into tmp a line before",
    "bench/models.py::_special_ids": "vocab.json that write_gpt2_tokenizer wrote into a temporary folder a line before",
    "bench/models.py::make_checkpoint": "vocab.json that write_gpt2_tokenizer wrote a line before",
    "bench/models.py::build": "config_path is the benchmark's own endpoint config YAML, compared with its text",
    "bench/staging.py::measure": "config.json of the benchmark's own Hub mirror fixture, uploaded as the staged copy",
    # model_build/: the config YAML and the tiny models and adapters our own code writes.
    "model_build/recipe_job.py::spec_key": "config_path is the endpoint config YAML, uploaded whole as the build's spec",
    "model_build/tiny_adapters.py::make_tiny_adapter": "adapter_config.json that PEFT save_pretrained wrote above",
    "model_build/tiny_models.py::make_tiny_model": (
        "tokenizer.json (_write_t5_tokenizer) and vocab.json (write_gpt2_tokenizer) written a line before"
    ),
    # systems/checkpoint_artifact.py: copies and hashes, no parsing.
    "systems/checkpoint_artifact.py::_copy": (
        "streams a file into the artifact in chunks while hashing it: a local folder's every entry was found a "
        "regular file or folder by check_model_folder at the build's start (model_build/cli.py _check_local_model), "
        "a Hub model's files were fetched by our bounded reader"
    ),
    "systems/checkpoint_artifact.py::_write_chat_template": "hashes the tokenizer_config.json it just wrote",
    "systems/checkpoint_artifact.py::_copy_checkpoint": "hashes the files container.rewrite wrote into out_dir",
    # The handlers run in the container, shipped without facts/, on the artifact our build wrote.
    "systems/deepspeed_byoc/handler/handler.py::read_engine_config": "deepspeed.json, written by the recipe",
    "systems/hf_fastload/handler/inference.py::read_manifest": "the artifact's manifest.json, written by the build",
    "systems/tensorrt_byoc/handler/engine.py::onnx_sha256": (
        "the artifact's manifest.json and the engine files the recipe compiled (hashed in chunks)"
    ),
    "systems/tensorrt_byoc/handler/handler.py::load": "decoder.json and tensorrt_profile.json, written by the recipe",
    "systems/djl_fastertransformer/handler/model.py::read_model_type": (
        "the artifact's config.json in the container: copied by the build after read_model_config checked it"
    ),
    "systems/djl_fastertransformer/handler/model.py::load_transformers": (
        "the artifact's config.json in the container: copied by the build after read_model_config checked it"
    ),
}


def _assignments(scope: ast.AST, *, top_level_only: bool = False) -> dict[str, list[ast.expr]]:
    """name -> the expressions assigned to it in `scope` (a for loop's target: what it iterates)."""
    found: dict[str, list[ast.expr]] = {}
    nodes = (
        [n for statement in scope.body for n in _walk_outside_functions(statement)]  # type: ignore[attr-defined]
        if top_level_only
        else list(ast.walk(scope))
    )
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node.iter)
    return found


def _walk_outside_functions(node: ast.AST):
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield from _walk_outside_functions(child)


class _PathOrigin:
    """Why a path expression is a model file's (None: nothing says so), following the names it is built from."""

    def __init__(self, assigned: dict[str, list[ast.expr]], parameters: set[str]) -> None:
        self.assigned, self.parameters, self.seen = assigned, parameters, set[str]()

    def of(self, e: ast.AST) -> str | None:
        if isinstance(e, ast.Constant):
            return repr(e.value) if isinstance(e.value, str) and MODEL_FILE.search(e.value) else None
        if isinstance(e, ast.JoinedStr):
            return self._first(e.values)
        if isinstance(e, ast.FormattedValue):
            return self.of(e.value)
        if isinstance(e, ast.Name):
            if MODEL_NAME.search(e.id):
                return e.id
            if e.id in self.parameters and MODEL_PARAMETER.search(e.id):
                return f"parameter {e.id}"
            if e.id in self.seen:
                return None
            self.seen.add(e.id)
            return self._first(self.assigned.get(e.id, []))
        if isinstance(e, ast.Attribute):
            return e.attr if MODEL_NAME.search(e.attr) else self.of(e.value)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
            return self.of(e.left) or self.of(e.right)
        if isinstance(e, ast.IfExp):
            return self.of(e.body) or self.of(e.orelse)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            return self._first(e.elts)
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Name) and f.id in PATH_FUNCTIONS:
                return self._first(e.args)
            if isinstance(f, ast.Attribute) and f.attr in PATH_FUNCTIONS:  # os.path.join, os.fspath
                return self._first(e.args)
            if isinstance(f, ast.Attribute) and f.attr in PATH_METHODS:
                return self.of(f.value) or self._first(e.args)
        return None

    def _first(self, expressions: list[ast.expr]) -> str | None:
        return next((why for e in expressions if (why := self.of(e))), None)


def _read_path(call: ast.Call) -> ast.expr | None:
    """The path a call reads, if it is a read of a file: open(p), os.open(p), p.open(), p.read_text(),
    p.read_bytes()."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "open" and call.args:
        return call.args[0]
    if isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id in NOT_A_RECEIVER:
            opens = f.attr == "open" and f.value.id in OPENING_MODULES and call.args
            return call.args[0] if opens else None
        if f.attr in ("read_text", "read_bytes", "open"):
            return f.value
    return None


def model_file_reads(source: str) -> list[tuple[int, str, str]]:
    """(line, innermost enclosing function, why the path is a model file's) of each read of a model file in
    `source`. A function sees the module's names and its enclosing functions' (closures) besides its own."""
    tree = ast.parse(source)
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str, assigned: dict[str, list[ast.expr]], parameters: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                own = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
                visit(child, child.name, {**assigned, **_assignments(child)}, parameters | own)
                continue
            if isinstance(child, ast.Call) and (path := _read_path(child)) is not None:
                if why := _PathOrigin(assigned, parameters).of(path):
                    found.append((child.lineno, function, why))
            visit(child, function, assigned, parameters)

    visit(tree, "<module>", _assignments(tree, top_level_only=True), set())
    return sorted(found)


def _our_python_files() -> list[str]:
    return [p for p in repository_python_files() if not p.startswith("tests/") and p != "facts/model_files.py"]


def unbounded_model_reads() -> tuple[list[str], set[str]]:
    """(file:line of each read of a model file outside facts/model_files.py not in ALLOWED, the ALLOWED keys used)."""
    bad: list[str] = []
    used: set[str] = set()
    for relative in _our_python_files():
        for line, function, why in model_file_reads((ROOT / relative).read_text()):
            key = f"{relative}::{function}"
            if key in ALLOWED:
                used.add(key)
            else:
                bad.append(f"{relative}:{line} ({function}): reads {why} without facts/model_files.py")
    return bad, used


def test_model_files_are_read_only_through_the_bounded_readers() -> None:
    bad, used = unbounded_model_reads()
    assert not bad, (
        "model files read outside facts/model_files.py (use read_model_config / read_model_json / "
        "read_tokenizer_config / read_chat_template_file / read_safetensors_header / config_fields, or add the "
        "function to ALLOWED with the reason the file is ours):\n" + "\n".join(bad)
    )
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"ALLOWED names functions that no longer read a model file; remove them: {stale}"


def test_the_model_read_finder_sees_every_form() -> None:
    source = """
import json, os
from pathlib import Path
CONFIG = "config.json"

def a(folder):
    return json.loads((folder / "config.json").read_text())  # 7

def b(source):
    with open(Path(source) / "deepspeed.json") as f:  # 10: a model folder parameter
        return f.read()

def c(folder):
    path = folder / CONFIG
    return path.read_bytes()  # 15: through a local and a module constant

def d(folder):
    for p in sorted(folder.glob("*.safetensors")):
        os.open(p, os.O_RDONLY)  # 19: what a listing of shards yields

def e(out):
    return (out / "manifest.json").read_text()  # ours: not a model file

def f(config_path):
    with config_path.open("rb") as g:  # 25: a name that says so
        return g.read()

def g(build):
    return (build / f"{stem}.tokenizer_config.json").read_text()  # 29: an f-string

def h(log_path, archive):
    import tarfile
    tarfile.open(archive)  # an archive of ours, not a read of a path here
    return log_path.read_text()
"""
    found = {line: (function, why) for line, function, why in model_file_reads(source)}
    assert found == {
        7: ("a", "'config.json'"),
        10: ("b", "parameter source"),
        15: ("c", "'config.json'"),
        19: ("d", "'*.safetensors'"),
        25: ("f", "config_path"),
        29: ("g", "'.tokenizer_config.json'"),
    }


def test_every_allowed_entry_names_a_file_that_exists() -> None:
    for key, reason in ALLOWED.items():
        path, _, function = key.partition("::")
        assert (ROOT / path).is_file(), key
        assert function and reason.strip(), key


# ---- each path that now reads through the bounded readers refuses a config.json that is not one


def _spoil(path: Path, how: str) -> str:
    """Make `path` a file the bounded readers refuse; returns what the message must say."""
    path.unlink(missing_ok=True)
    if how == "oversized":
        with open(path, "wb") as f:  # sparse: the size is what the reader checks before reading
            f.truncate(64 * 2**20 + 1)
        return "bytes; allowed: at most"
    if how == "fifo":
        os.mkfifo(path)
        return "a FIFO; allowed: a regular file"
    if how == "symlink loop":
        path.symlink_to(path.name)
        return "cannot be read"
    if how == "symlink to a FIFO":
        os.mkfifo(path.with_name(path.name + ".fifo"))
        path.symlink_to(path.name + ".fifo")
        return "a FIFO; allowed: a regular file"
    raise AssertionError(how)


SPOILED = ["oversized", "fifo", "symlink loop", "symlink to a FIFO"]


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Path]:
    """The hand-made honest model, under a deadline: a reader that regresses to a plain open() blocks on a FIFO
    forever (measured on main a0e7241: config_for_container and the chat_template.jinja rewrite did), and SIGALRM
    turns that into this test's failure instead of a hung suite."""

    def blocked(signum: int, frame: object) -> None:
        raise AssertionError(f"a model file read blocked for {READ_DEADLINE_S} s: opened without facts/model_files.py")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(READ_DEADLINE_S)
    try:
        yield write_hand_made_model(tmp_path / "model")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


READ_DEADLINE_S = 60  # each case takes well under a second; the margin is for a loaded machine


@pytest.mark.parametrize("how", SPOILED)
def test_the_load_time_model_config_refuses_a_config_json_that_is_not_one(model: Path, how: str) -> None:
    """systems/checks.py _model_config (the LoRA memory and max_model_len rules) and model_support.local_architecture
    (the architecture rule): UnreadableModel naming the file, which the loader reports as a problem of `model:`."""
    from facts.model_files import UnreadableModel
    from systems.checks import _model_config
    from systems.model_support import local_architecture

    says = _spoil(model / "config.json", how)
    for read in (_model_config, local_architecture):
        with pytest.raises(UnreadableModel) as err:
            read(str(model))
        assert str(err.value).startswith(str(model / "config.json")) and says in str(err.value), (read, err.value)


@pytest.mark.parametrize("how", SPOILED)
def test_the_build_time_readers_refuse_a_config_json_that_is_not_one(model: Path, how: str) -> None:
    """recipe_common.config_for_container and djl_common/lmi.check_max_model_len."""
    from facts.model_files import UnreadableModel
    from systems.djl_common.lmi import check_max_model_len
    from systems.recipe_common import config_for_container

    says = _spoil(model / "config.json", how)
    with pytest.raises(UnreadableModel, match=re.escape(says)) as err:
        config_for_container(model, "bf16")
    assert str(model / "config.json") in str(err.value)
    with pytest.raises(UnreadableModel, match=re.escape(says)):
        engine = SimpleNamespace(max_model_len=128)
        check_max_model_len(SimpleNamespace(name="e"), engine, model)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", SPOILED)
def test_the_tokenizer_rewrites_refuse_a_file_that_is_not_one(model: Path, how: str) -> None:
    """container_tokenizer's chat_template.jinja (cap 1 MiB) and hf_fastload's set_chat_template's
    tokenizer_config.json (cap 32 MiB)."""
    from facts.model_files import UnreadableModel
    from systems.container_tokenizer import TokenizerExport, _config_for_transformers4
    from systems.hf_fastload.recipe import set_chat_template

    (model / "tokenizer_config.json").write_text("{}")
    says = _spoil(model / "chat_template.jinja", how)
    export = TokenizerExport(source=model, files={"tokenizer_config.json": None, "chat_template.jinja": None})
    with pytest.raises(UnreadableModel, match=re.escape(says)) as err:
        _config_for_transformers4(export, "transformers 4.49")
    assert str(model / "chat_template.jinja") in str(err.value)

    if how == "oversized":
        says = _spoil(model / "tokenizer_config.json", how)
        with pytest.raises(UnreadableModel, match=re.escape(says)):
            set_chat_template(model, "{{ messages }}")


def test_the_demo_refuses_a_config_json_that_is_not_one(model: Path) -> None:
    """local_emulator/demo_config.py _family: ConfigError (the demo's exit 2) naming the model and the file."""
    from endpoint_config import ConfigError
    from local_emulator.demo_config import _family

    assert _family(str(model), "vllm") == HAND_MADE_CONFIG["model_type"]
    _spoil(model / "config.json", "oversized")
    with pytest.raises(ConfigError, match=r"config\.json: size is 67,108,865 bytes; allowed: at most 4,194,304"):
        _family(str(model), "vllm")


def test_lora_slot_elements_reads_the_shape_config_fields_reads() -> None:
    """The slot size from config_fields' shape: head_dim when given, else hidden // heads; KV heads default to the
    heads; None for mixture-of-experts or no intermediate_size; a mistyped field refused, not guessed."""
    from facts.model_files import UnreadableModel
    from systems.checks import lora_slot_elements

    c = dict(HAND_MADE_CONFIG)  # hidden 64, intermediate 128, 2 layers, 4 heads, 2 KV heads, head_dim 16
    q, kv = 4 * 16, 2 * 16
    per_layer = (3 * 64 + q + 2 * kv) + (q + 64) + (2 * 64 + 2 * 128) + (128 + 64)
    assert lora_slot_elements(c, 8) == 8 * per_layer * 2
    without = {k: v for k, v in c.items() if k not in ("head_dim", "num_key_value_heads")}
    assert lora_slot_elements(without, 8) == 8 * ((3 * 64 + 64 + 128) + (64 + 64) + (2 * 64 + 256) + (128 + 64)) * 2
    assert lora_slot_elements({**c, "num_experts": 8, "num_experts_per_tok": 2}, 8) is None
    assert lora_slot_elements({k: v for k, v in c.items() if k != "intermediate_size"}, 8) is None
    with pytest.raises(UnreadableModel, match="hidden_size"):
        lora_slot_elements({**c, "hidden_size": "64"}, 8)
