"""One serving system's whole path on the local emulator, as `make demo CONFIG=config/scenarios/<system>.yaml` runs it:
the tiny model made offline -> model_build build -> the local SageMaker runtime starting the system's local container
(local_runtime: the real engine, our own server's CPU path, or the stand-in, which says so) -> `make deploy`'s code
(preflight, synth, artifact stack, publish, endpoint stack, smoke test, SLO gate) -> the invoke and stream functions
-> the openai SDK through SageMaker's OpenAI route with a bearer token and the endpoint's name (where the system
serves chat) -> `make destroy`'s code -> nothing left.

Each scenario records which container answered and how long it took (the `scenario` property, listed at the end of
the run by tests/conftest.py's terminal summary)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from helpers import ROOT
from hermetic import python_path_env

from deployment import load_config
from local_emulator import moto_server
from model_build.tiny_models import CHAT_ARCHITECTURES


def run_demo(logs, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m local_emulator.demo ARGS` (what `make demo` runs) on a free model-server port, in its own process
    group: a timeout stops what it started too (the emulator, the CDK CLI, the model server)."""
    command = [sys.executable, "-m", "local_emulator.demo", "--port", str(moto_server.free_port()), "--logs", str(logs)]
    process = subprocess.Popen(
        [*command, *args],
        cwd=ROOT,
        env=python_path_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# What each kind of local container says when it answers (local_runtime's answered_by()).
ANSWERED_BY = {
    "stand-in": "stand-in: local_runtime/stand_in.py",
    "byoc": "server (systems/byoc_server) on its CPU path",
}
DEPLOY_ORDER = ("==> preflight (", "==> cdk synth", "==> model_build publish", "==> smoke test", "==> SLO gate")


def run_scenario(system: str, container: str, tmp_path: Path, record_property) -> str:
    """Run the system's scenario config through the demo; assert the whole chain; return the demo's output."""
    config = ROOT / "config" / "scenarios" / f"{system}.yaml"
    # From no build of its own, as on a fresh machine (a leftover artifact once hid a plan made before the model
    # existed: chat, decided from the model's template, was off in the demo's invoke step)
    endpoint = yaml.safe_load(config.read_text())["endpoints"][0]["name"]
    shutil.rmtree(ROOT / "build" / endpoint, ignore_errors=True)
    started = time.monotonic()
    result = run_demo(tmp_path / "logs", "--config", str(config.relative_to(ROOT)))
    took = time.monotonic() - started
    out = result.stdout
    assert result.returncode == 0, out[-5000:] + result.stderr[-3000:]
    # planned after the run, from the build the demo just made in the repository's build/ (the session's default
    # build root is a folder of this worker: tests/conftest.py)
    environment_plan = load_config(config, build_root=ROOT / "build")
    spec = environment_plan.endpoints[0]
    plan = environment_plan.plan(spec.name)
    if plan.system.chat.supported and Path(spec.model).name in CHAT_ARCHITECTURES:  # a model with a chat template
        assert spec.chat is not None, f"{system}: the tiny model's chat template should turn chat on by default"

    answered = re.search(r"container answering: (.*?); ready in ([\d.]+) s", out)
    assert answered, out[-5000:]
    assert ANSWERED_BY[container] in answered.group(1), answered.group(1)
    record_property("scenario", f"{system}: {answered.group(1)}; whole chain {took:.0f} s")

    at = [out.index(step) for step in DEPLOY_ORDER]
    assert at == sorted(at), [step for step in DEPLOY_ORDER]
    assert "PASS  response" in out and "PASS  every objective met" in out, out[-5000:]
    assert out.count("    output: ") >= 2, out[-5000:]
    if plan.system.streaming.supported:
        assert re.search(r"streamed \d+ (tokens|chunks); time to first", out), out[-5000:]
    else:
        assert f"skipped: {system} does not stream" in out
    if spec.chat is not None:
        assert f"/endpoints/{environment_plan.endpoint_name(spec)}/openai/v1" in out
        assert re.search(r"finish_reason: \w+; usage: \d+ prompt \+ \d+ completion tokens", out), out[-5000:]
    assert "nothing left" in out and "s3 buckets                   0 left" in out
    return out
