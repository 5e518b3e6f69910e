"""`make demo`: the whole chain on this machine, with no AWS account, GPU or Docker engine.

make a tiny GPT-2 offline -> model_build build -> local AWS emulator (moto) -> serve the artifact under the
SageMaker container contract on localhost -> `make deploy`'s code (preflight, cdk synth, bootstrap, artifact
stack, publish into the emulated bucket, preflight of the artifacts, endpoint stack, smoke test: InService on
the deployed config, a prompt answered by the served model, latency) -> prompts through lambda/invoke ->
one prompt streamed token by token through lambda/stream's code (InvokeEndpointWithResponseStream) -> a chat exchange
through the openai SDK, streamed (SageMaker's OpenAI route, when the endpoint has a chat: block) -> `make destroy`'s
code -> nothing of the app left. Every process it starts is stopped.

`--config FILE [--endpoint NAME]` (`make demo CONFIG=FILE [ENDPOINT=NAME]`) runs the same chain for any endpoint whose
model is a local directory (build/tiny-models/<architecture> is made when missing), and says which container
answered: the system's real engine where one runs here (local_runtime: vllm's vLLM 0.30.0, with the version it
logged) or the stand-in. An engine system's container takes OpenAI bodies only, so its prompts go through the
invoke and stream functions' chat routes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import boto3

from deployment import EndpointPlan, EnvironmentPlan, load_config
from endpoint_config import ConfigError, EndpointSpec
from endpoint_config.model_reference import is_hub_id
from endpoint_runtime import bodies, invoke, stream
from local_runtime import has_container_process
from local_runtime.process import stop_process
from workstation.deploy import DeployError, deploy, destroy, run

from . import moto_server
from .instance import download_artifact
from .inventory import function_runs, leftovers

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
        except urllib.error.HTTPError as err:
            if err.code == 500:  # the model (or its container) failed to load: the body says why
                raise DemoError(f"the model server could not load the model: {err.read().decode(errors='replace')}")
            time.sleep(0.3)
        except OSError:
            time.sleep(0.3)
    raise DemoError(f"the model server did not answer /ping within {timeout_s:.0f} s")


def run_demo(
    config_path: str, endpoint: str | None, port: int, keep_logs: Path, environment: str | None = None
) -> None:
    config_path, endpoint, environment = _demo_config(config_path, endpoint, environment)
    environment_plan = load_config(config_path, environment)
    spec = environment_plan.endpoints[0] if endpoint is None else environment_plan.endpoint(endpoint)
    endpoint_name = environment_plan.endpoint_name(spec)
    region = environment_plan.environment.region or moto_server.EMULATOR_REGION
    started = time.monotonic()

    environment_plan = _build_artifact(config_path, spec, environment)
    # Planned again once the tiny model exists: what a local model directory decides (its chat template turns chat on
    # by default) is unknown while it is missing, as on a fresh machine.
    spec = environment_plan.endpoint(spec.name)
    plan = environment_plan.plan(spec.name)
    with ExitStack() as cleanup:
        t = _step(3, "start the local AWS emulator (moto server)")
        # The functions the stacks deploy run on the emulator; their SageMaker runtime calls (the smoke test's)
        # go to the model server of step 4, which answers for the endpoints the emulator never runs.
        emulator = moto_server.start(
            keep_logs, lambda_env={"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": f"http://127.0.0.1:{port}"}
        )
        cleanup.callback(emulator.stop)
        cleanup.callback(say_emulator_gaps, emulator.log_path)  # before it stops, whether the demo passed or not
        print(f"    listening on {emulator.url}")
        _done(t)

        staged = _staged_weights(spec.name)
        if staged is None:
            local_url, runtime, server_ready = _serve_artifact(
                cleanup, config_path, spec.name, plan, port, keep_logs, region, wait=False
            )

            def before_endpoints(planned: EnvironmentPlan) -> None:
                server_ready()  # the endpoint stack's smoke check invokes it
        else:  # the weights reach S3 only inside the deploy (the staging job): the instance downloads them after it
            local_url, runtime = f"http://127.0.0.1:{port}", _runtime_client(f"http://127.0.0.1:{port}", region)
            print(f"\n==> [4] serve: after the staging job has put the weights in S3 ({staged:,} bytes), in step 5")

            def before_endpoints(planned: EnvironmentPlan) -> None:
                instance = download_artifact(planned, spec.name, cleanup, echo=lambda line: print(f"    {line}"))
                _serve_artifact(cleanup, config_path, spec.name, plan, port, keep_logs, region, artifact=instance)

        with emulator.activated():
            t = _step(
                5, "make deploy: preflight, synth, bootstrap, artifact stack, publish, endpoint stack, smoke test"
            )
            deploy(
                environment_plan,
                echo=lambda line: print(f"    {line}"),
                runtime_client=runtime,
                before_endpoints=before_endpoints,
                # this run's own assembly: another demo of the same project and environment may synthesize at once
                assembly_dir=keep_logs / "cdk.out",
            )
            _done(t)
            _function_logs(environment_plan.project)

        _send_prompts(plan, endpoint_name, runtime)
        step = 8
        if spec.chat is not None:
            with emulator.activated():  # the emulator's credentials sign the bearer token
                # The route passes the container's stream as it is: server-sent events from an engine's own OpenAI
                # server (vLLM, SGLang) or TGI's router, which the openai SDK reads; LMI 27 streams chat as JSON lines
                # (local_runtime/stand_in.py LMI27), which it does not; hf-fastload does not stream.
                streams = plan.system.streaming.supported and plan.system.bodies.chat_streams_sse
                how = "streamed" if streams else "whole (the container streams no server-sent events)"
                t = _step(
                    step,
                    f"a chat exchange through the openai SDK, {how} (SageMaker's OpenAI route -> the local server)",
                )
                _chat_exchange(local_url, endpoint_name, region, streams)
                _done(t)
            step += 1

        with emulator.activated():
            _destroy_and_check(environment_plan, step, region, keep_logs / "cdk.out")
        print("\n==> stopping the model server and the emulator")
    print(f"\ndemo finished in {time.monotonic() - started:.1f} s: built, deployed, served, destroyed; nothing left.")


def say_emulator_gaps(log_path: Path) -> None:
    """Name the calls the emulator answered with a server error (moto_server.server_errors): moto lacks or failed on
    them where AWS would have answered, and a client's SDK retried each in silence first."""
    errors = moto_server.server_errors(log_path)
    if errors:
        print(
            f"\nnote: the emulator (moto, a stand-in for AWS) answered {len(errors)} call(s) with a server error where "
            f"AWS would answer; each client retried before giving up ({log_path}):"
        )
        for error in errors[:10]:
            print(f"    {error}")


def _demo_config(config_path: str, endpoint: str | None, environment: str | None) -> tuple[str, str | None, str | None]:
    """Step 0: the config as the demo runs it (local_emulator/demo_config.py): the user's own file where it already
    targets the emulator and names what runs here, else a copy with each replacement printed."""
    from .demo_config import make_demo_config

    made = make_demo_config(config_path, endpoint, environment)
    if not made.substitutions:
        made.path.unlink()
        return config_path, made.endpoint, made.environment
    t = _step(0, f"fit {config_path} to this machine and the emulator (the file itself is not changed)")
    for substitution in made.substitutions:
        print(f"    {substitution.line()}")
    print(f"    the demo runs {made.path.relative_to(ROOT) if made.path.is_relative_to(ROOT) else made.path}")
    _done(t)
    return str(made.path), made.endpoint, made.environment


def _build_artifact(config_path: str, spec: EndpointSpec, environment: str | None) -> EnvironmentPlan:
    """Steps 1 and 2: the tiny model and its artifact; the deployment planned again (its manifest names the
    artifact now)."""
    py = sys.executable
    if is_hub_id(spec.model) and not (ROOT / spec.model).is_dir():
        print(f"\n==> [1] {spec.model} is read from the Hub at {os.environ.get('HF_ENDPOINT')}: metadata only here")
    else:
        t = _step(1, f"make the tiny model {spec.model} offline (random weights, locally trained tokenizer)")
        if not (ROOT / spec.model / "config.json").is_file():
            _make_tiny_model(py, spec.model)
        else:
            print(f"    {spec.model} exists")
        _done(t)

    t = _step(2, f"model_build build --endpoint {spec.name}")
    env_args = ["--env", environment] if environment else []
    run([py, "-m", "model_build", "build", "--config", config_path, *env_args, "--endpoint", spec.name, "--quiet"])
    environment_plan = load_config(config_path, environment)  # planned again: the manifest names the artifact now
    artifact = environment_plan.plan(spec.name).artifact
    print(f"    content hash {artifact.content_hash[:16]}..., {artifact.total_bytes:,} bytes")
    _done(t)
    return environment_plan


def _staged_weights(endpoint: str) -> int | None:
    """The bytes the staging job moves for the endpoint's build (a Hub model planned from its metadata), or None when
    the build holds its weights (a local model directory)."""
    from artifact.manifest import MANIFEST_NAME, Manifest

    manifest = Manifest.load(ROOT / "build" / endpoint / MANIFEST_NAME)
    return manifest.staged_bytes if manifest.staging is not None else None


def _runtime_client(local_url: str, region: str) -> object:
    """A sagemaker-runtime client to the model served on localhost: the emulator never runs a container."""
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=local_url,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _serve_artifact(
    cleanup: ExitStack,
    config_path: str,
    endpoint: str,
    plan: EndpointPlan,
    port: int,
    keep_logs: Path,
    region: str,
    artifact: Path | None = None,
    wait: bool = True,
) -> tuple[str, object, Callable[[], None]]:
    """Step 4: the model server on the port (stopped by cleanup); its URL, a sagemaker-runtime client to it, and the
    wait for it to answer /ping (done here with `wait`; else the caller's, when it needs the server: the demo starts
    it, then synthesizes and deploys the artifact stack while the model loads). `artifact`: the folder to serve (the
    instance's download of a staged artifact), else the build's."""
    t = _step(4, f"serve the artifact under the SageMaker container contract on 127.0.0.1:{port}")
    container = has_container_process(plan.system.name)
    server_log = open(keep_logs / "serve.log", "wb")
    cleanup.callback(server_log.close)
    server = subprocess.Popen(
        [
            sys.executable,
            *("-m", "model_build", "serve", "--config", config_path, "--endpoint", endpoint, "--port", str(port)),
            *(("--artifact", str(artifact)) if artifact is not None else ()),
        ],
        cwd=ROOT,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    cleanup.callback(_stop, server)
    local_url = f"http://127.0.0.1:{port}"

    def ready(indent: str = "    ") -> None:
        # A real engine takes its time to start (vLLM on 2 cores: 1-2 minutes).
        _wait_ping(local_url, server, timeout_s=CONTAINER_READY_TIMEOUT_S if container else 120)
        print(f"{indent}GET {local_url}/ping -> 200")
        for line in _container_lines(keep_logs / "serve.log"):
            print(f"{indent}{line}")

    if wait:
        ready()
        _done(t)
        return local_url, _runtime_client(local_url, region), lambda: None
    print(f"    started (pid {server.pid}); the model loads while step 5 synthesizes and deploys the artifact stack")

    def waited() -> None:
        started = time.monotonic()
        print(f"    ==> the model server of step 4: waiting for GET {local_url}/ping")
        ready("        ")
        print(f"        answered after {time.monotonic() - started:.1f} s more")

    return local_url, _runtime_client(local_url, region), waited


def _send_prompts(plan: EndpointPlan, endpoint_name: str, runtime: object) -> None:
    """Steps 6 and 7: prompts through the invoke function's code, then one streamed through the stream function's,
    in the body the container takes (the system's ContainerBodies)."""
    body = plan.endpoint_body
    t = _step(6, "send prompts through lambda/invoke (sagemaker-runtime -> the local server)")
    print("    (the tiny model has random weights: its text is noise; the path it took is the point)")
    _invoke_prompts(endpoint_name, runtime, body)
    if body.kind != "generation":  # an engine's OpenAI server: the invoke function's chat route too
        with _function_environment(plan.chat_features.environment()):
            _chat_prompts(endpoint_name, runtime)
    _done(t)

    t = _step(7, "stream a prompt through lambda/stream's code (InvokeEndpointWithResponseStream -> the local server)")
    if not plan.system.streaming.supported:  # its container answers whole replies only (as the local server does)
        print(f"    skipped: {plan.system.name} does not stream: {plan.system.streaming.note}")
    elif body.kind != "generation":
        with _function_environment(plan.chat_features.environment()):
            _stream_chat(endpoint_name, runtime)
    else:
        _stream_prompt(endpoint_name, runtime, body)
    _done(t)


def _function_logs(project: str) -> None:
    """What the stacks' Lambda functions logged on the emulator, which ran each from its deployed code package
    (local_emulator/server.py): the custom resources (the artifact check, the smoke check, CDK's auto-delete) ran
    while CloudFormation deployed; a function never invoked has no log group yet."""
    print("    the stacks' Lambda functions that ran, from their CloudWatch Logs groups:")
    logs = boto3.client("logs")
    for function in function_runs(boto3.client("lambda"), logs, prefix=f"{project}-"):
        print(
            f"      {function.name}: {function.runs} run(s) in {function.log_group}; last: {function.last_line[:160]}"
        )


def _destroy_and_check(environment_plan: EnvironmentPlan, step: int, region: str, assembly_dir: Path) -> None:
    """The last two steps, inside the emulator: make destroy, then nothing of the app may be left."""
    t = _step(step, "make destroy: cdk destroy (CDK's auto-delete function empties the bucket)")
    destroy(environment_plan, echo=lambda line: print(f"    {line}"), assembly_dir=assembly_dir)
    _done(t)

    t = _step(step + 1, "check nothing of the app is left in the emulator")
    session = boto3.Session(region_name=region)
    left = leftovers(session, stack_prefix=f"{environment_plan.project}-")
    for kind, names in left.items():
        print(f"    {kind:28s} {len(names)} left" + (f": {', '.join(names)}" if names else ""))
    if any(left.values()):
        raise DemoError("destroy left resources behind (listed above)")
    _done(t)


# How long a system's container process (local_runtime.container_host) may take to answer /ping.
CONTAINER_READY_TIMEOUT_S = 900


def _tiny_architecture(model: str) -> str:
    """The architecture to make for a missing model directory: build/tiny-models/<architecture>, the tiny-model
    command's default place, names it. The demo serves local directories only."""
    from model_build.tiny_models import ARCHITECTURES

    path = Path(model)
    if path.parent == Path("build/tiny-models") and path.name in ARCHITECTURES:
        return path.name
    raise DemoError(
        f"model {model!r}: the demo serves a local model directory with a config.json; it makes only "
        f"build/tiny-models/<architecture> (architectures: {', '.join(ARCHITECTURES)})"
    )


def _make_tiny_model(py: str, model: str) -> None:
    """Write the tiny model beside its place and move it in whole (one rename): a second demo making the same model
    at the same time (the scenarios share build/tiny-models/) never reads a half-written one. The first to finish
    wins; the other's copy, identical (seeded), is dropped."""
    import shutil
    import tempfile

    target = ROOT / model
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        run([py, "-m", "model_build", "tiny-model", _tiny_architecture(model), "--out", str(scratch / "model")])
        try:
            (scratch / "model").rename(target)
        except OSError:  # made meanwhile by another run (a non-empty directory cannot be renamed over)
            if not (target / "config.json").is_file():
                raise
            print(f"    {model} was made meanwhile by another run; kept that one")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _container_lines(serve_log: Path) -> list[str]:
    """What the local server said about its container (local_runtime, model_build/cli.py serve): which engine
    answered, with the engine's own version line, or that the stand-in serves."""
    lines = serve_log.read_text(errors="replace").splitlines() if serve_log.is_file() else []
    return [line.strip() for line in lines if line.startswith("container") or "vLLM server version" in line]


@contextmanager
def _function_environment(environment: dict[str, str]) -> Iterator[None]:
    """The front door functions' environment (their chat features, chat_contract.CHAT_ENV), as the endpoint stack
    sets it on the Lambda functions, for the duration of the block."""
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _chat_prompts(endpoint_name: str, runtime) -> None:
    """The prompts as OpenAI chat requests through the invoke function's chat route (endpoint_runtime/invoke.py)."""
    for prompt in PROMPTS:
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 24, "temperature": 0}
        t1 = time.monotonic()
        status, reply = invoke.invoke_chat(endpoint_name, body, client=runtime)
        wall = (time.monotonic() - t1) * 1000
        if status != 200:
            raise DemoError(f"invoke (chat) returned {status}: {reply}")
        message = reply["choices"][0]["message"]
        text = message.get("content") or ""
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        print(f"    prompt: {prompt!r}\n    output: {text!r}" + (f" (reasoning: {reasoning!r})" if reasoning else ""))
        print(f"    latency: {wall:.0f} ms")


def _stream_chat(endpoint_name: str, runtime) -> None:
    """One chat request through the streaming function's chat route (InvokeEndpointWithResponseStream), printing
    each chunk's text (answer or reasoning) as it arrives."""
    body = {"messages": [{"role": "user", "content": STREAM_PROMPT}], "max_tokens": 24, "stream": True}
    started = time.monotonic()
    status, events = stream.open_chat_stream(endpoint_name, body, client=runtime)
    if status != 200:
        raise DemoError(f"the stream was refused with {status}: {events}")
    print(f"    prompt: {STREAM_PROMPT!r}\n    chunks: ", end="", flush=True)
    first_at, count = None, 0
    for raw in events:
        for line in raw.decode().splitlines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: ") :])
            if "error" in chunk:
                raise DemoError(f"the stream ended with an error: {chunk['error']}")
            for choice in chunk.get("choices", []):
                delta = choice.get("delta", {})
                text = delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content")
                if text:
                    first_at = first_at or time.monotonic()
                    count += 1
                    print(json.dumps(text, ensure_ascii=False)[1:-1] + "|", end="", flush=True)
    print()
    if first_at is None:
        raise DemoError("the chat stream brought no text")
    total = (time.monotonic() - started) * 1000
    print(
        f"    streamed {count} chunks; time to first chunk: {(first_at - started) * 1000:.0f} ms; all: {total:.0f} ms"
    )


def _invoke_prompts(endpoint_name: str, runtime, body: bodies.EndpointBody) -> None:
    """PROMPTS through endpoint_runtime/invoke.py, the invoke function's code, in the body the container takes."""
    for prompt in PROMPTS:
        payload = {"inputs": prompt, "parameters": {"max_new_tokens": 24, "do_sample": False}}
        t1 = time.monotonic()
        status, answer = invoke.invoke(endpoint_name, payload, client=runtime, body=body)
        wall = (time.monotonic() - t1) * 1000
        if status != 200:
            raise DemoError(f"invoke returned {status}: {answer}")
        text = answer["outputs"][0]["generated_text"]
        print(f"    prompt: {prompt!r}\n    output: {text!r}\n    latency: {wall:.0f} ms")


def _stream_prompt(endpoint_name: str, runtime, body: bodies.EndpointBody) -> None:
    """One prompt through endpoint_runtime/stream.py, the streaming front door's code, printing each token as its
    line arrives, from a container that streams (LMI's JSON-lines framing in AWS event-stream messages); a system
    that does not stream (hf-fastload) skips this step, here as on AWS (docs/production.md, "Streaming")."""
    # min_new_tokens: the tiny model's random weights could pick the end-of-text token first; a container that
    # does not read it (TGI, LMI 27: EndpointBody.unread_parameters) is not sent it, which its front door would refuse.
    parameters = {"max_new_tokens": 24, "do_sample": False}
    if body.reads("min_new_tokens"):
        parameters["min_new_tokens"] = 8
    payload = {"inputs": STREAM_PROMPT, "parameters": parameters}
    started = time.monotonic()
    status, answer = stream.open_stream(endpoint_name, payload, client=runtime, body=body)
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


def _chat_exchange(local_url: str, endpoint_name: str, region: str, streams: bool = True) -> None:
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
    if not streams:  # a container that answers whole replies (hf-fastload): the route's "stream": true is its 400
        reply = client.chat.completions.create(model=endpoint_name, messages=messages, max_tokens=24, temperature=0)
        print(json.dumps(reply.choices[0].message.content or "", ensure_ascii=False)[1:-1])
        if reply.usage is None:
            raise DemoError("the chat reply brought no usage")
        print(
            f"    finish_reason: {reply.choices[0].finish_reason}; usage: {reply.usage.prompt_tokens} prompt + "
            f"{reply.usage.completion_tokens} completion tokens; {(time.monotonic() - started) * 1000:.0f} ms"
        )
        return
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
            # a reasoning model's thinking comes as `reasoning` (vLLM 0.30.0's field), its answer as `content`
            text = choice.delta.content or (choice.delta.model_extra or {}).get("reasoning")
            if text:
                first_at = first_at or time.monotonic()
                print(json.dumps(text, ensure_ascii=False)[1:-1] + "|", end="", flush=True)
    print()
    if first_at is None or usage is None:
        raise DemoError(f"the chat stream brought no text or no usage chunk (finish_reason {finish!r})")
    print(
        f"    finish_reason: {finish}; usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
        f"tokens; time to first token: {(first_at - started) * 1000:.0f} ms"
    )


def _stop(process: subprocess.Popen) -> None:
    stop_process(process, timeout_s=60)  # the local server stops its container first (vLLM: up to 30 s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_emulator.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/local.yaml")
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--env", default=None, help="the config's environment to fit (default: its first)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "demo-logs")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    try:
        run_demo(args.config, args.endpoint, args.port, args.logs, args.env)
    except (ConfigError, DemoError, DeployError) as err:
        print(f"\ndemo failed: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # an AWS or emulator error: say what and where the logs are, no traceback
        print(f"\ndemo failed: {type(err).__name__}: {err} (logs in {args.logs})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
