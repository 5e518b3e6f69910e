"""`make demo CONFIG=<any config>`: a config written for a real account runs on the emulator, with each replacement
said before the demo starts and the user's file untouched (local_emulator/demo_config.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.loader import read_document
from local_emulator.demo import main as demo_main
from local_emulator.demo_config import EMULATOR_GPU_INSTANCE, make_demo_config
from local_emulator.moto_server import EMULATOR_ACCOUNT, EMULATOR_REGION

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))


def _every_example_endpoint() -> list[tuple[Path, str]]:
    return [(path, str(endpoint["name"])) for path in EXAMPLES for endpoint in read_document(path).data["endpoints"]]


@pytest.mark.parametrize(
    "config,endpoint", _every_example_endpoint(), ids=lambda v: v.stem if isinstance(v, Path) else v
)
def test_every_example_endpoint_becomes_a_config_the_emulator_takes(config, endpoint, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    before = config.read_bytes()
    made = make_demo_config(config, endpoint, out_dir=tmp_path)
    plan = load_config(made.path, made.environment)  # ConfigError fails the test, naming the problem
    assert config.read_bytes() == before, "the user's own file was changed"
    assert plan.environment.emulator and [ep.name for ep in plan.endpoints] == [endpoint]
    assert plan.environment.account == EMULATOR_ACCOUNT and plan.environment.region == EMULATOR_REGION
    spec = plan.endpoints[0]
    model = Path(spec.model)
    assert model.parts[:2] == ("build", "tiny-models") or (ROOT / model).is_dir(), spec.model
    substituted = {s.where.split(".", 1)[-1] for s in made.substitutions}
    if spec.model != read_document(config).data["endpoints"][0].get("model") and endpoint in spec.name:
        assert any(w.endswith("model") for w in substituted)


def test_a_real_account_config_says_each_replacement(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    made = make_demo_config(ROOT / "config/examples/vllm-qwen3-32b.yaml", out_dir=tmp_path)
    lines = {s.where: s for s in made.substitutions}
    assert lines["environments.dev.account"].now == EMULATOR_ACCOUNT
    assert lines["environments.dev.emulator"].now is True
    model = lines["endpoints[qwen3-32b].model"]
    assert (model.was, model.now) == ("Qwen/Qwen3-32B", "build/tiny-models/qwen3_thinking")
    assert "no Hub here" in model.why and "HF_ENDPOINT" in model.why
    assert lines["endpoints[qwen3-32b].instance_type"].now == EMULATOR_GPU_INSTANCE
    assert lines["endpoints[qwen3-32b].dtype"].line() == (
        "endpoints[qwen3-32b].dtype: 'bf16' -> 'fp16' (the emulator's g4dn is an NVIDIA T4, which computes fp16, "
        "not bf16)"
    )
    assert lines["endpoints[qwen3-32b].engine.max_model_len"].now == 512


def test_a_config_that_already_runs_here_is_run_as_it_is(tmp_path):
    for name in ("config/local.yaml", "config/examples/vllm-local-tiny-qwen3.yaml"):
        assert make_demo_config(ROOT / name, out_dir=tmp_path).substitutions == ()


def test_a_hub_model_is_kept_when_a_hub_mirror_on_this_machine_serves_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    made = make_demo_config(ROOT / "config/examples/vllm-qwen3-32b.yaml", out_dir=tmp_path)
    assert not any(s.where.endswith(".model") for s in made.substitutions)
    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.co")
    made = make_demo_config(ROOT / "config/examples/vllm-qwen3-32b.yaml", out_dir=tmp_path)
    assert any(s.where.endswith(".model") for s in made.substitutions)


def test_other_endpoints_and_environments_are_left_out_and_named(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    made = make_demo_config(ROOT / "config/examples/production.yaml", "summarize-async", out_dir=tmp_path)
    dropped = next(s for s in made.substitutions if s.where == "endpoints")
    assert dropped.now == ["summarize-async"] and "ENDPOINT=NAME" in dropped.why
    with pytest.raises(ConfigError, match=r"endpoint 'nope' is not in .*; it has: chat-vllm, summarize-async"):
        make_demo_config(ROOT / "config/examples/production.yaml", "nope", out_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"environment 'prod' is not in the config; it has: dev"):
        make_demo_config(ROOT / "config/examples/vllm-qwen3-32b.yaml", environment="prod", out_dir=tmp_path)


def test_the_demo_refuses_unknown_names_without_a_traceback(tmp_path, capsys):
    before = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    code = demo_main(
        ["--config", "config/examples/vllm-qwen3-32b.yaml", "--endpoint", "nope", "--logs", str(tmp_path / "logs")]
    )
    err = capsys.readouterr().err
    assert code == 1 and "endpoint 'nope' is not in" in err and "Traceback" not in err
    # a refused demo leaves this process's AWS settings as they were (it sets the emulator's only once it runs)
    assert {k: v for k, v in os.environ.items() if k.startswith("AWS_")} == before


@pytest.mark.e2e
@pytest.mark.emulator
def test_make_demo_runs_a_real_account_config_with_no_credentials(tmp_path):
    """config/examples/minimal.yaml names a Hub model and a GPU type of a real account, and no account: the demo says
    what it replaces, then runs the whole chain on the emulator and leaves nothing."""
    from system_scenario import run_demo

    result = run_demo(tmp_path / "logs", "--config", "config/examples/minimal.yaml")
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-3000:]
    assert "==> [0] fit config/examples/minimal.yaml to this machine and the emulator" in out
    assert "endpoints[gpt2-small].model: 'openai-community/gpt2' -> 'build/tiny-models/gpt2'" in out
    assert "environments.default.account: (unset) -> '123456789012'" in out
    assert out.index("==> [0]") < out.index("==> [1]") and "nothing left" in out
    assert (ROOT / "config/examples/minimal.yaml").read_text().count("openai-community/gpt2") == 1


def _config_with_engine(tmp_path: Path, system: str, model: str, engine: dict) -> Path:
    """A one-endpoint config for a real account whose engine options the demo has to fit to the tiny model."""
    import yaml

    path = tmp_path / f"{system}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": "fit",
                "environments": {"dev": {"account": "123456789012", "region": "us-east-1"}},
                "endpoints": [
                    {
                        "name": "e",
                        "system": system,
                        "model": model,
                        "dtype": "fp16",
                        "instance_type": "ml.g5.2xlarge",
                        "engine": engine,
                    }
                ],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("system", "engine", "dropped", "fitted"),
    [
        # TGI's own names (systems/tgi EngineOptions): its quantize is a GPU key, max_input_tokens its prompt key
        ("tgi", {"quantize": "awq", "max_total_tokens": 8192, "max_input_tokens": 4096}, ["quantize"], [512, 256]),
        ("sglang", {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2", "context_length": 4096}, None, [512]),
        ("vllm", {"quantization": "fp8", "tensor_parallel_size": 1, "max_model_len": 4096}, None, [512]),
    ],
)
def test_a_tiny_model_drops_and_fits_the_engine_options_its_system_names(
    system, engine, dropped, fitted, tmp_path, monkeypatch
):
    """Which options are tied to the GPUs or to the context is each system's own fact (its options class's GPU_KEYS,
    CONTEXT_KEY, PROMPT_KEY), read by the demo: TGI's quantize was kept before, the demo's list knowing vLLM's
    quantization only."""
    from systems import get_system

    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    options = get_system(system).engine_options
    made = make_demo_config(_config_with_engine(tmp_path, system, "Qwen/Qwen3-8B", engine), out_dir=tmp_path / "out")
    changed = {s.where.rsplit(".", 1)[-1]: s.now for s in made.substitutions if ".engine." in s.where}
    expected_dropped = dropped if dropped is not None else [k for k in engine if k in options.GPU_KEYS]
    assert expected_dropped and sorted(k for k, now in changed.items() if now is None) == sorted(expected_dropped)
    keys = [options.CONTEXT_KEY, options.PROMPT_KEY][: len(fitted)]
    assert [changed[key] for key in keys] == fitted
    load_config(made.path, made.environment)  # what is left is a config the emulator takes
