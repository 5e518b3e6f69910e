"""Bad chat requests and the answer every entry point gives them: one table, written out by hand (not derived from
chat_contract), run against chat_contract itself, the local server's OpenAI route and /invocations
(tests/local_runtime/test_serve_chat.py), byoc_server (tests/systems/test_byoc_server_chat.py), and the Lambda
front doors once they speak chat.

Each case: (id, body, status, error type, param, message fragment). The body is a dict (sent as JSON) or bytes
(sent as they are). `param` None means OpenAI's param is null (the body is not a request at all). The endpoint's
limits are request_contract's defaults (MAX_NEW_TOKENS 512, MAX_INPUT_CHARS 16384) and its engine does no
constrained decoding (hf-fastload, byoc_server).
"""

from __future__ import annotations

from typing import Any, NamedTuple

USER = {"role": "user", "content": "Hello"}
OK: dict[str, Any] = {"model": "tiny", "messages": [USER]}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def body(**fields: Any) -> dict[str, Any]:
    """OK with `fields` set (None removes a field)."""
    out = {**OK, **fields}
    return {k: v for k, v in out.items() if v is not None}


def messages(*items: Any) -> dict[str, Any]:
    return body(messages=list(items))


class ChatCase(NamedTuple):
    id: str
    body: dict[str, Any] | list | bytes
    status: int
    type: str
    param: str | None
    fragment: str

    @property
    def decodes(self) -> bool:
        """Whether the body is a JSON object with "messages" (entry points that also take the generation contract
        know it is a chat request only then; before that, a refusal is in their generation-contract shape)."""
        return isinstance(self.body, dict) and "messages" in self.body


BAD = "invalid_request_error"
CASES: list[ChatCase] = [
    # not a request at all
    ChatCase("body-empty", b"", 400, BAD, None, "empty"),
    ChatCase("body-not-json", b"{not json", 400, BAD, None, "not valid JSON"),
    ChatCase("body-duplicate-key", b'{"messages": [], "messages": []}', 400, BAD, None, "duplicate key 'messages'"),
    ChatCase(
        "body-nan",
        b'{"messages": [{"role": "user", "content": "a"}], "temperature": NaN}',
        400,
        BAD,
        None,
        "NaN is not allowed",
    ),
    ChatCase(
        "body-lone-surrogate",
        b'{"messages": [{"role": "user", "content": "a\\ud800"}]}',
        400,
        BAD,
        None,
        "lone UTF-16 surrogate",
    ),
    ChatCase("body-array", [USER], 400, BAD, None, 'must be a JSON object with "messages"'),
    # the request's keys
    ChatCase("unknown-key", body(best_of=2), 400, BAD, "best_of", "unknown request key"),
    # a key clients send, at a value that would change the answer were it ignored (at its neutral value: ignored)
    ChatCase(
        "penalty-not-served", body(frequency_penalty=0.5), 400, BAD, "frequency_penalty", "would change the answer"
    ),
    ChatCase(
        "generation-contract-key",
        body(parameters={"max_new_tokens": 5}),
        400,
        BAD,
        "parameters",
        "allowed: ['chat_template_kwargs'",
    ),
    ChatCase("model-number", body(model=5), 400, BAD, "model", "must be a string"),
    # messages
    ChatCase("messages-missing", {"model": "tiny"}, 400, BAD, "messages", "must be a non-empty list"),
    ChatCase("messages-null", {"model": "tiny", "messages": None}, 400, BAD, "messages", "must be a non-empty list"),
    ChatCase("messages-empty", body(messages=[]), 400, BAD, "messages", "must be a non-empty list"),
    ChatCase("messages-string", body(messages="Hello"), 400, BAD, "messages", "must be a non-empty list"),
    ChatCase("message-string", messages("Hello"), 400, BAD, "messages[0]", "must be an object"),
    ChatCase(
        "role-unknown",
        messages({"role": "robot", "content": "x"}),
        400,
        BAD,
        "messages[0].role",
        "must be one of ['system', 'developer', 'user', 'assistant', 'tool']",
    ),
    ChatCase(
        "role-function-deprecated",
        messages({"role": "function", "name": "f", "content": "x"}),
        400,
        BAD,
        "messages[0].role",
        'got "function"',
    ),
    ChatCase("content-missing", messages({"role": "user"}), 400, BAD, "messages[0].content", "is required"),
    ChatCase(
        "content-number",
        messages({"role": "user", "content": 5}),
        400,
        BAD,
        "messages[0].content",
        "must be a string, a list of text parts",
    ),
    ChatCase(
        "content-image-part",
        messages(
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}
        ),
        400,
        BAD,
        "messages[0].content[0].type",
        'content part type "image_url" is not supported; allowed: "text"',
    ),
    ChatCase(
        "content-parts-empty",
        messages({"role": "user", "content": []}),
        400,
        BAD,
        "messages[0].content",
        "must not be an empty list",
    ),
    ChatCase(
        "message-unknown-key",
        messages({"role": "user", "content": "x", "weight": 1}),
        400,
        BAD,
        "messages[0].weight",
        "unknown key ['weight']",
    ),
    ChatCase(
        "assistant-empty",
        messages(USER, {"role": "assistant"}),
        400,
        BAD,
        "messages[1].content",
        "is required unless the message has tool_calls",
    ),
    ChatCase(
        "tool-call-arguments-not-json",
        messages(
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**CALL, "function": {"name": "get_weather", "arguments": "city=Paris"}}],
            },
        ),
        400,
        BAD,
        "messages[1].tool_calls[0].function.arguments",
        "must be a JSON object as text",
    ),
    ChatCase(
        "tool-message-without-id",
        messages(
            USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}, {"role": "tool", "content": "sunny"}
        ),
        400,
        BAD,
        "messages[2].tool_call_id",
        "must be a string",
    ),
    ChatCase(
        "tool-message-unknown-id",
        messages(
            USER,
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "sunny", "tool_call_id": "call_9"},
        ),
        400,
        BAD,
        "messages[2].tool_call_id",
        "answers no tool call of an earlier assistant message",
    ),
    # tools and tool_choice
    ChatCase("tools-object", body(tools=WEATHER), 400, BAD, "tools", "must be a list of function tools"),
    ChatCase(
        "tool-type-custom",
        body(tools=[{"type": "custom", "custom": {"name": "x"}}]),
        400,
        BAD,
        "tools[0].type",
        'tool type "custom" is not supported',
    ),
    ChatCase(
        "tool-name-with-space",
        body(tools=[{"type": "function", "function": {"name": "get weather"}}]),
        400,
        BAD,
        "tools[0].function.name",
        "must be 1 to 64 of a-z, A-Z, 0-9, _ and -",
    ),
    ChatCase("tool-name-twice", body(tools=[WEATHER, WEATHER]), 400, BAD, "tools[1].function.name", "defined twice"),
    ChatCase(
        "tool-parameters-string",
        body(tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
        400,
        BAD,
        "tools[0].function.parameters",
        "must be a JSON Schema object",
    ),
    ChatCase(
        "tool-choice-unknown",
        body(tools=[WEATHER], tool_choice="always"),
        400,
        BAD,
        "tool_choice",
        "must be one of ['none', 'auto', 'required']",
    ),
    ChatCase(
        "tool-choice-names-unknown-function",
        body(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_time"}}),
        400,
        BAD,
        "tool_choice.function.name",
        '"get_time" is not a function in tools',
    ),
    ChatCase(
        "tool-choice-required-without-tools", body(tool_choice="required"), 400, BAD, "tool_choice", "needs tools"
    ),
    ChatCase(
        "tool-choice-required-unconstrained",
        body(tools=[WEATHER], tool_choice="required"),
        400,
        BAD,
        "tool_choice",
        "needs constrained decoding",
    ),
    # streaming
    ChatCase("stream-string", body(stream="yes"), 400, BAD, "stream", "must be true or false"),
    ChatCase(
        "stream-options-without-stream",
        body(stream_options={"include_usage": True}),
        400,
        BAD,
        "stream_options",
        "may only be set when stream is true",
    ),
    ChatCase(
        "stream-options-unknown-key",
        body(stream=True, stream_options={"include_obfuscation": False}),
        400,
        BAD,
        "stream_options.include_obfuscation",
        "unknown key",
    ),
    # sampling and length
    ChatCase("max-tokens-0", body(max_tokens=0), 400, BAD, "max_tokens", "must be between 1 and 512, got 0"),
    ChatCase("max-tokens-above-limit", body(max_tokens=513), 400, BAD, "max_tokens", "must be between 1 and 512"),
    ChatCase("max-tokens-string", body(max_tokens="64"), 400, BAD, "max_tokens", "must be an integer"),
    ChatCase(
        "max-completion-tokens-float",
        body(max_completion_tokens=5.5),
        400,
        BAD,
        "max_completion_tokens",
        "must be an integer",
    ),
    ChatCase("temperature-above-2", body(temperature=2.5), 400, BAD, "temperature", "must be between 0 and 2"),
    # sampling at a temperature below the generation contract's floor divides the logits into infinities (issue 17
    # item 15 on the chat route): 0 (greedy) or at least 0.01
    ChatCase(
        "temperature-tiny",
        body(temperature=1e-300),
        400,
        BAD,
        "temperature",
        "must be 0 (greedy) or between 0.01 and 2",
    ),
    ChatCase("temperature-string", body(temperature="hot"), 400, BAD, "temperature", "must be a number"),
    ChatCase("top-p-0", body(top_p=0), 400, BAD, "top_p", "must be greater than 0 and at most 1"),
    ChatCase("n-2", body(n=2), 400, BAD, "n", "only 1 choice per request"),
    ChatCase("stop-5-sequences", body(stop=["a", "b", "c", "d", "e"]), 400, BAD, "stop", "at most 4 sequences"),
    ChatCase("stop-number", body(stop=5), 400, BAD, "stop", "must be a string or a list"),
    ChatCase("stop-empty-string", body(stop=""), 400, BAD, "stop", "must not be empty"),
    ChatCase("seed-negative", body(seed=-1), 400, BAD, "seed", "must be between 0 and 4294967295"),
    ChatCase("seed-2^32", body(seed=2**32), 400, BAD, "seed", "must be between 0 and 4294967295"),
    ChatCase(
        "response-format-json-unconstrained",
        body(response_format={"type": "json_object"}),
        400,
        BAD,
        "response_format",
        "needs constrained decoding",
    ),
    ChatCase(
        "response-format-xml",
        body(response_format={"type": "xml"}),
        400,
        BAD,
        "response_format.type",
        "must be one of ['text', 'json_object', 'json_schema']",
    ),
    ChatCase(
        "template-kwargs-list",
        body(chat_template_kwargs=["enable_thinking"]),
        400,
        BAD,
        "chat_template_kwargs",
        "must be an object",
    ),
    ChatCase(
        "template-kwargs-replaces-template",
        body(chat_template_kwargs={"chat_template": "{{ 'x' }}"}),
        400,
        BAD,
        "chat_template_kwargs.chat_template",
        "cannot be set",
    ),
    ChatCase(
        "template-kwargs-nested",
        body(chat_template_kwargs={"options": {"a": 1}}),
        400,
        BAD,
        "chat_template_kwargs.options",
        "must be a string, number, true, false or null",
    ),
    ChatCase(
        "text-above-limit",
        messages({"role": "user", "content": "x" * 16385}),
        400,
        BAD,
        "messages",
        "16385 characters of text; the limit is 16384",
    ),
]

# Requests every chat entry point accepts (with the same limits and no constrained decoding).
GOOD: list[tuple[str, dict[str, Any]]] = [
    ("plain", OK),
    ("no-model", {"messages": [USER]}),
    (
        "system-and-parts",
        messages(
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
        ),
    ),
    ("developer-is-system", messages({"role": "developer", "content": "Be brief."}, USER)),
    (
        "tool-round-trip",
        body(
            tools=[WEATHER],
            messages=[
                USER,
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
            ],
        ),
    ),
    ("tool-choice-none-and-auto", body(tools=[WEATHER], tool_choice="none")),
    (
        "every-knob",
        body(
            max_tokens=8,
            max_completion_tokens=9,
            temperature=0,
            top_p=1,
            stop=["\n\n"],
            seed=7,
            n=1,
            stream=True,
            stream_options={"include_usage": True},
            response_format={"type": "text"},
            chat_template_kwargs={"enable_thinking": False},
        ),
    ),
    ("nulls-are-defaults", {**OK, "tools": None, "tool_choice": None, "temperature": None, "stop": None, "n": None}),
    ("text-at-limit", messages({"role": "user", "content": "x" * 16384})),
]
