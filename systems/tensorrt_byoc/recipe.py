"""Build the tensorrt-byoc artifact of one endpoint: GPT-2 -> ONNX (fp32, KV cache), verified with ONNX Runtime.

Artifact: decoder.onnx (+ .data), decoder.json, tensorrt_profile.json, tokenizer.json (+ source files), manifest.json;
no TensorRT engine (the container builds it at start). Our own decoder module, verified against transformers' model.
The layout, and why our own decoder module: docs/design/engines.md.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path
from typing import Any

from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems.recipe_common import library_versions, read_model_config, run_recipe
from systems.tensorrt_byoc import TensorRTByocEngineOptions, TensorRTProfile

SYSTEM = "tensorrt-byoc"
GRAPH_FILE = "decoder.onnx"
EXTERNAL_DATA_FILE = "decoder.onnx.data"
INFO_FILE = "decoder.json"
PROFILE_FILE = "tensorrt_profile.json"
OPSET = 17  # LayerNormalization is one op from 17 on: TensorRT keeps it in fp32 accumulation under fp16
EXTERNAL_DATA_ABOVE_BYTES = 1_800_000_000  # protobuf's 2 GB limit on one file
TOKENIZER_FILES = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
)
SUPPORTED_ACTIVATIONS = ("gelu_new", "gelu", "gelu_pytorch_tanh", "relu")

# fp32 graph vs fp32 PyTorch: only the order of floating point operations differs.
TOLERANCE = 1e-3
VERIFY_PROMPTS = (
    "The quick brown fox",
    "Hello, world! How are you today?",
    "Amazon SageMaker hosts a model behind an HTTPS endpoint.",
    "In the spring",
)
VERIFY_BATCH_SIZES = (1, 2, 4)
VERIFY_NEW_TOKENS = 6


def check_tokenizers_writer(endpoint: EndpointSpec, installed: str | None = None) -> None:
    """Refuse to write tokenizer.json with a tokenizers release newer (major.minor) than the image's: the image reads
    it with its own pinned release, and a newer writer may use a form it cannot read (tokenizers 0.20 changed the BPE
    merges; systems/container_tokenizer.py). Older or equal writers are read by the newer image."""
    import re

    from systems import get_system
    from systems.container_tokenizer import python_stack_of

    if installed is None:
        import tokenizers

        installed = tokenizers.__version__
    stack = python_stack_of(get_system(SYSTEM))
    here = tuple(int(part) for part in re.findall(r"\d+", installed)[:2])
    if here > stack.tokenizers_floor[:2]:
        raise BuildError(
            f"endpoint {endpoint.name!r}: this machine's tokenizers {installed} writes tokenizer.json, which the "
            f"{SYSTEM} image's tokenizers {stack.tokenizers.lstrip('=')} may not read; allowed: a build with "
            f"tokenizers {stack.tokenizers.lstrip('=')} or older (requirements-build.txt), or an image rebuilt with "
            f"tokenizers {installed} (systems/tensorrt_byoc/container/Dockerfile and systems/images.py)"
        )


def check_architecture(source: Path, endpoint: EndpointSpec) -> dict[str, Any]:
    config = read_model_config(source, endpoint)
    model_type = config.get("model_type")
    if model_type != "gpt2":
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has model_type {model_type!r} "
            f"(architectures {config.get('architectures')}); system {SYSTEM!r} exports GPT-2 only (model_type 'gpt2', "
            "e.g. openai-community/gpt2); use system 'lmi-trtllm' for other architectures on TensorRT"
        )
    checks = {
        "activation_function": (config.get("activation_function", "gelu_new"), SUPPORTED_ACTIVATIONS),
        "scale_attn_by_inverse_layer_idx": (config.get("scale_attn_by_inverse_layer_idx", False), (False,)),
        "reorder_and_upcast_attn": (config.get("reorder_and_upcast_attn", False), (False,)),
        "scale_attn_weights": (config.get("scale_attn_weights", True), (True,)),
        "add_cross_attention": (config.get("add_cross_attention", False), (False,)),
    }
    for key, (value, allowed) in checks.items():
        if value not in allowed:
            raise BuildError(
                f"endpoint {endpoint.name!r}: model {endpoint.model!r}: config.json {key} {value!r} is not exported by "
                f"system {SYSTEM!r}; allowed: {', '.join(map(repr, allowed))}"
            )
    return config


def resolve_profile(endpoint: EndpointSpec, engine: TensorRTByocEngineOptions, n_positions: int) -> TensorRTProfile:
    profile = engine.tensorrt_profile
    if profile.max_sequence_length > n_positions:
        raise BuildError(
            f"endpoint {endpoint.name!r}: engine.tensorrt_profile.max_sequence_length: value "
            f"{profile.max_sequence_length} is above the model's n_positions {n_positions}; allowed: 2-{n_positions}"
        )
    return profile


def decoder_module(model: Any) -> Any:
    """GPT-2 as one torch module with the KV cache as a tensor (the graph engine.py documents)."""
    import torch
    from transformers.activations import ACT2FN

    cfg = model.config
    heads, width = cfg.n_head, cfg.n_embd
    head_dim = width // heads
    act = ACT2FN[cfg.activation_function]

    class GPT2Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = model.transformer
            self.lm_head = model.lm_head

        def forward(self, input_ids, position_ids, attention_bias, past_key_values):
            t = self.transformer
            batch, seq = input_ids.shape[0], input_ids.shape[1]
            h = t.wte(input_ids) + t.wpe(position_ids)
            presents = []
            for i, block in enumerate(t.h):
                a = block.ln_1(h)
                qkv = block.attn.c_attn(a)  # Conv1D: x @ W + b
                q, k, v = qkv.split(width, dim=2)
                q, k, v = (x.view(batch, seq, heads, head_dim).transpose(1, 2) for x in (q, k, v))
                k = torch.cat([past_key_values[i, 0], k], dim=2)
                v = torch.cat([past_key_values[i, 1], v], dim=2)
                presents.append(torch.stack([k, v]))
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim) + attention_bias
                ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
                ctx = ctx.transpose(1, 2).reshape(batch, seq, width)
                h = h + block.attn.c_proj(ctx)
                h = h + block.mlp.c_proj(act(block.mlp.c_fc(block.ln_2(h))))
            logits = self.lm_head(t.ln_f(h))
            return logits, torch.stack(presents)

    return GPT2Decoder().eval()


def export_onnx(model: Any, out_dir: Path) -> list[str]:
    """Write decoder.onnx (fp32, dynamic batch/sequence/past axes); returns the graph file names."""
    import onnx
    import torch

    cfg = model.config
    head_dim = cfg.n_embd // cfg.n_head
    batch, seq, past = 2, 3, 1
    example = (
        torch.zeros(batch, seq, dtype=torch.long),
        torch.arange(seq).repeat(batch, 1),
        torch.zeros(batch, 1, seq, past + seq),
        torch.zeros(cfg.n_layer, 2, batch, cfg.n_head, past, head_dim),
    )
    path = out_dir / GRAPH_FILE
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(
            decoder_module(model),
            example,
            str(path),
            dynamo=False,  # the TorchScript exporter: plain ops, no onnxscript dependency
            input_names=["input_ids", "position_ids", "attention_bias", "past_key_values"],
            output_names=["logits", "present_key_values"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "seq"},
                "position_ids": {0: "batch", 1: "seq"},
                "attention_bias": {0: "batch", 2: "seq", 3: "total"},
                "past_key_values": {2: "batch", 4: "past"},
                "logits": {0: "batch", 1: "seq"},
                "present_key_values": {2: "batch", 4: "total"},
            },
            opset_version=OPSET,
            # no constant folding: it would store a transposed copy of the tied embedding as the LM head
            # (+30 % file size for GPT-2); ONNX Runtime and TensorRT fold at load/build time themselves.
            do_constant_folding=False,
        )
    parameter_bytes = sum(p.numel() * 4 for p in model.parameters())
    if parameter_bytes > EXTERNAL_DATA_ABOVE_BYTES:
        graph = onnx.load(str(path))
        onnx.save_model(
            graph, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=EXTERNAL_DATA_FILE
        )
        return [GRAPH_FILE, EXTERNAL_DATA_FILE]
    onnx.checker.check_model(str(path))
    return [GRAPH_FILE]


def write_profile(out_dir: Path, profile: TensorRTProfile, info: dict[str, Any]) -> dict[str, Any]:
    from systems.tensorrt_byoc.handler.engine import profile_shapes

    data = profile.model_dump()
    data["opt_batch"] = profile.opt_batch or profile.min_batch
    data["shapes"] = profile_shapes(data, info)
    (out_dir / PROFILE_FILE).write_text(json.dumps(data, indent=2) + "\n")
    return data


def _reference_logits(model: Any, ids: list[int]) -> Any:
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float().numpy()


def _reference_greedy(model: Any, ids: list[int], new_tokens: int, pad: int) -> list[int]:
    import torch

    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=pad,
        )
    return out[0, len(ids) :].tolist()


def verify(artifact: Path, model: Any, tokenizer: Any, endpoint_name: str = "") -> dict[str, Any]:
    """Run the artifact with the handler's own code on ONNX Runtime and compare it with the PyTorch model.

    Returns the measurements; `passed` is False when the logits differ by more than TOLERANCE anywhere, the
    greedy tokens differ, or the handler's tokenizer gives other ids than the source tokenizer.
    """
    import numpy as np

    from systems.byoc_server.contract import GenerationParameters
    from systems.tensorrt_byoc.handler.engine import OnnxRuntimeBackend
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    handler = TensorRTHandler(backend="onnxruntime")
    handler.load(artifact)
    backend = handler.backend
    assert isinstance(backend, OnnxRuntimeBackend)
    # Within the profile: batches up to max_batch, prompts cut so prompt + new tokens fit max_sequence_length.
    new_tokens = min(VERIFY_NEW_TOKENS, handler.max_sequence_length // 2)
    keep = handler.max_sequence_length - new_tokens
    params = GenerationParameters(max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    max_diff, tokens_match, ids_match, cases = 0.0, True, True, []
    for batch_size in sorted({min(b, handler.max_batch) for b in VERIFY_BATCH_SIZES}):
        for start in range(0, len(VERIFY_PROMPTS) - batch_size + 1, batch_size):
            prompts = list(VERIFY_PROMPTS[start : start + batch_size])
            ours = [enc.ids for enc in handler.tokenizer.encode_batch(prompts, add_special_tokens=False)]
            source_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            ids_match &= ours == source_ids
            batch = [ids[:keep] for ids in ours]
            trace: list[Any] = []
            generated = handler.generate_ids(batch, params, trace=trace)
            prefill, steps = trace[0], trace[1:]
            seq = prefill.shape[1]
            for b, prompt_ids in enumerate(batch):
                n = len(prompt_ids)
                reference = _reference_logits(model, prompt_ids + generated[b])  # teacher-forced on our tokens
                diffs = [np.abs(prefill[b, seq - n :] - reference[:n]).max()]
                diffs += [np.abs(step[b] - reference[n - 1 + k]).max() for k, step in enumerate(steps)]
                greedy = _reference_greedy(model, prompt_ids, new_tokens, pad)
                tokens_match &= greedy == generated[b]
                max_diff = max(max_diff, float(max(diffs)))
            cases.append({"batch_size": batch_size, "prompts": prompts})
    result = {
        "backend": f"onnxruntime {_ort_version()} ({', '.join(backend.providers)})",
        "reference": "transformers GPT2LMHeadModel fp32 (PyTorch)",
        "cases": cases,
        "new_tokens": new_tokens,
        "max_abs_logit_diff": max_diff,
        "tolerance": TOLERANCE,
        "greedy_tokens_match": bool(tokens_match),
        "tokenizer_ids_match": bool(ids_match),
    }
    result["passed"] = bool(max_diff <= TOLERANCE and tokens_match and ids_match)
    return result


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def build(
    endpoint: EndpointSpec, engine: TensorRTByocEngineOptions, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` and return its manifest."""
    check_tokenizers_writer(endpoint)
    source = resolve_model_source(endpoint.model, endpoint.revision)
    source_config = check_architecture(source, endpoint)
    profile = resolve_profile(endpoint, engine, int(source_config.get("n_positions", 1024)))

    import torch
    import transformers

    out_dir = Path(out_dir)
    graph_files: list[str] = []
    profile_data: dict[str, Any] = {}

    def load(path: Path) -> tuple[Any, Any]:
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        return model, transformers.AutoTokenizer.from_pretrained(path)

    def export(model: Any, tokenizer: Any) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise BuildError(
                f"endpoint {endpoint.name!r}: model {endpoint.model!r}: the tokenizer has no fast (tokenizers) form; the container needs tokenizer.json"
            )
        graph_files.extend(export_onnx(model, out_dir))

    def write_profile_and_tokenizer(model: Any, tokenizer: Any) -> None:
        cfg = model.config
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        info = {
            "architecture": "gpt2",
            "num_layers": cfg.n_layer,
            "num_heads": cfg.n_head,
            "head_dim": cfg.n_embd // cfg.n_head,
            "hidden_size": cfg.n_embd,
            "vocab_size": cfg.vocab_size,
            "n_positions": cfg.n_positions,
            "eos_token_id": eos[0] if isinstance(eos, list) else eos,
            "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
            "onnx_dtype": "fp32",
            "serving_dtype": endpoint.dtype,
            "opset": OPSET,
        }
        (out_dir / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
        profile_data.update(write_profile(out_dir, profile, info))
        tokenizer.backend_tokenizer.save(str(out_dir / "tokenizer.json"))
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, out_dir / name)

    def check(model: Any, tokenizer: Any) -> dict[str, Any]:
        verification = verify(out_dir, model, tokenizer, endpoint.name)
        if not verification["passed"]:
            raise BuildError(
                f"endpoint {endpoint.name!r}: the exported ONNX graph does not reproduce the source model: max abs "
                f"logit diff {verification['max_abs_logit_diff']:.3g} (allowed <= {TOLERANCE}), greedy tokens match: "
                f"{verification['greedy_tokens_match']}, tokenizer ids match: {verification['tokenizer_ids_match']}"
            )
        return verification

    return run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        load=load,
        write=[("export ONNX", export), ("profile + tokenizer", write_profile_and_tokenizer)],
        verify=check,  # the handler's own code on ONNX Runtime against the source model (kept in memory)
        verify_label="verify (ONNX Runtime vs PyTorch)",
        fields=lambda: {
            "dtype": endpoint.dtype,
            "onnx": {
                "files": graph_files,
                "opset": OPSET,
                "dtype": "fp32",
                "exporter": "torch.onnx.export (TorchScript)",
            },
            "tensorrt_profile": profile_data,
            "engine_build": "at container start on the serving GPU, cached by (GPU, TensorRT version, ONNX sha256, profile, precision)",
            "libraries": library_versions("torch", "transformers", "onnx", "onnxruntime", "tokenizers"),
        },
    )
