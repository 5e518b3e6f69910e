"""Builds that stop on the files, not the code. F10 of the 2026-11-27 reliability probe: a build that runs out of disk ended in a SafetensorError traceback
("Error while serializing: I/O error: No space left on device"). The file system's refusal is real here: the CLI runs
in a subprocess whose RLIMIT_FSIZE lets it write no file above 64 KiB (with SIGXFSZ ignored, a longer write fails
with EFBIG, "File too large", as a full disk fails with ENOSPC), over a previous good build of the same endpoint."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

# slow: builds in subprocesses under a file-size limit (make test-fast leaves them out)
pytestmark = pytest.mark.slow

# gpt2_artifact's settings (tests/conftest.py GPT2_ENDPOINT), so the previous build is this endpoint's.
GPT2_ENDPOINT = """endpoints:
  - name: tiny-gpt2
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
    max_shard_size: 300KB
"""


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_build_that_cannot_write_says_so_and_keeps_the_previous_build(
    tmp_path: Path, tiny_models: dict[str, Path], gpt2_artifact: Path
) -> None:
    config = tmp_path / "endpoints.yaml"
    config.write_text(GPT2_ENDPOINT.format(model=tiny_models["gpt2"]))
    build_root = tmp_path / "build"
    previous = build_root / "tiny-gpt2"
    shutil.copytree(gpt2_artifact, previous)
    before = hashlib.sha256((previous / "manifest.json").read_bytes()).hexdigest()
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "model_build", "build", "--config", str(config), "--endpoint", "tiny-gpt2"]
        + ["--build-root", str(build_root), "--quiet"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size,
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr
    message = run.stderr.strip().splitlines()[-1]  # after the progress bars
    assert message.startswith("error: endpoint 'tiny-gpt2': the build of ")
    assert [line for line in run.stderr.splitlines() if line.startswith("error:")] == [message]
    assert "failed on a file operation: " in message and "File too large" in message, message
    assert "the previous build there is unchanged" in message
    assert hashlib.sha256((previous / "manifest.json").read_bytes()).hexdigest() == before
    assert sorted(p.name for p in build_root.iterdir()) == ["tiny-gpt2"]  # no temp folder left


@pytest.mark.parametrize(
    "name, content",
    [
        ("tokenizer_config.json", b"[]"),
        ("tokenizer_config.json", b"{"),
        ("config.json", b"[1]"),
    ],
)
def test_a_model_file_that_is_not_a_json_object_stops_the_build_by_name(
    tmp_path: Path, tiny_models: dict[str, Path], capsys, name: str, content: bytes
) -> None:
    """The load reads config.json (refused there when broken: tests/config/test_probe_configs.py); the build reads
    the tokenizer's files too. A list where an object belongs was an AttributeError traceback."""
    from model_build.cli import main

    model = tmp_path / "model"
    shutil.copytree(tiny_models["gpt2"], model)
    (model / name).write_bytes(content)
    config = tmp_path / "endpoints.yaml"
    config.write_text(GPT2_ENDPOINT.format(model=model))
    build_root = tmp_path / "build"
    argv = ["build", "--config", str(config), "--endpoint", "tiny-gpt2", "--build-root", str(build_root), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{model / name}" in err, err
    assert not build_root.exists() or not any(build_root.iterdir())
