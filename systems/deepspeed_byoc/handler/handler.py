"""The deepspeed-byoc model handler (byoc_server.contract.Handler): DeepSpeed-Inference with kernel injection.

In the image this file is /opt/program/handler.py and the server runs it as `--handler handler:DeepSpeedHandler`.
It runs under two library stacks, on purpose: the image's (torch 2.1.2, transformers 4.36.2, deepspeed 0.12.6,
CUDA) and the build machine's (transformers 5.x, CPU, no deepspeed), where model_build verifies the artifact
with it and the tests serve it. So: stdlib + torch + transformers at import time; deepspeed only on the GPU path.

Load (artifact written by systems/deepspeed_byoc/recipe.py):
    deepspeed.json                 {"dtype", "tensor_parallel": {"tp_size"}, "replace_with_kernel_inject", "max_out_tokens"}
    config.json + *.safetensors    the model in fp16, sharded; tokenizer files next to them
  GPU + kernel injection (the endpoint): from_pretrained on the host, then
      deepspeed.init_inference(model, dtype=torch.float16, replace_with_kernel_inject=True, tensor_parallel={"tp_size": N})
    which swaps every transformer block for DeepSpeed's fused CUDA kernels and splits the weights over N GPUs.
  CPU, or DS_KERNEL_INJECTION=false: the plain transformers model (the path model_build verifies and tests serve).

Tensor parallelism (N > 1): one process per GPU (torchrun, started by `serve`); rank 0 serves HTTP and
broadcasts each validated request to the other ranks, which run the same generate call in `follow()`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import threading
from pathlib import Path
from typing import Any

import torch
import transformers

try:  # in the image the server package is top-level; in the repository it lives under systems/
    from byoc_server.contract import RequestError
except ImportError:  # pragma: no cover - depends on the layout
    from systems.byoc_server.contract import RequestError

log = logging.getLogger("deepspeed_byoc")

ENGINE_CONFIG = "deepspeed.json"
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])


def dtype_kwargs(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """`from_pretrained`'s dtype argument: `torch_dtype` before transformers 5, `dtype` since."""
    return {"torch_dtype": dtype} if _TRANSFORMERS_MAJOR < 5 else {"dtype": dtype}


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"DS_KERNEL_INJECTION={value!r} is not a boolean; allowed: true, false")


def read_engine_config(model_dir: Path) -> dict[str, Any]:
    """deepspeed.json with the container environment's overrides (DTYPE, TENSOR_PARALLEL_DEGREE, DS_KERNEL_INJECTION)."""
    path = Path(model_dir) / ENGINE_CONFIG
    config = json.loads(path.read_text()) if path.is_file() else {}
    dtype = os.environ.get("DTYPE") or config.get("dtype") or "fp16"
    if dtype not in TORCH_DTYPES:
        raise ValueError(
            f"dtype {dtype!r} (DTYPE or {ENGINE_CONFIG}) is not supported; allowed: {', '.join(TORCH_DTYPES)}"
        )
    tp_size = int(os.environ.get("TENSOR_PARALLEL_DEGREE") or config.get("tensor_parallel", {}).get("tp_size", 1))
    inject = _flag(os.environ.get("DS_KERNEL_INJECTION"), bool(config.get("replace_with_kernel_inject", True)))
    return {
        "dtype": dtype,
        "tp_size": tp_size,
        "kernel_injection": inject,
        "max_out_tokens": config.get("max_out_tokens"),
    }


class DeepSpeedHandler:
    """Loads the artifact once; `generate` is called by one thread at a time (the server holds a lock)."""

    def __init__(self) -> None:
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = torch.device("cpu")
        self.kernel_injection = False
        self.tp_size = 1
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.context_length: int | None = None
        self._lock = threading.Lock()

    # ---- load -------------------------------------------------------------------------------------------

    def load(self, model_dir: Path, kernel_injection: bool | None = None, tp_size: int | None = None) -> None:
        """Load tokenizer + model. kernel_injection / tp_size None: from deepspeed.json and the environment
        (model_build's verification passes False / 1: the plain model, on the build machine)."""
        model_dir = Path(model_dir)
        engine = read_engine_config(model_dir)
        dtype = TORCH_DTYPES[engine["dtype"]]
        self.tp_size = engine["tp_size"] if tp_size is None else tp_size
        inject = engine["kernel_injection"] if kernel_injection is None else kernel_injection
        cuda = torch.cuda.is_available()
        if inject and not cuda:
            log.warning("DS_KERNEL_INJECTION is on but there is no CUDA device: serving the plain transformers model")
            inject = False
        if self.tp_size > 1 and not cuda:
            raise RuntimeError(f"tensor parallel size {self.tp_size} needs {self.tp_size} CUDA GPUs; none is visible")
        if self.tp_size != self.world_size and self.tp_size > 1:
            raise RuntimeError(
                f"tensor parallel size {self.tp_size} needs one process per GPU (WORLD_SIZE={self.world_size}); "
                f"start the server with BYOC_PROCESSES={self.tp_size}"
            )

        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        tokenizer.padding_side = "left"  # decoder-only batches pad on the left so every row continues its prompt
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token

        kwargs: dict[str, Any] = dict(use_safetensors=True, **dtype_kwargs(dtype))
        if _TRANSFORMERS_MAJOR < 5 and importlib.util.find_spec("accelerate") is not None:
            kwargs["low_cpu_mem_usage"] = True  # load straight into place (5.x always does)
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs).eval()
        config = model.config
        context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)

        if cuda:
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
            if inject or self.tp_size > 1:
                import deepspeed

                options: dict[str, Any] = dict(
                    dtype=dtype,
                    replace_with_kernel_inject=inject,
                    tensor_parallel={"tp_size": self.tp_size},
                )
                if engine["max_out_tokens"]:
                    # the KV-cache workspace DeepSpeed allocates: prompt + new tokens must fit in it
                    options["max_out_tokens"] = int(engine["max_out_tokens"])
                    context = min(context or options["max_out_tokens"], options["max_out_tokens"])
                model = deepspeed.init_inference(model, **options).module
            else:
                model = model.to(self.device)
        self.model, self.tokenizer = model, tokenizer
        self.kernel_injection = inject
        self.context_length = context
        log.info(
            "loaded %s (%s) on %s, kernel injection %s, tensor parallel %d",
            type(model).__name__,
            engine["dtype"],
            self.device,
            inject,
            self.tp_size,
        )

    # ---- generate ---------------------------------------------------------------------------------------

    def generate(self, prompts: list[str], parameters: Any) -> list[str]:
        """Continuations of `prompts` (without the prompt text); RequestError when they cannot fit."""
        if self.model is None:
            raise RuntimeError("generate() called before load()")
        params = parameters.model_dump() if hasattr(parameters, "model_dump") else dict(parameters)
        encoded = self._encode(prompts, params)  # refuse before any rank starts work
        if self.world_size > 1:
            if params.get("do_sample") and params.get("seed") is None:
                params["seed"] = random.randrange(2**32)  # every rank must sample the same tokens
            import torch.distributed as dist

            dist.broadcast_object_list([prompts, params], src=0)
        return self._generate(encoded, params)

    def follow(self) -> None:
        """Ranks > 0: take part in every generate call rank 0 broadcasts (runs until the process is stopped)."""
        import torch.distributed as dist

        while True:
            payload: list[Any] = [None, None]
            dist.broadcast_object_list(payload, src=0)
            prompts, params = payload
            self._generate(self._encode(prompts, params), params)

    def _encode(self, prompts: list[str], params: dict[str, Any]) -> Any:
        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True)
        prompt_tokens = encoded["input_ids"].shape[1]
        if self.context_length and prompt_tokens + params["max_new_tokens"] > self.context_length:
            raise RequestError(
                f"inputs tokens + parameters.max_new_tokens must be <= {self.context_length} (the model's context); "
                f"got {prompt_tokens} inputs tokens + max_new_tokens {params['max_new_tokens']}"
            )
        return encoded.to(self.device)

    def _generate(self, encoded: Any, params: dict[str, Any]) -> list[str]:
        kwargs: dict[str, Any] = {
            "max_new_tokens": params["max_new_tokens"],
            "do_sample": bool(params.get("do_sample")),
            "num_beams": params.get("num_beams", 1),
            "repetition_penalty": params.get("repetition_penalty", 1.0),
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if params.get("min_new_tokens"):
            kwargs["min_new_tokens"] = params["min_new_tokens"]
        if kwargs["do_sample"]:
            kwargs.update(
                temperature=params.get("temperature", 1.0), top_p=params.get("top_p", 1.0), top_k=params.get("top_k", 0)
            )
        prompt_tokens = encoded["input_ids"].shape[1]
        with self._lock, torch.inference_mode():
            if params.get("seed") is not None:
                torch.manual_seed(params["seed"])
            output = self.model.generate(**encoded, **kwargs)
        return self.tokenizer.batch_decode(output[:, prompt_tokens:], skip_special_tokens=True)
