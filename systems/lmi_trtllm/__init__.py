"""lmi-trtllm: the LMI TensorRT-LLM container (djl-inference 0.33, TensorRT-LLM 0.21) with in-flight batching.

The container compiles TensorRT-LLM engines from the Hugging Face checkpoint at start ("JIT"), for the
tensor-parallel degree, dtype and length limits given in the environment, then serves them with LMI's async
TensorRT-LLM handler. The artifact is the same model directory as lmi-vllm (sharded safetensors + config +
tokenizer at /opt/ml/model). No torch import here.

Where the options go (deepjavalibrary/djl-serving branch 0.33.0-dlc): at start LmiUtils.convertTrtLLM
(wlm/src/main/java/ai/djl/serving/wlm/LmiUtils.java) writes the model's properties to a temporary
serving.properties and runs serving/docker/partition/trt_llm_partition.py, which strips `option.` and passes
every key as `--<key> <value>` to TensorRT-LLM's own build parser (`parse_build_config`:
tensorrt_llm.commands.build.parse_arguments().parse_known_args): keys the parser does not know are logged as
"not used by TRTLLM build" and dropped. The runtime side reads the same keys through
engines/python/setup/djl_python/properties_manager/trt_properties.py (max_input_len, max_seq_len, ...).
"""

from __future__ import annotations

from endpoint_config import EndpointSpec
from systems.base import GENERATION_AND_CHAT, LocalRun, ServingSystem
from systems.chat import LMI_TRTLLM_CHAT
from systems.djl_common import djl_system
from systems.djl_common.lmi import (
    LMI_INFERENCE_AMI_VERSION,
    LMI_INFERENCE_COMPONENTS,
    LMI_PLAIN_CHECKPOINT,
    LMI_STREAMING,
    LMI_TENSOR_PARALLEL,
    LmiEngineOptions,
    base_options,
    option_environment,
)
from systems.images import DJL_TENSORRTLLM

# LMI 0.33's TensorRT-LLM handler, an async `handle` (0.33.0-dlc engines/python/setup/djl_python/lmi_trtllm/
# trtllm_async_service.py); the recommended entry point of the TensorRT-LLM image (PyModel.java) and the one
# DJL's integration tests name (tests/integration/llm/prepare.py build_trtllm_handler_model).
ENTRY_POINT = "djl_python.lmi_trtllm.trtllm_async_service"
# Engine compilation at start takes many minutes for a 7B model, on top of the load.
DEFAULT_STARTUP_TIMEOUT_S = 1800
# Architectures (transformers model_type) whose just-in-time compilation LMI 0.33 lists as supported and tested
# (0.33.0-dlc serving/docs/lmi/user_guides/trt_llm_user_guide.md, "Supported Model Architectures": Llama,
# Falcon, GPT-J, Mistral, Mixtral, Qwen, GPT2/SantaCoder/StarCoder/GPTBigCode, Phi2, OPT, Gemma; InternLM,
# Baichuan and ChatGLM need remote code, T5 is an encoder-decoder: neither is served by this decoder recipe).
# Others fail at container start on a GPU, so the recipe refuses them at build time.
MODEL_TYPES = ("llama", "falcon", "gptj", "mistral", "mixtral", "qwen2", "gpt2", "gpt_bigcode", "phi", "opt", "gemma")
# Share of engine.max_model_len a prompt may take (OPTION_MAX_INPUT_LEN); the rest is kept for the answer.
PROMPT_SHARE = (3, 4)


class TrtllmEngineOptions(LmiEngineOptions):
    """lmi-trtllm's `engine:` options: max_batch_size (OPTION_MAX_ROLLING_BATCH_SIZE, TensorRT-LLM
    max_batch_size) and max_model_len (OPTION_MAX_SEQ_LEN and OPTION_MAX_INPUT_LEN, `length_options`)."""


def length_options(max_model_len: int) -> dict[str, str]:
    """TensorRT-LLM 0.21 sizes an engine by max_seq_len, "Maximum total length of one request, including prompt
    and outputs", and max_input_len, "Maximum input length of one request" (NVIDIA/TensorRT-LLM
    tensorrt_llm/commands/build.py parse_arguments, read at a newer commit than v0.21.0, which could not be
    fetched here: unverified that 0.21 words it the same; LMI 0.33 passes both names, trt_llm_partition.py
    parse_build_config). engine.max_model_len is that total, so it is max_seq_len as is. max_input_len is
    3/4 of it (PROMPT_SHARE, rounded down): prompts for instruction models are usually longer than the answers,
    and a prompt at the limit still leaves a quarter of the window to generate in, rather than a window a full
    prompt could use up. Without max_input_len LMI would build for 1024 prompt tokens whatever the window
    (TensorRtLlmProperties.max_input_len default, 0.33.0-dlc trt_properties.py). OPTION_MAX_OUTPUT_LEN is not
    set: nothing in LMI 0.33 reads it (its JIT path hands it to TensorRT-LLM's build parser, which has no such
    argument, so it is dropped as unused; the 0.33 user guide's claim that it "maps to max_seq_len" is not
    borne out by the 0.33 code: no file outside docs/tests names it except the secure-mode allow-list)."""
    numerator, denominator = PROMPT_SHARE
    return {"max_seq_len": str(max_model_len), "max_input_len": str(max_model_len * numerator // denominator)}


def container_environment(endpoint: EndpointSpec, engine: TrtllmEngineOptions) -> dict[str, str]:
    options = base_options(endpoint, ENTRY_POINT, engine)
    if engine.max_model_len is not None:
        options.update(length_options(engine.max_model_len))
    return option_environment(options)


SYSTEM: ServingSystem[TrtllmEngineOptions] = djl_system(
    engine_options=TrtllmEngineOptions,
    name="lmi-trtllm",
    local=LocalRun.stand_in(
        "lmi", "LMI's front end (DJL Serving, Java, with djl_python) and TensorRT-LLM need the image and a GPU"
    ),
    recipe="systems.lmi_trtllm.recipe",
    summary="LMI TensorRT-LLM container: engines compiled at start, in-flight batching, OPTION_* environment",
    image=DJL_TENSORRTLLM,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    # CUDA 12.8 image (cu128): see systems/djl_common/lmi.py LMI_INFERENCE_AMI_VERSION.
    inference_ami_version=LMI_INFERENCE_AMI_VERSION,
    engine_notes=(
        "Compiles TensorRT-LLM engines at container start (allow up to 30 min); one engine per "
        "tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies). engine.max_model_len is the "
        "engine's max_seq_len (prompt + answer); prompts may take 3/4 of it. Needs InferenceAmiVersion "
        f"{LMI_INFERENCE_AMI_VERSION} (NVIDIA driver 580) for its CUDA 12.8 image. Model types: "
        + ", ".join(MODEL_TYPES)
    ),
    streaming=LMI_STREAMING,
    chat=LMI_TRTLLM_CHAT,
    # LMI answers {"inputs", "parameters"} and "messages" (trtllm_async_service.py openai_chat) on /invocations.
    bodies=GENERATION_AND_CHAT,
    inference_components=LMI_INFERENCE_COMPONENTS,
    plain_checkpoint=LMI_PLAIN_CHECKPOINT,
    # Its image reads the checkpoint with its own transformers, a 4.x at the floor systems/images.py records.
    rewrite_metadata_for_image=True,
    tensor_parallel=LMI_TENSOR_PARALLEL,
)

__all__ = ["SYSTEM", "container_environment", "MODEL_TYPES", "ENTRY_POINT", "length_options"]
