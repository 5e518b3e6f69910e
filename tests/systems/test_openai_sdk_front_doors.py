"""The invoke function's chat door in front of an engine's OpenAI server, driven by the real `openai` SDK over HTTP:
a two-turn tool loop as the SDK's users write it (turn 2 re-sends `resp.choices[0].message`, which the SDK
serializes with the fields vLLM set: reasoning, refusal, annotations, audio, function_call), the engines' own
request fields (reasoning_effort, parallel_tool_calls), and the engine's own limits instead of the contract's
512 tokens / 16,384 characters (review F7, F8).

The door is endpoint_runtime/invoke.py's handler behind a small HTTP server that hands it function-URL events; the
container is a stand-in of vLLM's chat route that answers as vLLM 0.30.0's ChatMessage serializes
(entrypoints/openai/chat_completion/protocol.py: role, content, refusal, annotations, audio, function_call,
tool_calls, reasoning) and records what it was sent.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from helpers import serve_in_thread
from test_client_bodies import ContainerRuntime

from endpoint_runtime import invoke

if TYPE_CHECKING:
    from deployment import EndpointPlan

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class VllmChatStandIn:
    """vLLM's chat reply shape: turn 1 thinks and calls get_weather, turn 2 (with the tool's result) answers."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def post(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        self.seen.append(body)
        answered = any(m.get("role") == "tool" for m in body.get("messages", []))
        message = {
            "role": "assistant",
            "content": "Sunny in Paris." if answered else None,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "reasoning": "The user wants the weather; call the tool." if not answered else "Report it.",
        }
        if not answered:
            message["tool_calls"] = [
                {
                    "id": "chatcmpl-tool-1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ]
        reply = {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "created": 1,
            "model": body.get("model") or "",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop" if answered else "tool_calls"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
        return 200, json.dumps(reply).encode(), "json"


@contextlib.contextmanager
def function_url(handler: Any) -> Iterator[str]:
    """A Lambda handler behind HTTP as a function URL delivers it (rawPath, body, requestContext.http.method)."""

    class Door(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            event = {
                "rawPath": self.path,
                "body": body,
                "requestContext": {"http": {"method": "POST", "path": self.path}},
            }
            with lock:  # the handler reads its environment per request; one at a time
                reply = handler(event)
            data = reply["body"].encode()
            self.send_response(reply["statusCode"])
            for key, value in reply["headers"].items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    lock = threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Door)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _plan(tmp_path: Path, example: str) -> Any:
    from deployment import load_config

    data = yaml.safe_load((EXAMPLES / example).read_text())
    data["endpoints"][0]["chat"] = {}
    path = tmp_path / example
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path, "dev", build_root=tmp_path / "no-build").plans[0]


def _door_environment(plan: EndpointPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the stack gives the invoke function (stacks/llm_endpoint.py request_limits)."""
    from chat_contract import CHAT_ENV
    from request_contract import LIMIT_ENV

    for key in (*CHAT_ENV, *LIMIT_ENV, "PROMPT_BODY", "REASONING_FIELD"):
        monkeypatch.delenv(key, raising=False)
    env = {"ENDPOINT_NAME": plan.endpoint_name, **plan.front_door_environment}
    for key, value in env.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def vllm_door(tmp_path, monkeypatch) -> Iterator[tuple[Any, str, VllmChatStandIn]]:
    plan = _plan(tmp_path, "vllm-llama-3.1-8b-tools.yaml")
    _door_environment(plan, monkeypatch)
    engine = VllmChatStandIn()
    monkeypatch.setattr(invoke, "_client", ContainerRuntime(engine))
    with function_url(invoke.handler) as url:
        yield plan, url, engine


def test_a_tool_loop_with_the_openai_sdk_through_the_invoke_function(vllm_door):
    import openai

    plan, url, engine = vllm_door
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(
        model=plan.endpoint_name, messages=messages, tools=[WEATHER], reasoning_effort="low", parallel_tool_calls=False
    )
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and getattr(first.choices[0].message, "reasoning", None)
    sent = engine.seen[-1]
    assert (sent["reasoning_effort"], sent["parallel_tool_calls"]) == ("low", False)
    assert "max_tokens" not in sent  # the engine's own default (max_model_len - prompt), not the contract's 512

    messages.append(first.choices[0].message)  # as the SDK's users write a tool loop
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
    second = client.chat.completions.create(model=plan.endpoint_name, messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "Sunny in Paris."
    assistant = engine.seen[-1]["messages"][1]
    assert assistant["tool_calls"][0]["id"] == call.id and "reasoning" not in assistant


def test_the_engines_limits_apply_not_the_contracts(vllm_door):
    """max_tokens up to the engine's max_model_len and prompts beyond 16,384 characters pass to the engine, which
    refuses what exceeds its context itself."""
    import openai

    plan, url, engine = vllm_door
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    client.chat.completions.create(
        model=plan.endpoint_name, max_tokens=4096, messages=[{"role": "user", "content": "x " * 10_000}]
    )
    assert engine.seen[-1]["max_tokens"] == 4096
    context = int(plan.front_door_environment["MAX_NEW_TOKENS"])
    assert context == plan.engine.max_model_len
    with pytest.raises(openai.BadRequestError, match=f"between 1 and {context}"):
        client.chat.completions.create(
            model=plan.endpoint_name, max_tokens=context + 1, messages=[{"role": "user", "content": "Hi"}]
        )


def test_handler_systems_refuse_the_engine_fields_naming_who_takes_them(tmp_path, monkeypatch):
    import openai

    plan = _plan(tmp_path, "hf-fastload.yaml")
    _door_environment(plan, monkeypatch)
    monkeypatch.setattr(invoke, "_client", ContainerRuntime(VllmChatStandIn()))
    with function_url(invoke.handler) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="reasoning_effort: only an engine's own OpenAI server"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}], reasoning_effort="low"
            )


def test_echoed_fields_are_checked():
    import chat_contract

    base = [{"role": "user", "content": "hi"}]
    for key, value, expected in (
        ("function_call", {"name": "f", "arguments": "{}"}, "function_call: must be null"),
        ("audio", {"id": "a"}, "audio: must be null"),
        ("reasoning", 3, "reasoning: must be a string"),
        ("annotations", "x", "annotations: must be a list or null"),
    ):
        with pytest.raises(chat_contract.ChatError, match=expected):
            chat_contract.parse_chat_request(
                {"messages": [*base, {"role": "assistant", "content": "x", key: value}, *base]}
            )
