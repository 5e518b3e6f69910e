"""Tiny offline models: loadable, generating, deterministic, and written in files transformers 4.x reads; the chat
models' template renders tools, tool calls and tool results (which of them the HF container's transformers 4.49
serves: tests/systems/test_hf_container_compat.py)."""

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

    with pytest.raises(ValueError, match="'bloom'.*allowed: gpt2, gptj, t5, llama, qwen2, qwen3, mistral, gemma2"):
        make_tiny_model("bloom", tmp_path / "x")
    assert not (tmp_path / "x").exists()


CHAT_CLASSES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
}


@pytest.mark.parametrize("arch", list(CHAT_CLASSES))
def test_chat_models_load_render_tools_and_generate(tiny_chat_models: dict[str, Path], arch: str) -> None:
    import torch
    import transformers

    from model_build.tiny_models import CHAT_ARCHITECTURES, CHAT_EOS

    assert set(CHAT_ARCHITECTURES) == set(CHAT_CLASSES)
    path = tiny_chat_models[arch]
    tok_config = json.loads((path / "tokenizer_config.json").read_text())
    assert tok_config["tokenizer_class"] == "PreTrainedTokenizerFast" and (path / "tokenizer.json").is_file()
    assert sum(p.stat().st_size for p in path.iterdir()) < 4_000_000
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    assert type(model).__name__ == CHAT_CLASSES[arch]
    assert model.config.eos_token_id == tokenizer.convert_tokens_to_ids(CHAT_EOS) == tokenizer.eos_token_id
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    text = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        ],
        tools=tools,
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou may call functions.")
    assert '{"type": "function", "function": {"name": "get_weather"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    # the tool tags are single tokens that survive decoding; the turn markers are special and do not
    assert "<tool_call>" in tokenizer.convert_ids_to_tokens(ids["input_ids"][0])
    assert "<tool_call>" in tokenizer.decode(ids["input_ids"][0], skip_special_tokens=True)
    assert "<|im_start|>" not in tokenizer.decode(ids["input_ids"][0], skip_special_tokens=True)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 4


def test_chat_model_same_seed_same_bytes(tiny_chat_models: dict[str, Path], tmp_path: Path) -> None:
    from model_build.tiny_models import make_tiny_model

    again = make_tiny_model("qwen2", tmp_path / "qwen2")
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json"):
        assert (again / name).read_bytes() == (tiny_chat_models["qwen2"] / name).read_bytes(), name


@pytest.mark.parametrize("arch", list(CHAT_CLASSES))
def test_the_cli_makes_each_chat_model(tmp_path: Path, arch: str) -> None:
    from model_build.cli import main

    assert main(["tiny-model", arch, "--out", str(tmp_path / arch)]) == 0
    assert json.loads((tmp_path / arch / "config.json").read_text())["model_type"] == arch
