"""The bad configs of the 2026-11-27 reliability probe, each refused when the config loads: by `load_config` (what
`cdk synth` runs first) and by `python -m model_build build`, with a message naming the key, the value and what is
allowed, no traceback and nothing written. Before, 17 of them synthesized and failed only at deploy or start, and 11
were refused with a traceback, files in the CDK output folder, a wrong "does not exist" or no allowed keys. Each case
keeps the probe's id; the class checks below cover what the cases are instances of (every float, every pattern,
every container environment, every model reference)."""

from __future__ import annotations

import itertools
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ROOT

from deployment import load_config
from endpoint_config import ConfigError

# slow: every probe config through the loader, the CLI and a synth subprocess (make test-fast leaves them out)
pytestmark = pytest.mark.slow

VLLM = """project: probe
environments:
  dev: {{{account}region: {region}, retain_data: false}}
endpoints:
  - name: chat-vllm
    system: vllm
    model: {model}
    dtype: bf16
    instance_type: {instance}
    volume_size_gb: null
    engine: {{max_model_len: 32768, max_num_seqs: 64{engine}}}
{extra}"""
ACCOUNT = 'account: "444455556666", '


def vllm(
    engine: str = "",
    extra: str = "",
    *,
    account: str = ACCOUNT,
    region: str = "us-east-1",
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    instance: str = "ml.g6e.xlarge",
) -> str:
    return VLLM.format(engine=engine, extra=extra, account=account, region=region, model=model, instance=instance)


def lmi(instance: str = "ml.g5.12xlarge", dtype: str = "fp16", engine: str = "") -> str:
    return (
        "project: probe\nenvironments:\n  dev: {retain_data: false}\nendpoints:\n  - name: gptj\n    system: lmi-vllm\n"
        f"    model: EleutherAI/gpt-j-6B\n    dtype: {dtype}\n    instance_type: {instance}\n    volume_size_gb: null\n"
        f"    engine: {{{engine}}}\n"
    )


def lora(adapters: str) -> str:
    return (
        'project: probe\nenvironments:\n  dev: {account: "444455556666", region: us-east-1, retain_data: false}\n'
        "endpoints:\n  - name: lora\n    system: lmi-vllm\n    model: meta-llama/Llama-3.1-8B-Instruct\n    dtype: bf16\n"
        "    instance_type: ml.g5.2xlarge\n    volume_size_gb: null\n    engine: {max_model_len: 8192, max_lora_rank: 16}\n"
        "    hosting: {mode: inference-components, compute: {cpu_cores: 4, min_memory_mb: 16384}}\n"
        f"    adapters:\n{adapters}"
    )


def local_model(tmp_path: Path, weights: bytes) -> Path:
    """A local GPT-2-shaped model directory whose model.safetensors holds `weights` (corrupt in the cases)."""
    path = tmp_path / "model"
    path.mkdir()
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 64, "n_embd": 32}
    (path / "config.json").write_text(json.dumps(config))
    (path / "model.safetensors").write_bytes(weights)
    return path


def hf_fastload(model: Path) -> str:
    return f"endpoints:\n  - {{name: tiny, system: hf-fastload, model: '{model}', instance_type: ml.m5.xlarge}}\n"


def bad_adapter(tmp_path: Path) -> Path:
    path = tmp_path / "adapter"
    path.mkdir()
    (path / "adapter_config.json").write_text(json.dumps({"r": "sixteen", "rank_pattern": {"q_proj": 1e9}}))
    return path


CALLER = "    chat: {openai_route: {callers: ['arn:aws:iam::999988887777:role/app']}}\n"
SLO = "    slo: {p95_ttft_ms: 500, workload: {%s}}\n"

# id: (config text from a tmp folder, environment, endpoint, fragments the message must hold)
CASES: dict[str, tuple[Callable[[Path], str], str | None, str, list[str]]] = {
    # ---- accepted before, failing at deploy or start
    "C07b caller of another account, environment without an account": (
        lambda _: vllm(extra=CALLER, account=""),
        "dev",
        "chat-vllm",
        ["chat.openai_route.callers[0]", "999988887777", "names no account", "set environments.dev.account"],
    ),
    "S09 slo objective .inf": (
        lambda _: vllm(extra="    slo: {p95_ttft_ms: .inf}\n"),
        "dev",
        "chat-vllm",
        ["slo.p95_ttft_ms", "value inf", "allowed: a finite number"],
    ),
    "S11 token spread .inf": (
        lambda _: vllm(extra=SLO % "input_tokens: {mean: 128, stddev: .inf}"),
        "dev",
        "chat-vllm",
        ["slo.workload.input_tokens.stddev", "value inf", "allowed: a finite number"],
    ),
    "target_value .nan": (
        lambda _: vllm(extra="    autoscaling: {max_capacity: 2, target_value: .nan}\n"),
        "dev",
        "chat-vllm",
        ["autoscaling.target_value", "value nan", "allowed: a finite number"],
    ),
    "S19 output tokens beyond max_model_len": (
        lambda _: vllm(extra=SLO % "output_tokens: {mean: 100000}"),
        "dev",
        "chat-vllm",
        ["slo.workload", "output_tokens.mean 100000", "32768", "engine.max_model_len", "allowed: at most 32768"],
    ),
    "S20 input tokens beyond max_model_len": (
        lambda _: vllm(extra=SLO % "input_tokens: {mean: 40000}"),
        "dev",
        "chat-vllm",
        ["slo.workload", "input_tokens.mean 40000", "allowed: at most 32768"],
    ),
    "E38 lmi-vllm max_model_len beyond the model's positions": (
        lambda _: lmi(engine="max_model_len: 1048576"),
        "dev",
        "gptj",
        ["engine.max_model_len", "value 1048576", "2048 positions", "allowed: up to 2048"],
    ),
    "E39 lmi-vllm bf16 on T4": (
        lambda _: lmi(instance="ml.g4dn.12xlarge", dtype="bf16"),
        "dev",
        "gptj",
        ["instance_type", "'ml.g4dn.12xlarge'", "bf16 needs compute capability 8.0", "instance families that run it"],
    ),
    "E47 draft_tensor_parallel_size vLLM refuses": (
        lambda _: vllm(
            ", speculative: {method: draft_model, model: meta-llama/Llama-3.2-1B-Instruct, num_speculative_tokens: 4, "
            "draft_tensor_parallel_size: 3}"
        ),
        "dev",
        "chat-vllm",
        ["engine.speculative.draft_tensor_parallel_size", "value 3", "allowed: 1"],
    ),
    "A16 300 LoRA adapters on one A10G": (
        lambda _: lora("".join(f"      - {{name: a{i}, model: org/adapter-{i}}}\n" for i in range(300))),
        "dev",
        "lora",
        ["adapters: 300 adapters of rank up to 16", "GiB of LoRA slots", "A10G", "allowed here: at most"],
    ),
    "A14 adapter_config.json rank not a number": (
        lambda tmp: lora(f"      - {{name: sql, model: '{bad_adapter(tmp)}'}}\n"),
        "dev",
        "lora",
        ["adapters[0]", "adapter_config.json: r is 'sixteen'", "allowed: an integer from 1 to 4096"],
    ),
    "A17 the base model as its own adapter": (
        lambda _: lora("      - {name: base, model: meta-llama/Llama-3.1-8B-Instruct}\n"),
        "dev",
        "lora",
        ["adapters[0].model", "is the endpoint's base model itself", "allowed: a PEFT LoRA adapter"],
    ),
    "Y20 model id with a right-to-left override": (
        lambda _: vllm(model='"meta-llama/\\u202eLlama-3.1-8B-Instruct"'),
        "dev",
        "chat-vllm",
        ["model: value", "neither a local directory nor a Hub id", "allowed: a Hugging Face Hub id"],
    ),
    "Y23 revision of 100,000 characters": (
        lambda _: vllm(extra="    revision: " + "a" * 100_000 + "\n"),
        "dev",
        "chat-vllm",
        ["revision: value", "is not a git revision", "allowed: a branch, tag or commit of 1-255"],
    ),
    # ---- refused before, but with a traceback, files in the output folder or a wrong message
    "C07 caller of another account": (
        lambda _: vllm(extra=CALLER),
        "dev",
        "chat-vllm",
        ["chat.openai_route.callers[0]", "in account 999988887777, not the endpoint's 444455556666", "allowed:"],
    ),
    "caller in another partition": (
        lambda _: vllm(extra=CALLER.replace("arn:aws:iam::999988887777", "arn:aws-cn:iam::444455556666")),
        "dev",
        "chat-vllm",
        ["chat.openai_route.callers[0]", "is in partition aws-cn, not the endpoint's aws (region us-east-1)"],
    ),
    "Y19 caller account in fullwidth digits": (
        lambda _: vllm(extra=CALLER.replace("999988887777", "４４４４５５５５６６６６")),
        "dev",
        "chat-vllm",
        ["callers[0]", "is not an IAM role or user ARN"],
    ),
    "Y16 environment account in fullwidth digits": (
        lambda _: vllm(account='account: "４４４４５５５５６６６６", '),
        "dev",
        "chat-vllm",
        ["environment 'dev': account", "allowed: 12 digits 0-9"],
    ),
    "C26 chat_template the container reads as a boolean": (
        lambda _: vllm(", chat_template: 'false'"),
        "dev",
        "chat-vllm",
        ["engine.chat_template", "value 'false'", "allowed: any text other than true, false"],
    ),
    "Y22 model of 100,000 characters": (
        lambda _: vllm(model="m" * 100_000),
        "dev",
        "chat-vllm",
        ["model: value 'mmmm", "neither a local directory nor a Hub id"],
    ),
    "Y22b local path with a name longer than NAME_MAX": (
        lambda _: vllm(model="./" + "m" * 300),
        "dev",
        "chat-vllm",
        ["model: value './mmm", "longest name has 300", "each name at most 255 bytes"],
    ),
    "S18 managed benchmark in a region without AIWorkloadConfig": (
        lambda _: vllm(
            extra="    chat: {}\n    slo: {p95_ttft_ms: 500, concurrency: 1, managed_benchmark: true}\n",
            region="eu-west-2",
        ),
        "dev",
        "chat-vllm",
        ["slo.managed_benchmark", "not offered in eu-west-2", "regions with it: ap-northeast-1"],
    ),
    "E13 unknown key inside a nested engine option": (
        lambda _: vllm(", speculative: {method: ngram, prompt_lookup_max: 4, num_spec_tokens: 3}"),
        "dev",
        "chat-vllm",
        ["engine.speculative.num_spec_tokens: unknown key", "did you mean 'num_speculative_tokens'", "allowed keys:"],
    ),
    # ---- corrupted safetensors of a local model (section 3): a traceback at synth and build before
    "F9 zero-length model.safetensors": (
        lambda tmp: hf_fastload(local_model(tmp, b"")),
        None,
        "tiny",
        ["model: value", "model.safetensors: size is 0 bytes", "allowed: at least the 8-byte header length"],
    ),
    "F9 random bytes as the JSON header": (
        lambda tmp: hf_fastload(local_model(tmp, struct.pack("<Q", 16) + bytes(range(128, 144)) + b"\0" * 64)),
        None,
        "tiny",
        ["model.safetensors header is not UTF-8", "allowed: a UTF-8 JSON object"],
    ),
    "F9 header length 2**62": (
        lambda tmp: hf_fastload(local_model(tmp, struct.pack("<Q", 2**62) + b"{}")),
        None,
        "tiny",
        ["model.safetensors: header length is 4,611,686,018,427,387,904 bytes", "allowed: at most 2"],
    ),
    "F9 a tensor without data_offsets": (
        lambda tmp: hf_fastload(local_model(tmp, struct.pack("<Q", 32) + b'{"w": {"shape": [2, 2]}}'.ljust(32))),
        None,
        "tiny",
        ["model.safetensors: tensor 'w' dtype is None", "allowed: F64"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_probe_config_is_refused_at_load_by_synth_and_by_build(tmp_path, capsys, case) -> None:
    make, env, endpoint, fragments = CASES[case]
    path = tmp_path / "probe.yaml"
    path.write_text(make(tmp_path), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env)
    message = str(refused.value)
    assert all(f in message for f in fragments), (case, message)

    # model_build build applies the same checks (the probe's 5 synth-only refusals went on to resolve the model)
    from model_build.cli import main

    out = tmp_path / "build-root"
    out.mkdir()
    argv = ["build", "--config", str(path), "--endpoint", endpoint, "--build-root", str(out)]
    assert main(argv + (["--env", env] if env else [])) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert captured.err.startswith(f"error: {path}: invalid config:") and fragments[0] in captured.err, captured.err
    assert not list(out.iterdir())


@pytest.fixture
def odd_paths(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Config paths that are not a regular file: {case: (path, what the message says)}."""
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(loop)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "gone.yaml")
    return {
        "Y31 a directory": (folder, "is a directory; allowed: a YAML file"),
        "Y32 a symlink loop": (loop, "cannot be read: Too many levels of symbolic links"),
        "Y41 a FIFO": (fifo, "is a FIFO, not a regular file; allowed: a YAML file"),
        "Y42 /dev/zero": (Path("/dev/zero"), "is a device, not a regular file; allowed: a YAML file"),
        "a dangling link": (dangling, "is a link to a file that does not exist"),
        "missing": (tmp_path / "missing.yaml", "does not exist"),
    }


def test_a_config_path_that_is_not_a_file_is_named_for_what_it_is(odd_paths) -> None:
    """A FIFO or a device is refused before it is opened (reading one would block or never end)."""
    for case, (path, says) in odd_paths.items():
        with pytest.raises(ConfigError) as refused:
            load_config(path)
        assert says in str(refused.value), (case, str(refused.value))
        assert "does not exist" not in str(refused.value) or case in ("missing", "a dangling link"), case


def test_synth_refuses_at_load_and_writes_nothing(tmp_path: Path) -> None:
    """The CDK app as the CLI runs it (`cdk synth` starts `python3 app.py` with the context in CDK_CONTEXT_JSON and
    the output folder in CDK_OUTDIR), on the two probe refusals that came from the stacks after CDK had staged assets
    (C07: 18 files left in the output folder; S18), in one file: exit 2, no traceback, both named, nothing written."""
    config = vllm(extra=CALLER, region="eu-west-2") + (
        "  - {name: bench, system: vllm, model: meta-llama/Llama-3.1-8B-Instruct, dtype: bf16, instance_type: "
        "ml.g6e.xlarge, chat: {}, slo: {p95_ttft_ms: 500, concurrency: 1, managed_benchmark: true}}\n"
    )
    path = tmp_path / "probe.yaml"
    path.write_text(config, encoding="utf-8")
    out = tmp_path / "cdk.out"
    out.mkdir()
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        # the CLI passes cdk.json's context (the feature flags) with the -c values
        "CDK_CONTEXT_JSON": json.dumps(
            {**json.loads((ROOT / "cdk.json").read_text())["context"], "config": str(path), "env": "dev"}
            | {"allow_unbuilt": "true"}
        ),
        "CDK_OUTDIR": str(out),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",  # node 20's end-of-life banner on stderr
    }
    run = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stderr.startswith(f"error: {path}: invalid config:"), run.stderr
    assert "callers[0]: value 'arn:aws:iam::999988887777:role/app': is in account 999988887777" in run.stderr
    assert "endpoint 'bench': slo.managed_benchmark: value true" in run.stderr and "eu-west-2" in run.stderr
    assert not list(out.iterdir())


# ---- the classes the cases belong to --------------------------------------------------------------------------


def _config_models() -> list[type]:
    """Every config block (Strict and its subclasses, the systems' engine options included)."""
    import systems
    from endpoint_config.base import Strict

    systems.all_systems()
    found, todo = [], [Strict]
    while todo:
        model = todo.pop()
        found.append(model)
        todo += model.__subclasses__()
    return found


def test_every_config_block_refuses_inf_and_nan() -> None:
    """S09/S11's class: a float field of any block, engine options included, refuses .inf and .nan."""
    models = _config_models()
    assert len(models) > 40
    assert [m.__name__ for m in models if m.model_config.get("allow_inf_nan", True)] == []


def test_every_pattern_of_the_config_is_ascii_only() -> None:
    """Y16/Y19's class: pydantic-core's and Python's \\d and \\w match any script's digits and letters, so an
    account id in fullwidth digits passed; every pattern a config value is checked against spells its ASCII ranges."""
    from endpoint_config.chat import CALLER_ARN
    from endpoint_config.slo import HUB_ID

    patterns = [CALLER_ARN, HUB_ID.pattern]
    for model in _config_models():
        for field in model.model_fields.values():
            patterns += [m.pattern for m in field.metadata if getattr(m, "pattern", None)]
            for arg in getattr(field.annotation, "__args__", ()):  # Annotated[str, Field(pattern=...)] in a tuple
                patterns += [m.pattern for m in getattr(arg, "__metadata__", ()) if getattr(m, "pattern", None)]
    assert len(patterns) > 10
    assert [p for p in patterns if "\\d" in p or "\\w" in p] == []


def test_hub_ids_follow_huggingface_hub_own_validator() -> None:
    """The model reference rule restates huggingface_hub 2.4.0's validate_repo_id: compare on both sides."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    from endpoint_config.model_reference import is_hub_id

    samples = [
        "gpt2",
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen3-30B-A3B",
        "a" * 96,
        "a" * 97,
        "org/" + "b" * 96,
        "-org/x",
        "org/x-",
        "org/.x",
        "org/x.git",
        "org--a/x",
        "org/a..b",
        "a/b/c",
        "café/x",
        "meta-llama/\u202ellama",
        "x y",
        "_x",
        "x_",
        "1/2",
    ]
    for sample in samples:
        try:
            validate_repo_id(sample)
            valid = True
        except HFValidationError:
            valid = False
        assert is_hub_id(sample) == valid, sample


def test_the_container_environment_renders_at_load_for_every_system() -> None:
    """C26's class: a value a system's environment() refuses (vllm's and sglang's boolean-looking options) is a
    config error at load, never an exception while the stacks build (after CDK staged assets)."""
    from endpoint_config.schema import EndpointSpec
    from systems import get_system
    from systems.checks import environment_problems

    for system, model, instance in (
        ("vllm", "meta-llama/Llama-3.1-8B-Instruct", "ml.g6e.xlarge"),
        ("sglang", "Qwen/Qwen3-30B-A3B", "ml.g6e.12xlarge"),
    ):
        spec = EndpointSpec.model_validate(
            {
                "name": "x",
                "system": system,
                "model": model,
                "instance_type": instance,
                "engine": {"chat_template": "TRUE"},
            }
        )
        serving = get_system(system)
        [problem] = environment_problems(spec, serving, serving.engine(spec))
        assert "engine.chat_template: value 'TRUE'" in problem and "allowed:" in problem, problem


def test_each_engine_names_its_own_key_for_the_other_engines_concurrency_key() -> None:
    """A quality note of the probe: `max_num_seqs` on sglang got only "remove the key", while `context_length` on
    vllm named vLLM's key. Both engines' names for concurrency and context now point to each other."""
    from endpoint_config.schema import EndpointSpec
    from systems import get_system

    for system, model, key, hint in (
        ("sglang", "Qwen/Qwen3-30B-A3B", "max_num_seqs", "max_running_requests"),
        ("vllm", "meta-llama/Llama-3.1-8B-Instruct", "max_running_requests", "max_num_seqs"),
        ("sglang", "Qwen/Qwen3-30B-A3B", "max_model_len", "context_length"),
        ("vllm", "meta-llama/Llama-3.1-8B-Instruct", "context_length", "max_model_len"),
    ):
        spec = EndpointSpec.model_validate(
            {"name": "x", "system": system, "model": model, "instance_type": "ml.g6e.12xlarge", "engine": {key: 8}}
        )
        [problem] = get_system(system).engine_problems(spec)
        assert f"engine.{key}: value 8 is not supported" in problem and "name for" in problem, problem
        assert hint in problem, problem


def test_a_file_of_thousands_of_unknown_keys_lists_50_problems_and_the_count(tmp_path: Path) -> None:
    """The probe's 9,000 unknown engine keys in one line printed 907 KB of messages."""
    keys = ", ".join(f"k{i}: 1" for i in range(9000))
    path = tmp_path / "probe.yaml"
    path.write_text(vllm(f", {keys}"), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, "dev")
    lines = str(refused.value).splitlines()
    assert len(lines) == 1 + 50 + 1 and lines[-1] == "  - ... and 8950 more problems (fix these first)", lines[-3:]
    assert len(str(refused.value)) < 20_000


def test_lmi_max_model_len_beyond_a_local_models_positions_is_refused_at_load(tmp_path: Path, tiny_models) -> None:
    """E38's class on a local model: the positions come from its config.json (the tiny GPT-J's n_positions), for a
    system without an engine profile, at load (the LMI recipe refuses it again at build)."""
    positions = json.loads((tiny_models["gptj"] / "config.json").read_text())["n_positions"]
    path = tmp_path / "probe.yaml"
    path.write_text(
        "endpoints:\n  - {name: len, system: lmi-vllm, model: '%s', instance_type: ml.g5.2xlarge, "
        "engine: {max_model_len: %d}}\n" % (tiny_models["gptj"], positions * 8)
    )
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert (
        f"engine.max_model_len: value {positions * 8} is beyond the {positions} positions of "
        f"'{tiny_models['gptj']}' (config.json n_positions, no rope scaling); allowed: up to {positions}"
    ) in str(refused.value)


# A local model's files, broken in the ways a careless copy or a hostile file can be: config.json and
# tokenizer_config.json that are not JSON, not an object, or hold the wrong kinds.
BROKEN_CONFIGS = {
    "not JSON": b"{not json",
    "a list": b"[1, 2]",
    "empty": b"",
    "architectures a string": json.dumps({"architectures": "LlamaForCausalLM", "model_type": "llama"}).encode(),
    "numbers for names": json.dumps({"architectures": [1], "model_type": 7}).encode(),
    "llama without hidden_size": json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}).encode(),
    "mistyped sizes": json.dumps(
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": "big",
            "num_hidden_layers": 2,
            "intermediate_size": 8,
            "num_attention_heads": 2,
            "vocab_size": 10,
        }
    ).encode(),
    "latin-1": '{"architectures": ["Llamá"]}'.encode("latin-1"),
}
BROKEN_TOKENIZER_CONFIGS = {
    "absent": None,
    "not JSON": b"{",
    "a list": b"[]",
    "template a number": b'{"chat_template": 5}',
}


def test_a_local_models_broken_files_are_refused_by_name_or_accepted_never_a_traceback(tmp_path: Path) -> None:
    """The load reads a local model's config.json (architecture, positions, size), its tokenizer_config.json (chat
    template) and its safetensors headers (F9 above): whatever they hold, the answer is a ConfigError or a load."""
    systems = [
        ("vllm", "ml.g6e.xlarge"),
        ("sglang", "ml.g6e.xlarge"),
        ("hf-fastload", "ml.m5.xlarge"),
        ("lmi-vllm", "ml.g5.2xlarge"),
        ("deepspeed-byoc", "ml.g5.2xlarge"),
    ]
    uncaught = []
    for (config_name, config), (tokenizer_name, tokenizer) in itertools.product(
        BROKEN_CONFIGS.items(), BROKEN_TOKENIZER_CONFIGS.items()
    ):
        model = tmp_path / f"model-{len(list(tmp_path.iterdir()))}"
        model.mkdir()
        (model / "config.json").write_bytes(config)
        if tokenizer is not None:
            (model / "tokenizer_config.json").write_bytes(tokenizer)
        for system, instance in systems:
            path = tmp_path / "probe.yaml"
            path.write_text(
                f"endpoints:\n  - {{name: m, system: {system}, model: '{model}', instance_type: {instance}, chat: {{}}}}\n"
            )
            try:
                load_config(path)
            except ConfigError:
                pass
            except Exception as err:
                uncaught.append((config_name, tokenizer_name, system, f"{type(err).__name__}: {err}"))
    assert uncaught == []


@pytest.mark.parametrize(
    "content, says",
    [
        (b"{", "adapter_config.json is not JSON"),
        (b"", "adapter_config.json is not JSON"),
        (b"[]", "adapter_config.json is a JSON list; allowed: a JSON object"),
        (b'{"r": true}', "adapter_config.json: r is True; allowed: an integer from 1"),
        (
            b'{"r": 8, "rank_pattern": [1]}',
            "adapter_config.json: rank_pattern is [1]; allowed: a mapping of module names to ranks",
        ),
    ],
)
def test_a_local_adapters_broken_config_is_refused_at_load(tmp_path: Path, content: bytes, says: str) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_bytes(content)
    path = tmp_path / "probe.yaml"
    path.write_text(lora(f"      - {{name: sql, model: '{adapter}'}}\n"), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, "dev")
    assert f"adapters[0] ('sql', '{adapter}'): " in str(refused.value) and says in str(refused.value)
