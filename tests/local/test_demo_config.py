"""`make demo CONFIG=file [ENDPOINT=name]`: the demo's chain for another config; plain `make demo` unchanged."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hermetic import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def _make_dry_run(*args: str) -> str:
    env = {"PATH": subprocess_env()["PATH"], "HOME": subprocess_env()["HOME"], "LANG": "C.UTF-8"}
    result = subprocess.run(["make", "-n", "demo", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if "local_emulator.demo" in line][-1].rstrip()


def test_make_demo_passes_config_and_endpoint_only_when_given():
    assert _make_dry_run().split("local_emulator.demo")[1].strip() == ""
    given = _make_dry_run("CONFIG=config/examples/vllm-local-tiny-qwen3.yaml", "ENDPOINT=tiny-qwen3")
    assert given.endswith(
        "-m local_emulator.demo --config config/examples/vllm-local-tiny-qwen3.yaml --endpoint tiny-qwen3"
    )
    with_env = _make_dry_run("CONFIG=config/examples/production.yaml", "ENDPOINT=chat-vllm", "ENV=dev")
    assert with_env.endswith("--config config/examples/production.yaml --endpoint chat-vllm --env dev")


def test_demo_replaces_a_model_that_is_not_a_local_directory_and_says_so(tmp_path, monkeypatch):
    """A Hub id with no Hub on this machine: a tiny model of the same family replaces it (local_emulator/demo_config.py),
    named before the demo starts; the chain itself is the same as plain `make demo`'s."""
    from local_emulator.demo_config import make_demo_config

    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    config = tmp_path / "hub.yaml"
    text = (ROOT / "config" / "local.yaml").read_text()
    config.write_text(text.replace("model: build/tiny-models/gpt2", "model: openai-community/gpt2"))
    made = make_demo_config(config, out_dir=tmp_path / "demo")
    (model,) = [s for s in made.substitutions if s.where.endswith(".model")]
    assert (model.was, model.now) == ("openai-community/gpt2", "build/tiny-models/gpt2")
    assert "a tiny gpt2 of the same family, made offline" in model.line()


def test_two_demos_making_the_same_tiny_model_at_once_both_get_a_whole_one(tmp_path, monkeypatch):
    """The scenarios share build/tiny-models/<architecture>: two runs making it at the same time each end with the
    whole model in place (written aside, moved in by one rename), and no scratch folder is left. The maker (`python
    -m model_build tiny-model`, 5-7 s; tests/model_build/test_tiny_models.py runs it) is replaced by one that writes
    the folder's files and waits for the other run's, so the two renames always collide."""
    import threading

    from local_emulator import demo

    monkeypatch.setattr(demo, "ROOT", tmp_path)
    both_written = threading.Barrier(2, timeout=20)
    commands: list[list[str]] = []

    def make_tiny_model(command: list[str], **kwargs) -> None:
        commands.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "config.json").write_text('{"model_type": "gpt2"}')
        (out / "model.safetensors").write_bytes(b"weights")
        both_written.wait()

    monkeypatch.setattr(demo, "run", make_tiny_model)
    errors: list[BaseException] = []

    def make() -> None:
        try:
            demo._make_tiny_model("python", "build/tiny-models/gpt2")
        except BaseException as err:  # collected for the assertion below
            errors.append(err)

    threads = [threading.Thread(target=make) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert [c[:4] for c in commands] == [["python", "-m", "model_build", "tiny-model"]] * 2
    model = tmp_path / "build" / "tiny-models" / "gpt2"
    assert (model / "config.json").is_file() and (model / "model.safetensors").is_file()
    assert sorted(p.name for p in model.parent.iterdir()) == ["gpt2"]
