"""Build the djl-fastertransformer artifact.

Layout:
    code/serving.properties   engine=FasterTransformer, option.entryPoint=model.py, tensor parallel, dtype
    code/model.py             the handler (systems/djl_fastertransformer/handler/model.py)
    weights/                  the source checkpoint's files, copied byte for byte: *.json, weights
                              (*.safetensors, else *.bin/*.pt), *.txt, *.model (sentencepiece). The engine
                              converts them itself at start, for its tensor-parallel degree and dtype. The
                              tokenizer files are rewritten where the image's transformers 4.34 / tokenizers
                              0.14 cannot read them (systems/container_tokenizer.py; manifest
                              `tokenizer_rewritten` lists what changed).
    manifest.json             hashes of both parts; `parts` says which is the model data and which is staged

Verification: the copied weights/ directory is loaded with transformers (what model.py falls back to without
FasterTransformer) and must reproduce the source model's logits and greedy tokens in the same dtype. The
FasterTransformer conversion itself only runs on a GPU in the 0.24 image.
"""

from __future__ import annotations

import fnmatch
import shutil
from pathlib import Path
from typing import Any

import request_contract
from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems.container_tokenizer import image_python_stack, plan_tokenizer
from systems.djl_common import check_weights_format, copies_per_instance, write_properties
from systems.djl_fastertransformer import (
    CODE_DIR,
    HANDLER_FILE,
    MODEL_TYPES,
    SYSTEM,
    WEIGHTS_DIR,
    FasterTransformerEngineOptions,
    serving_properties,
)
from systems.images import DJL_FASTERTRANSFORMER_LEGACY

HANDLER_SOURCE = Path(__file__).parent / "handler" / "model.py"
# What the engine needs from a checkpoint (artifact.source's allow_patterns). Safetensors are preferred;
# *.bin / *.pt are fetched only when a checkpoint has no safetensors, so a Hub repo holding both is not
# downloaded twice.
BASE_PATTERNS = ("*.json", "*.txt", "*.model")
SAFETENSORS_PATTERNS = ("*.safetensors",)
PICKLE_PATTERNS = ("*.bin", "*.pt")


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def select_files(endpoint: EndpointSpec) -> tuple[Path, list[str], str]:
    """(source dir, file names to stage, weights kind 'safetensors' | 'pickle')."""
    source = resolve_model_source(
        endpoint.model, endpoint.revision, allow_patterns=BASE_PATTERNS + SAFETENSORS_PATTERNS
    )
    names = sorted(p.name for p in source.iterdir() if p.is_file())
    kind = "safetensors"
    if not any(_matches(n, SAFETENSORS_PATTERNS) for n in names):
        kind = "pickle"
        if not any(_matches(n, PICKLE_PATTERNS) for n in names) and not Path(endpoint.model).expanduser().is_dir():
            source = resolve_model_source(
                endpoint.model, endpoint.revision, allow_patterns=BASE_PATTERNS + PICKLE_PATTERNS
            )
            names = sorted(p.name for p in source.iterdir() if p.is_file())
    weights_patterns = SAFETENSORS_PATTERNS if kind == "safetensors" else PICKLE_PATTERNS
    selected = [n for n in names if _matches(n, BASE_PATTERNS + weights_patterns)]
    if not any(_matches(n, weights_patterns) for n in selected):
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has no weights ({source}); "
            "allowed: a checkpoint with *.safetensors or *.bin / *.pt files"
        )
    if "config.json" not in selected:
        raise BuildError(f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has no config.json ({source})")
    return source, selected, kind


# Model types users ask for that DJL 0.24's FasterTransformer path does not serve, and why (the error says so).
UNSERVED = {
    "gptj": "the fastertransformer package serves GPT-J only in Triton mode: its GPTJModel.initialize raises "
    "'Not supported under python mode', and DJL 0.24 runs gptj on engine=Python + Triton (LmiUtils.TRITON_MODELS)",
    "mt5": "not in the fastertransformer package's SUPPORTED_MODEL_TYPES (only model_type 't5')",
    "llama": "not in the fastertransformer package's SUPPORTED_MODEL_TYPES for engine=FasterTransformer",
}


def check_model(endpoint: EndpointSpec, config: dict[str, Any]) -> None:
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        why = f" ({UNSERVED[model_type]})" if model_type in UNSERVED else ""
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has model_type {model_type!r}, which "
            f"FasterTransformer in DJL 0.24 does not serve{why}; allowed model types: {', '.join(MODEL_TYPES)}"
        )


def _seq2seq_reference(model: Any, tokenizer: Any) -> tuple[Any, list[int], list[int]]:
    """Encoder-decoder twin of recipe_common.reference_outputs: first decoder step's logits and greedy output ids."""
    import torch

    ids = tokenizer(common.VERIFY_PROMPT, return_tensors="pt")["input_ids"]
    start = torch.tensor([[model.config.decoder_start_token_id]])
    with torch.inference_mode():
        logits = model(input_ids=ids, decoder_input_ids=start).logits.float()
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=common.VERIFY_NEW_TOKENS,
            min_new_tokens=common.VERIFY_NEW_TOKENS,
            do_sample=False,
        )
    return logits, ids[0].tolist(), out[0].tolist()


def build(
    endpoint: EndpointSpec, engine: FasterTransformerEngineOptions, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    check_weights_format(endpoint)
    source, names, weights_kind = select_files(endpoint)
    config = common.read_model_config(source, endpoint)
    check_model(endpoint, config)
    stack = image_python_stack(DJL_FASTERTRANSFORMER_LEGACY)
    tokenizer_export = plan_tokenizer(
        source, stack, f"transformers {stack.transformers} (djl-inference:{DJL_FASTERTRANSFORMER_LEGACY.gpu_tag})"
    )
    encoder_decoder = bool(config.get("is_encoder_decoder"))
    out_dir = Path(out_dir)
    code, weights = out_dir / CODE_DIR, out_dir / WEIGHTS_DIR

    def load(path: Path) -> tuple[Any, Any]:
        return common.load_pretrained(path, endpoint.dtype, encoder_decoder=encoder_decoder)

    def stage(_model: Any, _tokenizer: Any) -> None:
        code.mkdir(parents=True, exist_ok=True)
        weights.mkdir(parents=True, exist_ok=True)
        for name in names:
            if name not in common.TOKENIZER_FILES:
                shutil.copyfile(source / name, weights / name)  # follows Hub-cache symlinks to the blobs
        tokenizer_export.write(weights)
        write_properties(code, serving_properties(endpoint, engine))
        shutil.copyfile(HANDLER_SOURCE, code / HANDLER_FILE)
        shutil.copyfile(request_contract.__file__, code / "request_contract.py")  # model.py imports it

    return common.run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        load=load,
        reference=_seq2seq_reference if encoder_decoder else common.reference_outputs,
        write=[("stage weights + code", stage)],
        reload=lambda: load(weights),
        note={
            "method": "transformers load of the staged weights/ vs the source model, same dtype (FasterTransformer's "
            "conversion runs on a GPU only)"
        },
        failure="the staged weights do not reproduce the source model",
        model_extra={"encoder_decoder": encoder_decoder},
        fields=lambda: {
            "dtype": endpoint.dtype,
            "weights_format": weights_kind,
            # model_data: the SageMaker model data (subfolder of the uploaded artifact); staged_weights: stays in
            # S3, its URI goes to SYSTEM.staged_weights_environment.
            "parts": {"model_data": CODE_DIR, "staged_weights": WEIGHTS_DIR},
            "libraries": common.library_versions("torch", "transformers"),
            "tokenizer_rewritten": tokenizer_export.rewritten,
            "target_container": {
                "image_repository": DJL_FASTERTRANSFORMER_LEGACY.repository,
                "image_tag_gpu": DJL_FASTERTRANSFORMER_LEGACY.gpu_tag,
            },
            "serving": {
                "engine": "FasterTransformer",
                "serving_properties": f"{CODE_DIR}/serving.properties",
                "handler": f"{CODE_DIR}/{HANDLER_FILE}",
                "model_copies_per_instance": copies_per_instance(endpoint),
                "tensor_parallel_degree": endpoint.tensor_parallel_degree,
                "notes": SYSTEM.engine_notes,
            },
        },
    )
