"""The one rule on an engine value the DLC entrypoint hands to the engine's argument parser: it must reach the
engine as exactly the one argv token it is in the config.

The entrypoints, at the commits the pinned images are built from (systems/images.py):
- vLLM, aws/deep-learning-containers scripts/docker/vllm/sagemaker_args.py (commit 19aa4751eb), build_args and
  tokens_for: `lowered = value.strip().lower()`; "true" -> the bare flag, "false" -> omitted; "" -> the bare flag;
  a value that is a JSON array (`stripped.startswith("[") and stripped.endswith("]")`) -> one token per element; a
  value that is "a whitespace-separated run of JSON objects" (json_object_sequence, `len(objects) > 1`) -> one
  token per object; anything else -> `[value]`, one token, verbatim.
- SGLang, aws/deep-learning-containers scripts/docker/sglang/sagemaker_entrypoint.sh (commit 3a66fab5ed):
  `while IFS='=' read -r key value; do ... done < <(env | grep "^${PREFIX}")`: the environment is read line by line,
  so a line break splits a value (and the rest becomes a line of its own); "true"/"false" (lowercased) as for vLLM;
  else `ARGS+=("$value")`, one token.
Both engines then parse argv with Python's argparse, which reads a token that starts with '-' as an option unless
it looks like a negative number (argparse.py, `_negative_number_matcher = re.compile(r'^-\\d+$|^-\\d*\\.\\d+$')`,
and _parse_optional: "if it starts with a prefix character it's an option"): `--chat-template --trust-remote-code`
would pass a flag of its own, or fail with "expected one argument". And a value with whitespace at either end is
judged stripped by the entrypoint (" true" is the bare flag) while the raw one is passed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

# argparse.ArgumentParser._negative_number_matcher (CPython 3.12 Lib/argparse.py).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _json_objects(value: str) -> int:
    """How many whitespace-separated JSON objects `value` is a run of (sagemaker_args.py json_object_sequence);
    0 when it is not such a run."""
    decoder = json.JSONDecoder()
    count, index = 0, 0
    while index < len(value):
        try:
            parsed, index = decoder.raw_decode(value, index)
        except ValueError:
            return 0
        if not isinstance(parsed, dict):
            return 0
        count += 1
        while index < len(value) and value[index].isspace():
            index += 1
    return count


def sglang_entrypoint_splits(name: str, value: str) -> str | None:
    """Where the SGLang DLC's entrypoint (its `env | grep` + `IFS='=' read` loop) would split `value`: a line break."""
    if "\n" in value or "\r" in value:
        return f"{name}: value {value!r} has a line break, which the container splits; use a file"
    return None


def vllm_entrypoint_splits(name: str, value: str) -> str | None:
    """Where the vLLM DLC's entrypoint (sagemaker_args.py) would split `value`: a JSON array, or a run of several
    JSON objects."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            json.loads(text)
        except ValueError:
            return None
        return f"{name}: value {value!r} is a JSON array, which the container splits into several tokens"
    if text.startswith("{") and text.endswith("}") and _json_objects(text) > 1:
        return (
            f"{name}: value {value!r} is a run of several JSON objects, which the container splits into one token "
            "each (sagemaker_args.py json_object_sequence); allowed: one JSON object"
        )
    return None


def entrypoint_value_problem(name: str, value: str, splits: Callable[[str, str], str | None]) -> str | None:
    """Why a DLC entrypoint would not hand `value` to the engine as one argv token meaning what it says; None when
    it would. `splits` is that entrypoint's own rule (sglang_entrypoint_splits, vllm_entrypoint_splits). The message
    starts with `name` and says what is allowed."""
    text = value.strip()
    if text.lower() in ("", "true", "false"):
        return f"{name}: value {value!r} would be read by the container as a boolean or a bare flag"
    if text != value:
        return (
            f"{name}: value {value!r} has whitespace at an end, which the container's entrypoint strips to judge "
            "the value but passes as given; allowed: the value without it"
        )
    if text.startswith("-") and not _NEGATIVE_NUMBER.match(text):
        return (
            f"{name}: value {value!r} starts with '-', so the engine's argument parser would read it as an option "
            "(argparse), not as this flag's value; allowed: a value that does not start with '-' (a negative number "
            "is fine)"
        )
    return splits(name, value)


__all__ = ["entrypoint_value_problem", "sglang_entrypoint_splits", "vllm_entrypoint_splits"]
