"""The chat contract itself (chat_contract.py): the table of bad requests (tests/chat_cases.py) and the good ones,
what a parsed request forwards, the replies it builds (checked by the openai package's own models), the hermes
tool-call reader, the stream assembler, and that the module ships alone."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from chat_cases import CALL, CASES, GOOD, OK, USER, WEATHER, ChatCase, body

import chat_contract
import request_contract

ROOT = Path(__file__).resolve().parents[2]
LIMITS = request_contract.Limits()  # the defaults the table is written for


def _raw(case_body: Any) -> bytes:
    return case_body if isinstance(case_body, bytes) else json.dumps(case_body).encode()


def parse(data: Any, **options: Any) -> chat_contract.ChatRequest:
    return chat_contract.parse_chat_request(data, LIMITS, **options)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_bad_request_is_refused_as_the_table_says(case: ChatCase) -> None:
    with pytest.raises(chat_contract.ChatError) as info:
        parse(chat_contract.decode_chat_body(_raw(case.body)))
    err = info.value
    assert (err.status, err.type, err.param) == (case.status, case.type, case.param), err.message
    assert case.fragment in err.message, err.message
    assert chat_contract.error_body(err) == {
        "error": {"message": err.message, "type": case.type, "param": case.param, "code": err.code}
    }


def test_the_table_is_big_and_its_ids_unique() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "data"), GOOD, ids=[g[0] for g in GOOD])
def test_good_requests_parse(name: str, data: dict) -> None:
    request = parse(chat_contract.decode_chat_body(json.dumps(data).encode()))
    assert request.messages and all(m.role in ("system", "user", "assistant", "tool") for m in request.messages)


def test_defaults_are_applied() -> None:
    request = parse(OK)
    assert request.max_tokens == LIMITS.max_new_tokens and not request.max_tokens_given
    assert (request.tool_choice, request.stream, request.include_usage) == ("none", False, False)
    assert (request.temperature, request.top_p, request.seed, request.stop) == (None, None, None, ())
    assert parse(body(tools=[WEATHER])).tool_choice == "auto"


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    assert parse(body(max_tokens=10, max_completion_tokens=20)).max_tokens == 20
    assert parse(body(max_tokens=10)).max_tokens == 10
    with pytest.raises(chat_contract.ChatError, match="max_tokens: must be between 1 and 8"):
        chat_contract.parse_chat_request(body(max_tokens=9), request_contract.Limits(max_new_tokens=8))


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_NEW_TOKENS", "16")
    monkeypatch.setenv("MAX_INPUT_CHARS", "10")
    assert chat_contract.parse_chat_request(OK).max_tokens == 16
    with pytest.raises(chat_contract.ChatError, match="hold 11 characters of text; the limit is 10"):
        chat_contract.parse_chat_request(body(messages=[{"role": "user", "content": "x" * 11}]))


def test_what_is_forwarded() -> None:
    """to_json(): only parsed fields, normalized, in OpenAI's shape; it parses back to the same request."""
    data = body(
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            USER,
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
        ],
        tools=[WEATHER],
        tool_choice="auto",
        temperature=0.5,
        stop="###",
        max_tokens=9,
        stream=True,
        stream_options={"include_usage": True},
        chat_template_kwargs={"enable_thinking": False},
    )
    request = parse(data)
    forwarded = request.to_json()
    assert forwarded["messages"][0] == {"role": "system", "content": "a\nb"}
    assert forwarded["messages"][2]["tool_calls"] == [CALL] and forwarded["messages"][2]["content"] is None
    assert forwarded["tools"] == [WEATHER] and forwarded["stop"] == ["###"] and forwarded["max_tokens"] == 9
    assert forwarded["stream_options"] == {"include_usage": True}
    assert set(forwarded) <= set(chat_contract.REQUEST_KEYS)
    assert parse(forwarded) == request
    # chat templates get the arguments as an object
    assert request.template_messages()[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert parse(body(tools=[WEATHER], tool_choice="none")).template_tools() is None


def test_named_tool_choice_and_structured_output_with_constrained_decoding() -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    request = parse(body(tools=[WEATHER], tool_choice=named), constrained_decoding=True)
    assert (request.tool_choice, request.tool_name) == ("required", "get_weather")
    assert request.to_json()["tool_choice"] == named
    schema = {"name": "answer", "schema": {"type": "object"}}
    request = parse(body(response_format={"type": "json_schema", "json_schema": schema}), constrained_decoding=True)
    assert request.response_format == "json_schema" and request.to_json()["response_format"]["json_schema"] == schema


def test_the_sdk_reads_what_we_build() -> None:
    """completion_body and chunk validate as the openai package's own ChatCompletion / ChatCompletionChunk."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    call = chat_contract.ToolCall(id="chatcmpl-tool-1", name="get_weather", arguments='{"city": "Paris"}')
    done = ChatCompletion.model_validate(chat_contract.completion_body("m", None, [call], "tool_calls", 3, 4))
    assert done.choices[0].message.tool_calls[0].function.arguments == '{"city": "Paris"}'
    assert done.usage.total_tokens == 7 and done.object == "chat.completion"
    piece = ChatCompletionChunk.model_validate(chat_contract.chunk("id", 1, "m", {"content": "x"}, include_usage=True))
    assert piece.choices[0].delta.content == "x" and piece.usage is None
    last = ChatCompletionChunk.model_validate(
        chat_contract.chunk("id", 1, "m", None, usage_counts=chat_contract.usage(1, 2))
    )
    assert last.choices == [] and last.usage.completion_tokens == 2


# ---- hermes tool calls: vLLM's Hermes2ProToolParser.extract_tool_calls semantics ---------------------------


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ("no tools here", "no tools here", []),
        ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', None, [("f", '{"a": 1}')]),
        (
            'Let me check. <tool_call>{"name": "f", "arguments": {"city": "Zürich"}}</tool_call>',
            "Let me check. ",
            [("f", '{"city": "Zürich"}')],
        ),
        (
            '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "arguments": {"x": [1]}}',
            None,
            [("f", "{}"), ("g", '{"x": [1]}')],
        ),  # the last one unclosed: read to the end
        ('<tool_call>{"name": "f", "arguments": {"a": 1}</tool_call>', None, "fallback"),  # broken JSON
        ('<tool_call>{"name": "f"}</tool_call>', None, "fallback"),  # no arguments
        ('<tool_call>{"name": 5, "arguments": {}}</tool_call>', None, "fallback"),
    ],
)
def test_parse_tool_calls(text: str, content: str | None, calls: Any) -> None:
    got_content, got_calls = chat_contract.parse_tool_calls(text)
    if calls == "fallback":  # any call that does not parse: no calls, the whole text is the content
        assert (got_content, got_calls) == (text, [])
        return
    assert got_content == content
    assert [(c.name, c.arguments) for c in got_calls] == calls
    assert all(c.id.startswith("chatcmpl-tool-") for c in got_calls) and len({c.id for c in got_calls}) == len(calls)
    assert all(isinstance(json.loads(c.arguments), dict) for c in got_calls)


def test_completion_from_text_stops_and_reads_tool_calls() -> None:
    plain = parse(body(stop=["\n\n"]))
    reply = chat_contract.completion_from_text(plain, "m", "one\n\ntwo", "length", 2, 3)
    assert reply["choices"][0]["message"]["content"] == "one" and reply["choices"][0]["finish_reason"] == "stop"
    assert reply["model"] == "tiny"  # the request's model, echoed
    text = 'ok <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    # without tools offered the text is content; with them, a tool call
    assert chat_contract.completion_from_text(plain, "m", text, "length")["choices"][0]["message"]["content"] == text
    with_tools = chat_contract.completion_from_text(parse(body(tools=[WEATHER])), "m", text, "length")
    choice = with_tools["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "ok "
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


# ---- the stream assembler ----------------------------------------------------------------------------------


def events(raw: list[bytes]) -> list[Any]:
    text = b"".join(raw).decode()
    assert text.endswith("data: [DONE]\n\n")
    return [json.loads(e[len("data: ") :]) for e in text.split("\n\n") if e and e != "data: [DONE]"]


def run_stream(request: chat_contract.ChatRequest, pieces: list[str], finish: str = "length") -> list[Any]:
    stream = chat_contract.ChatStream(request, "m")
    out = stream.start()
    for piece in pieces:
        out += stream.feed(piece)
        if stream.stopped:
            break
    return events(out + stream.finish(finish, 4, len(pieces)))


def content_of(chunks: list[Any]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_stream_sends_text_then_finish_then_usage() -> None:
    chunks = run_stream(parse(body(stream=True, stream_options={"include_usage": True})), ["Hel", "lo", "!"])
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content_of(chunks) == "Hello!"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 3,
        "total_tokens": 7,
    }
    assert all(c["usage"] is None for c in chunks[:-1]) and len({c["id"] for c in chunks}) == 1
    plain = run_stream(parse(body(stream=True)), ["a"])
    assert all("usage" not in c for c in plain)  # not asked: no usage field, no usage chunk


def test_stream_holds_back_a_stop_sequence_split_across_pieces() -> None:
    chunks = run_stream(parse(body(stream=True, stop=["END"])), ["one E", "N", "D two"])
    assert content_of(chunks) == "one " and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # a held-back prefix that turns out not to be the stop sequence is sent
    assert content_of(run_stream(parse(body(stream=True, stop=["END"])), ["one E", "x"])) == "one Ex"


def test_stream_turns_a_tool_call_into_tool_call_deltas() -> None:
    request = parse(body(stream=True, tools=[WEATHER]))
    text = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]
    chunks = run_stream(request, pieces)
    assert content_of(chunks) == "Checking. "  # nothing of the tag leaks as content
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert len(calls) == 1 and calls[0][0]["index"] == 0 and calls[0][0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0][0]["function"]["arguments"]) == {"city": "Paris"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    broken = run_stream(request, ["<tool_call>{not json"])  # not a tool call after all: content
    assert content_of(broken) == "<tool_call>{not json" and broken[-1]["choices"][0]["finish_reason"] == "length"


def test_stream_error_event_is_what_the_sdk_raises_on() -> None:
    stream = chat_contract.ChatStream(parse(body(stream=True)), "m")
    error = json.loads(stream.error("the model failed")[0][len("data: ") :])
    assert error == {"error": {"message": "the model failed", "type": "server_error", "param": None, "code": None}}


def test_the_module_ships_alone() -> None:
    """stdlib + request_contract only, Python 3.10 syntax: it ships beside request_contract.py."""
    tree = ast.parse((ROOT / "chat_contract.py").read_text(), feature_version=(3, 10))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported - set(sys.stdlib_module_names) == {"request_contract"}


@pytest.mark.parametrize("temperature", [0, 1e-300, 0.005, 0.01, 0.7, 2])
def test_chat_accepts_no_sampling_temperature_the_generation_contract_refuses(temperature):
    """The class of issue 17 item 15 across both contracts: a chat temperature is greedy (0) or within the generation
    contract's bounds, so no front door forwards one the engines fail on."""
    low = request_contract.PARAMETERS["temperature"].low
    try:
        parsed = chat_contract.parse_chat_request(
            {"messages": [{"role": "user", "content": "a"}], "temperature": temperature}
        )
    except chat_contract.ChatError:
        assert 0 < temperature < low
        return
    assert parsed.temperature == 0 or low <= parsed.temperature <= 2


def test_fields_common_clients_always_send_are_ignored_with_a_log_line(caplog) -> None:
    """As vLLM ignores a field it does not know (OpenAIBaseModel.__log_extra_fields__), unless ignoring it would
    change the answer: the openai SDK's user, LiteLLM's sagemaker_base_url, and the neutral defaults of logprobs,
    penalties and logit_bias pass; the same keys asking for something are refused naming the key."""
    import logging

    asked = {
        "messages": [{"role": "user", "content": "Hi"}],
        "user": "u-1",
        "sagemaker_base_url": "http://127.0.0.1:1/endpoints/e/invocations",
        "metadata": {"k": "v"},
        "store": False,
        "logprobs": False,
        "top_logprobs": 0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0,
        "logit_bias": {},
        "parallel_tool_calls": True,
    }
    with caplog.at_level(logging.INFO, logger="chat_contract"):
        request = chat_contract.parse_chat_request(asked)
    assert request.messages[0].content == "Hi"
    assert "present in the request but ignored" in caplog.text and "sagemaker_base_url" in caplog.text
    for key, value in (
        ("logprobs", True),
        ("top_logprobs", 2),
        ("frequency_penalty", 0.5),
        ("presence_penalty", -1),
        ("logit_bias", {"50256": -100}),
        ("parallel_tool_calls", False),
    ):
        with pytest.raises(chat_contract.ChatError) as err:
            chat_contract.parse_chat_request({"messages": [{"role": "user", "content": "Hi"}], key: value})
        assert err.value.param == key and "ignoring it would change the answer" in err.value.message, key
    with pytest.raises(chat_contract.ChatError, match=r"unknown request key \['temperatures'\]"):
        chat_contract.parse_chat_request({"messages": [{"role": "user", "content": "Hi"}], "temperatures": 1})
