"""`make demo`: the whole chain on this machine, with no AWS account, GPU or Docker engine.

make a tiny GPT-2 offline -> model_build build -> local AWS emulator (moto) -> serve the artifact under the
SageMaker container contract on localhost -> `make deploy`'s code (preflight, cdk synth, bootstrap, artifact
stack, publish into the emulated bucket, preflight of the artifacts, endpoint stack, smoke test: InService on
the deployed config, a prompt answered by the served model, latency) -> prompts through lambda/invoke ->
one prompt streamed token by token through lambda/stream's code (InvokeEndpointWithResponseStream) -> a chat exchange
through the openai SDK, streamed (SageMaker's OpenAI route, when the endpoint has a chat: block) -> `make destroy`'s
code -> nothing of the app left. Every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import boto3

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_runtime import invoke, stream
from workstation.deploy import DeployError, deploy, destroy, run

from . import moto_server
from .inventory import leftovers

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ["The weather today is", "Infrastructure as code means"]
STREAM_PROMPT = "Streaming sends each token"
CHAT_QUESTION = "What does infrastructure as code mean?"


class DemoError(Exception):
    pass


def _step(n: int, text: str) -> float:
    print(f"\n==> [{n}] {text}", flush=True)
    return time.monotonic()


def _done(t0: float) -> None:
    print(f"    done in {time.monotonic() - t0:.1f} s", flush=True)


def _wait_ping(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DemoError(f"the model server exited with code {process.returncode}")
        try:
            if urllib.request.urlopen(f"{url}/ping", timeout=2).status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise DemoError(f"the model server did not answer /ping within {timeout_s:.0f} s")


def run_demo(config_path: str, endpoint: str | None, port: int, keep_logs: Path) -> None:
    deployment = load_config(config_path)
    if not deployment.environment.emulator:
        raise DemoError(
            f"{config_path}: the demo deploys to the local emulator; its environment must set emulator: true"
        )
    spec = deployment.endpoints[0] if endpoint is None else deployment.endpoint(endpoint)
    endpoint_name = deployment.endpoint_name(spec)
    # the body the container takes a prompt in, and where its replies carry reasoning (the system's ContainerBodies)
    prompt_body = deployment.plan(spec.name).prompt_body
    reasoning_field = deployment.plan(spec.name).system.bodies.reasoning_field
    py = sys.executable
    region = deployment.environment.region or moto_server.EMULATOR_REGION
    started = time.monotonic()

    t = _step(1, f"make the tiny model {spec.model} offline (random weights, locally trained tokenizer)")
    if not (ROOT / spec.model / "config.json").is_file():
        run([py, "-m", "model_build", "tiny-model", "gpt2", "--out", spec.model])
    else:
        print(f"    {spec.model} exists")
    _done(t)

    t = _step(2, f"model_build build --endpoint {spec.name}")
    run([py, "-m", "model_build", "build", "--config", config_path, "--endpoint", spec.name, "--quiet"])
    deployment = load_config(config_path)  # planned again: the build's manifest names the artifact now
    artifact = deployment.plan(spec.name).artifact
    print(f"    content hash {artifact.content_hash[:16]}..., {artifact.total_bytes:,} bytes")
    _done(t)

    with ExitStack() as cleanup:
        t = _step(3, "start the local AWS emulator (moto server)")
        emulator = moto_server.start(keep_logs)
        cleanup.callback(emulator.stop)
        print(f"    listening on {emulator.url}")
        _done(t)

        t = _step(4, f"serve the artifact under the SageMaker container contract on 127.0.0.1:{port}")
        server_log = open(keep_logs / "serve.log", "wb")
        cleanup.callback(server_log.close)
        server = subprocess.Popen(
            [py, "-m", "model_build", "serve", "--config", config_path, "--endpoint", spec.name, "--port", str(port)],
            cwd=ROOT,
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
        cleanup.callback(_stop, server)
        local_url = f"http://127.0.0.1:{port}"
        _wait_ping(local_url, server)
        print(f"    GET {local_url}/ping -> 200")
        # SageMaker runtime calls go to the served model: the emulator never runs a container.
        runtime = boto3.client(
            "sagemaker-runtime",
            endpoint_url=local_url,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        _done(t)

        with emulator.activated():
            t = _step(
                5, "make deploy: preflight, synth, bootstrap, artifact stack, publish, endpoint stack, smoke test"
            )
            deploy(deployment, echo=lambda line: print(f"    {line}"), runtime_client=runtime)
            _done(t)

        t = _step(6, "send prompts through lambda/invoke (sagemaker-runtime -> the local server)")
        print("    (the tiny model has random weights: its text is noise; the path it took is the point)")
        _invoke_prompts(endpoint_name, runtime, prompt_body, reasoning_field)
        _done(t)

        t = _step(
            7, "stream a prompt through lambda/stream's code (InvokeEndpointWithResponseStream -> the local server)"
        )
        _stream_prompt(endpoint_name, runtime, prompt_body, reasoning_field)
        _done(t)

        step = 8
        if spec.chat is not None:
            with emulator.activated():  # the emulator's credentials sign the bearer token
                t = _step(
                    step,
                    "a chat exchange through the openai SDK, streamed (SageMaker's OpenAI route -> the local server)",
                )
                _chat_exchange(local_url, endpoint_name, region)
                _done(t)
            step += 1

        with emulator.activated():
            t = _step(step, "make destroy: empty the bucket (as auto-delete does on AWS), cdk destroy")
            destroy(deployment, echo=lambda line: print(f"    {line}"))
            _done(t)

            t = _step(step + 1, "check nothing of the app is left in the emulator")
            session = boto3.Session(region_name=region)
            left = leftovers(session, stack_prefix=f"{deployment.project}-")
            for kind, names in left.items():
                print(f"    {kind:28s} {len(names)} left" + (f": {', '.join(names)}" if names else ""))
            if any(left.values()):
                raise DemoError("destroy left resources behind (listed above)")
            _done(t)
        print("\n==> stopping the model server and the emulator")
    print(f"\ndemo finished in {time.monotonic() - started:.1f} s: built, deployed, served, destroyed; nothing left.")


def _invoke_prompts(
    endpoint_name: str, runtime, prompt_body: str = "generation", reasoning_field: str | None = None
) -> None:
    """PROMPTS through endpoint_runtime/invoke.py, the invoke function's code, in the body the container takes."""
    for prompt in PROMPTS:
        payload = {"inputs": prompt, "parameters": {"max_new_tokens": 24, "do_sample": False}}
        t1 = time.monotonic()
        status, body = invoke.invoke(
            endpoint_name, payload, client=runtime, prompt_body=prompt_body, reasoning_field=reasoning_field
        )
        wall = (time.monotonic() - t1) * 1000
        if status != 200:
            raise DemoError(f"invoke returned {status}: {body}")
        text = body["outputs"][0]["generated_text"]
        print(f"    prompt: {prompt!r}\n    output: {text!r}\n    latency: {wall:.0f} ms")


def _stream_prompt(
    endpoint_name: str, runtime, prompt_body: str = "generation", reasoning_field: str | None = None
) -> None:
    """One prompt through endpoint_runtime/stream.py, the streaming front door's code, printing each token as its
    line arrives. The local server streams with the artifact's stream_fn (LMI's JSON-lines framing in AWS
    event-stream messages); a deployed hf-fastload endpoint does not stream (docs/production.md, "Streaming")."""
    # min_new_tokens: the tiny model's random weights could pick the end-of-text token first.
    payload = {"inputs": STREAM_PROMPT, "parameters": {"max_new_tokens": 24, "min_new_tokens": 8, "do_sample": False}}
    started = time.monotonic()
    status, answer = stream.open_stream(
        endpoint_name, payload, client=runtime, prompt_body=prompt_body, reasoning_field=reasoning_field
    )
    if status != 200:
        raise DemoError(f"the stream was refused with {status}: {answer}")
    print(f"    prompt: {STREAM_PROMPT!r}\n    tokens: ", end="", flush=True)
    first_at, count, last = None, 0, {}
    for raw in answer:
        last = json.loads(raw)
        if "token" in last:
            first_at = first_at or time.monotonic()
            count += 1
            print(json.dumps(last["token"]["text"], ensure_ascii=False)[1:-1] + "|", end="", flush=True)
    print()
    if "error" in last or first_at is None:
        raise DemoError(f"the stream ended without tokens or with an error: {last}")
    total = (time.monotonic() - started) * 1000
    print(
        f"    streamed {count} tokens; time to first token: {(first_at - started) * 1000:.0f} ms; all: {total:.0f} ms"
    )


def _chat_exchange(local_url: str, endpoint_name: str, region: str) -> None:
    """One chat request through the openai SDK at the endpoint's OpenAI route (the base URL the stack outputs, here
    on the local server), streamed with usage in the last chunk. The bearer token is made as
    sagemaker.core.token_generator.generate_token makes it (endpoint_runtime/openai_route.py, which the smoke test
    uses; importing the sagemaker package would add seconds here), from the emulator's credentials. The served
    handler renders the config's chat template and answers SSE chunks."""
    from openai import OpenAI

    from endpoint_runtime.openai_route import bearer_token

    base_url = f"{local_url}/endpoints/{endpoint_name}/openai/v1"
    token = bearer_token(boto3.Session().get_credentials(), region)
    client = OpenAI(base_url=base_url, api_key=token, max_retries=0, timeout=60)
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": CHAT_QUESTION}]
    print(f"    base_url: {base_url}\n    user: {CHAT_QUESTION!r}\n    assistant: ", end="", flush=True)
    started, first_at, usage, finish = time.monotonic(), None, None, None
    chunks = client.chat.completions.create(
        model=endpoint_name,
        messages=messages,
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            if choice.delta.content:
                first_at = first_at or time.monotonic()
                print(json.dumps(choice.delta.content, ensure_ascii=False)[1:-1] + "|", end="", flush=True)
    print()
    if first_at is None or usage is None:
        raise DemoError(f"the chat stream brought no text or no usage chunk (finish_reason {finish!r})")
    print(
        f"    finish_reason: {finish}; usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
        f"tokens; time to first token: {(first_at - started) * 1000:.0f} ms"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_emulator.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/local.yaml")
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "demo-logs")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    try:
        run_demo(args.config, args.endpoint, args.port, args.logs)
    except (ConfigError, DemoError, DeployError) as err:
        print(f"\ndemo failed: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # an AWS or emulator error: say what and where the logs are, no traceback
        print(f"\ndemo failed: {type(err).__name__}: {err} (logs in {args.logs})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
