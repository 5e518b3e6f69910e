"""Every system's artifact carries a tokenizer its container reads, proven with the container's own library versions.

The source is a tiny GPT-2 whose tokenizer transformers 5 saved (class TokenizersBackend, tokenizer.json in tokenizers
0.23's form, extra special tokens as a list, chat_template.jinja), as a model saved today is. Each system of
systems.REGISTRY builds its artifact from it with its real recipe; then each artifact's tokenizer is loaded the way
its container loads it (AutoTokenizer.from_pretrained, or tokenizers.Tokenizer for tensorrt-byoc, whose image has
no transformers) under every library set its container may hold: the oldest versions its requirements allow and,
where they are bounded, the newest (tests/systems/container_tokenizers/make_envs.py builds them from
systems.container_tokenizer.python_stack_of, so a new system or a changed pin is covered without editing this file).
Each load must give the source tokenizer's ids and decode back to the text.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CHAT_TEMPLATE, EXTRA_SPECIAL_TOKENS, ROOT, run_side_by_side, save_tokenizer_with_transformers5
from hermetic import subprocess_env

from systems import REGISTRY, get_system
from systems.container_tokenizer import python_stack_of

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent / "container_tokenizers"
ENVS_ROOT = ROOT / ".venv-tokenizers"
TEXTS = [
    "Once upon a time there was a small town by the sea.",
    "  Hello,   world!  2048 ",
    "<|user|> What is the capital of France?<|endoftext|>",
    "<|tool|>é 猫 🙂",
]
# pip's words when an index cannot be reached (the only reason to skip rather than fail), as test_hf_container_compat.
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known|"
    r"Connection refused|Network is unreachable|ConnectTimeoutError|ReadTimeoutError|ProxyError|SSLError"
)


def _make_envs_module():
    spec = importlib.util.spec_from_file_location("container_tokenizer_envs", HERE / "make_envs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


make_envs = _make_envs_module()
VARIANTS = make_envs.variants()


def make_the_envs() -> dict[str, Path]:
    """Every variant's venv (make_envs.py keeps the ones whose pins are unchanged): {variant key: venv}."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "make_envs.py"), str(ENVS_ROOT)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        if NETWORK_ERRORS.search(proc.stdout + proc.stderr):
            pytest.skip(
                f"cannot build the container tokenizer envs: a package registry is unreachable:\n{proc.stderr[-2000:]}"
            )
        pytest.fail(f"make_envs.py failed (not a network problem):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return {variant.key: ENVS_ROOT / variant.key for variant in VARIANTS}


def make_source_model(root: Path) -> Path:
    from model_build.tiny_models import make_tiny_model

    source = make_tiny_model("gpt2", root / "source")
    save_tokenizer_with_transformers5(source)
    return source


def _config(root: Path, source: Path) -> Path:
    lines = ["endpoints:"]
    for system in REGISTRY:
        instance = "ml.g4dn.xlarge" if system == "tensorrt-byoc" else "ml.g5.2xlarge"
        lines.append(
            f"  - {{name: tok-{system}, system: {system}, model: {source}, instance_type: {instance}, "
            "dtype: fp16, max_shard_size: 300KB}"
        )
    path = root / "endpoints.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def tokenizer_dir(system: str, artifact: Path) -> Path:
    """Where the container reads the tokenizer: the model directory, except djl-fastertransformer's staged weights."""
    if system == "djl-fastertransformer":
        from systems.djl_fastertransformer import WEIGHTS_DIR

        return artifact / WEIGHTS_DIR
    return artifact


def build_every_system(root: Path, source_model: Path) -> dict[str, Path]:
    """Every system's artifact, built by its recipe from the transformers-5 tokenizer: {system: tokenizer folder}."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    environment_plan = load_config(_config(root, source_model))
    built = {}
    for system in REGISTRY:
        build_endpoint(environment_plan.endpoint(f"tok-{system}"), root / system, progress=False)
        built[system] = tokenizer_dir(system, root / system)
    return built


@dataclass
class Prepared:
    source_model: Path
    artifacts: dict[str, Path]
    loads: dict[
        str, tuple[subprocess.CompletedProcess[str], dict[str, tuple[str, Path]]]
    ]  # name -> (run, {label: (mode, folder)})


def _mode(system: str) -> str:
    return "auto" if python_stack_of(get_system(system)).transformers is not None else "tokenizers"


def _oldest_of(system: str):
    return next(v for v in VARIANTS if system in v.systems and v.key.startswith("oldest-"))


@pytest.fixture(scope="module")
def prepared(request: pytest.FixtureRequest) -> Prepared:
    """Build every system's artifact here, then run each load: each variant's loads of every artifact, and the source
    as saved, which the old containers must refuse."""
    root = request.getfixturevalue("tmp_path_factory").mktemp("container-tokenizers")
    envs = make_the_envs()
    source = make_source_model(root)
    (root / "builds").mkdir()
    artifacts = build_every_system(root / "builds", source)
    wanted = {
        variant.key: (variant.key, {s: (_mode(s), artifacts[s]) for s in variant.systems}) for variant in VARIANTS
    }
    wanted["refused-hf"] = (_oldest_of("hf-fastload").key, {"source": ("auto", source)})
    wanted["refused-ds"] = (
        _oldest_of("deepspeed-byoc").key,
        {"source": ("auto", source), "raw": ("tokenizers", source)},
    )
    commands = {
        name: [
            str(make_envs.base_python(ENVS_ROOT)),
            "-I",
            str(HERE / "load_tokenizer.py"),
            str(envs[variant_key]),
            json.dumps(TEXTS),
            *(f"{mode}:{directory}" for mode, directory in dirs.values()),
        ]
        for name, (variant_key, dirs) in wanted.items()
    }
    runs = run_side_by_side(commands)
    return Prepared(source, artifacts, {name: (runs[name], dirs) for name, (_, dirs) in wanted.items()})


@pytest.fixture(scope="module")
def source_model(prepared: Prepared) -> Path:
    return prepared.source_model


@pytest.fixture(scope="module")
def expected(source_model: Path) -> list[list[int]]:
    """The source tokenizer's ids (transformers 5, the build machine) for TEXTS."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source_model)
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in TEXTS]


def loaded(prepared: Prepared, name: str) -> dict:
    """One load's result: {"versions": ..., label: result for each folder}."""
    result, dirs = prepared.loads[name]
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return {
        "versions": out["versions"],
        **{label: out["results"][str(directory)] for label, (_, directory) in dirs.items()},
    }


def test_every_system_has_its_containers_versions_and_every_variant_is_tested():
    covered = {system for variant in VARIANTS for system in variant.systems}
    assert covered == set(REGISTRY)
    for system in REGISTRY:
        assert python_stack_of(get_system(system)).tokenizers  # recorded for every container


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.key for v in VARIANTS])
def test_each_systems_tokenizer_loads_in_its_container_and_round_trips(prepared, expected, variant):
    results = loaded(prepared, variant.key)
    versions = results.pop("versions")
    for pin in variant.pins:  # the libraries really are the container's
        name, requirement = re.match(r"([a-z]+)(.*)", pin).groups()
        if requirement.startswith("=="):
            assert versions[name].startswith(requirement[2:]), (pin, versions)
    for system, result in results.items():
        assert result["ok"], f"{system} under {versions}: {result.get('error')}"
        assert result["ids"] == expected, (system, versions)
        assert result["decoded"] == TEXTS, (system, versions)
        if result["class"] != "tokenizers.Tokenizer":
            assert result["eos_token"] == "<|endoftext|>"
            assert result["special_tokens"] == sorted(["<|endoftext|>", *EXTRA_SPECIAL_TOKENS]), (system, versions)
            assert result["chat_template"] == CHAT_TEMPLATE, (system, versions)


def test_the_check_fails_on_a_tokenizer_the_old_containers_cannot_read(prepared):
    """The source as transformers 5 saved it (not rewritten) fails in the containers, so the passing loads above are
    the recipes' doing: transformers 4.49 knows no class TokenizersBackend, tokenizers 0.15 cannot parse the pair-style
    BPE merges of tokenizers 0.23's tokenizer.json."""
    results = loaded(prepared, "refused-hf")
    assert not results["source"]["ok"] and "TokenizersBackend" in results["source"]["error"], results
    results = loaded(prepared, "refused-ds")
    for label in ("source", "raw"):
        assert not results[label]["ok"] and "did not match any variant" in results[label]["error"], results


def test_the_own_images_dockerfiles_pin_what_systems_images_records():
    from systems import deepspeed_byoc
    from systems.images import OWN_CONTAINER_STACKS

    for dockerfile, stack in OWN_CONTAINER_STACKS.items():
        text = (ROOT / dockerfile).read_text()
        installed = " ".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        pins = dict(re.findall(r"\b(transformers|tokenizers)==([0-9.]+)", installed))
        assert pins.get("tokenizers") == stack.tokenizers.removeprefix("=="), dockerfile
        assert pins.get("transformers") == (stack.transformers.removeprefix("==") if stack.transformers else None)
    assert OWN_CONTAINER_STACKS["systems/deepspeed_byoc/container/Dockerfile"].transformers == (
        f"=={deepspeed_byoc.TRANSFORMERS_VERSION}"
    )


def test_tensorrt_byoc_refuses_a_tokenizers_writer_newer_than_its_image(tmp_path):
    from deployment import load_config
    from model_build import BuildError
    from systems.tensorrt_byoc.recipe import check_tokenizers_writer

    config = tmp_path / "c.yaml"
    config.write_text(
        "endpoints:\n  - {name: trt, system: tensorrt-byoc, model: gpt2, instance_type: ml.g4dn.xlarge}\n"
    )
    endpoint = load_config(config).endpoint("trt")
    for accepted in ("0.23.3", "0.23.9", "0.22.0", "0.19.1"):
        check_tokenizers_writer(endpoint, installed=accepted)
    with pytest.raises(
        BuildError,
        match=r"tokenizers 0\.24\.0 writes tokenizer.json, which the tensorrt-byoc image's "
        r"tokenizers 0\.23\.3 may not read; allowed: ",
    ):
        check_tokenizers_writer(endpoint, installed="0.24.0")


def test_deepspeed_byoc_refuses_what_no_rewrite_can_give_transformers_4362(tmp_path, source_model):
    """A transformers-5 class without its tokenizer.json has nothing 4.36.2 can load: refused before any weights."""
    import shutil

    from deployment import load_config
    from model_build import BuildError
    from systems.deepspeed_byoc.recipe import build

    broken = tmp_path / "no-tokenizer-json"
    shutil.copytree(source_model, broken)
    (broken / "tokenizer.json").unlink()
    (broken / "vocab.json").write_text("{}")
    config = tmp_path / "c.yaml"
    config.write_text(
        f"endpoints:\n  - {{name: ds, system: deepspeed-byoc, model: {broken}, instance_type: ml.g5.2xlarge}}\n"
    )
    with pytest.raises(
        BuildError,
        match=r"tokenizer_class 'TokenizersBackend' is a transformers 5 class and there is "
        r"no tokenizer.json, so transformers 4.36.2 \(the deepspeed-byoc image\) cannot "
        r"load it; allowed: ",
    ):
        plan = load_config(config).plan("ds")
        build(plan.spec, plan.engine, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
