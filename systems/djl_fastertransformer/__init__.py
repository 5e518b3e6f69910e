"""djl-fastertransformer (legacy): DJL Serving 0.24's FasterTransformer engine with our own `model.py`.

FasterTransformer was dropped from LMI after 0.24.0; this is pinned to the last image with it
(`0.24.0-fastertransformer5.3.0-cu118`); the replacement is lmi-trtllm. Reference: flan-t5-xxl, tensor
parallel 4 on ml.g5.12xlarge.

Staged weights: the engine reads the checkpoint itself and converts it at start, so the weights are not
SageMaker model data. The artifact has two parts:
    code/     serving.properties + model.py: the SageMaker model data (small, mounted at /opt/ml/model)
    weights/  the Hugging Face checkpoint files, uploaded to S3 next to code/; the stack passes their S3 URI
              to `staged_weights_environment`, which sets OPTION_MODEL_ID=s3://... (DJL maps OPTION_<NAME> to
              option.<name>; it only fills keys serving.properties leaves out, so code/serving.properties must
              not name a model_id: DJL applies the environment with putIfAbsent, see systems/djl_common). DJL 0.24's frontend downloads an s3:// model_id (s5cmd) before the handler runs
              and hands the handler the local copy as `model_id`. `option.s3url` is the older spelling 0.24
              still accepts as a deprecated alias; only one is set, so the weights are downloaded once.
The container downloads from S3 itself, so it needs network access: network_isolation is off.
No torch import here.
"""

from __future__ import annotations

from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import LocalRun, ServingSystem
from systems.djl_common import MODEL_LOADING_TIMEOUT_S, DjlEngineOptions, legacy_djl_system
from systems.images import DJL_FASTERTRANSFORMER_LEGACY

# Model types served (engine=FasterTransformer, the package's non-Triton path), as DJL 0.24 itself routes them:
# deepjavalibrary/djl-serving 0.24.0-dlc wlm/src/main/java/ai/djl/serving/wlm/LmiUtils.java,
# FASTERTRANSFORMER_MODELS = List.of("bloom", "gpt_neox", "gpt2", "t5", "opt"). The fastertransformer package's
# SUPPORTED_MODEL_TYPES (python/fastertransformer/__init__.py: t5, gpt2, gptj, opt, gpt_neox, bloom) adds gptj,
# which it serves only through Triton (the recipe's refusal message says why). handler/model.py keeps the same
# tuple (it is copied into the artifact on its own; a test keeps the two equal).
MODEL_TYPES = ("t5", "gpt2", "opt", "gpt_neox", "bloom")
CODE_DIR = "code"
WEIGHTS_DIR = "weights"
HANDLER_FILE = "model.py"


class FasterTransformerEngineOptions(DjlEngineOptions):
    """The `engine:` options djl-fastertransformer implements: one request per call in model.py (no dynamic
    batching, so no max_batch_size), no rolling batch in FasterTransformer for T5, per-request length limits
    instead of an engine-wide one (no max_model_len), and model.py is always the handler (no entry_point)."""

    custom_handler: bool = False  # model.py serves either way
    rolling_batch: Literal["disable"] | None = None


def serving_properties(endpoint: EndpointSpec, engine: FasterTransformerEngineOptions) -> dict[str, str]:
    """code/serving.properties. No model location in it: the weights' S3 URI is known only at deploy time
    (content-addressed prefix), so it comes from the environment (`staged_weights_environment`)."""
    return {
        "engine": "FasterTransformer",
        "option.entryPoint": HANDLER_FILE,
        "option.tensor_parallel_degree": str(endpoint.tensor_parallel_degree),
        "option.dtype": endpoint.dtype,
        "option.model_loading_timeout": str(MODEL_LOADING_TIMEOUT_S),
    }


def container_environment(endpoint: EndpointSpec, engine: FasterTransformerEngineOptions) -> dict[str, str]:
    """Nothing beyond serving.properties; the weights' location comes from staged_weights_environment."""
    return {}


def staged_weights_environment(weights_s3_uri: str) -> dict[str, str]:
    """Point the engine at the staged weights (an S3 prefix: always given with a trailing slash)."""
    if not weights_s3_uri.startswith("s3://") or len(weights_s3_uri) <= len("s3://"):
        raise ValueError(f"weights location {weights_s3_uri!r} is not an S3 URI; expected s3://bucket/prefix/")
    return {"OPTION_MODEL_ID": weights_s3_uri.rstrip("/") + "/"}


SYSTEM: ServingSystem[FasterTransformerEngineOptions] = legacy_djl_system(
    djl_version="0.24",
    maintained_replacement="lmi-trtllm",
    serving_properties=serving_properties,
    engine_options=FasterTransformerEngineOptions,
    name="djl-fastertransformer",
    local=LocalRun.stand_in("djl", "DJL Serving (Java) and FasterTransformer's kernels need the image and a GPU"),
    recipe="systems.djl_fastertransformer.recipe",
    summary="DJL Serving 0.24 FasterTransformer engine (t5, gpt2, opt, gpt_neox, bloom), weights staged in S3; legacy",
    image=DJL_FASTERTRANSFORMER_LEGACY,
    environment=container_environment,
    architectures=("encoder-decoder", "decoder"),
    # The engine downloads the weights from S3 and converts them to FasterTransformer's layout at start.
    default_startup_timeout_s=1200,
    legacy=True,
    replacement="lmi-trtllm",
    network_isolation=False,
    staged_weights_environment=staged_weights_environment,
    engine_notes=(
        "Model data is the artifact's code/ subfolder; the weights/ subfolder stays in S3 and the engine "
        "downloads and converts it at start (startup timeout covers both). One model copy per "
        "tensor_parallel_degree GPUs (ml.g5.12xlarge at degree 4: 1 copy). FasterTransformer was dropped "
        "from LMI after 0.24.0."
    ),
)

__all__ = ["SYSTEM", "MODEL_TYPES", "serving_properties", "container_environment", "staged_weights_environment"]
