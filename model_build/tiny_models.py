"""Real but tiny models (GPT-2, GPT-J, T5) made offline, for tests and the local demo.

There is no Hugging Face Hub on the build machines, so test models are made here: small configs with random
weights (seeded, so two runs give the same bytes) and a byte-level BPE tokenizer trained in about a second on
an embedded corpus. GPT-2/GPT-J tokenizers are written as vocab.json + merges.txt with
`tokenizer_class: GPT2Tokenizer`, the files transformers 4.x (the serving container) reads; a tokenizers-0.23
`tokenizer.json` would not load there.
"""

from __future__ import annotations

import json
from pathlib import Path

ARCHITECTURES = ("gpt2", "gptj", "t5")
SEED = 1234
EOS = "<|endoftext|>"
VOCAB_SIZE = 1024

# A few paragraphs of plain English: enough for ~1000 BPE merges, small enough to train in a second.
CORPUS = """\
The quick brown fox jumps over the lazy dog. A large language model predicts the next token of a text,
one token at a time, from the tokens that came before. Serving such a model means loading its weights onto
an accelerator, keeping them there, and answering requests as they arrive.
Amazon SageMaker hosts a model behind an HTTPS endpoint. The container it runs must answer a health check
on the ping path and requests on the invocations path. The model data is downloaded from Amazon S3 before
the container starts, and the container has a limited time to become healthy.
Once upon a time there was a small town by the sea. Every morning the fishermen went out in their boats,
and every evening they came back with their nets full of fish. The children played on the beach, the old
people sat in the sun and talked about the weather, and the baker sold bread that smelled of warm butter.
In the spring the hills turned green and the rivers ran fast with melted snow. In the summer the days were
long and the nights were short and warm. In the autumn the leaves turned red and gold and fell from the
trees, and in the winter the town was quiet and the sea was grey and cold.
Good software is tested, documented and easy to change. Configuration should be checked early, errors
should say what is wrong and how to fix it, and a build should either finish completely or leave nothing
behind. Numbers such as 1, 2, 3, 10, 42, 100 and 2048 appear in many texts, as do dates like 2024-05-01.
Hello, world! How are you today? I am fine, thank you. What is the capital of France? Paris is the capital
of France, and Berlin is the capital of Germany. Water boils at one hundred degrees Celsius at sea level.
"""


def _train_bpe():
    """Byte-level BPE like GPT-2's, trained on CORPUS (deterministic: same corpus, same merges)."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        [CORPUS] * 4, vocab_size=VOCAB_SIZE, min_frequency=1, special_tokens=[EOS], show_progress=False
    )
    return tokenizer


def write_gpt2_tokenizer(out_dir: Path, model_max_length: int) -> int:
    """Write vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json; return the vocab size."""
    tokenizer = _train_bpe()
    tokenizer.save_model(str(out_dir))
    tokenizer_config = {
        "tokenizer_class": "GPT2Tokenizer",
        "model_max_length": model_max_length,
        "bos_token": EOS,
        "eos_token": EOS,
        "unk_token": EOS,
        "pad_token": EOS,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    special = {"bos_token": EOS, "eos_token": EOS, "unk_token": EOS, "pad_token": EOS}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return tokenizer.get_vocab_size()


def _write_t5_tokenizer(out_dir: Path) -> int:
    """T5 wants a unigram/sentencepiece tokenizer; offline, a BPE tokenizer.json with T5's special tokens
    stands in (T5 is for a later serving system; it is not read by transformers 4.x here)."""
    tokenizer = _train_bpe()
    tokenizer.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tokenizer.save(str(out_dir / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 512,
        "pad_token": "<pad>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    return tokenizer.get_vocab_size()


def make_tiny_model(arch: str, out_dir: str | Path) -> Path:
    """Write a tiny `arch` model with tokenizer to `out_dir` (created; existing files overwritten).

    Weights are random but seeded, so the same call writes the same tensors every time.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"architecture {arch!r} is not offered; allowed: {', '.join(ARCHITECTURES)}")
    import torch
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_positions = 512
    if arch == "t5":
        vocab_size = _write_t5_tokenizer(out)
        tok = json.loads((out / "tokenizer.json").read_text())["added_tokens"]
        ids = {t["content"]: t["id"] for t in tok}
        config = transformers.T5Config(
            vocab_size=vocab_size, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
            num_heads=4, pad_token_id=ids["<pad>"], eos_token_id=ids["</s>"],
            decoder_start_token_id=ids["<pad>"],
        )  # fmt: skip
        model_cls = transformers.T5ForConditionalGeneration
    else:
        vocab_size = write_gpt2_tokenizer(out, n_positions)
        eos_id = json.loads((out / "vocab.json").read_text())[EOS]
        ids = dict(bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id)
        if arch == "gpt2":
            config = transformers.GPT2Config(
                vocab_size=vocab_size, n_positions=n_positions, n_embd=64, n_layer=2, n_head=4, **ids
            )
            model_cls = transformers.GPT2LMHeadModel
        else:
            config = transformers.GPTJConfig(
                vocab_size=vocab_size, n_positions=n_positions, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                tie_word_embeddings=False, **ids,
            )  # fmt: skip
            model_cls = transformers.GPTJForCausalLM
    torch.manual_seed(SEED)
    model = model_cls(config).eval()
    # The source is written in fp32: builds then cast to the configured dtype, as they would a Hub model.
    model.save_pretrained(out)
    return out
