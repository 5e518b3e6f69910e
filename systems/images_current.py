"""Today's engine images, pinned: the AWS vLLM and SGLang DLCs for SageMaker and the Hugging Face PyTorch inference
images on transformers 4.51.3 and 5.5.3. Same `ImagePin` as systems/images.py; tests/systems/test_images_current.py
cross-checks each against the `sagemaker` package's tables (sagemaker-core 2.27.0) in every region they list (a pin
newer than its table against the table's newest version, `sdk_table_version`). An engine upgrade is a change of
VLLM_DLC or SGLANG_DLC here plus `make engine-tables` (docs/design/engine-upgrades.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from systems.images import DLC_REGIONS, HF_PYTORCH_INFERENCE, ImagePin, PythonStack

# Regions the sagemaker tables (vllm.json 0.30.0, sglang.json 0.5.20) list for the vLLM and SGLang DLCs that
# systems/images.py has no registry account for (its _DLC_ACCOUNT_BY_REGION predates them); the tables give
# ap-east-2 975050140332, ap-southeast-5 550225433462, ap-southeast-6 633930458069, ap-southeast-7 590183813437,
# me-west-1 124382933778, mx-central-1 637423239942. Until those accounts are added there, the pins leave the
# regions out (the cross-check test holds this list to exactly what the tables add).
REGIONS_WITHOUT_ACCOUNT = (
    "ap-east-2",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "me-west-1",
    "mx-central-1",
)
# vllm.json and sglang.json list no China or GovCloud region for these versions (nor the ISO regions, which
# DLC_REGIONS does not cover).
_ENGINE_DLC_REGIONS = tuple(r for r in DLC_REGIONS if not r.startswith(("cn-", "us-gov-")))


@dataclass(frozen=True)
class ImageFacts:
    """What an image holds beyond its tag: the CUDA toolkit (the host driver it needs follows from it,
    facts/gpus.py), the engine, and where each fact was read."""

    pin: ImagePin
    cuda: str  # CUDA toolkit version of the image
    engine: str  # "<project>==<version>" of the serving engine inside (a key of systems/engine_tables ARCHITECTURES)
    python: str
    source: str


# Which builds: the newest SageMaker images the DLC repository's release records list (aws/deep-learning-containers
# docs/src/data/<engine>/*-sagemaker.yml). Its support policy (docs/src/templates/reference/support_policy.template.md)
# says "For vLLM and SGLang, only the latest released versions are supported" and recommends the Amazon Linux images,
# as Ubuntu builds cannot be guaranteed security patches. The Amazon Linux SageMaker builds lag: vllm-server's newest
# is 0.30.0+amzn2023.ec4a3a53 (docs/src/data/vllm-server/0.30.0+amzn2023.ec4a3a53-v2.6-gpu-sagemaker.yml, commit
# 05a719126e: cu130, amzn2023, the moving tag "server-sagemaker-cuda-v2.6" only), sglang-server's
# 0.5.19+amzn2023.0bcd822 (commit f50fe2b44b: tag "server-sagemaker-cuda-v1.4"). Neither is the latest release,
# each is an AWS build of the engine that PyPI does not carry (systems/engine_tables reads PyPI wheels), each has
# only a moving tag, and the vLLM one adds a middleware that reroutes /invocations to any path a caller names
# (scripts/docker/vllm/sagemaker_serve.py at e0ecedea6a; docs/design/engine-upgrades.md).
# So the pins are the Ubuntu builds of the latest releases; docs/design/engine-upgrades.md says how to move.
#
# The AWS vLLM DLC for SageMaker: docs/src/data/vllm/0.31.0-gpu-sagemaker.yml (commit 8c7b4b1d11): vLLM 0.31.0,
# py312, cu130, ubuntu24.04, tags "0.31.0-gpu-py312-cu130-ubuntu24.04-sagemaker" and the moving
# "0.31-gpu-py312-cu130-ubuntu24.04-sagemaker-v1", "0.31.0-gpu-py312", "0.31-gpu-py312". The sagemaker package's
# vllm.json (sagemaker-core 2.27.0, the newest on PyPI) stops at 0.30.0, so retrieve() cannot name 0.31.0: the pin
# takes 0.30.0's registries (sdk_table_version; GPU only, no CPU processor) and its tag format, which the 0.30.0
# record (docs/src/data/vllm/0.30.0-gpu-sagemaker.yml, commit 51c7d99316) shares. Unverified: that 0.31.0 is in
# every region 0.30.0 is (the record names no regions). The image is the upstream vllm/vllm-openai:v<version> with
# the SageMaker entrypoint (docker/vllm/Dockerfile, target vllm-sagemaker; .github/config/image/vllm/
# sagemaker-ubuntu.yml).
# python_stack: the vllm 0.31.0 wheel's METADATA requires transformers<5.18.0,>=5.10.4 (0.30.0: >=5.10.4), which
# requires tokenizers<=0.23.0,>=0.22.0; but tokenizers 0.22.0's METADATA requires huggingface-hub<1.0 and
# transformers 5.10.4's huggingface-hub>=1.5.0, so pip cannot pair them: 0.22.1, which allows huggingface-hub<2.0,
# is the floor. The version pip resolved in the image is unverified, so the floor is written for. The <5.18.0 cap
# is not written: tests/systems/container_tokenizers/make_envs.py keys its venvs by this text, and the newest one
# it built for ">=5.10.4" holds transformers 5.15.1, inside the cap.
VLLM_DLC = ImagePin(
    repository="vllm",
    gpu_tag="0.31.0-gpu-py312-cu130-ubuntu24.04-sagemaker",
    sdk_framework="vllm",
    sdk_version="0.31.0",
    sdk_table_version="0.30.0",
    regions=_ENGINE_DLC_REGIONS,
    python_stack=PythonStack(transformers=">=5.10.4", tokenizers=">=0.22.1,<=0.23.0", verified=False),
)
# The AWS SGLang DLC for SageMaker: docs/src/data/sglang/0.5.21-gpu-sagemaker.yml (commit 2f6086014c): SGLang
# 0.5.21, py312, cu130, ubuntu24.04, tags "0.5.21-gpu-py312-cu130-ubuntu24.04-sagemaker" and the moving
# "0.5-gpu-py312-cu130-ubuntu24.04-sagemaker-v1", "0.5.21-gpu-py312", "0.5-gpu-py312". sglang.json stops at 0.5.20
# (docs/src/data/sglang/0.5.20-gpu-sagemaker.yml, commit 2a48521ce6, same tag format): the pin takes its registries,
# as VLLM_DLC does (the same caveat). .github/config/image/sglang/sagemaker-ubuntu.yml (commit 1c7a22c611, 0.5.20):
# base_image lmsysorg/sglang:v<version>, CUDA 13.0.3, Python 3.12; the entrypoint is
# scripts/docker/sglang/sagemaker_entrypoint.sh, installed as /usr/bin/serve (docker/sglang/Dockerfile).
# python_stack: the sglang 0.5.21 wheel's METADATA pins transformers==5.12.1 and tokenizers==0.22.2 (as 0.5.20's).
SGLANG_DLC = ImagePin(
    repository="sglang",
    gpu_tag="0.5.21-gpu-py312-cu130-ubuntu24.04-sagemaker",
    sdk_framework="sglang",
    sdk_version="0.5.21",
    sdk_table_version="0.5.20",
    regions=_ENGINE_DLC_REGIONS,
    python_stack=PythonStack(transformers="==5.12.1", tokenizers="==0.22.2"),
)
# The engines inside, "<project>==<version>": the keys of systems/engine_tables and systems/precision.py, and the
# releases tools/generate_architectures.py reads. The image's release is the engine's (base image
# vllm/vllm-openai:v<version>, lmsysorg/sglang:v<version>).
VLLM_ENGINE = f"vllm=={VLLM_DLC.sdk_version}"
SGLANG_ENGINE = f"sglang=={SGLANG_DLC.sdk_version}"
# Hugging Face PyTorch inference DLC, transformers 4.51.3: hf-fastload's image, pinned in systems/images.py.
HF_PYTORCH_INFERENCE_4_51 = HF_PYTORCH_INFERENCE
# Hugging Face PyTorch inference DLC, transformers 5.5.3 (huggingface.json 5.5.3 / pytorch2.6.0).
# aws/deep-learning-containers commit cc7c8dc2a1 ("Hugging Face PyTorch inference DLC for Transformers v5", #5953):
# Dockerfile.gpu ARG TRANSFORMERS_VERSION=5.5.3, torch 2.6.0+cu124, Python 3.12.8; buildspec.yml tag
# "2.6.0-transformers5.5.3-gpu-py312-cu124-ubuntu22.04". The inference toolkit is installed from git,
# sagemaker-huggingface-inference-toolkit@f0c3eb2, not the 2.6.0 release (which imports
# `is_tf_available` from transformers.file_utils, gone in transformers 5); the toolkit's PR #141 "Update
# dependencies for transformers v5" (merged 2026-03) made it import under 5.x. Unverified: that f0c3eb2 contains
# #141 (the commit was not readable here; the DLC commit installs it precisely for transformers v5).
# tokenizers: transformers 5.5.3's METADATA requires tokenizers<=0.23.0,>=0.22.0.
HF_PYTORCH_INFERENCE_5_5 = ImagePin(
    repository="huggingface-pytorch-inference",
    gpu_tag="2.6.0-transformers5.5.3-gpu-py312-cu124-ubuntu22.04",
    cpu_tag="2.6.0-transformers5.5.3-cpu-py312-ubuntu22.04",
    sdk_framework="huggingface",
    sdk_version="5.5.3",
    sdk_base_framework_version="pytorch2.6.0",
    python_stack=PythonStack(transformers="==5.5.3", tokenizers=">=0.22.0,<=0.23.0"),
)

CURRENT_IMAGES: tuple[ImageFacts, ...] = (
    ImageFacts(
        VLLM_DLC,
        cuda="13.0",
        engine=VLLM_ENGINE,
        python="3.12",
        source="DLC docs/src/data/vllm/0.31.0-gpu-sagemaker.yml @8c7b4b1d11: py312, cu130, ubuntu24.04",
    ),
    ImageFacts(
        SGLANG_DLC,
        cuda="13.0",
        engine=SGLANG_ENGINE,
        python="3.12",
        source="DLC docs/src/data/sglang/0.5.21-gpu-sagemaker.yml @2f6086014c: py312, cu130, ubuntu24.04",
    ),
    ImageFacts(
        HF_PYTORCH_INFERENCE_4_51,
        cuda="12.4",
        engine="transformers==4.51.3",
        python="3.12",
        source="DLC huggingface/pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu @6dbb542b45",
    ),
    ImageFacts(
        HF_PYTORCH_INFERENCE_5_5,
        cuda="12.4",
        engine="transformers==5.5.3",
        python="3.12",
        source="DLC huggingface/pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu @cc7c8dc2a1",
    ),
)

# Neuron (inf2/trn): the Hugging Face vLLM Neuron image is NOT pinned. What was established:
# huggingface-vllm-neuronx.json lists 0.4.1, 0.4.2, 0.4.4 (tag prefix "0.11.0-optimum0.4.4": vLLM 0.11.0 through
# optimum-neuron 0.4.4, Neuron SDK 2.26.1, py310, 11 regions), while the DLC docs
# (docs/src/data/huggingface-vllm-inference-neuronx/0.11-neuronx-sdk2.26.1.yml) name
# "0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04": the two sources disagree on the tag, and
# sagemaker.core.image_uris.retrieve refuses the framework for ml.inf2 ("Unsupported processor: inf ... neuronx")
# and ml.trn1 (Trainium allows only pytorch), so no pin could be cross-checked. Its container contract
# (entrypoint, environment convention) and optimum-neuron's option set were not read. Not offered.


def facts_of(pin: ImagePin) -> ImageFacts:
    """The recorded facts of a pinned image of CURRENT_IMAGES; KeyError naming the image otherwise."""
    for facts in CURRENT_IMAGES:
        if facts.pin == pin:
            return facts
    raise KeyError(f"image {pin.repository}:{pin.gpu_tag} has no recorded CUDA and engine (systems/images_current.py)")
