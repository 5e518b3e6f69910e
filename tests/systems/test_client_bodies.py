"""The class check for the seams between our clients and the containers: no client sends a body its endpoint's
container refuses, and every client reads the container's reply.

Each serving system states the bodies its container takes and how its replies read (systems/base.py
ContainerBodies). Every client of an endpoint builds its bodies from that, through the endpoint plan: the smoke
test (the Lambda and `model_build smoke`: endpoint_runtime/smoke.py), the invoke, stream and asynchronous-submit
functions (endpoint_runtime/invoke.py, stream.py, async_invoke.py), the SLO gate and load test
(load_testing/gate.py gate_target, load_testing/loadtest.py) and the demo (local_emulator/demo.py). Here each
of those clients' own code runs, for every registered system, against
  - the system's declaration: a container that answers exactly the declared kinds, each in its kind's reply shape
    (a generation reply as the declared list or object, ContainerBodies.generation_reply; an OpenAI chat reply of a system with a reasoning field comes back all reasoning, content null: a reasoning
    model still thinking), and refuses any other body as its engine would (4xx, SageMaker's ModelError);
  - for vllm and sglang, the CPU stand-ins of their containers (tests/systems/engine_stand_in.py) serving a tiny
    Qwen3 built by the system's own recipe, reached over HTTP;
  - and any container URL named in CONTAINER_URL_<SYSTEM> (e.g. CONTAINER_URL_VLLM=http://127.0.0.1:8080, the
    real vLLM 0.30.0 server started from the same plan's environment): the same clients, sent to its /invocations.
The runtime client here (ContainerRuntime) stands in for sagemaker-runtime only: it delivers InvokeEndpoint and
InvokeEndpointWithResponseStream bodies to the container's POST /invocations as SageMaker does and answers a
container's 4xx/5xx as SageMaker's ModelError (botocore sagemaker-runtime: OriginalStatusCode, OriginalMessage).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.exceptions
import httpx
import pytest

from endpoint_runtime import async_invoke, bodies, invoke, smoke, stream
from local_runtime import has_container_process
from systems import all_systems, get_system

if TYPE_CHECKING:
    from deployment import EndpointPlan

# slow: every client of every system against HTTP stand-ins serving tiny models (make test-fast leaves them out)
pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
# Each system's example config (ServingSystem.example_config), its first endpoint of the system.
EXAMPLE_OF = {name: (system.example_config.name, None) for name, system in all_systems().items()}


def plan_of(system: str, tmp_path: Path) -> Any:
    from deployment import load_config

    name, endpoint = EXAMPLE_OF[system]
    environment_plan = load_config(EXAMPLES / name, "dev", build_root=tmp_path / "no-build")
    plans = [p for p in environment_plan.plans if p.system.name == system]
    return plans[0] if endpoint is None else environment_plan.plan(endpoint)


# ---- the containers -------------------------------------------------------------------------------------------


class DeclaredContainer:
    """A container that takes exactly the body kinds its system declares and answers each in its kind's shape."""

    def __init__(self, declared: Any) -> None:
        self.declared = declared
        self.seen: list[dict[str, Any]] = []

    def post(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        self.seen.append(body)
        kind = bodies.kind_of(body)
        if kind not in self.declared.accepts:
            message = f"this container takes {sorted(self.declared.accepts)}, not a {kind or 'unknown'} body"
            return 400, json.dumps({"error": {"message": message, "type": "BadRequestError"}}).encode(), "json"
        ignored = sorted(set(body.get("parameters") or {}) & set(self.declared.unread_parameters))
        if kind == bodies.GENERATION and ignored:
            # the container would answer, ignoring them: a client that sends what it does not read is refused here
            message = f"this container's generation body does not read {ignored} (ContainerBodies.unread_parameters)"
            return 400, json.dumps({"error": message}).encode(), "json"
        text = "Paris"
        streamed = bool(body.get("stream"))
        if kind == bodies.GENERATION:
            if streamed:
                lines = [{"token": {"text": t}} for t in ("Pa", "ris")] + [{"generated_text": text, "details": {}}]
                return 200, b"".join(json.dumps(x).encode() + b"\n" for x in lines), "jsonlines"
            # in the shape the system declares: the toolkit's list, or LMI 27's one object
            answer: Any = {"generated_text": text}
            answer = answer if self.declared.generation_reply == "object" else [answer]
            return 200, json.dumps(answer).encode(), "json"
        if kind == bodies.OPENAI_COMPLETION:
            chunk = {"object": "text_completion", "choices": [{"index": 0, "text": text}]}
        elif "tools" in body:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
            chunk = {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            }
        else:
            field = self.declared.reasoning_field  # a reasoning model still thinking: content null
            message = (
                {"role": "assistant", "content": None, field: "Let me think"}
                if field
                else {"role": "assistant", "content": text}
            )
            chunk = {
                "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "length", "message": message}],
            }
        if streamed:
            choice = chunk["choices"][0]
            if "message" in choice:
                delta = {k: v for k, v in choice["message"].items() if v is not None and k != "role"}
                chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
            return 200, f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(), "sse"
        return 200, json.dumps(chunk).encode(), "json"


class HttpContainer:
    """A container process at `url` (the stand-in, or a real engine): bodies go to its POST /invocations."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.seen: list[dict[str, Any]] = []

    def post(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        self.seen.append(body)
        reply = httpx.post(f"{self.url}/invocations", json=body, timeout=120)
        return reply.status_code, reply.content, reply.headers.get("content-type", "")


class ContainerRuntime:
    """sagemaker-runtime for one container: InvokeEndpoint and InvokeEndpointWithResponseStream deliver the body to
    the container's /invocations; a container's error comes back as SageMaker's ModelError."""

    def __init__(self, container: Any) -> None:
        self.container = container

    def _post(self, Body: bytes) -> tuple[int, bytes]:
        status, data, _ = self.container.post(json.loads(Body))
        if status >= 400:
            raise botocore.exceptions.ClientError(
                {
                    "Error": {"Code": "ModelError", "Message": f"Received client error ({status}) from primary"},
                    "OriginalStatusCode": status,
                    "OriginalMessage": data.decode("utf-8", "replace"),
                },
                "InvokeEndpoint",
            )
        return status, data

    def invoke_endpoint(self, *, Body: bytes, **_: Any) -> dict[str, Any]:
        _, data = self._post(Body)
        return {"Body": io.BytesIO(data), "ContentType": "application/json"}

    def invoke_endpoint_with_response_stream(self, *, Body: bytes, **_: Any) -> dict[str, Any]:
        _, data = self._post(Body)
        # SageMaker relays the container's bytes in PayloadParts of its own sizes: split mid-line on purpose.
        return {"Body": iter([{"PayloadPart": {"Bytes": data[i : i + 7]}} for i in range(0, len(data), 7)])}


# ---- the clients, each its own code ----------------------------------------------------------------------------

ClientCheck = Callable[[Any, ContainerRuntime, pytest.MonkeyPatch], None]
PROMPT = "The capital of France is"


def _function_env(plan: EndpointPlan, monkeypatch: pytest.MonkeyPatch, chat: bool = False) -> None:
    """The environment the stack gives the invoke and stream functions (stacks/llm_endpoint.py request_limits)."""
    env = {
        "ENDPOINT_NAME": plan.endpoint_name,
        **plan.endpoint_body.environment(),
    }
    if chat:
        env.update(chat_features(plan).environment())
    for key in (
        bodies.PROMPT_BODY_ENV,
        bodies.REASONING_FIELD_ENV,
        bodies.UNREAD_PARAMETERS_ENV,
        "CHAT_ROUTE",
        "CHAT_TOOL_CALLS",
        "CHAT_CONSTRAINED_DECODING",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def chat_features(plan: EndpointPlan) -> Any:
    """The endpoint's chat features as a chat: block would give them (the example configs have none)."""
    from chat_contract import ChatFeatures

    chat = plan.system.chat
    return ChatFeatures(chat.route, chat.parses_tool_calls(plan.engine), chat.constrained_decoding)


def smoke_prompt(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke test's invocation (model_build smoke and the smoke Lambda run the same code with the plan's
    SmokeSettings)."""
    settings = plan.smoke
    payload = smoke.generation_payload(settings.prompt, settings.max_new_tokens)
    answer = smoke._answer_real_time(plan.endpoint_name, payload, None, runtime, None, settings.body)
    assert answer.submitted_ok, answer.problem
    assert smoke.check_response_shape(answer.outputs) is None, answer.outputs


def smoke_lambda_settings(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke Lambda reads the container's body from the environment the stack sets (bodies.EndpointBody)."""
    settings = plan.smoke
    for key, value in {
        "STACK_NAME": plan.stack_name,
        "PROMPT": settings.prompt,
        "MAX_NEW_TOKENS": str(settings.max_new_tokens),
        "LATENCY_BUDGET_MS": str(settings.latency_budget_ms),
        **plan.endpoint_body.environment(),
    }.items():
        monkeypatch.setenv(key, value)
    read = smoke.settings_from_env()
    assert read["body"] == settings.body == plan.endpoint_body
    payload = smoke.generation_payload(read["prompt"], read["max_new_tokens"])
    answer = smoke._answer_real_time(plan.endpoint_name, payload, None, runtime, None, read["body"])
    assert answer.submitted_ok and smoke.check_response_shape(answer.outputs) is None, answer


def invoke_function(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The invoke function's generation route: its handler, as Lambda calls it."""
    _function_env(plan, monkeypatch)
    monkeypatch.setattr(invoke, "_client", runtime)
    reply = invoke.handler({"inputs": PROMPT, "parameters": {"max_new_tokens": 8, "do_sample": False}})
    assert reply["statusCode"] == 200, reply
    text = json.loads(reply["body"])["outputs"][0]["generated_text"]
    # the contract's return_full_text defaults to false, whatever the container's own default (TGI's is true)
    assert isinstance(text, str) and not text.startswith(PROMPT), text


def stream_function(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream function's generation route (lambda/stream/app.py calls handle_request)."""
    if not plan.system.streaming.supported:
        pytest.skip(f"system {plan.system.name} does not stream: {plan.system.streaming.note}")
    _function_env(plan, monkeypatch)
    monkeypatch.setattr(stream, "_client", runtime)
    body = json.dumps({"inputs": PROMPT, "parameters": {"max_new_tokens": 8}}).encode()
    status, _, answer = stream.handle_request("POST", body)
    assert status == 200, answer
    lines = [json.loads(line) for line in answer]
    assert any("token" in line for line in lines) and "error" not in lines[-1], lines
    assert not lines[-1]["generated_text"].startswith(PROMPT), lines[-1]


def async_submit(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The asynchronous invoke function's submit: the body it puts in S3 is what SageMaker hands the container."""

    class S3:
        def put_object(self, *, Body: bytes, **_: Any) -> None:
            self.body = Body

    class Runtime:
        def invoke_endpoint_async(self, **_: Any) -> dict[str, str]:
            return {"InferenceId": "i", "OutputLocation": "s3://b/out/i.out"}

    _function_env(plan, monkeypatch)
    s3 = S3()
    status, answer = async_invoke.submit(
        plan.endpoint_name,
        {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}},
        input_location=("b", "in"),
        s3=s3,
        runtime=Runtime(),
    )
    assert status == 202, answer
    # SageMaker then posts the stored body to the container and writes its reply to S3; the function's result
    # request reads it back in the generation contract's shape
    reply = json.loads(runtime.invoke_endpoint(Body=s3.body)["Body"].read())
    state = async_invoke.generation_result({"status": "completed", "output": reply})
    assert smoke.check_response_shape(state["output"]) is None, state


def slo_gate(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SLO gate's load-test target, built as the gate builds it, sending one prompt of its workload."""
    import asyncio

    from load_testing.gate import gate_target
    from load_testing.loadtest import Prompt, Workload, fit_workload_to_body

    target = gate_target(plan, "us-east-1")
    # as run_gate asks it: fixed output lengths only where the container reads min_new_tokens
    target.workload = fit_workload_to_body(Workload(output_tokens={"mean": 8}), plan.endpoint_body, lambda _: None)
    target.client = runtime
    prompt = Prompt(text="The capital of France is", messages=None, input_tokens=5, output_tokens=8)
    record = target._call(target.body(prompt), prompt)
    assert record.ok, record.error
    # the server's count, or the text to count (a tiny random T5 may answer its end token first: "" is an answer)
    assert record.output_tokens is not None or record.output_text is not None, record
    asyncio.run(target.close())


def demo(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's prompts through the invoke function's code and its stream through the stream function's."""
    from local_emulator import demo as demo_module

    demo_module._invoke_prompts(plan.endpoint_name, runtime, plan.endpoint_body)
    if plan.system.streaming.supported:
        demo_module._stream_prompt(plan.endpoint_name, runtime, plan.endpoint_body)


def smoke_chat(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke test's chat check through InvokeEndpoint (and its forced tool call where a parser is set)."""
    if not plan.system.chat.supported:
        pytest.skip(f"system {plan.system.name} serves no chat")
    settings = plan.smoke
    chat = smoke.ChatSmoke(
        "invoke",
        plan.system.chat.route == "native" and chat_features(plan).tool_calls,
        chat_features(plan),
        reasoning_field=settings.body.reasoning_field,
        extra=settings.chat_extra or {},
    )
    result = smoke.SmokeResult(stack=plan.stack_name)
    smoke.chat_check(result, plan.endpoint_name, chat, runtime_client=runtime)
    assert result.ok, result.failures


def invoke_chat(plan: EndpointPlan, runtime: ContainerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The invoke function's chat route (an endpoint with a chat: block)."""
    if not plan.system.chat.supported:
        pytest.skip(f"system {plan.system.name} serves no chat")
    _function_env(plan, monkeypatch, chat=True)
    monkeypatch.setattr(invoke, "_client", runtime)
    reply = invoke.handler({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})
    assert reply["statusCode"] == 200, reply


CLIENTS: dict[str, ClientCheck] = {
    "smoke": smoke_prompt,
    "smoke-lambda": smoke_lambda_settings,
    "invoke": invoke_function,
    "stream": stream_function,
    "async-submit": async_submit,
    "slo-gate": slo_gate,
    "demo": demo,
    "smoke-chat": smoke_chat,
    "invoke-chat": invoke_chat,
}


def kinds_sent(container: Any) -> set[str | None]:
    return {bodies.kind_of(body) for body in container.seen}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("system", sorted(EXAMPLE_OF))
def test_every_client_sends_what_the_system_declares(system, client, tmp_path, monkeypatch):
    plan = plan_of(system, tmp_path)
    container = DeclaredContainer(plan.system.bodies)
    CLIENTS[client](plan, ContainerRuntime(container), monkeypatch)
    assert container.seen and kinds_sent(container) <= set(plan.system.bodies.accepts)


# ---- the engines' containers: the stand-ins, and any URL given --------------------------------------------------


@pytest.fixture(scope="module")
def engine_containers(tmp_path_factory, tiny_chat_models) -> Iterator[dict[str, tuple[Any, str]]]:
    """vllm and sglang: a tiny Qwen3 built by each system's recipe, served by the stand-in of its container from
    the argv its entrypoint builds out of the plan's environment. CONTAINER_URL_<SYSTEM> adds that container."""
    import contextlib

    from engine_configs import build, endpoint_yaml
    from engine_stand_in import StandIn, flags_of, serving, sglang_argv, vllm_argv

    argv_of = {"vllm": vllm_argv, "sglang": sglang_argv}
    with contextlib.ExitStack() as stack:
        found: dict[str, tuple[Any, str]] = {}
        for system in ("vllm", "sglang"):
            root = tmp_path_factory.mktemp(f"bodies-{system}")
            engine = {"max_model_len": 512} if system == "vllm" else {"context_length": 512}
            plan, _, out = build(
                root, endpoint_yaml(f"tiny-{system}", system, str(tiny_chat_models["qwen3"]), engine=engine), system
            )
            flags = flags_of(argv_of[system](plan.container_environment("bucket"), out))
            found[system] = (
                plan,
                stack.enter_context(serving(StandIn(flags, get_system(system).local.dialect or "vllm-openai"))),
            )
            url = os.environ.get(f"CONTAINER_URL_{system.upper()}")
            if url:
                found[f"{system} at {url}"] = (plan, url)
        yield found


ENGINE_TARGETS = ("vllm", "sglang")


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("system", ENGINE_TARGETS)
def test_every_client_is_answered_by_the_engine_container(system, client, engine_containers, monkeypatch):
    """The stand-in of each engine's container (and CONTAINER_URL_<SYSTEM>, when given) answers every client."""
    for name, (plan, url) in engine_containers.items():
        if name.split(" ")[0] != system:
            continue
        container = HttpContainer(url)
        CLIENTS[client](plan, ContainerRuntime(container), monkeypatch)
        assert kinds_sent(container) <= set(plan.system.bodies.accepts), (name, container.seen)


# ---- every system's local container (local_runtime): the real engine, our own server, or the stand-in -------------

ROOT = EXAMPLES.parents[1]
# Each system's scenario config (its tiny model and engine settings).
LOCAL_CONFIGS = {
    system: ROOT / "config" / "scenarios" / f"{system}.yaml"
    for system in EXAMPLE_OF
    # hf-fastload: its container is the artifact's handler in local_runtime/serve.py (tests/systems/test_hf_handler*);
    # vllm: the real engine answers these clients in tests/local/test_vllm_scenario.py (one more engine start here
    # would cost a minute of make test), and its stand-in in test_every_client_is_answered_by_the_engine_container
    if has_container_process(system) and system != "vllm"
}


@pytest.fixture(scope="module")
def local_containers(tmp_path_factory) -> Iterator[dict[str, tuple[Any, Any]]]:
    """Every system's local container, as the local SageMaker runtime starts it (local_runtime.local_container) on
    the artifact its recipe builds from a tiny model of the scenario config's architecture: started together,
    stopped at the end."""
    import contextlib

    import yaml

    from deployment import load_config
    from local_runtime import local_container
    from model_build.cli import build_endpoint
    from model_build.tiny_models import make_tiny_model

    models: dict[str, Path] = {}
    started: dict[str, tuple[Any, Any]] = {}
    with contextlib.ExitStack() as stack:
        for system, path in sorted(LOCAL_CONFIGS.items()):
            root = tmp_path_factory.mktemp(f"local-{system}")
            config = yaml.safe_load(path.read_text())
            architecture = Path(config["endpoints"][0]["model"]).name
            if architecture not in models:
                models[architecture] = make_tiny_model(architecture, tmp_path_factory.mktemp("tiny") / architecture)
            config["endpoints"][0]["model"] = str(models[architecture])
            (root / "config.yaml").write_text(yaml.safe_dump(config))
            plan = load_config(root / "config.yaml", build_root=root / "build").plans[0]
            out = root / "build" / plan.name
            build_endpoint(plan.spec, out, progress=False, engine=plan.engine)
            container = local_container(plan, out, root / "container")
            (root / "container").mkdir()
            container.start()
            stack.callback(container.stop)
            started[system] = (plan, container)
        for system, (_, container) in started.items():
            container.wait_ready()
        yield started


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("system", sorted(LOCAL_CONFIGS))
def test_every_client_is_answered_by_the_systems_local_container(system, client, local_containers, monkeypatch):
    """What the demo and the scenarios start for each system answers every client, and no client sends a body kind
    the system does not declare."""
    plan, process = local_containers[system]
    container = HttpContainer(process.url)
    CLIENTS[client](plan, ContainerRuntime(container), monkeypatch)
    assert kinds_sent(container) <= set(plan.system.bodies.accepts), (process.answered_by(), container.seen)


def test_the_old_generation_body_is_what_the_engines_refuse(engine_containers):
    """What F1 was: {"inputs", "parameters"} at /invocations is refused by both engines' containers; each system's
    prompt body is answered."""
    for name, (plan, url) in engine_containers.items():
        refused = httpx.post(f"{url}/invocations", json={"inputs": "Hi", "parameters": {"max_new_tokens": 4}})
        assert refused.status_code in (400, 422), (name, refused.text)
        sent = bodies.prompt_body(plan.prompt_body, {"inputs": "Hi", "parameters": {"max_new_tokens": 4}})
        answered = httpx.post(f"{url}/invocations", json=sent, timeout=120)
        assert answered.status_code == 200, (name, answered.text)
        assert bodies.generation_outputs(plan.prompt_body, answered.json(), plan.system.bodies.reasoning_field)


def test_a_system_whose_bodies_and_chat_disagree_is_refused():
    import dataclasses

    vllm = all_systems()["vllm"]
    with pytest.raises(ValueError, match="container bodies .* and its chat capability"):
        dataclasses.replace(vllm, bodies=dataclasses.replace(vllm.bodies, accepts=frozenset({"openai-completion"})))


def test_the_stack_hands_the_functions_the_systems_body(synth):
    """The synthesized vllm endpoint stack: the invoke and smoke functions get the plan's PROMPT_BODY and
    REASONING_FIELD, the model the served names (shared synth of config/examples/vllm-gpt-oss-20b.yaml)."""
    synthesized = synth("config/examples/vllm-gpt-oss-20b.yaml", "dev")
    resources = synthesized.templates["llm-endpoints-dev-gpt-oss-20b"]["Resources"]
    functions = {
        lid: r["Properties"]["Environment"]["Variables"]
        for lid, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and lid.startswith(("Invoke", "SmokeTest"))
    }
    assert len(functions) == 2
    for lid, env in functions.items():
        assert (env.get("PROMPT_BODY"), env.get("REASONING_FIELD")) == ("openai-completion", "reasoning"), lid
    [model] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SageMaker::Model"]
    names = model["PrimaryContainer"]["Environment"]["SM_VLLM_SERVED_MODEL_NAME"]
    assert json.loads(names) == ["dev-gpt-oss-20b", "gpt-oss-20b"]
