"""The tiny Qwen3 that the real vLLM engine serves on a CPU (model_build/tiny_models.py qwen3_thinking): a head size
vLLM's CPU attention takes, and Qwen3's thinking turns in its chat template."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from model_build.tiny_models import make_tiny_model

    return make_tiny_model("qwen3_thinking", tmp_path_factory.mktemp("qwen3_thinking") / "m")


def test_shape_is_one_vllms_cpu_attention_takes(model):
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    # head_dim 12 is refused by vLLM 0.30.0's CPU attention ("Unsupported CPU attention configuration"); 64 serves
    assert (config["head_dim"], config["num_attention_heads"], config["hidden_size"]) == (64, 2, 128)
    assert config["num_hidden_layers"] == 2 and config["num_key_value_heads"] == 1


def test_template_opens_a_think_block_unless_thinking_is_off(model):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    messages = [{"role": "user", "content": "Hi"}]
    thinking = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert thinking.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n")
    direct = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert direct.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # the tool turns are the hermes ones the other chat models have
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert "<tools>" in tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    out = transformers.AutoModelForCausalLM.from_pretrained(model).generate(
        **ids, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    assert out.shape[1] == ids["input_ids"].shape[1] + 4
