"""Tiny offline models: loadable, generating, deterministic, and written in files transformers 4.x reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.parametrize("arch", ["gpt2", "gptj"])
def test_causal_models_load_and_generate(tiny_models: dict[str, Path], arch: str) -> None:
    import torch
    import transformers

    path = tiny_models[arch]
    tok_config = json.loads((path / "tokenizer_config.json").read_text())
    assert tok_config["tokenizer_class"] == "GPT2Tokenizer"
    assert {"vocab.json", "merges.txt", "special_tokens_map.json"} <= {p.name for p in path.iterdir()}
    assert not (path / "tokenizer.json").exists(), "tokenizers-0.23 tokenizer.json does not load in 4.x"
    assert sum(p.stat().st_size for p in path.iterdir()) < 4_000_000

    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    assert 500 <= len(tokenizer) <= 2000
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    expected_cls = {"gpt2": "GPT2LMHeadModel", "gptj": "GPTJForCausalLM"}[arch]
    assert type(model).__name__ == expected_cls
    assert model.config.eos_token_id == model.config.pad_token_id == tokenizer.eos_token_id
    ids = tokenizer("The quick brown fox", return_tensors="pt")
    assert tokenizer.decode(ids["input_ids"][0]) == "The quick brown fox"  # byte-level BPE round trip
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5


def test_same_seed_same_bytes(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    from model_build.tiny_models import make_tiny_model

    again = make_tiny_model("gpt2", tmp_path / "gpt2")
    for name in ("model.safetensors", "vocab.json", "merges.txt", "config.json"):
        assert (again / name).read_bytes() == (tiny_models["gpt2"] / name).read_bytes(), name


def test_t5_seq2seq(tmp_path: Path) -> None:
    import torch
    import transformers

    from model_build.tiny_models import make_tiny_model

    path = make_tiny_model("t5", tmp_path / "t5")
    model = transformers.T5ForConditionalGeneration.from_pretrained(path).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    assert tokenizer.pad_token_id == model.config.pad_token_id
    ids = tokenizer("translate: hello world", return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape[1] == 5  # decoder start token + 4


def test_unknown_architecture_is_refused(tmp_path: Path) -> None:
    from model_build.tiny_models import make_tiny_model

    with pytest.raises(ValueError, match="'llama'.*allowed: gpt2, gptj, t5"):
        make_tiny_model("llama", tmp_path / "x")
    assert not (tmp_path / "x").exists()
