"""byoc_server's chat requests on /invocations, over real HTTP, with a stand-in handler (the server is under test):
chat.completion replies, SSE streaming where the handler streams, tool calls read from the generated text, the
table of bad requests (tests/chat_cases.py) in OpenAI's error shape, and the refusals of a handler that serves no
chat or does not stream. The openai SDK's own models read every reply."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from chat_cases import CASES, OK, WEATHER, ChatCase, body
from helpers import running

from systems.byoc_server.app import create_app
from systems.byoc_server.contract import ChatError, GenerationParameters

TOOL_TEXT = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


class ChatHandler:
    """Renders messages as "role: content" lines; answers with the last user message's words reversed, or the
    scripted tool call when the user says "weather"; counts words as tokens; streams word by word."""

    model_name = "stand-in"

    def __init__(self) -> None:
        self.seen: list[tuple[str, GenerationParameters]] = []

    def load(self, model_dir: Path) -> None:
        pass

    def chat_prompt(self, request) -> str:
        if any(m.content == "no template" for m in request.messages):
            raise ChatError("messages: the template refuses this", param="messages")
        tools = " ".join(t["function"]["name"] for t in request.template_tools() or [])
        return "".join(f"{m['role']}: {m['content']}\n" for m in request.template_messages()) + f"tools: {tools}\n"

    def _answer(self, prompt: str, parameters: GenerationParameters) -> list[str]:
        self.seen.append((prompt, parameters))
        last = [line for line in prompt.splitlines() if line.startswith("user: ")][-1][len("user: ") :]
        if "weather" in last and "get_weather" in prompt:
            return TOOL_TEXT.split(" ")
        return (last.split()[::-1] * 20)[: parameters.max_new_tokens]

    def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
        return [" ".join(self._answer(prompts[0], parameters))]

    def generate_stream(self, prompt: str, parameters: GenerationParameters) -> Iterator[str]:
        words = self._answer(prompt, parameters)
        for i, word in enumerate(words):
            yield word if i == 0 else " " + word

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def handler() -> ChatHandler:
    return ChatHandler()


@pytest.fixture(scope="module")
def url(handler: ChatHandler, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running(create_app(handler, tmp_path_factory.mktemp("model"))) as base:
        yield base


def post(url: str, data: object) -> httpx.Response:
    content = data if isinstance(data, bytes) else json.dumps(data).encode()
    return httpx.post(f"{url}/invocations", content=content, headers={"content-type": "application/json"}, timeout=30)


def completion(url: str, data: dict) -> dict:
    from openai.types.chat import ChatCompletion

    reply = post(url, data)
    assert reply.status_code == 200, reply.text
    ChatCompletion.model_validate(reply.json())
    return reply.json()


def test_a_chat_completion(url: str, handler: ChatHandler) -> None:
    out = completion(url, body(messages=[{"role": "user", "content": "one two three"}], max_tokens=2, temperature=0))
    assert out["choices"][0]["message"]["content"] == "three two" and out["model"] == "tiny"
    assert out["choices"][0]["finish_reason"] == "length" and out["usage"]["completion_tokens"] == 2
    prompt, parameters = handler.seen[-1]
    assert prompt == "user: one two three\ntools: \n" and out["usage"]["prompt_tokens"] == 5
    assert parameters.max_new_tokens == 2 and parameters.do_sample is False
    short = completion(url, {"messages": [{"role": "user", "content": "a b"}], "max_tokens": 9})
    assert short["choices"][0]["finish_reason"] == "length" and short["model"] == "stand-in"
    stopped = completion(url, body(messages=[{"role": "user", "content": "a b c"}], stop=["a"]))
    assert stopped["choices"][0]["message"]["content"] == "c b " and stopped["choices"][0]["finish_reason"] == "stop"


def test_sampling_knobs_reach_the_handler(url: str, handler: ChatHandler) -> None:
    completion(url, body(temperature=0.7, top_p=0.5, seed=11))
    parameters = handler.seen[-1][1]
    assert (parameters.do_sample, parameters.temperature, parameters.top_p, parameters.seed) == (True, 0.7, 0.5, 11)
    assert parameters.max_new_tokens == 512  # max_tokens not asked for: the endpoint's limit


def test_tool_calls_are_read_from_the_text(url: str) -> None:
    out = completion(url, body(tools=[WEATHER], messages=[{"role": "user", "content": "weather in Paris?"}]))
    message = out["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] == "tool_calls" and message["content"] == "Checking. "
    assert message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def events(reply: httpx.Response) -> list[dict]:
    from openai.types.chat import ChatCompletionChunk

    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    assert reply.text.endswith("data: [DONE]\n\n")
    chunks = [json.loads(e[len("data: ") :]) for e in reply.text.split("\n\n") if e and e != "data: [DONE]"]
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    return chunks


def test_streaming_gives_the_same_text_and_usage(url: str) -> None:
    ask = body(messages=[{"role": "user", "content": "one two three"}], max_tokens=5)
    whole = completion(url, ask)
    chunks = events(post(url, {**ask, "stream": True, "stream_options": {"include_usage": True}}))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == whole["choices"][0]["message"]["content"] and len(chunks) >= 7
    assert chunks[-1]["usage"] == whole["usage"] and chunks[-2]["choices"][0]["finish_reason"] == "length"
    streamed_call = events(
        post(url, body(stream=True, tools=[WEATHER], messages=[{"role": "user", "content": "weather?"}]))
    )
    calls = [t for c in streamed_call for t in c["choices"][0]["delta"].get("tool_calls") or []]
    assert [t["function"]["name"] for t in calls] == ["get_weather"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_bad_request_is_refused_as_the_table_says(url: str, case: ChatCase) -> None:
    reply = post(url, case.body)
    assert reply.status_code == case.status, (case.id, reply.text[:300])
    if not case.decodes:  # not known to be chat: the generation contract's {"error": message}, the same status
        assert isinstance(reply.json()["error"], str) and reply.json()["error"], (case.id, reply.json())
        return
    error = reply.json()["error"]
    assert (error["type"], error["param"]) == (case.type, case.param) and case.fragment in error["message"], error


def test_a_template_refusal_is_a_400(url: str) -> None:
    reply = post(url, body(messages=[{"role": "user", "content": "no template"}]))
    assert reply.status_code == 400 and reply.json()["error"]["message"] == "messages: the template refuses this"


class GenerateOnly:
    def load(self, model_dir: Path) -> None:
        pass

    def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
        return ["x" for _ in prompts]


class NoStream(GenerateOnly):
    def chat_prompt(self, request) -> str:
        return "prompt"


def test_a_handler_without_chat_refuses_it_clearly(tmp_path: Path) -> None:
    with running(create_app(GenerateOnly(), tmp_path)) as base:
        reply = post(base, OK)
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "chat_not_supported"
        assert "GenerateOnly) does not serve chat requests" in reply.json()["error"]["message"]
        assert post(base, {"inputs": "still served"}).json() == [{"generated_text": "x"}]
    with running(create_app(NoStream(), tmp_path)) as base:
        out = completion(base, OK)
        assert out["choices"][0]["finish_reason"] == "stop" and "usage" not in out  # no token counts
        reply = post(base, body(stream=True))
        assert reply.status_code == 400 and reply.json()["error"]["param"] == "stream"
