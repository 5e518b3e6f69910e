"""`make demo CONFIG=<a config whose model is a Hub id>` with HF_ENDPOINT at a Hub mirror on 127.0.0.1: the whole chain
with no weight byte on the workstation. Plan from the Hub's metadata (model_build build), stage through the staging
job's own code into the emulator's S3 (model_build publish -> weights_staging), deploy, the instance's download
(local_emulator/instance.py) served by the real vLLM engine, smoke test, prompts, destroy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hermetic import python_path_env

from local_emulator import moto_server
from local_emulator.hub_mirror import HubMirror, add_repo
from model_build.tiny_models import make_tiny_model

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/tiny-qwen3-thinking"
ENDPOINT = "hub-demo"  # its own build folder under the repository's build/

pytestmark = [pytest.mark.e2e, pytest.mark.emulator]


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "hub-demo.yaml"
    path.write_text(
        "project: llm-endpoints\n"
        "environments:\n  local:\n    account: '123456789012'\n    region: us-east-1\n"
        "    retain_data: false\n    emulator: true\n"
        f"endpoints:\n  - name: {ENDPOINT}\n    system: vllm\n    model: {REPO}\n    dtype: fp16\n"
        "    instance_type: ml.g4dn.xlarge\n    engine: {max_model_len: 512, reasoning_parser: qwen3}\n"
    )
    return path


@pytest.mark.skipif(not (ROOT / ".venv-vllm" / "bin" / "python").exists(), reason="needs .venv-vllm (make vllm-env)")
def test_demo_of_a_hub_model_moves_no_weights_through_the_workstation(tmp_path):
    hub = tmp_path / "hub"
    add_repo(hub, REPO, make_tiny_model("qwen3_thinking", tmp_path / "model"))
    hf_home = tmp_path / "hf-home"
    build = ROOT / "build" / ENDPOINT
    with HubMirror(hub) as mirror:
        command = [sys.executable, "-m", "local_emulator.demo", "--config", str(_config(tmp_path))]
        command += ["--port", str(moto_server.free_port()), "--logs", str(tmp_path / "logs")]
        env = python_path_env(PYTHONUNBUFFERED="1", HF_ENDPOINT=mirror.url, HF_HOME=str(hf_home), HF_HUB_OFFLINE="0")
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=1500)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        weights = mirror.file_bytes(REPO)
    assert process.returncode == 0, out[-5000:] + err[-3000:]
    assert f"{REPO} is read from the Hub at {mirror.url}: metadata only here" in out
    assert "the instance's download: s3://" in out and "every file matches the manifest" in out
    assert "vLLM" in out and "nothing left" in out
    # No weights file on the workstation: not in the build, not in the Hub cache (the instance's copy is removed).
    on_workstation = [p for folder in (build, hf_home) if folder.exists() for p in folder.rglob("*.safetensors")]
    assert on_workstation == [], on_workstation
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"demo-instance-{ENDPOINT}-*"))
    assert weights > 0  # the staging job read the weights from the mirror
