"""GPU generations (facts/gpus.py): every GPU of the instance table has facts, and the precision and
image checks refuse what the sources say cannot run, and accept what can."""

from __future__ import annotations

import re

import botocore.session
import pytest

from facts.gpus import AMI_DRIVERS, GPUS, gpu_facts, image_problems
from facts.instances import _ACCELERATED, GPU
from systems.images_current import SGLANG_ENGINE, VLLM_ENGINE
from systems.precision import ENGINE_PRECISION, precision_problems


def test_every_gpu_of_the_instance_table_has_an_entry():
    names = {f.accelerators.name for f in _ACCELERATED.values() if f.accelerators.kind == GPU}
    assert names - set(GPUS) == set()
    assert set(GPUS) - names == set(), "facts for a GPU no instance family has"


def test_capabilities_and_native_precisions():
    by_capability = {name: facts.capability for name, facts in GPUS.items()}
    assert by_capability["NVIDIA T4"] == 75 and by_capability["NVIDIA A10G"] == 86
    assert by_capability["NVIDIA L40S"] == by_capability["NVIDIA L4"] == 89
    assert by_capability["NVIDIA H100"] == by_capability["NVIDIA H200"] == 90
    assert (by_capability["NVIDIA B200"], by_capability["NVIDIA B300"]) == (100, 103)
    assert by_capability["NVIDIA RTX PRO 6000 Blackwell Server Edition"] == 120
    assert [n for n, f in GPUS.items() if not f.bf16] == ["NVIDIA K80", "NVIDIA V100", "NVIDIA T4"]
    assert sorted(n for n, f in GPUS.items() if f.fp8 and not f.fp4) == [
        "NVIDIA H100",
        "NVIDIA H200",
        "NVIDIA L4",
        "NVIDIA L40S",
    ]
    assert sorted(n for n, f in GPUS.items() if f.fp4) == [
        "NVIDIA B200",
        "NVIDIA B300",
        "NVIDIA RTX PRO 4500 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    ]
    assert [n for n, f in GPUS.items() if not f.verified] == ["NVIDIA K80", "NVIDIA A10G"]
    assert gpu_facts("NVIDIA B300").capability_text == "10.3"
    with pytest.raises(
        ValueError, match="GPU .NVIDIA X1. has no recorded compute capability; known: NVIDIA A100, NVIDIA A100 80GB,"
    ):
        gpu_facts("NVIDIA X1")


@pytest.mark.parametrize(
    ("gpu", "dtype", "engine", "method", "expected"),
    [
        ("NVIDIA T4", "bf16", None, None, "bf16 needs compute capability 8.0 .*NVIDIA T4 is 7.5: use fp16"),
        (
            "NVIDIA V100",
            "bf16",
            VLLM_ENGINE,
            "mxfp4",
            "bf16 needs compute capability 8.0 .*NVIDIA V100 is 7.0|"
            f"{VLLM_ENGINE} loads mxfp4 weights from compute capability 8.0; NVIDIA V100 is 7.0",
        ),
        # gpt-oss's MXFP4 computes in bf16 only (vLLM Mxfp4Config.get_supported_act_dtypes)
        (
            "NVIDIA L40S",
            "fp16",
            VLLM_ENGINE,
            "mxfp4",
            "computes mxfp4 weights in bf16 only, not fp16; set dtype: bf16",
        ),
        (
            "NVIDIA T4",
            "fp16",
            SGLANG_ENGINE,
            "fp8",
            "loads fp8 weights from compute capability 8.0; NVIDIA T4 is 7.5",
        ),
        ("NVIDIA A10G", "bf16", SGLANG_ENGINE, "modelopt_fp8", "from compute capability 8.9; NVIDIA A10G is 8.6"),
        ("NVIDIA H100", "bf16", SGLANG_ENGINE, "nvfp4_online", "from compute capability 10.0; NVIDIA H100 is 9.0"),
        (
            "NVIDIA H100",
            "bf16",
            VLLM_ENGINE,
            "bitsandbytes",
            f"'bitsandbytes' on {VLLM_ENGINE}: no recorded GPU floor",
        ),
    ],
)
def test_precision_refusals(gpu, dtype, engine, method, expected):
    """`expected`: one pattern per problem, separated by |."""
    problems = precision_problems(gpu, dtype, engine, method)
    patterns = expected.split("|")
    assert len(problems) == len(patterns) and all(re.search(p, m) for p, m in zip(patterns, problems)), problems


@pytest.mark.parametrize(
    ("gpu", "dtype", "engine", "method"),
    [
        ("NVIDIA T4", "fp16", None, None),
        ("NVIDIA A10G", "bf16", VLLM_ENGINE, "mxfp4"),  # gpt-oss on g5: vLLM's MXFP4 MoE from 8.0 (not native)
        ("NVIDIA T4", "fp16", VLLM_ENGINE, "fp8"),  # FP8 weight-only through Marlin from 7.5
        ("NVIDIA L40S", "bf16", SGLANG_ENGINE, "modelopt_fp8"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "bf16", SGLANG_ENGINE, "nvfp4_online"),
    ],
)
def test_precision_accepted(gpu, dtype, engine, method):
    assert precision_problems(gpu, dtype, engine, method) == []


def test_engine_precision_tables_name_native_floors_no_lower_than_the_minimum():
    for engine, table in ENGINE_PRECISION.items():
        for method, support in table.items():
            assert support.native is None or support.native >= support.minimum, (engine, method)


def test_image_cuda_against_gpu_and_host_driver():
    # The CUDA 13 DLCs: Turing and newer, driver 580 only from the AL2023 AMI.
    assert image_problems("NVIDIA L40S", "13.0", "al2023-ami-sagemaker-inference-gpu-4-1") == []
    assert image_problems("NVIDIA B300", "13.0", "al2023-ami-sagemaker-inference-gpu-4-1") == []
    (problem,) = image_problems("NVIDIA L40S", "13.0", None)
    assert "needs NVIDIA driver >= 580; InferenceAmiVersion (default)" in problem
    assert problem.endswith("allowed: al2023-ami-sagemaker-inference-gpu-4-1")
    assert "driver >= 580" in image_problems("NVIDIA H100", "13.0", "al2-ami-sagemaker-inference-gpu-3-1")[0]
    assert (
        "older than CUDA 13.0 supports (from 7.5)"
        in image_problems("NVIDIA V100", "13.0", "al2023-ami-sagemaker-inference-gpu-4-1")[0]
    )
    # The CUDA 12.4 HF images: no Blackwell code; any AMI (forward-compat libraries on the default one).
    assert image_problems("NVIDIA A10G", "12.4", None) == []
    assert "needs an image built with CUDA >= 12.8" in image_problems("NVIDIA B200", "12.4", None)[0]
    assert "CUDA 12.1 has no recorded driver" in image_problems("NVIDIA T4", "12.1", None)[0]
    enum = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("ProductionVariantInferenceAmiVersion")
        .enum
    )
    assert set(AMI_DRIVERS) == {v for v in enum if "-gpu-" in v}


def test_ami_driver_versions_are_botocores():
    """The driver of each InferenceAmiVersion as the API documentation in botocore's sagemaker model states it."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    text = model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation
    stated = {
        name: int(driver)
        for name, driver in re.findall(r"<dt>([a-z0-9-]+)</dt>\s*<dd>.*?NVIDIA driver version: (\d+)", text, re.S)
    }
    assert stated == AMI_DRIVERS
