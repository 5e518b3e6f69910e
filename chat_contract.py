"""The OpenAI Chat Completions contract: what a chat request may carry, its errors and its replies, in one place.

Shipped beside request_contract.py wherever that ships (the artifact's code/, our images, the Lambda assets), so:
stdlib only, no imports of ours but request_contract (strict JSON, limits), Python 3.10 syntax.

A body with "messages" is a chat request. parse_chat_request() parses it into a ChatRequest, defaults applied,
holding exactly what may be forwarded (ChatRequest.to_json()), or raises ChatError, whose error_body() is OpenAI's
error object {"error": {"message", "type", "param", "code"}}. Shapes and field names are the `openai` package's
own types (openai 3.57.0: openai/types/chat/completion_create_params.py, chat_completion.py,
chat_completion_chunk.py, chat_completion_*_message_param.py; openai/types/shared/error_object.py).

Replies: completion_body() (a chat.completion), ChatStream (chat.completion.chunk objects as server-sent events,
usage in a last chunk when asked, then `data: [DONE]`). Tool calls in generated text are read in the hermes
format, <tool_call>{"name": ..., "arguments": {...}}</tool_call>, as vLLM's hermes parser reads it
(parse_tool_calls).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import request_contract

# ---- errors -----------------------------------------------------------------------------------------------


class ChatError(ValueError):
    """A refused chat request (a ValueError, so toolkits that answer ValueError with 400 keep doing so).

    status: 400 for everything the request says (OpenAI answers invalid_request_error with 400); 413 for a body
    over the transport's limit; the other statuses are the servers' (auth, unknown endpoint, overload)."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code


def error_body(err: Any) -> dict[str, dict[str, Any]]:
    """OpenAI's error object (openai/types/shared/error_object.py: message, type, param, code) for a ChatError,
    or for anything with those attributes."""
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def error_type_for(status: int) -> str:
    """OpenAI's error type for an HTTP status: the request's fault (4xx), rate limits (429), the server's (5xx)."""
    if status == 429:
        return "rate_limit_error"
    if status == 503:
        return "service_unavailable"
    return "server_error" if status >= 500 else "invalid_request_error"


def from_error(status: int, message: str, code: str | None = None, param: str | None = None) -> ChatError:
    """A front door's own refusal or failure (the generation contract's {"error", "error_type"}) as a ChatError:
    its message, its kind as OpenAI's code, the type its status calls for."""
    return ChatError(message, status=status, type=error_type_for(status), param=param, code=code)


# What the front doors (the invoke and stream functions) know about the endpoint's chat, from their environment,
# which the stack sets from the serving system (ServingSystem.chat) and the endpoint's `chat:` block:
#   CHAT_ROUTE                 native | handler; unset or empty: the endpoint serves no chat (requests refused)
#   CHAT_TOOL_CALLS            true: tool calls are read from the model's output (else tools are refused)
#   CHAT_CONSTRAINED_DECODING  true: the engine can force JSON or a tool call
#   CHAT_ENGINE_KEYS           true: the engine's OpenAI server takes ENGINE_REQUEST_KEYS (vLLM, SGLang)
#   CHAT_ENGINE_LIMITS         true: the engine bounds max_tokens and the prompt by its own context length, so no
#                              max_tokens is added to a request without one (the engine's default applies)
CHAT_ENV = ("CHAT_ROUTE", "CHAT_TOOL_CALLS", "CHAT_CONSTRAINED_DECODING", "CHAT_ENGINE_KEYS", "CHAT_ENGINE_LIMITS")


@dataclass(frozen=True)
class ChatFeatures:
    route: str | None = None
    tool_calls: bool = False
    constrained_decoding: bool = False
    engine_keys: bool = False
    engine_limits: bool = False

    def environment(self) -> dict[str, str]:
        """The variables that give these features to a front door (empty when the endpoint serves no chat)."""
        if self.route is None:
            return {}
        return {
            "CHAT_ROUTE": self.route,
            "CHAT_TOOL_CALLS": str(self.tool_calls).lower(),
            "CHAT_CONSTRAINED_DECODING": str(self.constrained_decoding).lower(),
            **({"CHAT_ENGINE_KEYS": "true"} if self.engine_keys else {}),
            **({"CHAT_ENGINE_LIMITS": "true"} if self.engine_limits else {}),
        }


def features(environ: Any = None) -> ChatFeatures:
    """The endpoint's chat features from the environment (CHAT_ENV); request_contract.SetupError for a malformed
    value (the function's own configuration: a 500, never the caller's fault)."""
    import os

    env = os.environ if environ is None else environ
    route = (env.get("CHAT_ROUTE") or "").strip() or None
    if route not in (None, "native", "handler"):
        raise request_contract.SetupError(f"environment variable CHAT_ROUTE must be native or handler, got {route!r}")
    flags = []
    for name in ("CHAT_TOOL_CALLS", "CHAT_CONSTRAINED_DECODING", "CHAT_ENGINE_KEYS", "CHAT_ENGINE_LIMITS"):
        value = (env.get(name) or "false").strip().lower()
        if value not in ("true", "false"):
            raise request_contract.SetupError(f"environment variable {name} must be true or false, got {value!r}")
        flags.append(value == "true")
    return ChatFeatures(route, *flags)


def parse_for_endpoint(data: Any, feats: ChatFeatures, lim: request_contract.Limits | None = None) -> ChatRequest:
    """parse_chat_request with the endpoint's features; a chat request to an endpoint that serves none is refused."""
    if feats.route is None:
        raise ChatError(
            "this endpoint serves no chat requests (its config has no chat: block); send a generation "
            'request {"inputs": ...}',
            param="messages",
            code="chat_not_enabled",
        )
    return parse_chat_request(
        data,
        lim,
        constrained_decoding=feats.constrained_decoding,
        tool_calls=feats.tool_calls,
        engine_keys=feats.engine_keys,
        engine_limits=feats.engine_limits,
    )


def _refuse(param: str, message: str, code: str | None = None) -> ChatError:
    return ChatError(f"{param}: {message}", param=param, code=code)


# ---- the request ------------------------------------------------------------------------------------------

# Top-level keys a request may carry (what the endpoints behind this contract honour); anything else is refused,
# naming these. "n" takes 1 only (one choice per request). "model" is forwarded as given: our own handlers and
# LMI accept any name and echo it, SGLang 0.5.20 too (srt/entrypoints/openai/serving_chat.py does not check it),
# but vLLM 0.30.0 answers 404 "The model `X` does not exist." unless it is empty or one of its served names
# (entrypoints/serve/engine/serving.py _is_model_supported): the vllm system serves the SageMaker endpoint's name
# (what callers of SageMaker's OpenAI route send) and the config's name (deployment/plan.py served_model_names).
REQUEST_KEYS = (
    "messages",
    "model",
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "n",
    "response_format",
    "chat_template_kwargs",
)
# Keys only the engines' own OpenAI servers take (ChatFeatures.engine_keys): vLLM 0.30.0 entrypoints/openai/
# chat_completion/protocol.py ChatCompletionRequest and SGLang 0.5.20 srt/entrypoints/openai/protocol.py both have
# reasoning_effort (the strings below), parallel_tool_calls, frequency_penalty, presence_penalty and user (ignored).
ENGINE_REQUEST_KEYS = ("reasoning_effort", "parallel_tool_calls", "frequency_penalty", "presence_penalty", "user")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Keys common clients always send that change nothing in the answer: accepted and ignored, said in a log line, as
# vLLM 0.30.0 ignores a field it does not know (entrypoints/serve/engine/protocol.py OpenAIBaseModel.
# __log_extra_fields__: "The following fields were present in the request but ignored"). user: OpenAI's end-user
# identifier, metadata and store: OpenAI's stored-completion fields (none shapes the answer); sagemaker_base_url:
# LiteLLM 1.110.2 copies its transport setting into the body (shared/reviews/real-clients.md, finding 9).
IGNORED_KEYS = ("user", "metadata", "store", *request_contract.IGNORED_KEYS)
# Keys taken only at the value that changes nothing (the openai SDK and LangChain send these defaults); any other
# value is refused naming the key, since ignoring it would change the answer the client expects.
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "frequency_penalty": (None, 0),
    "presence_penalty": (None, 0),
    "logit_bias": (None, {}),
    "parallel_tool_calls": (None, True),
}
_log = logging.getLogger(__name__)
ROLES = ("system", "developer", "user", "assistant", "tool")  # "developer" is read as "system" (its successor)
# An assistant message as the openai SDK sends back the one it received (messages.append(reply.choices[0].message):
# openai 3.57 serializes the model's fields that were set, openai/_utils/_transform.py), so with what the engine put
# in it: refusal, annotations, audio, function_call (openai/types/chat/chat_completion_message.py) and vLLM's
# `reasoning` or SGLang's `reasoning_content`. They are read and not forwarded: the template renders the content
# and tool calls of earlier turns (a reasoning model's template drops earlier reasoning).
ASSISTANT_ECHO_KEYS = ("refusal", "annotations", "audio", "function_call", "reasoning", "reasoning_content")
MESSAGE_KEYS = {
    "system": ("role", "content", "name"),
    "developer": ("role", "content", "name"),
    "user": ("role", "content", "name"),
    "assistant": ("role", "content", "name", "tool_calls", *ASSISTANT_ECHO_KEYS),
    "tool": ("role", "content", "tool_call_id"),
}
TOOL_CHOICES = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
MAX_STOP = 4  # "Up to 4 sequences" (completion_create_params.py, stop)
MAX_TEMPERATURE = 2.0  # "between 0 and 2" (completion_create_params.py, temperature)
# Function and schema names: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64"
# (shared_params/function_definition.py, response_format_json_schema.py).
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The named parameters of tokenizer.apply_chat_template (transformers 4.49 and 5.23): a chat_template_kwargs key
# with one of these names would replace the handler's own argument (or the template itself), so it is refused.
# vLLM guards the same kwargs for the same reason.
RESERVED_TEMPLATE_KWARGS = (
    "conversation",
    "messages",
    "tools",
    "documents",
    "chat_template",
    "add_generation_prompt",
    "continue_final_message",
    "tokenize",
    "sanitize_control_tokens",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class ToolCall:
    """A function call: arguments is JSON text (an object), as OpenAI sends and expects it."""

    id: str
    name: str
    arguments: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Message:
    """One message; content is the text (text parts joined with newlines, as vLLM joins them), None for an
    assistant message that only calls tools."""

    role: str
    content: str | None
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [call.to_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    def for_template(self) -> dict[str, Any]:
        """The message as chat templates read it: tool-call arguments as an object (templates render them with
        `tojson`; vLLM parses them the same way before applying a template)."""
        out = self.to_json()
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.loads(c.arguments)}}
                for c in self.tool_calls
            ]
        return out


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: dict[str, Any]
    description: str | None = None
    strict: bool | None = None

    def to_json(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description is not None:
            function["description"] = self.description
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ChatRequest:
    """A parsed chat request, defaults applied.

    tool_choice: "none", "auto" or "required", and tool_name when one function is forced; default "auto" with
    tools, "none" without (completion_create_params.py, tool_choice).
    max_tokens: what the request asked (max_completion_tokens wins over the deprecated max_tokens when both are
    given), else the endpoint's limit; max_tokens_given says which. A handler that was not asked may stop earlier
    at its context length instead of refusing.
    temperature, top_p, seed: None when not given (the engine's default, e.g. the model's generation config).
    """

    messages: tuple[Message, ...]
    max_tokens: int | None  # None: not asked, and the engine bounds it (engine_limits)
    max_tokens_given: bool = False
    model: str | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: str = "none"
    tool_name: str | None = None
    stream: bool = False
    include_usage: bool = False
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    response_format: str = "text"
    json_schema: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    engine_fields: dict[str, Any] = field(default_factory=dict)  # ENGINE_REQUEST_KEYS given, forwarded as given

    @property
    def tools_active(self) -> bool:
        """Whether the model is shown the tools and its output read for tool calls."""
        return bool(self.tools) and self.tool_choice != "none"

    def template_messages(self) -> list[dict[str, Any]]:
        return [m.for_template() for m in self.messages]

    def template_tools(self) -> list[dict[str, Any]] | None:
        """The tools to render into the prompt (None when tool_choice is "none", as vLLM leaves them out)."""
        return [t.to_json() for t in self.tools] if self.tools_active else None

    def to_json(self) -> dict[str, Any]:
        """The request as forwarded to an engine that speaks Chat Completions: only what was parsed, normalized
        (developer -> system, text parts joined, the max_tokens in effect)."""
        out: dict[str, Any] = {"messages": [m.to_json() for m in self.messages]}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.model is not None:
            out["model"] = self.model
        if self.tools:
            out["tools"] = [t.to_json() for t in self.tools]
            out["tool_choice"] = (
                {"type": "function", "function": {"name": self.tool_name}} if self.tool_name else self.tool_choice
            )
        if self.stream:
            out["stream"] = True
            if self.include_usage:
                out["stream_options"] = {"include_usage": True}
        for key in ("temperature", "top_p", "seed"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.stop:
            out["stop"] = list(self.stop)
        if self.response_format != "text":
            out["response_format"] = {"type": self.response_format}
            if self.json_schema is not None:
                out["response_format"]["json_schema"] = self.json_schema
        if self.chat_template_kwargs:
            out["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        out.update(self.engine_fields)
        return out


def is_chat_request(data: Any) -> bool:
    """A decoded body is a chat request when it is an object with "messages" (the generation contract's bodies
    carry "inputs")."""
    return isinstance(data, dict) and "messages" in data


def decode_chat_body(body: bytes | bytearray | str) -> Any:
    """The request body as a JSON value with request_contract's strict decoding (no NaN, bounded numbers and
    nesting, no lone surrogates, no duplicate keys); ChatError (400) naming what is wrong."""
    if not (body.strip() if isinstance(body, str) else bytes(body).strip()):
        raise ChatError('request body is empty; send a JSON object with "messages"')
    try:
        return request_contract.decode_body(body)
    except request_contract.RequestError as err:
        raise ChatError(err.message) from None


_show = request_contract._show  # one wording of a shown value for both contracts


def _type(value: Any) -> str:
    return request_contract.json_type(value)


def _check_keys(where: str, obj: dict[str, Any], known: tuple[str, ...] | list[str]) -> None:
    unknown = sorted(k for k in obj if k not in known)
    if unknown:
        raise _refuse(
            f"{where}.{unknown[0]}" if where else unknown[0],
            f"unknown key{'s' if len(unknown) > 1 else ''} {unknown}; allowed: {sorted(known)}",
        )


def _string(where: str, value: Any, empty_ok: bool = True) -> str:
    if not isinstance(value, str):
        raise _refuse(where, f"must be a string, got {_show(value)} ({_type(value)})")
    if not empty_ok and not value.strip():
        raise _refuse(where, "must be a non-empty string")
    return value


def _number(where: str, value: Any, low: float, high: float, low_open: bool = False) -> float:
    bounds = f"greater than {low:g} and at most {high:g}" if low_open else f"between {low:g} and {high:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _refuse(where, f"must be a number {bounds}, got {_show(value)} ({_type(value)})")
    if value < low or value > high or (low_open and value == low):
        raise _refuse(where, f"must be {bounds}, got {_show(value)}")
    return float(value)


def _integer(where: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(where, f"must be an integer between {low} and {high}, got {_show(value)} ({_type(value)})")
    if not low <= value <= high:
        raise _refuse(where, f"must be between {low} and {high}, got {value}")
    return value


def _content(where: str, value: Any, role: str) -> str | None:
    """A message's content: a string, or a list of text parts (other part types are refused)."""
    if value is None and role == "assistant":
        return None
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        allowed = "a string, a list of text parts" + (" or null" if role == "assistant" else "")
        raise _refuse(where, f"must be {allowed}, got {_show(value)} ({_type(value)})")
    if not value:
        raise _refuse(where, "must not be an empty list of parts")
    texts = []
    for i, part in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(part, dict):
            raise _refuse(here, f'must be a content part object {{"type": "text", "text": ...}}, got {_type(part)}')
        kind = part.get("type")
        if kind != "text":
            raise _refuse(
                f"{here}.type",
                f'content part type {_show(kind)} is not supported; allowed: "text" '
                "(this endpoint serves a text model)",
            )
        _check_keys(here, part, ("type", "text"))
        texts.append(_string(f"{here}.text", part.get("text")))
    return "\n".join(texts)


def _tool_calls(where: str, value: Any) -> tuple[ToolCall, ...]:
    if not isinstance(value, list):
        raise _refuse(where, f"must be a list of tool calls, got {_type(value)}")
    calls = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise _refuse(here, f"must be an object, got {_type(item)}")
        _check_keys(here, item, ("id", "type", "function"))
        if item.get("type") != "function":
            raise _refuse(f"{here}.type", f'must be "function", got {_show(item.get("type"))}')
        call_id = _string(f"{here}.id", item.get("id"), empty_ok=False)
        function = item.get("function")
        if not isinstance(function, dict):
            raise _refuse(f"{here}.function", f"must be an object with name and arguments, got {_type(function)}")
        _check_keys(f"{here}.function", function, ("name", "arguments"))
        name = _string(f"{here}.function.name", function.get("name"), empty_ok=False)
        arguments = _string(f"{here}.function.arguments", function.get("arguments"))
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise _refuse(
                f"{here}.function.arguments",
                f"must be a JSON object as text, got {_show(arguments)} "
                "(chat templates render the arguments as an object)",
            )
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(calls)


def _messages(value: Any) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise _refuse("messages", f"must be a non-empty list of message objects, got {_show(value)} ({_type(value)})")
    messages: list[Message] = []
    call_ids: set[str] = set()
    for i, item in enumerate(value):
        here = f"messages[{i}]"
        if not isinstance(item, dict):
            raise _refuse(here, f"must be an object with role and content, got {_type(item)}")
        role = item.get("role")
        if role not in ROLES:
            raise _refuse(f"{here}.role", f"must be one of {list(ROLES)}, got {_show(role)}")
        _check_keys(here, item, MESSAGE_KEYS[role])
        name = _string(f"{here}.name", item["name"]) if "name" in item else None
        if role == "assistant":
            calls = _tool_calls(f"{here}.tool_calls", item["tool_calls"]) if item.get("tool_calls") is not None else ()
            if "content" not in item and not calls:
                raise _refuse(f"{here}.content", "is required unless the message has tool_calls")
            content = _content(f"{here}.content", item.get("content"), role)
            if content is None and not calls:
                raise _refuse(f"{here}.content", "must not be null unless the message has tool_calls")
            for key in ("refusal", "reasoning", "reasoning_content"):
                if item.get(key) is not None:
                    _string(f"{here}.{key}", item[key])
            if item.get("annotations") is not None and not isinstance(item["annotations"], list):
                raise _refuse(f"{here}.annotations", f"must be a list or null, got {_type(item['annotations'])}")
            for key, why in (
                ("function_call", "the deprecated single function call: send tool_calls"),
                ("audio", "an audio reply: this endpoint serves text"),
            ):
                if item.get(key) is not None:
                    raise _refuse(f"{here}.{key}", f"must be null ({why}), got {_type(item[key])}")
            call_ids.update(call.id for call in calls)
            messages.append(Message(role, content, name, tool_calls=calls))
            continue
        if "content" not in item:
            raise _refuse(f"{here}.content", "is required")
        content = _content(f"{here}.content", item["content"], role)
        if role == "tool":
            call_id = _string(f"{here}.tool_call_id", item.get("tool_call_id"), empty_ok=False)
            if call_id not in call_ids:
                raise _refuse(
                    f"{here}.tool_call_id",
                    f"{_show(call_id)} answers no tool call of an earlier assistant "
                    f"message; known ids: {sorted(call_ids)}",
                )
            messages.append(Message(role, content, tool_call_id=call_id))
            continue
        messages.append(Message("system" if role == "developer" else role, content, name))
    return tuple(messages)


def _tools(value: Any) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _refuse("tools", f"must be a list of function tools, got {_show(value)} ({_type(value)})")
    tools: list[Tool] = []
    for i, item in enumerate(value):
        here = f"tools[{i}]"
        if not isinstance(item, dict):
            raise _refuse(here, f"must be an object, got {_type(item)}")
        if item.get("type") != "function":
            raise _refuse(f"{here}.type", f'tool type {_show(item.get("type"))} is not supported; allowed: "function"')
        _check_keys(here, item, ("type", "function"))
        function = item.get("function")
        if not isinstance(function, dict):
            raise _refuse(f"{here}.function", f"must be an object with a name, got {_type(function)}")
        _check_keys(f"{here}.function", function, ("name", "description", "parameters", "strict"))
        name = function.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise _refuse(f"{here}.function.name", f"must be 1 to 64 of a-z, A-Z, 0-9, _ and -, got {_show(name)}")
        if any(t.name == name for t in tools):
            raise _refuse(f"{here}.function.name", f"{_show(name)} is defined twice; function names must be unique")
        description = (
            _string(f"{here}.function.description", function["description"])
            if function.get("description") is not None
            else None
        )
        # "Omitting parameters defines a function with an empty parameter list" (function_definition.py).
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise _refuse(f"{here}.function.parameters", f"must be a JSON Schema object, got {_type(parameters)}")
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise _refuse(f"{here}.function.strict", f"must be true, false or null, got {_show(strict)}")
        tools.append(Tool(name=name, parameters=parameters, description=description, strict=strict))
    return tuple(tools)


def _tool_choice(value: Any, tools: tuple[Tool, ...], constrained_decoding: bool) -> tuple[str, str | None]:
    if value is None:
        return ("auto" if tools else "none"), None
    name = None
    if isinstance(value, str):
        if value not in TOOL_CHOICES:
            raise _refuse(
                "tool_choice",
                f"must be one of {list(TOOL_CHOICES)} or "
                f'{{"type": "function", "function": {{"name": ...}}}}, got {_show(value)}',
            )
        choice = value
    elif isinstance(value, dict):
        if value.get("type") != "function":
            raise _refuse("tool_choice.type", f'{_show(value.get("type"))} is not supported; allowed: "function"')
        _check_keys("tool_choice", value, ("type", "function"))
        function = value.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _refuse("tool_choice.function", 'must be {"name": <a function in tools>}')
        _check_keys("tool_choice.function", function, ("name",))
        name = function["name"]
        if name not in [t.name for t in tools]:
            raise _refuse(
                "tool_choice.function.name",
                f"{_show(name)} is not a function in tools; allowed: {[t.name for t in tools]}",
            )
        choice = "required"
    else:
        raise _refuse("tool_choice", f"must be a string or an object, got {_show(value)} ({_type(value)})")
    if choice == "required" and not tools:
        raise _refuse("tool_choice", f"{_show(value)} needs tools; the request has none")
    if choice == "required" and not constrained_decoding:
        raise _refuse(
            "tool_choice",
            f"{_show(value)} needs constrained decoding, which this endpoint's engine does "
            'not do; allowed: "auto" or "none"',
            code="unsupported_value",
        )
    return choice, name


def _response_format(value: Any, constrained_decoding: bool) -> tuple[str, dict[str, Any] | None]:
    if value is None:
        return "text", None
    if not isinstance(value, dict):
        raise _refuse("response_format", f'must be an object such as {{"type": "text"}}, got {_show(value)}')
    kind = value.get("type")
    if kind not in RESPONSE_FORMATS:
        raise _refuse("response_format.type", f"must be one of {list(RESPONSE_FORMATS)}, got {_show(kind)}")
    _check_keys("response_format", value, ("type", "json_schema") if kind == "json_schema" else ("type",))
    if kind == "text":
        return "text", None
    if not constrained_decoding:
        raise _refuse(
            "response_format",
            f"type {_show(kind)} needs constrained decoding, which this endpoint's "
            'engine does not do; allowed: "text"',
            code="unsupported_value",
        )
    if kind == "json_object":
        return kind, None
    schema = value.get("json_schema")
    if not isinstance(schema, dict):
        raise _refuse("response_format.json_schema", f"must be an object with name and schema, got {_type(schema)}")
    _check_keys("response_format.json_schema", schema, ("name", "description", "schema", "strict"))
    if not isinstance(schema.get("name"), str) or not NAME_PATTERN.match(schema["name"]):
        raise _refuse(
            "response_format.json_schema.name",
            f"must be 1 to 64 of a-z, A-Z, 0-9, _ and -, got {_show(schema.get('name'))}",
        )
    if "schema" in schema and not isinstance(schema["schema"], dict):
        raise _refuse(
            "response_format.json_schema.schema", f"must be a JSON Schema object, got {_type(schema['schema'])}"
        )
    return kind, schema


def _template_kwargs(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _refuse("chat_template_kwargs", f"must be an object, got {_show(value)} ({_type(value)})")
    for key, item in value.items():
        where = f"chat_template_kwargs.{key}"
        if not _IDENTIFIER.match(key):
            raise _refuse(where, "names must be identifiers (letters, digits, _; at most 64)")
        if key in RESERVED_TEMPLATE_KWARGS:
            raise _refuse(
                where,
                f"{key!r} is an argument of the template call itself and cannot be set; "
                "allowed: variables the chat template reads, such as enable_thinking",
            )
        if isinstance(item, (dict, list)):
            raise _refuse(where, f"must be a string, number, true, false or null, got {_type(item)}")
    return dict(value)


def _text_size(messages: tuple[Message, ...], tools: tuple[Tool, ...]) -> int:
    size = sum(len(m.content or "") + sum(len(c.name) + len(c.arguments) for c in m.tool_calls) for m in messages)
    return size + sum(len(json.dumps(t.to_json(), ensure_ascii=False)) for t in tools)


def parse_chat_request(
    data: Any,
    lim: request_contract.Limits | None = None,
    *,
    constrained_decoding: bool = False,
    tool_calls: bool = True,
    engine_keys: bool = False,
    engine_limits: bool = False,
) -> ChatRequest:
    """Parse a decoded chat request (text-generation-inference's router/src/validation.rs style: parse into a
    typed request, refuse what does not fit). lim: the endpoint's limits (request_contract.limits(): the
    environment's MAX_NEW_TOKENS bounds max_tokens, MAX_INPUT_CHARS the text of messages and tools).
    constrained_decoding: the engine can force JSON output or a tool call (response_format json_object /
    json_schema, tool_choice "required" or a named function); without it those are refused. tool_calls: the
    endpoint reads tool calls out of the model's output; without it tools are refused unless tool_choice is "none"
    (vLLM 0.23 refuses them alike without a tool parser). engine_keys: the engine takes ENGINE_REQUEST_KEYS too.
    engine_limits: the engine bounds the request by its context length itself: a request without max_tokens is
    forwarded without one (max_tokens None), and lim bounds only what the engine could never take. Raises
    ChatError."""
    lim = lim or request_contract.limits()
    if not isinstance(data, dict):
        raise ChatError(f'request must be a JSON object with "messages", got {_type(data)}')
    _check_request_keys(data, engine_keys)
    engine_fields = _engine_fields(data) if engine_keys else {}
    messages = _messages(data.get("messages"))
    model = _string("model", data["model"]) if data.get("model") is not None else None
    tools = _tools(data.get("tools"))
    tool_choice, tool_name = _tool_choice(data.get("tool_choice"), tools, constrained_decoding)
    if tools and tool_choice != "none" and not tool_calls:
        raise _refuse(
            "tools",
            "this endpoint reads no tool calls from the model's output (its engine has no tool-call "
            'parser configured: engine.tool_call_parser); send tool_choice "none" or no tools',
            code="unsupported_value",
        )
    stream, include_usage = _stream(data)
    max_tokens, given = (None if engine_limits else lim.max_new_tokens), False
    for key in ("max_tokens", "max_completion_tokens"):  # the second, current name wins when both are given
        if data.get(key) is not None:
            max_tokens, given = _integer(key, data[key], 1, lim.max_new_tokens), True
    temperature = _temperature(data.get("temperature"))
    top_p = _number("top_p", data["top_p"], 0, 1, low_open=True) if data.get("top_p") is not None else None
    seed = _integer("seed", data["seed"], 0, request_contract.MAX_SEED) if data.get("seed") is not None else None
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise _refuse("n", f"only 1 choice per request is served, got {_show(n)}", code="unsupported_value")
    stops = _stops(data.get("stop"))
    response_format, json_schema = _response_format(data.get("response_format"), constrained_decoding)
    template_kwargs = _template_kwargs(data.get("chat_template_kwargs"))
    size = _text_size(messages, tools)
    if size > lim.max_input_chars:
        raise ChatError(
            f"messages and tools hold {size} characters of text; the limit is {lim.max_input_chars}",
            param="messages",
            code="string_above_max_length",
        )
    return ChatRequest(
        messages=messages,
        max_tokens=max_tokens,
        max_tokens_given=given,
        model=model,
        tools=tools,
        tool_choice=tool_choice,
        tool_name=tool_name,
        stream=stream,
        include_usage=include_usage,
        temperature=temperature,
        top_p=top_p,
        stop=stops,
        seed=seed,
        response_format=response_format,
        json_schema=json_schema,
        chat_template_kwargs=template_kwargs,
        engine_fields=engine_fields,
    )


def _neutral(value: Any, allowed: tuple[Any, ...]) -> bool:
    """`value` is one of `allowed`, a boolean only as a boolean and a number (0 or 0.0) only as a number."""
    if isinstance(value, bool) or value is None:
        return any(value is v for v in allowed)
    if isinstance(value, (int, float)):
        return any(not isinstance(v, bool) and isinstance(v, (int, float)) and value == v for v in allowed)
    return any(isinstance(v, dict) and value == v for v in allowed)


def _check_request_keys(data: dict[str, Any], engine_keys: bool) -> None:
    known = REQUEST_KEYS + (ENGINE_REQUEST_KEYS if engine_keys else ())
    ignored = sorted(k for k in data if k not in known and k in IGNORED_KEYS)
    for key in sorted(k for k in data if k not in known and k in NEUTRAL_VALUES):
        value = data[key]
        if not _neutral(value, NEUTRAL_VALUES[key]):
            neutral = " or ".join(json.dumps(v) for v in NEUTRAL_VALUES[key])
            raise _refuse(
                key,
                f"{_show(value)} is not served here (ignoring it would change the answer); send {neutral} or leave "
                "it out",
                code="unsupported_value",
            )
        ignored.append(key)
    if ignored:
        _log.info("The following fields were present in the request but ignored: %s", sorted(ignored))
    unknown = sorted(k for k in data if k not in known and k not in IGNORED_KEYS and k not in NEUTRAL_VALUES)
    if unknown:
        served = [k for k in unknown if k in ENGINE_REQUEST_KEYS]
        why = (
            f" ({', '.join(served)}: only an engine's own OpenAI server takes it: systems vllm, sglang)"
            if served
            else ""
        )
        raise ChatError(
            f"unknown request key{'s' if len(unknown) > 1 else ''} {unknown}; allowed: {sorted(known)}{why}",
            param=unknown[0],
        )


def _stream(data: dict[str, Any]) -> tuple[bool, bool]:
    """stream and stream_options.include_usage."""
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _refuse("stream", f"must be true or false, got {_show(stream)} ({_type(stream)})")
    include_usage = False
    options = data.get("stream_options")
    if options is not None:
        if not stream:
            raise _refuse("stream_options", "may only be set when stream is true")
        if not isinstance(options, dict):
            raise _refuse("stream_options", f"must be an object, got {_show(options)}")
        _check_keys("stream_options", options, ("include_usage",))
        include_usage = options.get("include_usage", False)
        if not isinstance(include_usage, bool):
            raise _refuse("stream_options.include_usage", f"must be true or false, got {_show(include_usage)}")
    return bool(stream), include_usage


def _temperature(value: Any) -> float | None:
    temperature = _number("temperature", value, 0, MAX_TEMPERATURE) if value is not None else None
    # 0 is greedy decoding (OpenAI's meaning); between 0 and the generation contract's floor, sampling divides the
    # logits into infinities and the engine fails (request_contract.py's bounds): refused, as there.
    floor = request_contract.PARAMETERS["temperature"].low
    if temperature is not None and floor is not None and 0 < temperature < floor:
        raise _refuse(
            "temperature", f"must be 0 (greedy) or between {floor:g} and {MAX_TEMPERATURE:g}, got {_show(temperature)}"
        )
    return temperature


def _stops(stop_value: Any) -> tuple[str, ...]:
    stops: tuple[str, ...] = ()
    if isinstance(stop_value, str):
        stops = (stop_value,)
    elif isinstance(stop_value, list):
        if len(stop_value) > MAX_STOP:
            raise _refuse("stop", f"takes at most {MAX_STOP} sequences, got {len(stop_value)}")
        stops = tuple(_string(f"stop[{i}]", s) for i, s in enumerate(stop_value))
    elif stop_value is not None:
        raise _refuse("stop", f"must be a string or a list of up to {MAX_STOP} strings, got {_show(stop_value)}")
    if any(s == "" for s in stops):
        raise _refuse("stop", "stop sequences must not be empty strings")
    return stops


def _engine_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The ENGINE_REQUEST_KEYS of a request, checked as both engines check them."""
    out: dict[str, Any] = {}
    effort = data.get("reasoning_effort")
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise _refuse("reasoning_effort", f"must be one of {list(REASONING_EFFORTS)}, got {_show(effort)}")
        out["reasoning_effort"] = effort
    if data.get("parallel_tool_calls") is not None:
        if not isinstance(data["parallel_tool_calls"], bool):
            raise _refuse("parallel_tool_calls", f"must be true or false, got {_show(data['parallel_tool_calls'])}")
        out["parallel_tool_calls"] = data["parallel_tool_calls"]
    for key in ("frequency_penalty", "presence_penalty"):  # OpenAI: "Number between -2.0 and 2.0"
        if data.get(key) is not None:
            out[key] = _number(key, data[key], -2.0, 2.0)
    if data.get("user") is not None:
        out["user"] = _string("user", data["user"])
    return out


# ---- tool calls in generated text (hermes) ----------------------------------------------------------------
# As vLLM's Hermes2ProToolParser.extract_tool_calls reads them (vllm-project/vllm, vllm/tool_parsers/
# hermes_tool_parser.py at commit 02bb669bf661df8b946121215ecb213468247b22): every <tool_call>...</tool_call>
# (or an unclosed <tool_call> to the end) holds a JSON object with "name" and "arguments"; the arguments are
# returned as JSON text (json.dumps(..., ensure_ascii=False)); the content is the text before the first
# <tool_call>, None when empty; if any call does not parse, there are no tool calls and the whole text is the
# content. Ids as vLLM's make_tool_call_id (vllm/entrypoints/chat_utils.py): "chatcmpl-tool-" + a random uuid.

TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def make_tool_call_id() -> str:
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]]:
    """(content, tool calls) of a generated text in the hermes format; no calls: (text, [])."""
    if TOOL_CALL_START not in text:
        return text, []
    try:
        raw = [json.loads(first or rest) for first, rest in _TOOL_CALL.findall(text)]
        calls = [
            ToolCall(
                id=make_tool_call_id(),
                name=_called_name(item),
                arguments=json.dumps(item["arguments"], ensure_ascii=False),
            )
            for item in raw
        ]
    except (ValueError, TypeError, KeyError):
        return text, []
    content = text[: text.find(TOOL_CALL_START)]
    return (content or None), calls


def _called_name(item: Any) -> str:
    name = item["name"]
    if not isinstance(name, str):
        raise TypeError("the tool call's name is not a string")
    return name


# ---- stop sequences ---------------------------------------------------------------------------------------


def truncate_at_stop(text: str, stops: tuple[str, ...] | list[str]) -> tuple[str, bool]:
    """(text before the earliest stop sequence, whether one was found); the reply never holds the stop sequence
    ("The returned text will not contain the stop sequence", completion_create_params.py)."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def _partial_overlap(text: str, tag: str) -> int:
    """Length of the longest end of `text` that begins `tag` (text held back until it is known not to be one)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


# ---- replies ----------------------------------------------------------------------------------------------


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """completion_usage.py's required fields."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_body(
    model: str,
    content: str | None,
    tool_calls: list[ToolCall] | tuple[ToolCall, ...],
    finish_reason: str,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    id: str | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """A chat.completion (chat_completion.py): one choice; usage when the token counts are known."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [call.to_json() for call in tool_calls]
    body: dict[str, Any] = {
        "id": id or completion_id(),
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
    }
    if prompt_tokens is not None and completion_tokens is not None:
        body["usage"] = usage(prompt_tokens, completion_tokens)
    return body


def completion_from_text(
    request: ChatRequest,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
) -> dict[str, Any]:
    """The reply to `request` from the generated `text`: cut at the first stop sequence (finish_reason "stop"),
    tool calls read when the request offered tools ("tool_calls")."""
    text, stopped = truncate_at_stop(text, request.stop)
    if stopped:
        finish_reason = "stop"
    content: str | None = text
    calls: list[ToolCall] = []
    if request.tools_active:
        content, calls = parse_tool_calls(text)
        if calls:
            finish_reason = "tool_calls"
    return completion_body(request.model or model, content, calls, finish_reason, prompt_tokens, completion_tokens)


def chunk(
    id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish_reason: str | None = None,
    include_usage: bool = False,
    usage_counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A chat.completion.chunk (chat_completion_chunk.py). delta None: the usage chunk, whose choices are empty.
    With include_usage every chunk has "usage" (null but on the last) (chat_completion_stream_options_param.py)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    out: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if include_usage or usage_counts is not None:
        out["usage"] = usage_counts
    return out


SSE_DONE = b"data: [DONE]\n\n"
SSE_CONTENT_TYPE = "text/event-stream"


def sse_event(obj: Any) -> bytes:
    """One server-sent event carrying JSON (the `data: ` framing the openai SDK's SSE decoder reads)."""
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


class ChatStream:
    """The SSE reply to a streamed chat request, built from text as it is generated.

        stream = ChatStream(request, model)
        yield from stream.start()
        for piece in generated: yield from stream.feed(piece); if stream.stopped: break
        yield from stream.finish("length" or "stop", prompt_tokens, completion_tokens)

    Text that may be the start of a stop sequence, or of <tool_call> when tools are offered, is held back until
    the next piece settles it. Once a tool call starts, the rest is buffered and sent at the end as tool_calls
    deltas (name and whole arguments per call), with finish_reason "tool_calls"; text that then does not parse
    as tool calls is sent as content (parse_tool_calls' rule)."""

    def __init__(self, request: ChatRequest, model: str) -> None:
        self.request = request
        self.id = completion_id()
        self.created = int(time.time())
        self.model = request.model or model
        self.text = ""  # everything generated, cut at a stop sequence
        self.sent = 0  # characters of self.text sent as content
        self.stopped = False
        self.in_tool_call = False

    def _event(
        self, delta: dict[str, Any] | None, finish_reason: str | None = None, usage_counts: dict[str, int] | None = None
    ) -> bytes:
        return sse_event(
            chunk(self.id, self.created, self.model, delta, finish_reason, self.request.include_usage, usage_counts)
        )

    def start(self) -> list[bytes]:
        return [self._event({"role": "assistant", "content": ""})]

    def feed(self, piece: str) -> list[bytes]:
        if self.stopped or not piece:
            return []
        self.text += piece
        self.text, self.stopped = truncate_at_stop(self.text, self.request.stop)
        return self._send(final=self.stopped)

    def _send(self, final: bool) -> list[bytes]:
        if self.in_tool_call:
            return []
        end = len(self.text)
        start = self.text.find(TOOL_CALL_START, self.sent) if self.request.tools_active else -1
        if start >= 0:
            self.in_tool_call, end = True, start
        elif not final:  # hold back what may begin a tool call or a stop sequence
            tags = ((TOOL_CALL_START,) if self.request.tools_active else ()) + tuple(self.request.stop)
            end -= max((_partial_overlap(self.text, tag) for tag in tags), default=0)
        if end <= self.sent:
            return []
        delta, self.sent = self.text[self.sent : end], end
        return [self._event({"content": delta})]

    def finish(self, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> list[bytes]:
        """The rest of the text, the tool calls, the finishing chunk, the usage chunk when asked, [DONE]."""
        events = self._send(final=True)
        if self.stopped:
            finish_reason = "stop"
        if self.in_tool_call:
            _, calls = parse_tool_calls(self.text)
            if calls:
                finish_reason = "tool_calls"
                events += [
                    self._event({"tool_calls": [{"index": i, **call.to_json()}]}) for i, call in enumerate(calls)
                ]
            else:  # not a tool call after all: the held text is content
                events.append(self._event({"content": self.text[self.sent :]}))
            self.sent = len(self.text)
        events.append(self._event({}, finish_reason))
        if self.request.include_usage:
            events.append(self._event(None, usage_counts=usage(prompt_tokens, completion_tokens)))
        events.append(SSE_DONE)
        return events

    def error(self, message: str) -> list[bytes]:
        """A failure after the stream started: an error event (the openai SDK raises APIError on it) and
        [DONE]; the HTTP status was sent already."""
        return [sse_event(error_body(ChatError(message, status=500, type="server_error"))), SSE_DONE]
