"""Hub repositories for the plan-from-metadata tests, laid in a Hub mirror (local_emulator/hub_mirror.py): a tiny
Qwen3 made offline, and a Qwen3-32B-shaped checkpoint of sparse safetensors (real headers, holes for data) with a
tokenizer of the real one's size class, so the plan's bytes read can be measured against 65.5 GB of weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest

from local_emulator.hub_mirror import add_repo, write_sparse_safetensors

# Qwen/Qwen3-32B's config.json (huggingface.co/Qwen/Qwen3-32B, the file as published; the same facts as
# systems/checkpoint_facts.py KNOWN_CHECKPOINTS): 64 layers, hidden 5120, intermediate 25600, 64 heads of 128, 8 KV
# heads, vocabulary 151936, untied embeddings, bf16.
QWEN3_32B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 25600,
    "max_position_embeddings": 40960,
    "max_window_layers": 64,
    "model_type": "qwen3",
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
QWEN3_32B_SHARDS = 17
# Qwen3's tokenizer: 151,643 BPE tokens (its tokenizer.json is 11.4 MB, vocab.json 2.8 MB, merges.txt 1.7 MB).
QWEN3_BPE_TOKENS = 151_643


def qwen3_32b_tensors() -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor of the checkpoint (transformers' Qwen3ForCausalLM names), in the order the shards hold them."""
    c = QWEN3_32B_CONFIG
    hidden, inter, head = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * head, c["num_key_value_heads"] * head
    tensors: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (c["vocab_size"], hidden))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (q, hidden)),
            (p + "self_attn.k_proj.weight", (kv, hidden)),
            (p + "self_attn.v_proj.weight", (kv, hidden)),
            (p + "self_attn.o_proj.weight", (hidden, q)),
            (p + "self_attn.q_norm.weight", (head,)),
            (p + "self_attn.k_norm.weight", (head,)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "mlp.gate_proj.weight", (inter, hidden)),
            (p + "mlp.up_proj.weight", (inter, hidden)),
            (p + "mlp.down_proj.weight", (hidden, inter)),
        ]
    return tensors + [("model.norm.weight", (hidden,)), ("lm_head.weight", (c["vocab_size"], hidden))]


def big_bpe_tokenizer(small: Path, target: Path, tokens: int = QWEN3_BPE_TOKENS) -> None:
    """`small`'s tokenizer files with its byte-level BPE grown to `tokens` entries (merges of existing tokens, so
    it loads and round-trips like any BPE): a tokenizer.json of the real one's size class, made offline."""
    document = json.loads((small / "tokenizer.json").read_text())
    model = document["model"]
    vocab: dict[str, int] = model["vocab"]
    merges: list = model["merges"]
    taken = set(vocab.values()) | {t["id"] for t in document["added_tokens"]}
    base = sorted(vocab, key=vocab.__getitem__)[:700]
    next_id = max(taken) + 1
    for left in base:
        for right in base:
            if len(vocab) >= tokens:
                break
            merged = left + right
            if merged not in vocab:
                vocab[merged] = next_id
                next_id += 1
                merges.append([left, right])
    (target / "tokenizer.json").write_text(json.dumps(document, ensure_ascii=False))
    shutil.copy(small / "tokenizer_config.json", target / "tokenizer_config.json")


def lay_qwen3_32b(root: Path, repo_id: str, tokenizer_source: Path) -> Path:
    """The Qwen3-32B-shaped repository: config, generation config, a big tokenizer, 17 sparse shards and the index."""
    folder = root / repo_id
    folder.mkdir(parents=True)
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (folder / "config.json").write_text(json.dumps(QWEN3_32B_CONFIG, indent=2))
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": True, "temperature": 0.6})
    )
    big_bpe_tokenizer(tokenizer_source, folder)
    tensors = qwen3_32b_tensors()
    sizes = [2 * _count(shape) for _, shape in tensors]
    share = sum(sizes) / QWEN3_32B_SHARDS
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(QWEN3_32B_SHARDS)]
    running = 0
    for (name, shape), size in zip(tensors, sizes, strict=True):
        shards[min(int(running // share), QWEN3_32B_SHARDS - 1)].append((name, shape))
        running += size
    weight_map = {}
    for i, members in enumerate(shards, start=1):
        shard = f"model-{i:05d}-of-{QWEN3_32B_SHARDS:05d}.safetensors"
        write_sparse_safetensors(folder / shard, {name: ("BF16", shape) for name, shape in members})
        weight_map |= {name: shard for name, _ in members}
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return folder


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def point_hub_at(monkeypatch: pytest.MonkeyPatch, url: str, home: Path, token: str | None = None) -> None:
    """This test's process talks to the mirror at `url` (the suite runs with the Hub offline: tests/hermetic.py),
    with its own HF_HOME (cache and stored token) and HF_TOKEN only when given."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    if token is None:
        monkeypatch.delenv("HF_TOKEN", raising=False)
    else:
        monkeypatch.setenv("HF_TOKEN", token)


__all__ = ["add_repo", "lay_qwen3_32b", "point_hub_at", "qwen3_32b_tensors"]
