"""Tiny LoRA adapters made offline with peft on a tiny base model (model_build/tiny_models.py): what the adapter
tests build, publish and deploy. peft is a test dependency (requirements-dev.txt), imported only here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def make_tiny_adapter(
    base_dir: str | Path,
    out_dir: str | Path,
    *,
    rank: int = 8,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
    seed: int = 0,
    trained_on: str | None = None,
) -> Path:
    """A LoRA adapter of `base_dir` (peft's save_pretrained: adapter_config.json + adapter_model.safetensors) with
    random, non-zero weights (init_lora_weights=False), so it changes the base's output. `trained_on`: the
    base_model_name_or_path to record (default: the base directory, as peft records it)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_dir)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=list(target_modules),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )
    out = Path(out_dir)
    get_peft_model(model, config).save_pretrained(out)
    if trained_on is not None:
        path = out / "adapter_config.json"
        document = json.loads(path.read_text())
        document["base_model_name_or_path"] = trained_on
        path.write_text(json.dumps(document, indent=2))
    return out


__all__ = ["make_tiny_adapter"]
