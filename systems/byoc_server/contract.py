"""The request/response contract our own containers serve (deepspeed-byoc, tensorrt-byoc).

Requests are typed with bounds, like text-generation-inference: every refusal quotes the key, the limit and
the value. Two request shapes are accepted:
    {"inputs": "text" | ["text", ...], "parameters": {...}}   the Hugging Face / LMI shape
    {"input": "text"}                                          the original TensorRT GPT-2 container's shape
Reply: {"generated_text": "..."} per input, as a list, like the Hugging Face containers.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_NEW_TOKENS = int(os.environ.get("MAX_NEW_TOKENS", "512"))
MAX_BATCH = int(os.environ.get("MAX_BATCH_SIZE", "8"))
MAX_INPUT_CHARS = int(os.environ.get("MAX_INPUT_CHARS", "16384"))
MAX_JSON_DEPTH = 32  # a request needs 2 levels (body -> parameters)
MAX_INT_DIGITS = 40  # the largest integer a request takes is a seed <= 2**32 - 1 (10 digits)


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


# ---- the body: bytes -> JSON value -------------------------------------------------------------------
# Python's json accepts more than a request may carry, and three of those extras made the server answer 500:
# lone UTF-16 surrogates ("\ud800" decodes to a str that cannot be encoded as UTF-8 again, so the tokenizer
# or the reply fails), nesting deep enough to exhaust the recursion limit (RecursionError), and integers
# longer than int()'s 4300-digit limit (https://docs.python.org/3/library/stdtypes.html#int-max-str-digits).
# NaN/Infinity literals are refused too. RFC 8259 section 6 leaves NaN/Infinity out of the grammar, section 9
# lets a parser limit nesting depth and the range of numbers, and section 8.2 says unpaired surrogates make
# the receiver's behaviour unpredictable. https://www.rfc-editor.org/rfc/rfc8259
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # json.loads joins escaped pairs; what is left is unpaired
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate can come from in the JSON text


class _Refused(ValueError):
    """Raised by the json.loads hooks: the message is complete."""


def _reject_constant(name: str) -> object:
    raise _Refused(f"request body is not valid JSON: {name} is not allowed (numbers must be finite, RFC 8259)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:21] + "..."
        raise _Refused(f"request body has the number {shown}, which is out of range: numbers must fit a 64-bit float")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"request body has an integer of {digits} digits; the limit is {MAX_INT_DIGITS} digits")
    return int(text)


def _where(chain: Any) -> str:
    """The path of a value from its (parent chain, key) links, e.g. parameters.stop[1]; built only for a message."""
    keys: list[Any] = []
    while chain is not None:
        chain, key = chain
        keys.append(key)
    path = ""
    for key in reversed(keys):
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def _refuse_lone_surrogate(text: str, chain: Any, is_key: bool = False) -> None:
    match = _LONE_SURROGATE.search(text)
    if match:
        where = f"a key of {_where(chain) or 'the request body'}" if is_key else (_where(chain) or "request body")
        raise RequestError(
            f"{where} contains a lone UTF-16 surrogate \\u{ord(match.group()):04x} at character {match.start()}, "
            "which is not a Unicode character; send UTF-8 text (a \\u escape above U+FFFF must be a high + low "
            "surrogate pair)"
        )


def _check_tree(value: Any, text: str | None = None) -> None:
    """Refuse a decoded request nested deeper than MAX_JSON_DEPTH or holding a lone surrogate (in a value or a
    key), naming where. Breadth-first without recursion, so the check cannot run out of stack itself. With the
    JSON `text`, bodies that can hold neither (the usual case) are not walked at all: a lone surrogate can only
    come from a \\uD800-\\uDFFF escape (the UTF-8 decoder refuses encoded surrogates), and more than
    MAX_JSON_DEPTH levels need more than that many brackets."""
    brackets = None if text is None else text.count("[") + text.count("{")
    if brackets is not None and brackets <= MAX_JSON_DEPTH and not _SURROGATE_ESCAPE.search(text):
        return
    queue: deque[tuple[Any, Any, int]] = deque([(value, None, 1)])
    while queue:
        node, chain, depth = queue.popleft()
        if isinstance(node, str):
            _refuse_lone_surrogate(node, chain)
            continue
        if not isinstance(node, (dict, list)):  # a number, true, false or null at the top
            continue
        if depth > MAX_JSON_DEPTH:
            raise RequestError(
                f"{_where(chain) or 'request body'}: arrays and objects are nested more than {MAX_JSON_DEPTH} "
                f"levels deep; the limit is {MAX_JSON_DEPTH}"
            )
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(key, str):
                _refuse_lone_surrogate(key, chain, is_key=True)
            if isinstance(item, (str, dict, list)):
                queue.append((item, (chain, key), depth + 1))


def decode_body(body: bytes) -> object:
    """The request body as a JSON value; RequestError (a 400) for anything else, naming what is wrong."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RequestError(f"request body is not UTF-8 text: {err.reason} at byte {err.start}") from None
    if not text.strip():
        raise RequestError('request body is empty; send a JSON object with "inputs"')
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except _Refused as err:
        raise RequestError(str(err)) from None
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        raise RequestError(f"request body is not valid JSON: {err}") from None
    except RecursionError:  # the decoder's own depth guard, far above MAX_JSON_DEPTH
        raise RequestError(
            f"request body: arrays and objects are nested more than {MAX_JSON_DEPTH} levels deep; "
            f"the limit is {MAX_JSON_DEPTH}"
        ) from None
    _check_tree(value, text)
    return value


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
