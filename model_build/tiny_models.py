"""Real but tiny models made offline, for tests and the local demo: GPT-2, GPT-J, T5, and chat models of
today's architectures (Llama, Qwen2, Qwen3, Mistral, Gemma 2, Gemma 3, Mixtral, Qwen3-MoE, gpt-oss), and a Qwen3 with
thinking turns shaped for vLLM's CPU engine.

There is no Hugging Face Hub on the build machines, so test models are made here: small configs with random
weights (seeded, so two runs give the same bytes) and a byte-level BPE tokenizer trained in about a second on
an embedded corpus. GPT-2/GPT-J tokenizers are written as vocab.json + merges.txt with
`tokenizer_class: GPT2Tokenizer`, the files transformers 4.x (the serving container) reads.
The chat models carry a tokenizer.json (the same BPE plus ChatML and hermes tool tokens) with the generic
`PreTrainedTokenizerFast` class, which transformers 4.49 and 5.x both read (the architectures' own tokenizer
classes are sentencepiece-based and cannot be built offline), and CHAT_TEMPLATE, a hermes-style template made
here that renders tools, tool calls and tool results.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_ARCHITECTURES = ("llama", "qwen2", "qwen3", "mistral", "gemma2")
# Today's other families, for the engine systems' checks (same chat tokenizer): Gemma 3's text model (sliding and full
# attention layers), and the mixture-of-experts decoders Mixtral, Qwen3-MoE and gpt-oss (unquantized here: its
# MXFP4 experts need GPU kernels to write).
ENGINE_ARCHITECTURES = ("gemma3", "mixtral", "qwen3_moe", "gpt_oss")
# A Qwen3 the real vLLM engine serves on a CPU (the vllm system's local container, local_runtime/vllm_container.py):
# head size 64, since vLLM 0.30.0's CPU attention refuses the others' 16-wide heads' kind ("Unsupported CPU attention
# configuration" for head_dim 12; 64 measured to serve), with Qwen3's thinking turns (QWEN3_THINKING_TEMPLATE).
ENGINE_CPU_ARCHITECTURES = ("qwen3_thinking",)
ARCHITECTURES = ("gpt2", "gptj", "t5", *CHAT_ARCHITECTURES, *ENGINE_ARCHITECTURES, *ENGINE_CPU_ARCHITECTURES)
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


# ChatML turns with hermes tool calling (the layout Hermes-2-Pro and Qwen2.5 models use; written here): tools as
# JSON inside <tools></tools> in the system turn, each call as {"name", "arguments"} inside <tool_call></tool_call>,
# results as <tool_response> in a user turn. `enable_thinking` false (chat_template_kwargs) adds an empty think block.
CHAT_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- 'You may call functions. Their signatures are inside <tools></tools>:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\nTo call one, answer with <tool_call>{"name": <name>, "arguments": <object>}</tool_call>.<|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- if not loop.first %}{{- raise_exception('only the first message may be a system message') }}{%- endif %}
{%- elif message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for call in message.tool_calls %}
{{- '\\n<tool_call>\\n{"name": "' + call.function.name + '", "arguments": ' + (call.function.arguments | tojson) + '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}
{%- endif %}
"""
# Qwen3's thinking format (Qwen3-*-Thinking-2507's templates open the answer with "<think>\n" and the model writes
# its reasoning, "</think>", then the answer; vLLM 0.30.0's qwen3 reasoning parser takes everything before
# "</think>" as reasoning unless chat_template_kwargs enable_thinking is false, vllm/reasoning/qwen3_reasoning_parser
# .py): the same turns as CHAT_TEMPLATE, an earlier answer's reasoning dropped, the generation prompt opening a think
# block, or an empty one when enable_thinking is false.
QWEN3_THINKING_TEMPLATE = CHAT_TEMPLATE.replace(
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}",
)
CHAT_SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>")  # removed when decoding with skip_special_tokens
# Ordinary added tokens: they survive decoding, so the tool-call parser sees them (vLLM's hermes parser turns
# skip_special_tokens off for models that mark them special).
CHAT_TEXT_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
CHAT_EOS = "<|im_end|>"


def _write_chat_tokenizer(out_dir: Path, model_max_length: int, template: str = CHAT_TEMPLATE) -> dict[str, int]:
    """tokenizer.json + tokenizer_config.json (with `template`); returns the special token ids."""
    from tokenizers import AddedToken

    tokenizer = _train_bpe()
    tokenizer.add_special_tokens(list(CHAT_SPECIAL_TOKENS))
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in CHAT_TEXT_TOKENS])
    tokenizer.save(str(out_dir / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "bos_token": None,
        "eos_token": CHAT_EOS,
        "pad_token": EOS,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        # as the real models' tokenizers say: a decoder-only model takes no token_type_ids (transformers 4.49's
        # generic class returns them otherwise, and generate() refuses them)
        "model_input_names": ["input_ids", "attention_mask"],
        "chat_template": template,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    return {
        "vocab_size": tokenizer.get_vocab_size(),
        "eos_token_id": tokenizer.token_to_id(CHAT_EOS),
        "pad_token_id": tokenizer.token_to_id(EOS),
        "bos_token_id": tokenizer.token_to_id(EOS),
    }


def _chat_config(arch: str, ids: dict[str, int], n_positions: int):
    """A small config of `arch`: 2 layers, 4 query heads over 2 key/value heads (grouped-query attention, as the
    real models), head size 16, and a RoPE base other than 10000, as the real models have (a config reader that
    drops it computes different logits, which the container tests would see)."""
    import transformers

    shape = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=n_positions,
        tie_word_embeddings=False,
        **ids,
    )
    rope = {"rope_type": "default", "rope_theta": 1_000_000.0}
    if arch == "llama":
        return transformers.LlamaConfig(**shape, head_dim=16, rope_parameters={**rope, "rope_theta": 500_000.0})
    if arch == "qwen2":
        return transformers.Qwen2Config(**shape, rope_parameters=rope)
    if arch == "qwen3":
        return transformers.Qwen3Config(**shape, head_dim=16, rope_parameters=rope)
    if arch == "qwen3_thinking":  # 2 query heads of 64 over 1 key/value head: a head size vLLM's CPU attention takes
        wide = {**shape, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2}
        return transformers.Qwen3Config(**{**wide, "num_key_value_heads": 1}, head_dim=64, rope_parameters=rope)
    if arch == "mistral":
        return transformers.MistralConfig(**shape, head_dim=16, sliding_window=None, rope_parameters=rope)
    if arch == "gemma2":
        # alternating sliding-window and full attention layers, logit soft-capping, as Gemma 2 has
        return transformers.Gemma2Config(
            **shape, head_dim=16, query_pre_attn_scalar=16, sliding_window=4096, rope_parameters=rope
        )
    if arch == "gemma3":  # one sliding-window and one full attention layer (Gemma 3 has 5 of the first per 1)
        return transformers.Gemma3TextConfig(
            **shape,
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=256,
            layer_types=["sliding_attention", "full_attention"],
        )
    if arch == "mixtral":
        return transformers.MixtralConfig(
            **shape, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=None, rope_parameters=rope
        )
    if arch == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            **shape,
            head_dim=16,
            moe_intermediate_size=32,
            num_experts=4,
            num_experts_per_tok=2,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            rope_parameters=rope,
        )
    # gpt_oss: experts with biases, attention sinks, alternating sliding (128) and full attention, as gpt-oss has
    # and YaRN RoPE stretched 32-fold (gpt-oss: 4096 original positions to 131072; here 16 to 512)
    yarn = {
        "rope_type": "yarn",
        "rope_theta": 150_000.0,
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "original_max_position_embeddings": n_positions // 32,
        "truncate": False,
    }
    return transformers.GptOssConfig(
        **{**shape, "intermediate_size": 64},
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=128,
        rope_parameters=yarn,
        layer_types=["sliding_attention", "full_attention"],
    )


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
    if arch in ENGINE_CPU_ARCHITECTURES:
        config = _chat_config(arch, _write_chat_tokenizer(out, n_positions, QWEN3_THINKING_TEMPLATE), n_positions)
        model_cls = transformers.AutoModelForCausalLM
    elif arch in CHAT_ARCHITECTURES or arch in ENGINE_ARCHITECTURES:
        config = _chat_config(arch, _write_chat_tokenizer(out, n_positions), n_positions)
        model_cls = transformers.AutoModelForCausalLM
    elif arch == "t5":
        vocab_size = _write_t5_tokenizer(out)
        tok = json.loads((out / "tokenizer.json").read_text())["added_tokens"]
        ids = {t["content"]: t["id"] for t in tok}
        config = transformers.T5Config(
            vocab_size=vocab_size,
            d_model=64,
            d_kv=16,
            d_ff=128,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            pad_token_id=ids["<pad>"],
            eos_token_id=ids["</s>"],
            decoder_start_token_id=ids["<pad>"],
        )
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
                vocab_size=vocab_size,
                n_positions=n_positions,
                n_embd=64,
                n_layer=2,
                n_head=4,
                rotary_dim=8,
                tie_word_embeddings=False,
                **ids,
            )
            model_cls = transformers.GPTJForCausalLM
    torch.manual_seed(SEED)
    chat = arch in CHAT_ARCHITECTURES or arch in ENGINE_ARCHITECTURES or arch in ENGINE_CPU_ARCHITECTURES
    model = (model_cls.from_config(config) if chat else model_cls(config)).eval()
    # The source is written in fp32: builds then cast to the configured dtype, as they would a Hub model.
    model.save_pretrained(out)
    return out
