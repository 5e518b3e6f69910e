"""Build-recipe helpers shared by the systems whose artifact is a transformers model written and verified on
the build machine (hf-fastload, the DJL/LMI systems, djl-fastertransformer, deepspeed-byoc, tensorrt-byoc).

What differs between the systems (the transformers version their container reads, the wording of a failure,
extra manifest keys) is a parameter; what is the same (tokenizer file names, the container-readable config.json,
the reference logits and greedy tokens, the comparison with the source model, the manifest's model and
library sections) lives here once. No torch import at module level: the CDK app imports the systems.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from artifact import BuildError
from endpoint_config import EndpointSpec
from facts.model_files import config_fields
from facts.models import read_json_object
from systems.images import HF_CONTAINER_TRANSFORMERS

TOKENIZER_FILES = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "chat_template.jinja",
)
# Tokenizer classes that only exist since transformers 5: the 4.x containers cannot instantiate them.
TRANSFORMERS5_TOKENIZER_CLASSES = ("TokenizersBackend", "PythonBackend", "SentencePieceBackend", "MistralCommonBackend")
TOKENIZER_CLASS_PATTERN = re.compile(r"^(?:[A-Z][A-Za-z0-9]*Tokenizer(?:Fast)?|PreTrainedTokenizerFast)$")

VERIFY_PROMPT = "The quick brown fox"
VERIFY_NEW_TOKENS = 8
# At the first step where two greedy runs differ, each token must be among the other's 5 most likely: vLLM's model
# tests ask for 5 logprobs (NUM_LOG_PROBS in tests/models/language/generation) and check the same (first_divergence).
VERIFY_TOP_K = 5
# Same weights, same dtype, same kernels: the logits should match bit for bit; the slack covers kernel
# selection differences (e.g. a sharded vs single-file load changing memory layout).
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}
TORCH_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}

HF_CONTAINER_TARGET = f"transformers {HF_CONTAINER_TRANSFORMERS} (the serving container)"
TOKENIZER_CLASS_EXAMPLES = "'GPT2Tokenizer', 'GPT2TokenizerFast', 'LlamaTokenizerFast' or 'PreTrainedTokenizerFast'"
DEFAULT_LIBRARIES = ("torch", "transformers", "safetensors", "tokenizers")


def read_model_config(source: Path, endpoint: EndpointSpec | None = None) -> dict[str, Any]:
    """The source's config.json; refuses a directory without one (naming `endpoint` and its model when given)."""
    config_path = source / "config.json"
    if not config_path.is_file():
        if endpoint is not None:
            raise BuildError(
                f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has no config.json ({source}); "
                "allowed: a transformers model directory or Hub id"
            )
        raise BuildError(f"model directory {str(source)!r} has no config.json; it is not a transformers model")
    return read_json_object(config_path)


def check_causal_lm(
    endpoint: EndpointSpec,
    config: Mapping[str, Any],
    *,
    refuse_encoder_decoder: bool = True,
    serves: str = "decoder-only causal LMs",
) -> None:
    """The one "is this a causal LM" check: refuses a model_type AutoModelForCausalLM cannot load (and, unless
    `refuse_encoder_decoder` is false, an encoder-decoder model). `serves` says what the system serves instead."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type")
    architecture = config_fields(dict(config)).architecture  # architectures[0], typed (facts.model_files)
    encoder_decoder = refuse_encoder_decoder and bool(config.get("is_encoder_decoder"))
    if encoder_decoder or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        kind = "an encoder-decoder model" if encoder_decoder else "not a causal language model"
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} is {kind} (model_type {model_type!r}, "
            f"architecture {architecture!r}); system {endpoint.system!r} serves {serves} (e.g. gptj, gpt2, llama, "
            "mistral)"
        )
    # The container's own transformers or engine must know the architecture too (systems/model_support.py).
    if architecture is not None and (problem := _architecture_problem(endpoint, architecture)):
        raise BuildError(problem)


def _architecture_problem(endpoint: EndpointSpec, architecture: str) -> str | None:
    from systems import all_systems
    from systems.model_support import architecture_problem

    systems = all_systems()
    return architecture_problem(endpoint, systems[endpoint.system], architecture, systems)


def config_for_container(out_dir: Path, dtype: str) -> None:
    """config.json as the containers' transformers 4.x read it, from what transformers 5 writes:
    `dtype` -> `torch_dtype`; `rope_parameters` {"rope_type", "rope_theta", ...} -> `rope_theta` (+ `rope_scaling`
    when the type is not "default"), the keys 4.x's configs read (e.g. 4.49 LlamaConfig(rope_theta=10000.0,
    rope_scaling=None)). Without that 4.x silently uses its default base 10000 (measured: a Llama config saved
    by 5.23 with rope_theta 500000 loads under 4.49 with rope_theta 10000.0), and the model computes other logits."""
    path = out_dir / "config.json"
    config = read_json_object(path)  # written by transformers from the source's: bounded all the same
    config.pop("dtype", None)
    config["torch_dtype"] = TORCH_DTYPE_NAMES[dtype]
    rope = config.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" not in config:
        if not isinstance(rope.get("rope_theta"), (int, float)):
            raise BuildError(
                f"{path}: rope_parameters {json.dumps(rope)[:120]} has no single rope_theta (per-layer-type RoPE), "
                "which transformers 4.x configs cannot express; allowed: a model whose config has one rope_theta, "
                "or a system whose image has transformers 5"
            )
        config["rope_theta"] = rope["rope_theta"]
        if rope.get("rope_type", "default") != "default":
            config.setdefault("rope_scaling", {k: v for k, v in rope.items() if k != "rope_theta"})
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def load_pretrained(path: Path, dtype: str, *, encoder_decoder: bool = False) -> tuple[Any, Any]:
    """(model in eval mode, tokenizer) from a transformers directory, the model in `dtype` (fp16/bf16/fp32)."""
    import transformers

    from systems.hf_fastload.handler.inference import TORCH_DTYPES, dtype_kwargs

    cls = transformers.AutoModelForSeq2SeqLM if encoder_decoder else transformers.AutoModelForCausalLM
    model = cls.from_pretrained(path, **dtype_kwargs(TORCH_DTYPES[dtype])).eval()
    return model, transformers.AutoTokenizer.from_pretrained(path)


def load_source(
    endpoint: EndpointSpec,
    source: Path,
    load: Callable[[Path], tuple[Any, Any]],
    *,
    weight_limit_bytes: int | None = None,
) -> tuple[Any, Any]:
    """`load(source)`, with any failure as a BuildError naming the endpoint and its model.

    Every recipe reads its source weights here, so here the build first knows their real size: weights that do
    not fit the endpoint's GPUs (systems.checks.built_weights_problem; `weight_limit_bytes` replaces the
    instance's limit) are refused before the recipe writes anything.
    """
    try:
        model, tokenizer = load(source)
    except Exception as err:
        raise BuildError(
            f"endpoint {endpoint.name!r}: model {endpoint.model!r} failed to load from {source}: {type(err).__name__}: {err}"
        ) from None
    from systems.checks import built_weights_problem

    problem = built_weights_problem(endpoint, sum(p.numel() for p in model.parameters()), weight_limit_bytes)
    if problem is not None:
        raise BuildError(problem)
    return model, tokenizer


def reference_outputs(model: Any, tokenizer: Any) -> tuple[Any, list[int], list[int], Any]:
    """What the artifact must reproduce, computed where `model` lies: the logits of VERIFY_PROMPT, its token ids,
    the greedy continuation ids and the logits of each greedy step (float32, on the CPU)."""
    import torch

    ids = tokenizer(VERIFY_PROMPT, return_tensors="pt")["input_ids"].to(next(model.parameters()).device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits.float().cpu()
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=VERIFY_NEW_TOKENS,
            min_new_tokens=VERIFY_NEW_TOKENS,  # a full 8 tokens to compare, even past an early EOS
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
    step_logits = torch.stack([step[0] for step in out.logits]).float().cpu()
    return logits, ids[0].tolist(), out.sequences[0, ids.shape[1] :].tolist(), step_logits


def first_divergence(
    ref_tokens: Sequence[int], tokens: Sequence[int], ref_steps: Any, steps: Any, top_k: int = VERIFY_TOP_K
) -> dict[str, Any] | None:
    """Where two greedy runs first part ways, as vLLM's model tests compare generations (`check_logprobs_close`,
    vllm-project/vllm tests/models/utils.py): at the first differing step each run's token must be among the
    other's `top_k` most likely; the comparison stops there (the contexts differ after it). None when the tokens
    are the same; else {step, source_token, artifact_token, top_k, within_top_k}."""
    import torch

    for step, (ref, got) in enumerate(zip(ref_tokens, tokens, strict=False)):
        if ref != got:
            ref_top = torch.topk(ref_steps[step], top_k).indices.tolist()
            top = torch.topk(steps[step], top_k).indices.tolist()
            return {
                "step": step,
                "source_token": ref,
                "artifact_token": got,
                "top_k": top_k,
                "within_top_k": got in ref_top and ref in top,
            }
    return None


def compare_with_source(
    endpoint_name: str,
    dtype: str,
    source: tuple[Any, ...],
    artifact: tuple[Any, ...],
    *,
    note: Mapping[str, str] | None = None,
    failure: str = "the written artifact does not reproduce the source model",
) -> dict[str, Any]:
    """The manifest's `verification`: `artifact`'s (logits, prompt ids, greedy tokens[, step logits]) against
    `source`'s, both computed on the same device (run_recipe).

    With step logits (reference_outputs), greedy runs are compared as vLLM's model tests do (first_divergence):
    the logits within TOLERANCE[dtype] over the prompt and every greedy step up to and including the first one
    where the tokens differ, and there each token among the other's VERIFY_TOP_K; a near tie that rounding tips
    the other way is not a defect. Without them (the encoder-decoder reference) the greedy tokens must be equal.
    Raises BuildError (`failure` says what failed) otherwise, or when the prompt ids differ. `note` goes first
    into the record (how it was verified).
    """
    ref_logits, ref_prompt_ids, ref_tokens = source[:3]
    logits, prompt_ids, tokens = artifact[:3]
    with_steps = len(source) > 3 and len(artifact) > 3
    diverged = first_divergence(ref_tokens, tokens, source[3], artifact[3]) if with_steps else None
    max_diff = _max_abs_diff(logits, ref_logits)
    if with_steps:
        compared = VERIFY_NEW_TOKENS if diverged is None else diverged["step"] + 1
        max_diff = max(max_diff, _max_abs_diff(artifact[3][:compared], source[3][:compared]))
    tolerance = TOLERANCE[dtype]
    if with_steps:
        tokens_ok = len(tokens) == len(ref_tokens) and (diverged is None or diverged["within_top_k"])
    else:
        tokens_ok = tokens == ref_tokens
    verification = {
        **(note or {}),
        "prompt": VERIFY_PROMPT,
        "new_tokens": VERIFY_NEW_TOKENS,
        "max_abs_logit_diff": max_diff,
        "tolerance": tolerance,
        "tokenizer_ids_match": prompt_ids == ref_prompt_ids,
        "greedy_tokens_match": tokens == ref_tokens,
        "first_difference": diverged,
    }
    if not (max_diff <= tolerance and prompt_ids == ref_prompt_ids and tokens_ok):
        where = ""
        if diverged is not None:
            where = (
                f" (first differ at step {diverged['step']}: source {diverged['source_token']}, artifact "
                f"{diverged['artifact_token']}, each among the other's top {diverged['top_k']}: "
                f"{diverged['within_top_k']})"
            )
        raise BuildError(
            f"endpoint {endpoint_name!r}: {failure} ({dtype}): max abs logit diff {max_diff:.3g} (allowed <= "
            f"{tolerance}), prompt token ids match: {prompt_ids == ref_prompt_ids}, greedy tokens {tokens} vs "
            f"source {ref_tokens}{where}"
        )
    return verification


def _max_abs_diff(a: Any, b: Any) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a - b).abs().max()) if a.numel() else 0.0


def write_build_manifest(
    out_dir: Path,
    endpoint: EndpointSpec,
    *,
    system: str,
    source_config: Mapping[str, Any],
    parameter_count: int,
    progress: bool = True,
    model_extra: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Hash the artifact and write its manifest.json: system, endpoint, the source model (where the weights came
    from and what they are; `model_extra` before the count), then the recipe's own `fields`, in that order."""
    from artifact.manifest import write_manifest

    model = {
        "source": endpoint.model,
        "revision": endpoint.revision,
        "architecture": (source_config.get("architectures") or [None])[0],
        "model_type": source_config.get("model_type"),
        **(model_extra or {}),
        "parameter_count": parameter_count,
    }
    return write_manifest(out_dir, progress=progress, system=system, endpoint=endpoint.name, model=model, **fields)


def library_versions(*names: str) -> dict[str, str]:
    """The manifest's `libraries`: {module: __version__} of `names` (default torch, transformers,
    safetensors, tokenizers), in that order."""
    import importlib

    return {name: importlib.import_module(name).__version__ for name in names or DEFAULT_LIBRARIES}


def run_recipe(
    endpoint: EndpointSpec,
    out_dir: Path,
    progress: bool,
    *,
    source: Path,
    write: Sequence[tuple[str, Callable[[Any, Any], None]]],
    fields: Callable[[], dict[str, Any]],
    reload: Callable[[], tuple[Any, Any]] | None = None,
    load: Callable[[Path], tuple[Any, Any]] | None = None,
    reference: Callable[[Any, Any], tuple[Any, ...]] = reference_outputs,
    note: Mapping[str, str] | None = None,
    failure: str = "the written artifact does not reproduce the source model",
    verify: Callable[[Any, Any], dict[str, Any]] | None = None,
    verify_label: str = "verify",
    model_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The one recipe skeleton: load the source, compute its reference outputs, write, reload, compare, manifest.

    Each step is one tick of the progress bar. `load(path)` (default: load_pretrained in the endpoint's dtype)
    reads the source (through load_source: the size check); `reference(model, tokenizer)` is what the artifact must reproduce. `write` is the recipe's own
    (label, step(model, tokenizer)) steps; the source model is freed after the first of them (one copy in
    memory at a time), so only that one gets it. Verification: `reload()` gives (model, tokenizer) of the
    written artifact, compared with the source within TOLERANCE[dtype] (compare_with_source: `note`,
    `failure`); or, instead, `verify(model, tokenizer)` with the source model kept, which returns the
    manifest's `verification` or raises. The manifest: write_build_manifest with `fields()`, then
    `verification`; its `system` is endpoint.system (the registry picked this recipe by it), its model facts the
    source's config.json.
    """
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = tqdm(total=len(write) + 3, desc=f"build {endpoint.name}", unit="step", disable=not progress)

    steps.set_postfix_str("load source")
    if load is None:
        load = lambda path: load_pretrained(path, endpoint.dtype)
    model, tokenizer = load_source(endpoint, source, load)
    parameter_count = sum(p.numel() for p in model.parameters())
    expected_device = next(model.parameters()).device
    expected = reference(model, tokenizer) if verify is None else None
    steps.update()

    for label, step in write:
        steps.set_postfix_str(label)
        step(model, tokenizer)
        if verify is None:
            model = None  # free the source copy before the artifact is loaded
        steps.update()

    steps.set_postfix_str(verify_label)
    if verify is None:
        assert reload is not None, "run_recipe needs reload or verify"
        assert expected is not None  # computed above whenever verify is None
        artifact_model, artifact_tokenizer = reload()
        # Like with like: the artifact computes where the source's reference did (the source loads on the CPU; the
        # handler's loader puts the artifact on the GPU where there is one, whose kernels round differently).
        device = expected_device
        if next(artifact_model.parameters()).device != device:
            artifact_model = artifact_model.to(device)
        artifact = reference(artifact_model, artifact_tokenizer)
        del artifact_model
        verification = compare_with_source(
            endpoint.name, endpoint.dtype, expected, artifact, note=note, failure=failure
        )
        verification["device"] = str(device)
    else:
        verification = verify(model, tokenizer)
    del model
    steps.update()

    steps.set_postfix_str("hash")
    manifest = write_build_manifest(
        out_dir,
        endpoint,
        system=endpoint.system,
        source_config=read_model_config(source),
        parameter_count=parameter_count,
        progress=progress,
        model_extra=model_extra,
        **fields(),
        verification=verification,
    )
    steps.update()
    steps.close()
    return manifest
