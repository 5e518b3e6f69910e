"""The engine review's findings (vllm and sglang against their pinned engines), each by the check that catches its
class: F2 the chat smoke check on a reasoning model, F3 gpt-oss without network, F4 any container environment value
over CreateModel's limit, F5 the served model names, F6 chat.template in the engines' artifacts, F9 the managed
benchmark on a system without chat. F1 (the bodies every client sends) is tests/systems/test_client_bodies.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from engine_configs import build, endpoint_yaml, load, refusals

from artifact import BuildError
from endpoint_config import ConfigError
from endpoint_runtime import smoke
from systems import all_systems

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"


def _example(tmp_path: Path, name: str, change) -> Path:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    change(data["endpoints"][0])
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _refusal(path: Path) -> str:
    from deployment import load_config

    with pytest.raises(ConfigError) as caught:
        load_config(path, "dev", build_root=path.parent / "no-build")
    return str(caught.value)


# ---- F4: every environment value every system renders, against CreateModel's limits ------------------------------


def test_limits_are_botocores():
    from deployment.plan import container_environment_limits

    assert container_environment_limits() == {"key": 1024, "value": 1024, "entries": 100, "combined": 32 * 1024}


def test_an_inline_chat_template_over_1024_bytes_is_refused_at_load(tmp_path):
    template = "{%- for m in messages %}{{ m['content'] }}{%- endfor %}" * 30

    def change(ep):
        ep["engine"]["chat_template"] = template

    message = _refusal(_example(tmp_path, "vllm-llama-3.1-8b-tools.yaml", change))
    assert "SM_VLLM_CHAT_TEMPLATE is 1650 bytes; CreateModel takes at most 1024 bytes per value" in message
    assert "chat.template" in message


@pytest.mark.parametrize("system", sorted(all_systems()))
def test_every_systems_environment_is_measured(system, tmp_path, monkeypatch):
    """The check reads the whole rendered environment of any system: a value made too long in the system's own
    environment function is refused, whichever variable it is."""
    import dataclasses

    from test_client_bodies import EXAMPLE_OF

    import deployment

    real = all_systems()[system]
    long = dataclasses.replace(
        real, environment=lambda ep, engine: {**real.environment(ep, engine), "SOME_OPTION": "x" * 1025}
    )
    monkeypatch.setattr(deployment, "get_system", lambda name: long if name == system else all_systems()[name])
    with pytest.raises(ConfigError, match="SOME_OPTION is 1025 bytes; CreateModel takes at most 1024"):
        deployment.load_config(EXAMPLES / EXAMPLE_OF[system][0], "dev", build_root=tmp_path)


def test_the_examples_fit():
    from deployment import load_all_environments

    for path in sorted(EXAMPLES.glob("*.yaml")):
        load_all_environments(path, build_root=Path("/nonexistent"))


# ---- F3: gpt-oss's chat needs its vocabulary download ----------------------------------------------------------


def test_gpt_oss_without_network_is_refused_with_the_reason(tmp_path):
    def isolated(ep):
        ep["engine"].pop("stream_weights_from_s3")

    message = _refusal(_example(tmp_path, "vllm-gpt-oss-20b.yaml", isolated))
    assert "GptOssForCausalLM" in message and "o200k_base.tiktoken" in message
    assert "TIKTOKEN_ENCODINGS_BASE" in message and "stream_weights_from_s3 true" in message

    def open_network(ep):
        ep["engine"].pop("stream_weights_from_s3")
        ep["network"] = {"network_isolation": False}

    from deployment import load_config

    path = _example(tmp_path, "vllm-gpt-oss-20b.yaml", open_network)
    assert not load_config(path, "dev", build_root=tmp_path).plan("gpt-oss-20b").network_isolation


def test_a_local_gpt_oss_is_refused_at_load_and_its_build_too(tmp_path, tiny_chat_models):
    """A local gpt-oss: config.json names the architecture at load; the build checks the real files again."""
    from systems.checkpoint_facts import read_local_checkpoint
    from systems.vllm import VllmEngineOptions, checkpoint_rules

    model = str(tiny_chat_models["gpt_oss"])
    message = refusals(tmp_path, endpoint_yaml("oss", "vllm", model))
    assert "network.network_isolation: model" in message and "openai-harmony" in message
    plan = load(tmp_path, endpoint_yaml("oss", "vllm", model, engine={"stream_weights_from_s3": True})).plans[0]
    checkpoint = read_local_checkpoint(Path(model), model)
    assert checkpoint_rules(plan.spec, plan.engine, checkpoint) == []
    isolated = plan.spec.model_copy(update={"engine": {}})
    assert "openai-harmony" in checkpoint_rules(isolated, VllmEngineOptions(), checkpoint)[0]


# ---- F5: the names vLLM answers --------------------------------------------------------------------------------


def test_vllm_serves_the_endpoint_name_clients_send(tmp_path, tiny_chat_models):
    """SageMaker's OpenAI route passes `model` through; its callers send the endpoint's name. Served: the endpoint's
    name first (the reply's `model`), then the config's; anything else is vLLM's 404."""
    import httpx
    from engine_stand_in import StandIn, flags_of, serving, vllm_argv

    from deployment import load_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "environments: {dev: {}}\nendpoints:\n"
        + endpoint_yaml("tiny", "vllm", str(tiny_chat_models["qwen3"]), engine={"max_model_len": 256})
    )
    plan = load_config(path, "dev", build_root=tmp_path / "b").plans[0]
    assert plan.endpoint_name == "dev-tiny" and plan.served_model_names == ("dev-tiny", "tiny")
    env = plan.container_environment("bucket")
    assert json.loads(env["SM_VLLM_SERVED_MODEL_NAME"]) == ["dev-tiny", "tiny"]
    flags = flags_of(vllm_argv(env, tiny_chat_models["qwen3"]))
    assert flags["--served-model-name"] == ["dev-tiny", "tiny"]
    with serving(StandIn(flags, "vllm-openai")) as url:
        ask = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        for name in ("dev-tiny", "tiny", ""):
            reply = httpx.post(f"{url}/v1/chat/completions", json={**ask, "model": name})
            assert reply.status_code == 200 and reply.json()["model"] == "dev-tiny", reply.text
        assert httpx.post(f"{url}/v1/chat/completions", json={**ask, "model": "gpt-3.5-turbo"}).status_code == 404


# ---- F6: chat.template in the engines' artifacts -----------------------------------------------------------------


@pytest.mark.parametrize("system", ["vllm", "sglang"])
def test_chat_template_is_written_where_the_engines_read_it(system, tmp_path, tiny_chat_models):
    import transformers

    template = "MARKER {% for m in messages %}{{ m['content'] }}{% endfor %}"
    engine = {"max_model_len": 256} if system == "vllm" else {"context_length": 256}
    chat = f"    chat: {{template: {json.dumps(template)}}}\n"
    plan, manifest, out = build(
        tmp_path, endpoint_yaml("t", system, str(tiny_chat_models["qwen3"]), engine=engine, extra=chat), "built"
    )
    for where in (out, out / "metadata"):
        assert json.loads((where / "tokenizer_config.json").read_text())["chat_template"] == template
        assert not (where / "chat_template.jinja").exists()
        tokenizer = transformers.AutoTokenizer.from_pretrained(where if where == out else out)
        assert tokenizer.chat_template == template
    assert "tokenizer_config.json with chat.template written in" in manifest["verification"]["files"]


def test_a_model_without_a_template_is_refused_chat_at_build(tmp_path, tiny_chat_models):
    import shutil

    model = tmp_path / "no-template"
    shutil.copytree(tiny_chat_models["qwen3"], model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    (model / "chat_template.jinja").unlink(missing_ok=True)
    message = refusals(tmp_path, endpoint_yaml("t", "vllm", str(model), extra="    chat: {}\n"))
    assert "has no chat template" in message and "chat.template" in message


# ---- F9: the managed benchmark needs OpenAI chat -------------------------------------------------------------------


@pytest.mark.parametrize("system", sorted(s for s, v in all_systems().items() if not v.chat.supported))
def test_managed_benchmark_is_refused_without_chat(system, tmp_path):
    from test_client_bodies import EXAMPLE_OF

    def benchmark(ep):
        ep["slo"] = {"concurrency": 1, "max_error_rate": 0.01, "managed_benchmark": True}

    message = _refusal(_example(tmp_path, EXAMPLE_OF[system][0], benchmark))
    assert f"slo.managed_benchmark: value true is not supported by system {system!r}" in message
    assert "systems that serve them: hf-fastload" in message and "vllm" in message


# ---- F2: the chat smoke check and a reasoning model ----------------------------------------------------------------


def test_a_reply_that_is_all_reasoning_shows_the_model_answered():
    thinking = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": None, "reasoning": "Okay"},
            }
        ],
    }
    assert smoke._chat_problem(200, thinking, reasoning_field="reasoning") is None
    assert "nor reasoning (reasoning_content)" in smoke._chat_problem(
        200, thinking, reasoning_field="reasoning_content"
    )
    assert smoke._chat_problem(200, thinking) == "the assistant message has neither content nor tool_calls"


def test_the_smoke_chat_asks_the_engine_not_to_think(tmp_path):
    from deployment import load_config

    def chat(ep):
        ep["chat"] = {}

    plan = load_config(_example(tmp_path, "vllm-qwen3-32b.yaml", chat), "dev", build_root=tmp_path).plan("qwen3-32b")
    settings = plan.smoke
    ask = smoke.ChatSmoke(
        "invoke", False, plan.chat_features, reasoning_field=settings.body.reasoning_field, extra=settings.chat_extra
    )
    body = smoke.chat_request(ask)
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["max_tokens"] >= 64
    assert smoke.tool_call_request(ask)["max_tokens"] == smoke.TOOL_CALL_MAX_TOKENS


def test_enable_thinking_reaches_vllm_through_the_invoke_function(tmp_path):
    """The smoke's chat request goes through the invoke function's contract, which forwards the kwarg."""
    import chat_contract

    request = chat_contract.parse_chat_request(
        {"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": False}}
    )
    assert request.to_json()["chat_template_kwargs"] == {"enable_thinking": False}


def test_build_refuses_chat_template_that_cannot_render(tmp_path, tiny_chat_models):
    chat = '    chat: {template: "{% for m in messages %}{{ m.content | nosuchfilter }}{% endfor %}"}\n'
    with pytest.raises(BuildError, match="cannot render"):
        build(tmp_path, endpoint_yaml("t", "vllm", str(tiny_chat_models["qwen3"]), extra=chat), "bad")


def test_the_openai_load_test_counts_vllms_streamed_reasoning():
    """vLLM 0.30.0 streams reasoning as delta.reasoning (DeltaMessage); the openai target counts it as output."""
    import asyncio
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from helpers import serve_in_thread

    from load_testing.loadtest import OpenAITarget, Prompt, Workload

    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning": "thinking"}}]},
        {"choices": [{"index": 0, "delta": {"content": "Paris"}}]},
    ]

    class Engine(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    serve_in_thread(server)
    try:
        target = OpenAITarget(f"http://127.0.0.1:{server.server_address[1]}/v1", "m")

        async def one():
            await target.open(1, Workload())
            try:
                return await target.send(Prompt(text="Hi", messages=None, input_tokens=1, output_tokens=4))
            finally:
                await target.close()

        record = asyncio.run(one())
    finally:
        server.shutdown()
        server.server_close()
    assert record.ok and len(record.chunk_times) == 2, record
