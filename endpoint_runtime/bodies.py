"""The request bodies every client of an endpoint sends, built from the kind its container takes, and the text read
back from each kind's reply. Stdlib only: the invoke, stream and smoke functions ship it (stacks/lambda_asset.py).

A serving system states the kinds its container takes (systems/base.py ContainerBodies); the endpoint plan says
which one a prompt travels in (EndpointPlan.prompt_body) and the stack hands it to the functions as PROMPT_BODY.
  generation         {"inputs", "parameters"} (request_contract.py), answered [{"generated_text"}]
  openai-completion  {"prompt", "max_tokens", ...}: vLLM 0.30.0 answers it on /invocations
                     (vllm/entrypoints/serve/sagemaker/api_router.py tries ChatCompletionRequest, then
                     CompletionRequest), answered choices[].text
  openai-chat        {"messages", ...}: SGLang 0.5.20's /invocations takes only this
                     (sglang/srt/entrypoints/http_server.py), answered choices[].message.content
A generation request's parameters map to the engines' own fields of the same meaning (vLLM 0.30.0
entrypoints/openai/completion/protocol.py CompletionRequest: echo, seed, top_k, repetition_penalty, min_tokens;
SGLang 0.5.20 srt/entrypoints/openai/protocol.py ChatCompletionRequest: top_k, min_tokens, repetition_penalty);
what has no such field (beam search) is refused, naming what is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import request_contract

GENERATION, OPENAI_COMPLETION, OPENAI_CHAT = "generation", "openai-completion", "openai-chat"
BODY_KINDS = (GENERATION, OPENAI_COMPLETION, OPENAI_CHAT)
PROMPT_BODY_ENV = "PROMPT_BODY"  # the kind the endpoint's container takes a prompt in (unset: generation)
REASONING_FIELD_ENV = "REASONING_FIELD"  # the assistant message's reasoning field (unset: none)
UNREAD_PARAMETERS_ENV = "UNREAD_PARAMETERS"  # the parameters the container's generation body does not read
# Each parameter's value that changes nothing, which may be left out where a container does not read it.
PARAMETER_NO_OP = {"min_new_tokens": 0, "num_beams": 1}


def prompt_kind_from_env(environ: Any = None) -> str:
    """PROMPT_BODY (a BODY_KINDS value; unset or empty: generation); SetupError for any other value."""
    env = os.environ if environ is None else environ
    kind = (env.get(PROMPT_BODY_ENV) or "").strip() or GENERATION
    if kind not in BODY_KINDS:
        raise request_contract.SetupError(
            f"environment variable {PROMPT_BODY_ENV} must be one of {', '.join(BODY_KINDS)}, got {kind!r}"
        )
    return kind


def reasoning_field_from_env(environ: Any = None) -> str | None:
    env = os.environ if environ is None else environ
    return (env.get(REASONING_FIELD_ENV) or "").strip() or None


def unread_parameters_from_env(environ: Any = None) -> frozenset[str]:
    """UNREAD_PARAMETERS (comma-separated PARAMETER_NO_OP names; unset: none); SetupError for another name."""
    env = os.environ if environ is None else environ
    names = frozenset(n.strip() for n in (env.get(UNREAD_PARAMETERS_ENV) or "").split(",") if n.strip())
    if names - set(PARAMETER_NO_OP):
        raise request_contract.SetupError(
            f"environment variable {UNREAD_PARAMETERS_ENV} names {sorted(names - set(PARAMETER_NO_OP))}; "
            f"allowed: {', '.join(PARAMETER_NO_OP)}"
        )
    return names


@dataclass(frozen=True)
class EndpointBody:
    """How one endpoint's container takes a prompt and answers it: the body kind (BODY_KINDS), the assistant
    message's reasoning field, and the contract's parameters its generation body does not read (PARAMETER_NO_OP
    names). The three travel together so that no client knows one without the others: a workstation client takes
    the plan's (EndpointPlan.endpoint_body, from the system's ContainerBodies), a function reads the variables the
    stack rendered with environment() (from_env). SetupError for a kind or parameter outside those lists."""

    kind: str = GENERATION
    reasoning_field: str | None = None
    unread_parameters: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.kind not in BODY_KINDS:
            raise request_contract.SetupError(f"body kind {self.kind!r} is not one of {', '.join(BODY_KINDS)}")
        unknown = set(self.unread_parameters) - set(PARAMETER_NO_OP)
        if unknown:
            raise request_contract.SetupError(
                f"unread parameters {sorted(unknown)}: allowed: {', '.join(PARAMETER_NO_OP)}"
            )

    @classmethod
    def from_env(cls, environ: Any = None) -> EndpointBody:
        """PROMPT_BODY, REASONING_FIELD and UNREAD_PARAMETERS, as environment() wrote them."""
        return cls(
            prompt_kind_from_env(environ), reasoning_field_from_env(environ), unread_parameters_from_env(environ)
        )

    def environment(self) -> dict[str, str]:
        """The variables from_env reads back (unset where the value is the default)."""
        return {
            PROMPT_BODY_ENV: self.kind,
            **({REASONING_FIELD_ENV: self.reasoning_field} if self.reasoning_field else {}),
            **({UNREAD_PARAMETERS_ENV: ",".join(sorted(self.unread_parameters))} if self.unread_parameters else {}),
        }

    def reads(self, parameter: str) -> bool:
        """Whether this container reads the contract's `parameter` (false for its unread_parameters)."""
        return parameter not in self.unread_parameters

    def request(self, request: dict[str, Any], *, stream: bool = False) -> dict[str, Any]:
        """The body that carries a checked generation request to this container (prompt_body)."""
        return prompt_body(self.kind, request, stream=stream, unread=self.unread_parameters)

    def outputs(self, reply: Any) -> Any:
        """This container's reply as the generation contract's [{"generated_text"}] (generation_outputs)."""
        return generation_outputs(self.kind, reply, self.reasoning_field)


# The front doors of an engine's own OpenAI server (vllm, sglang) leave the context to the engine, which refuses a
# too-long request itself ("maximum context length", 400): max_new_tokens is capped at its context length, and no
# character cap is set below the request body's own (a prompt holds no more characters than its body has bytes:
# invoke.py MAX_REQUEST_BYTES, at most 6 MiB).
ENGINE_MAX_INPUT_CHARS = 6 * 1024 * 1024


def kind_of(body: Any) -> str | None:
    """Which kind a body is (None: none of them): "messages" is chat, "prompt" a completion, "inputs" generation."""
    if not isinstance(body, dict):
        return None
    keys = ((OPENAI_CHAT, "messages"), (OPENAI_COMPLETION, "prompt"), (GENERATION, "inputs"))
    present = [kind for kind, key in keys if key in body]
    return present[0] if len(present) == 1 else None


# Sampling values that filter nothing: every engine's default, and values TGI 3.3.6 refuses ("`top_p` must be > 0.0
# and < 1.0", "`top_k` must be strictly positive": router/src/validation.rs), so they are left out rather than sent.
NO_FILTER = {"top_p": 1, "top_k": 0}
SAMPLING_KNOBS = ("temperature", "top_p", "top_k")


def generation_parameters(request: dict[str, Any]) -> dict[str, Any]:
    """A checked request's parameters as every generation container reads them alike:
    - return_full_text always stated: the contract's default is false, and a container's own default is not ours
      to inherit (TGI 3.3.6 defaults it to true for a model loaded from a folder: local_runtime/tgi_router.py);
    - do_sample false is greedy: the sampling knobs are left out (transformers ignores them when greedy; TGI samples
      whenever one is set, validation.rs `sampling = do_sample || temperature.is_some() || ...`);
    - a knob at its no-filter value is left out (NO_FILTER)."""
    params = {"return_full_text": False, **(request.get("parameters") or {})}
    greedy = params.get("do_sample") is False
    for key in SAMPLING_KNOBS:
        if key in params and (greedy or params[key] == NO_FILTER.get(key)):
            del params[key]
    return params


def prompt_body(
    kind: str, request: dict[str, Any], *, stream: bool = False, unread: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The body that carries a checked generation request ({"inputs": str | [str], "parameters": {...}}, as
    request_contract.validate_request leaves it) to a container that takes `kind` and does not read the `unread`
    parameters (EndpointBody.unread_parameters). RequestError for what that kind cannot carry."""
    if kind == GENERATION:
        parameters = generation_parameters(request)
        for name in sorted(unread & set(parameters)):
            if parameters[name] != PARAMETER_NO_OP[name]:
                raise request_contract.RequestError(
                    f"parameters.{name}: value {parameters[name]} is not served by this endpoint's container (its "
                    f"generation body has no such field and would ignore it); allowed: {PARAMETER_NO_OP[name]} "
                    "(or leave it out)"
                )
            del parameters[name]  # the no-op value: nothing to send
        return {**request, "parameters": parameters, **({"stream": True} if stream else {})}
    if kind not in BODY_KINDS:
        raise request_contract.SetupError(f"body kind {kind!r} is not one of {', '.join(BODY_KINDS)}")
    params = dict(request.get("parameters") or {})
    inputs = request["inputs"]
    body: dict[str, Any] = {}
    if kind == OPENAI_CHAT:
        if isinstance(inputs, list) and len(inputs) != 1:
            raise request_contract.RequestError(
                f"inputs: this endpoint's engine takes one prompt per request, got a list of {len(inputs)}; "
                "send one string"
            )
        body["messages"] = [{"role": "user", "content": inputs[0] if isinstance(inputs, list) else inputs}]
        if params.get("return_full_text"):
            raise request_contract.RequestError(
                "parameters.return_full_text: true is not served by this endpoint's engine (a chat reply holds the "
                "answer only); allowed: false (or leave it out)"
            )
    else:
        body["prompt"] = inputs
        if params.get("return_full_text"):
            body["echo"] = True  # vLLM CompletionRequest.echo: the prompt, then the completion
    if params.get("num_beams", 1) != 1:
        raise request_contract.RequestError(
            f"parameters.num_beams: value {params['num_beams']} is not served by this endpoint's engine (its OpenAI "
            "server samples or decodes greedily); allowed: 1 (or leave it out)"
        )
    body["max_tokens"] = params.get("max_new_tokens", request_contract.DEFAULT_MAX_NEW_TOKENS)
    if params.get("min_new_tokens"):
        body["min_tokens"] = params["min_new_tokens"]
    sampling = params.get("do_sample")
    if sampling is False:
        body["temperature"] = 0.0  # greedy: both engines decode greedily at temperature 0
    else:
        for key in ("temperature", "top_p", "top_k"):
            if key in params:
                body[key] = params[key]
    for key in ("repetition_penalty", "seed"):
        if key in params:
            body[key] = params[key]
    if stream:
        body["stream"] = True
    return body


def _choices(reply: Any) -> list[dict[str, Any]]:
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise ValueError(
            f"the reply has no list of choices (keys: {sorted(reply)[:8] if isinstance(reply, dict) else type(reply).__name__})"
        )
    return sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c.get("index"), int) else 0)


def generation_outputs(kind: str, reply: Any, reasoning_field: str | None = None) -> Any:
    """A container's reply to prompt_body(kind, ...) as the generation contract's [{"generated_text"}] (the reply
    itself for the generation kind). A chat reply's text is its reasoning field, then its content, as a completion
    holds both (docs/design/container-bodies.md): SGLang separates reasoning by default (0.5.20
    srt/entrypoints/openai/protocol.py `separate_reasoning: bool = True`) and answers content "" or null while the
    thinking used the token budget (serving_chat.py `content=text if text else ""`), which read as "" before
    (engines review E2). ValueError for a reply of another shape. A generation reply that is one {"generated_text"}
    object, as LMI 27 answers {"inputs"} (deepjavalibrary/djl-serving@0.36.0-lmi27-dlc engines/python/setup/
    djl_python/lmi_vllm/request_response_utils.py:137-146, `lmi_response = {"generated_text": primary_choice.text}`),
    reads as the one-item list; a list (the Hugging Face handler, the older LMI and DJL handlers) as it is."""
    if kind == GENERATION:
        return [reply] if isinstance(reply, dict) and "generated_text" in reply else reply
    outputs = []
    for choice in _choices(reply):
        if kind == OPENAI_COMPLETION:
            text = choice.get("text")
        else:
            message = choice.get("message")
            message = message if isinstance(message, dict) else {}
            text = message.get("content")
            reasoning = message.get(reasoning_field) if reasoning_field else None
            if isinstance(reasoning, str):
                text = reasoning + (text if isinstance(text, str) else "")
        if not isinstance(text, str):
            raise ValueError(f"choice {choice.get('index', 0)} holds no text (keys: {sorted(choice)[:8]})")
        outputs.append({"generated_text": text})
    return outputs


def chunk_text(obj: dict[str, Any], reasoning_field: str | None = None) -> str | None:
    """The text one streamed OpenAI chunk carries (a completion's choices[].text, a chat delta's content, or its
    reasoning field when the engine separates reasoning); None for a chunk without text (the role, the usage)."""
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return None
    texts = []
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if isinstance(choice.get("text"), str):
            texts.append(choice["text"])
        delta = choice.get("delta")
        if isinstance(delta, dict):
            for key in ("content", reasoning_field):
                if key and isinstance(delta.get(key), str):
                    texts.append(delta[key])
    return "".join(texts) or None


__all__ = [
    "BODY_KINDS",
    "EndpointBody",
    "GENERATION",
    "OPENAI_CHAT",
    "OPENAI_COMPLETION",
    "PARAMETER_NO_OP",
    "PROMPT_BODY_ENV",
    "UNREAD_PARAMETERS_ENV",
    "REASONING_FIELD_ENV",
    "chunk_text",
    "generation_outputs",
    "generation_parameters",
    "kind_of",
    "prompt_body",
    "unread_parameters_from_env",
    "prompt_kind_from_env",
    "reasoning_field_from_env",
]
