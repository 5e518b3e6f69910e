"""The one generation-request contract: what a request may carry, checked the same way at every entry point.

Shipped unchanged by the Lambda functions, hf-fastload, the djl-* systems and our own images: so stdlib only, no
imports of ours, Python 3.10. Request {"inputs": str | [str, ...], "parameters": {...}} (PARAMETERS is the table);
a refusal is RequestError (a ValueError); limits() reads MAX_NEW_TOKENS, MAX_BATCH_SIZE and MAX_INPUT_CHARS.
Where it ships, and the reply shape: docs/design/front-doors.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import deque
from typing import Any, NamedTuple

DEFAULT_MAX_NEW_TOKENS_CAP = 512
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_MAX_INPUT_CHARS = 16384
DEFAULT_MAX_NEW_TOKENS = 64  # a request without max_new_tokens generates this many (capped by the limit)
ENV_MAX_NEW_TOKENS = "MAX_NEW_TOKENS"
ENV_MAX_BATCH_SIZE = "MAX_BATCH_SIZE"
ENV_MAX_INPUT_CHARS = "MAX_INPUT_CHARS"
LIMIT_ENV = (ENV_MAX_NEW_TOKENS, ENV_MAX_BATCH_SIZE, ENV_MAX_INPUT_CHARS)  # what limits() reads
# The smallest seed range the engines take: torch.manual_seed takes 64 bits, FasterTransformer's random_seed and
# numpy-style generators 32; one bound for all, so a request that one endpoint accepts every endpoint accepts.
MAX_SEED = 2**32 - 1


class RequestError(ValueError):
    """The caller's request is wrong: a 4xx (400 unless `status` says otherwise)."""

    def __init__(self, message: str, status: int = 400, error_type: str = "validation") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


class SetupError(Exception):
    """The entry point's own environment is wrong (a limit that is not a number): a 500, the operator's to fix."""


def error_body(err: RequestError) -> dict[str, str]:
    """The JSON reply for a refused request."""
    return {"error": err.message, "error_type": err.error_type}


# ---- limits: defaults here, overrides from the environment ------------------------------------------------


class Limits(NamedTuple):
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS_CAP
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_input_chars: int = DEFAULT_MAX_INPUT_CHARS


def env_int(name: str, default: int, low: int, high: int, environ: Any = None) -> int:
    """An integer setting from the environment (blank or unset: `default`); SetupError when not in [low, high]."""
    return int(_env_value(name, default, low, high, int, "an integer", environ))


def env_number(name: str, default: float, low: float, high: float, environ: Any = None) -> float:
    """A number setting from the environment (blank or unset: `default`); SetupError when not in [low, high]."""
    return float(_env_value(name, default, low, high, float, "a number", environ))


def _env_value(name: str, default: float, low: float, high: float, kind: Any, what: str, environ: Any) -> float:
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SetupError(f"environment variable {name} must be {what} between {low} and {high}, got {raw!r}") from None
    if not low <= value <= high or not math.isfinite(value):
        raise SetupError(f"environment variable {name} must be between {low} and {high}, got {raw!r}")
    return value


def limits(environ: Any = None) -> Limits:
    """The endpoint's limits: MAX_NEW_TOKENS, MAX_BATCH_SIZE, MAX_INPUT_CHARS from the environment, else defaults."""
    return Limits(
        max_new_tokens=env_int(ENV_MAX_NEW_TOKENS, DEFAULT_MAX_NEW_TOKENS_CAP, 1, 1_000_000, environ),
        max_batch_size=env_int(ENV_MAX_BATCH_SIZE, DEFAULT_MAX_BATCH_SIZE, 1, 1024, environ),
        max_input_chars=env_int(ENV_MAX_INPUT_CHARS, DEFAULT_MAX_INPUT_CHARS, 1, 10_000_000, environ),
    )


# ---- the parameter table ---------------------------------------------------------------------------------


class Parameter(NamedTuple):
    kind: str  # "integer", "number" or "boolean"
    low: float | None = None
    low_open: bool = False  # True: low itself is refused
    high: float | str | None = None  # a number, or the name of the Limits field that bounds it
    low_note: str = ""  # what to do instead, added to the refusal of a value below `low`


# Bounds: what every engine behind the contract takes without failing. Sampling divides the logits by temperature
# (transformers TemperatureLogitsWarper) and positive logits by repetition_penalty (RepetitionPenaltyLogitsProcessor,
# transformers/generation/logits_process.py in 4.34, 4.36, 4.39, 4.49 and 5.x alike); a tiny divisor overflows the
# logits and sampling fails (temperature 1e-300 or repetition_penalty 5e-324 with do_sample: "probability tensor
# contains either inf, nan or element < 0" from transformers, a 500 from hf-fastload's and deepspeed-byoc's servers;
# tensorrt-byoc's float64 sampler failed at 5e-324 with "Probabilities contain NaN"; tests/systems/test_accepted_requests.py).
# transformers 4.34/4.36/4.39 (djl 0.24, deepspeed-byoc, djl 0.27) sample in the model's dtype, fp16 for all but
# GPT-J (generation/utils.py `next_token_logits = outputs.logits[:, -1, :]`; 4.49 and 5.x take `.float()`), so
#   temperature >= 0.01: logits grow at most 100x (finite in fp16 up to |logit| 655). vLLM raises any temperature in
#     (0, 0.01) to 0.01 itself (vllm/sampling_params.py `_MAX_TEMP = 1e-2`), so nothing is lost there. <= 2: vLLM
#     refuses more ("temperature must be in [0, 2]", vllm-project/vllm PR #44965; whether LMI 27's vLLM 0.23.1 build
#     has it is unverified, so the bound is kept to what every version takes).
#   repetition_penalty >= 0.1: with the smallest temperature a positive logit grows at most 1000x (finite in fp16
#     up to 65); transformers and vLLM refuse <= 0.
#   top_p in (0, 1] and top_k >= 0: transformers (TopPLogitsWarper, TopKLogitsWarper; top_k 0 adds no warper) and
#     vLLM (`top_p must be in (0, 1]`); the smallest positive top_p keeps the most likely token.
# vLLM source read at commit 00388f6573 of vllm-project/vllm (the file of LMI's exact build could not be read here).
PARAMETERS: dict[str, Parameter] = {
    "max_new_tokens": Parameter("integer", 1, False, "max_new_tokens"),
    "min_new_tokens": Parameter("integer", 0, False, "max_new_tokens"),  # and <= the request's max_new_tokens
    "temperature": Parameter("number", 0.01, False, 2, "for greedy decoding leave it out and set do_sample false"),
    "top_p": Parameter("number", 0, True, 1),
    "top_k": Parameter("integer", 0, False, 1000),
    "repetition_penalty": Parameter("number", 0.1, False, 10, "1 means no penalty"),
    "num_beams": Parameter("integer", 1, False, 8),
    "do_sample": Parameter("boolean"),
    "return_full_text": Parameter("boolean"),
    "seed": Parameter("integer", 0, False, MAX_SEED),
}
TOP_LEVEL_KEYS = ("inputs", "parameters")
# Keys a client sends on its own that change nothing in the answer: accepted and ignored, at the top level and in
# parameters, said in a log line, as vLLM 0.30.0 ignores a field it does not know (entrypoints/serve/engine/
# protocol.py OpenAIBaseModel.__log_extra_fields__: "The following fields were present in the request but
# ignored"). sagemaker_base_url: LiteLLM 1.110.2's sagemaker/ provider copies its transport setting into
# `parameters` (litellm/llms/sagemaker/completion/transformation.py transform_request: every optional param, this one
# included, goes into "parameters"; handler.py:114 reads it as the URL;
# shared/reviews/real-clients.md, finding 9). A key that would change the answer (`stop`, which LiteLLM maps into
# parameters) is not here: it is refused naming it. chat_contract.IGNORED_KEYS includes these.
IGNORED_KEYS = ("sagemaker_base_url",)
_log = logging.getLogger(__name__)


_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _show(value: Any, limit: int = 60) -> str:
    """A value as the caller wrote it (JSON), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_parameter(key: str, value: Any, parameter: Parameter, high: float | None) -> Any:
    if parameter.kind == "boolean":
        if not isinstance(value, bool):
            raise RequestError(f"parameters.{key} must be true or false, got {_show(value)} ({json_type(value)})")
        return value
    integer = parameter.kind == "integer"
    if parameter.low_open:
        bounds = f"greater than {parameter.low}" + (f" and at most {high}" if high is not None else "")
    else:
        bounds = f"between {parameter.low} and {high}" if high is not None else f"at least {parameter.low}"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (integer and not isinstance(value, int))
        or not math.isfinite(value)
    ):
        raise RequestError(
            f"parameters.{key} must be {'an integer' if integer else 'a number'} {bounds}, "
            f"got {_show(value)} ({json_type(value)})"
        )
    low = parameter.low if parameter.low is not None else -math.inf
    if value < low or (parameter.low_open and value == low) or (high is not None and value > high):
        note = f" ({parameter.low_note})" if parameter.low_note and value <= low else ""
        raise RequestError(f"parameters.{key} must be {bounds}, got {_show(value)}{note}")
    return value if integer else float(value)


def validate_request(data: Any, lim: Limits | None = None) -> tuple[list[str], dict[str, Any]]:
    """Check a decoded request: (prompts, the parameters given, checked, floats as float, and max_new_tokens
    always: DEFAULT_MAX_NEW_TOKENS, within the limit, when not given). Raises RequestError. Other defaults are
    the engine's (e.g. do_sample when a sampling knob is set)."""
    lim = lim or limits()
    if not isinstance(data, dict):
        raise RequestError(f"request must be a JSON object with keys {list(TOP_LEVEL_KEYS)}, got {json_type(data)}")
    data = dict(data)
    if "input" in data:  # the TensorRT GPT-2 reference container's {"input": "..."}
        if "inputs" in data:
            raise RequestError("give either 'input' or 'inputs', not both")
        data["inputs"] = data.pop("input")
    ignored = sorted(k for k in data if k in IGNORED_KEYS)
    unknown = sorted(k for k in data if k not in TOP_LEVEL_KEYS and k not in IGNORED_KEYS)
    if unknown:
        raise RequestError(f"unknown request keys {unknown}; allowed keys are {list(TOP_LEVEL_KEYS)}")
    if "inputs" not in data:
        raise RequestError("inputs is required: a non-empty string or a list of non-empty strings")
    inputs = data["inputs"]
    batch = lim.max_batch_size
    # Messages describe a prompt (type, length) but never echo it.
    if isinstance(inputs, str):
        prompts = [inputs]
    elif isinstance(inputs, list):
        # a container that reads one prompt a body (ContainerBodies.prompts_per_body: MAX_BATCH_SIZE 1)
        if batch == 1 and len(inputs) > 1:
            raise RequestError(
                f"inputs: this endpoint's container takes one prompt per request, got a list of {len(inputs)}; "
                "send one string per request"
            )
        if not 1 <= len(inputs) <= batch:
            raise RequestError(f"inputs must be a list of 1 to {batch} strings, got a list of {len(inputs)}")
        prompts = inputs
    else:
        raise RequestError(
            f"inputs must be a non-empty string or a list of 1 to {batch} non-empty strings, got {json_type(inputs)}"
        )
    for i, item in enumerate(prompts):
        where = "inputs" if isinstance(inputs, str) else f"inputs[{i}]"
        if not isinstance(item, str):
            raise RequestError(f"{where} must be a non-empty string, got {json_type(item)}")
        if not item.strip():
            shown = _show(item) if isinstance(inputs, str) else "an empty or whitespace-only string"
            raise RequestError(f"{where} must be a non-empty string, got {shown}")
        if len(item) > lim.max_input_chars:
            raise RequestError(f"{where} has {len(item)} characters; the limit is {lim.max_input_chars}")

    raw = data.get("parameters")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RequestError(f"parameters must be an object, got {_show(raw)} ({json_type(raw)})")
    ignored += sorted(f"parameters.{k}" for k in raw if k in IGNORED_KEYS)
    unknown = sorted(k for k in raw if k not in PARAMETERS and k not in IGNORED_KEYS)
    if unknown:
        raise RequestError(f"unknown parameters {unknown}; allowed parameters are {sorted(PARAMETERS)}")
    if ignored:
        _log.warning("The following fields were present in the request but ignored: %s", ignored)
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if key in IGNORED_KEYS:
            continue
        parameter = PARAMETERS[key]
        high = getattr(lim, parameter.high) if isinstance(parameter.high, str) else parameter.high
        params[key] = _check_parameter(key, value, parameter, high)
    params.setdefault("max_new_tokens", min(DEFAULT_MAX_NEW_TOKENS, lim.max_new_tokens))
    if params.get("min_new_tokens", 0) > params["max_new_tokens"]:
        raise RequestError(
            f"parameters.min_new_tokens must be at most max_new_tokens ({params['max_new_tokens']}), "
            f"got {params['min_new_tokens']}"
        )
    return list(prompts), params


# ---- the body: bytes or str -> JSON value ----------------------------------------------------------------
# Python's json accepts more than a request may carry, and those extras made entry points answer 500 or pass
# garbage on: lone UTF-16 surrogates ("\ud800" decodes to a str that cannot be encoded as UTF-8 again, for
# SageMaker or the tokenizer), nesting deep enough to exhaust the recursion limit (RecursionError), integers
# longer than int()'s 4300-digit limit (https://docs.python.org/3/library/stdtypes.html#int-max-str-digits),
# NaN/Infinity (NaN passes every bound check). RFC 8259 section 6 leaves NaN/Infinity out of the grammar,
# section 9 lets a parser limit nesting depth and the range of numbers, section 8.2 says unpaired surrogates make
# the receiver's behaviour unpredictable, and section 4 that duplicate names make it unpredictable too.
# https://www.rfc-editor.org/rfc/rfc8259
MAX_JSON_DEPTH = 32  # a request needs 2 levels (body -> parameters)
MAX_INT_DIGITS = 40  # the largest integer a request takes is a seed <= 2**32 - 1 (10 digits)
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # json.loads joins escaped pairs; what is left is unpaired
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate can come from in the JSON text


class _Refused(ValueError):
    """Raised by the json.loads hooks: the message is complete."""


def _reject_constant(name: str) -> Any:
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


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"request body is not valid JSON: duplicate key {key!r}")
        seen[key] = value
    return seen


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


def refuse_lone_surrogate(text: str, chain: Any = None, is_key: bool = False) -> None:
    match = _LONE_SURROGATE.search(text)
    if match:
        where = f"a key of {_where(chain) or 'the request body'}" if is_key else (_where(chain) or "request body")
        raise RequestError(
            f"{where} contains a lone UTF-16 surrogate \\u{ord(match.group()):04x} at character {match.start()}, "
            "which is not a Unicode character; send UTF-8 text (a \\u escape above U+FFFF must be a high + low "
            "surrogate pair)"
        )


def check_json_tree(value: Any, text: str | None = None) -> None:
    """Refuse a decoded request nested deeper than MAX_JSON_DEPTH or holding a lone surrogate (in a value or a
    key), naming where. Breadth-first without recursion, so the check cannot run out of stack itself. With the
    JSON `text`, bodies that can hold neither (the usual case) are not walked at all: a lone surrogate can only
    come from a \\uD800-\\uDFFF escape (the UTF-8 decoder refuses encoded surrogates), and more than
    MAX_JSON_DEPTH levels need more than that many brackets."""
    if text is not None and text.count("[") + text.count("{") <= MAX_JSON_DEPTH and not _SURROGATE_ESCAPE.search(text):
        return
    queue: deque[tuple[Any, Any, int]] = deque([(value, None, 1)])
    while queue:
        node, chain, depth = queue.popleft()
        if isinstance(node, str):
            refuse_lone_surrogate(node, chain)
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
                refuse_lone_surrogate(key, chain, is_key=True)
            if isinstance(item, (str, dict, list)):
                queue.append((item, (chain, key), depth + 1))


def decode_json(text: str) -> Any:
    """Strict json.loads of a request body; RequestError naming what is wrong."""
    if not text.strip():
        raise RequestError('request body is not valid JSON: the body is empty; send an object with "inputs"')
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
            object_pairs_hook=_no_duplicates,
        )
    except _Refused as err:
        raise RequestError(str(err)) from None
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        raise RequestError(f"request body is not valid JSON: {err}") from None
    except RecursionError:  # the decoder's own depth guard, far above MAX_JSON_DEPTH
        raise RequestError(
            f"request body: arrays and objects are nested more than {MAX_JSON_DEPTH} levels deep; "
            f"the limit is {MAX_JSON_DEPTH}"
        ) from None
    check_json_tree(value, text)
    return value


def decode_body(body: bytes | bytearray | str) -> Any:
    """The request body (UTF-8 bytes, or str) as a JSON value; RequestError (a 400) for anything else."""
    if isinstance(body, (bytes, bytearray)):
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError as err:
            raise RequestError(f"request body is not valid UTF-8: {err.reason} at byte {err.start}") from None
    else:
        text = body
    return decode_json(text)
