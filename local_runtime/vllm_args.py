"""The AWS vLLM DLC's translation of SM_VLLM_* variables into vLLM server arguments, as this project applies it.

Primary source: aws/deep-learning-containers scripts/docker/vllm/sagemaker_args.py (19aa4751eb) `build_args`, run by
scripts/docker/vllm/sagemaker_entrypoint.sh before `exec standard-supervisor python3 -m
vllm.entrypoints.openai.api_server "${ARGS[@]}"`. Its rules (written here from them, not copied):
  - "--port 8080" first;
  - "--model /opt/ml/model" when SM_VLLM_MODEL is unset or empty and the directory exists and is non-empty, else
    "--model $HF_MODEL_ID" when that is set;
  - every SM_VLLM_<NAME> in sorted order as "--<name lower-cased, _ -> ->": "true" -> the bare flag, "false" ->
    nothing (both compared stripped and lower-cased), "" -> the bare flag;
  - --allowed-origins, --allowed-methods, --allowed-headers and --middleware keep their value as one token (vLLM
    parses the first three with json.loads; --middleware appends one value per occurrence);
  - a JSON array -> one token per element (objects and arrays re-serialized compactly, booleans "true"/"false",
    null ""), an empty array -> no flag at all, an array that does not parse -> the value as one token;
  - several whitespace-separated JSON objects -> one token each (compact); one object -> the value verbatim;
  - anything else -> the value as one token.
The entrypoint also appends "--middleware sagemaker_serve.SageMakerRouteMiddleware" when
/usr/local/bin/sagemaker_serve.py exists (the amzn2023 image only); the pinned image is the ubuntu24.04 one
(systems/images_current.py VLLM_DLC), so it is not added here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PREFIX = "SM_VLLM_"
DEFAULT_PORT = "8080"
MODEL_DIR = "/opt/ml/model"
SINGLE_TOKEN_FLAGS = frozenset({"--allowed-origins", "--allowed-methods", "--allowed-headers", "--middleware"})


def flag_for(key: str) -> str:
    """SM_VLLM_TENSOR_PARALLEL_SIZE -> --tensor-parallel-size."""
    return "--" + key[len(PREFIX) :].lower().replace("_", "-")


def _token(element: Any) -> str:
    if isinstance(element, (dict, list)):
        return json.dumps(element, separators=(",", ":"))
    if isinstance(element, bool):
        return "true" if element else "false"
    return "" if element is None else str(element)


def _json_objects(text: str) -> list[dict] | None:
    """`{...} {...}` as its objects; None when the text is not a run of JSON objects (a Jinja template, say)."""
    decoder, objects, index = json.JSONDecoder(), [], 0
    while index < len(text):
        try:
            parsed, index = decoder.raw_decode(text, index)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        objects.append(parsed)
        while index < len(text) and text[index].isspace():
            index += 1
    return objects or None


def tokens_for(flag: str, value: str) -> list[str] | None:
    """The argv tokens after `flag`: [] for a bare flag, None to leave the flag out (an empty JSON array)."""
    if not value:
        return []
    text = value.strip()
    if flag in SINGLE_TOKEN_FLAGS:
        return [value]
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return [value]
        if not isinstance(parsed, list):
            return [value]
        return [_token(element) for element in parsed] if parsed else None
    if text.startswith("{") and text.endswith("}"):
        objects = _json_objects(text)
        if objects is not None and len(objects) > 1:
            return [json.dumps(o, separators=(",", ":")) for o in objects]
        return [value]
    return [value]


def build_args(env: Mapping[str, str], model_dir: str | Path = MODEL_DIR) -> list[str]:
    """The argv (without the program) the entrypoint builds from `env`, `model_dir` standing for /opt/ml/model."""
    args = ["--port", DEFAULT_PORT]
    if not env.get(f"{PREFIX}MODEL"):
        if os.path.isdir(model_dir) and os.listdir(model_dir):
            args += ["--model", str(model_dir)]
        elif env.get("HF_MODEL_ID"):
            args += ["--model", env["HF_MODEL_ID"]]
    for key in sorted(env):
        if not key.startswith(PREFIX):
            continue
        flag, value = flag_for(key), env[key]
        lowered = value.strip().lower()
        if lowered == "true":
            args.append(flag)
        elif lowered != "false" and (tokens := tokens_for(flag, value)) is not None:
            args += [flag, *tokens]
    return args
