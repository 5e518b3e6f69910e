"""Random-weight checkpoints of real model shapes, written once under build/bench/ and reused.

The tokenizer is the offline byte-level BPE of model_build.tiny_models (small vocab); the model keeps the real
shape's vocab size, so weights and compute are those of the real model.
"""

from __future__ import annotations

import json
from pathlib import Path

SHAPES = {
    # name: (model_type, config kwargs)
    "gpt2-large": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=1280, n_layer=36, n_head=20)),
    "gpt2-124m": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)),
    "gptj-6b": ("gptj", dict(vocab_size=50400, n_positions=2048, n_embd=4096, n_layer=28, n_head=16, rotary_dim=64)),
    # the same code paths at test size (tests/model_build/test_bench.py)
    "tiny-gpt2": ("gpt2", dict(vocab_size=1024, n_positions=256, n_embd=32, n_layer=2, n_head=4)),
    "tiny-gptj": ("gptj", dict(vocab_size=1024, n_positions=256, n_embd=32, n_layer=2, n_head=4, rotary_dim=4)),
}


def random_model(shape: str, *, dtype: str = "fp32", device: str = "cpu"):
    """(model in eval mode, its config) of `shape` with random weights (seed 0), made on `device` in `dtype`
    (GPT-J-6B on a GPU: seconds instead of minutes of CPU init), plus the offline tokenizer's eos id."""
    import torch
    import transformers

    model_type, kwargs = SHAPES[shape]
    config_cls = transformers.GPT2Config if model_type == "gpt2" else transformers.GPTJConfig
    model_cls = transformers.GPT2LMHeadModel if model_type == "gpt2" else transformers.GPTJForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = model_cls(config_cls(**kwargs, **_special_ids(kwargs)))
    from systems.hf_fastload.handler.inference import TORCH_DTYPES

    return model.to(TORCH_DTYPES[dtype]).eval()


def _special_ids(kwargs: dict) -> dict[str, int]:
    import tempfile

    from model_build.tiny_models import EOS, write_gpt2_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        write_gpt2_tokenizer(Path(tmp), kwargs["n_positions"])
        eos_id = json.loads((Path(tmp) / "vocab.json").read_text())[EOS]
    return dict(bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id)


def make_checkpoint(shape: str, out: Path) -> Path:
    """fp32 safetensors checkpoint of `shape` with random weights (seed 0) + tokenizer files, as a user has it."""
    out = Path(out)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    import torch
    import transformers

    from model_build.tiny_models import EOS, write_gpt2_tokenizer

    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model_type, kwargs = SHAPES[shape]
    write_gpt2_tokenizer(tmp, kwargs["n_positions"])
    eos_id = json.loads((tmp / "vocab.json").read_text())[EOS]
    ids = dict(bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id)
    config_cls = transformers.GPT2Config if model_type == "gpt2" else transformers.GPTJConfig
    model_cls = transformers.GPT2LMHeadModel if model_type == "gpt2" else transformers.GPTJForCausalLM
    torch.manual_seed(0)
    model = model_cls(config_cls(**kwargs, **ids)).eval()
    model.save_pretrained(tmp)
    tmp.rename(out)
    return out


def endpoint_yaml(
    name: str,
    model: Path,
    dtype: str = "fp16",
    system: str = "hf-fastload",
    instance_type: str = "ml.m5.xlarge",
    extra: str = "",
) -> str:
    return (
        f"  - name: {name}\n    system: {system}\n    model: {model}\n    dtype: {dtype}\n"
        f"    instance_type: {instance_type}\n{extra}"
    )


def build(config_text: str, config_path: Path, endpoint: str, out: Path, force: bool = False) -> tuple[Path, float]:
    """Build `endpoint` of the config with model_build.cli.build_endpoint; (artifact dir, seconds or -1 if reused)."""
    import time

    from deployment import load_config
    from model_build.cli import build_endpoint

    config_path.parent.mkdir(parents=True, exist_ok=True)
    same = config_path.is_file() and config_path.read_text() == config_text
    if same and (out / "manifest.json").is_file() and not force:
        return out, -1.0
    config_path.write_text(config_text)
    started = time.perf_counter()
    plan = load_config(config_path).plan(endpoint)
    build_endpoint(plan.spec, out, progress=False, engine=plan.engine)
    return out, time.perf_counter() - started
