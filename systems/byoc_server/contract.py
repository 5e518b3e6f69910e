"""The request/response contract our own containers serve (deepspeed-byoc, tensorrt-byoc).

Requests are request_contract.py's (the one contract every entry point ships: parameter table, limits, strict
JSON): every refusal quotes the key, the limit and the value. Two request shapes are accepted:
    {"inputs": "text" | ["text", ...], "parameters": {...}}   the Hugging Face / LMI shape
    {"input": "text"}                                          the original TensorRT GPT-2 container's shape
Reply: {"generated_text": "..."} per input, as a list, like the Hugging Face containers.

Chat: a body with "messages" is an OpenAI Chat Completions request (chat_contract.py, shipped beside
request_contract.py). A handler serves chat when it also implements ChatHandler.chat_prompt (the request rendered
by its model's chat template); count_tokens gives the reply's usage, generate_stream lets it stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

import chat_contract  # the image: /opt/program/chat_contract.py, beside request_contract.py
import request_contract  # the image: /opt/program/request_contract.py (the Dockerfiles copy it beside us)

RequestError = request_contract.RequestError  # a bad request: the server answers 400 with its message
ChatError = chat_contract.ChatError  # a bad chat request: its status, OpenAI's error object
decode_body = request_contract.decode_body  # strict JSON (request_contract: NaN, huge numbers, surrogates, depth)


class GenerationParameters(BaseModel):
    """request_contract's parameters, typed, with their defaults. Bounds are request_contract.PARAMETERS':
    parse_request checks them before this is built; `model_fields_set` says which ones the request gave."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_new_tokens: int = request_contract.DEFAULT_MAX_NEW_TOKENS
    min_new_tokens: int = 0
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    num_beams: int = 1
    return_full_text: bool = False
    seed: int | None = None


class GenerationRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    inputs: list[str]
    parameters: GenerationParameters = GenerationParameters()


def parse_request(body: Any) -> GenerationRequest:
    """Validate a decoded JSON body (request_contract.validate_request, with the limits from this container's
    environment); raises RequestError naming the key, the limit and the value."""
    prompts, checked = request_contract.validate_request(body)
    given = body.get("parameters") or {}
    return GenerationRequest(
        inputs=prompts, parameters=GenerationParameters(**{k: v for k, v in checked.items() if k in given})
    )


class Handler(Protocol):
    """What a container's model code implements; the server does HTTP, validation and errors."""

    def load(self, model_dir: Path) -> None:
        """Load the model from the artifact directory (SageMaker mounts it at /opt/ml/model)."""

    def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
        """Generated continuations, one per prompt."""


class ChatHandler(Protocol):
    """What a handler adds to serve chat requests on /invocations (all optional but chat_prompt)."""

    def chat_prompt(self, request: chat_contract.ChatRequest) -> str:
        """The request rendered by the model's chat template, with its tools (request.template_messages(),
        request.template_tools(), request.chat_template_kwargs); raise ChatError when the model has no template or
        the template refuses the messages."""

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` (the reply's usage; without it the reply has none and says finish_reason "stop")."""

    def generate_stream(self, prompt: str, parameters: GenerationParameters) -> Iterator[str]:
        """The continuation of `prompt`, piece by piece as it is generated (without it, chat does not stream)."""


def chat_parameters(request: chat_contract.ChatRequest) -> GenerationParameters:
    """The generation parameters of a chat request: max_tokens (the endpoint's limit when not asked), greedy for
    temperature 0, sampling when a temperature or top_p is given, the seed."""
    fields: dict[str, Any] = {"max_new_tokens": request.max_tokens}
    if request.temperature == 0:
        fields["do_sample"] = False
    elif request.temperature is not None or request.top_p is not None:
        fields["do_sample"] = True
        fields.update({k: getattr(request, k) for k in ("temperature", "top_p") if getattr(request, k) is not None})
    if request.seed is not None:
        fields["seed"] = request.seed
    return GenerationParameters(**fields)
