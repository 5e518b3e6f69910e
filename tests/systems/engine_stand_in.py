"""CPU stand-ins of the AWS vLLM and SGLang containers' contracts, for the container-contract tests: the product's
local_runtime/stand_in.py (which says what is reproduced and from which source), plus vllm_argv: the vLLM DLC
entrypoint's rules (local_runtime/vllm_args.py, which the local SageMaker runtime starts the real engine with).
"""

from __future__ import annotations

from pathlib import Path

from local_runtime.stand_in import StandIn, flags_of, serving, sglang_argv
from local_runtime.vllm_args import build_args

MODEL_DIR = "/opt/ml/model"
SGLANG_PREFIX = "SM_SGLANG_"

__all__ = ["MODEL_DIR", "SGLANG_PREFIX", "StandIn", "flags_of", "serving", "sglang_argv", "vllm_argv"]


def vllm_argv(env: dict[str, str], model_dir: Path) -> list[str]:
    """The argv the vLLM DLC's entrypoint builds from `env`, with `model_dir` standing for /opt/ml/model."""
    return build_args(env, model_dir)
