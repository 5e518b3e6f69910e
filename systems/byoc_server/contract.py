"""The request/response contract our own containers serve (deepspeed-byoc, tensorrt-byoc).

Requests are typed with bounds, like text-generation-inference: every refusal quotes the key, the limit and
the value. Two request shapes are accepted:
    {"inputs": "text" | ["text", ...], "parameters": {...}}   the Hugging Face / LMI shape
    {"input": "text"}                                          the original TensorRT GPT-2 container's shape
Reply: {"generated_text": "..."} per input, as a list, like the Hugging Face containers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_NEW_TOKENS = int(os.environ.get("MAX_NEW_TOKENS", "512"))
MAX_BATCH = int(os.environ.get("MAX_BATCH_SIZE", "8"))
MAX_INPUT_CHARS = int(os.environ.get("MAX_INPUT_CHARS", "16384"))


class RequestError(ValueError):
    """A bad request: the server answers 400 with this message."""


class GenerationParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_new_tokens: int = Field(64, ge=1, le=MAX_NEW_TOKENS)
    min_new_tokens: int = Field(0, ge=0, le=MAX_NEW_TOKENS)
    do_sample: bool = False
    temperature: float = Field(1.0, gt=0, le=5)
    top_k: int = Field(0, ge=0, le=1000)
    top_p: float = Field(1.0, gt=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0, le=10)
    num_beams: int = Field(1, ge=1, le=8)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _min_below_max(self) -> GenerationParameters:
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"min_new_tokens ({self.min_new_tokens}) must not exceed max_new_tokens ({self.max_new_tokens})"
            )
        return self


class GenerationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    inputs: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    parameters: GenerationParameters = GenerationParameters()


def parse_request(body: object) -> GenerationRequest:
    """Validate a decoded JSON body; raises RequestError with every problem, each quoting limit and value."""
    if not isinstance(body, dict):
        raise RequestError(f"request body must be a JSON object, got {type(body).__name__}")
    data = dict(body)
    if "input" in data:  # the reference container's {"input": "..."}
        if "inputs" in data:
            raise RequestError("give either 'input' or 'inputs', not both")
        data["inputs"] = data.pop("input")
    if isinstance(data.get("inputs"), str):
        data["inputs"] = [data["inputs"]]
    try:
        request = GenerationRequest.model_validate(data)
    except ValidationError as err:
        raise RequestError("; ".join(_describe(e) for e in err.errors())) from None
    for i, text in enumerate(request.inputs):
        if not text:
            raise RequestError(f"inputs[{i}] is empty")
        if len(text) > MAX_INPUT_CHARS:
            raise RequestError(f"inputs[{i}] has {len(text)} characters; the limit is {MAX_INPUT_CHARS}")
    return request


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "body"
    if error["type"] == "extra_forbidden":
        allowed = GenerationParameters.model_fields if error["loc"][:1] == ("parameters",) else GenerationRequest.model_fields
        return f"unknown key {where!r}; allowed: {', '.join(allowed)}"
    if error["type"] == "missing":
        return f"{where} is required"
    return f"{where}: {error['msg']}, got {error.get('input')!r}"


class Handler(Protocol):
    """What a container's model code implements; the server does HTTP, validation and errors."""

    def load(self, model_dir: Path) -> None:
        """Load the model from the artifact directory (SageMaker mounts it at /opt/ml/model)."""

    def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
        """Generated continuations, one per prompt."""
