"""The endpoint's volume and timeouts sized from the model's bytes, or refused with what works: a 400 GB model is
refused before anything is built or deployed, never clipped to SageMaker's maximum (systems/sizing.py,
docs/design/sizing.md). The sizes come from `model_parameters` (no weights anywhere)."""

from __future__ import annotations

from pathlib import Path

import botocore.loaders
from helpers import config_refusal

from deployment import load_config
from systems.sizing import sagemaker_bounds

# 200 B parameters in bf16: 400 GB of weights, on the one instance type whose GPUs hold them (8 x H200).
HUGE = (
    "  - name: huge\n    system: vllm\n    model: acme/huge-400b\n    model_parameters: 200000000000\n"
    "    dtype: bf16\n    instance_type: ml.p5e.48xlarge\n    tensor_parallel_degree: 8\n"
)


def _write(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "sizing.yaml"
    path.write_text("endpoints:\n" + endpoint)
    return path


def test_the_bounds_are_botocores():
    shapes = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")["shapes"]
    assert sagemaker_bounds() == {
        "ModelDataDownloadTimeoutInSeconds": (60, 3600),
        "ContainerStartupHealthCheckTimeoutInSeconds": (60, 3600),
        "VolumeSizeInGB": (1, 512),
    }
    assert shapes["ProductionVariantVolumeSizeInGB"]["max"] == 512


def test_a_400_gb_model_is_refused_with_its_bytes_the_rate_the_limit_and_what_works(tmp_path):
    message = config_refusal(_write(tmp_path, HUGE + "    engine: {max_model_len: 8192}\n"))
    for part in (
        "endpoint 'huge': the model data is 400.0 GB (400,000,000,000 bytes)",
        "200,000,000,000 parameters (model_parameters) x 2 bytes (bf16)",
        "at 100 MB/s from S3 to the instance (this project's assumption, not measured: docs/design/sizing.md)",
        "needs 4,300 s",
        "above the 3600 s ModelDataDownloadTimeoutInSeconds allows (botocore sagemaker: 60-3600)",
        "It is not clipped",
        "engine.stream_weights_from_s3: true",
        "a quantized one",
        "more network bandwidth, set model_data_download_timeout_s",
    ):
        assert part in message, part


def test_streaming_the_weights_leaves_sagemaker_only_the_code_to_download(tmp_path):
    [plan] = load_config(
        _write(tmp_path, HUGE + "    engine: {max_model_len: 8192, stream_weights_from_s3: true}\n")
    ).plans
    assert plan.sizing is not None and plan.sizing.download_bytes is None
    assert plan.download_timeout_s == 600  # the engine's floor: only metadata/ is downloaded
    assert plan.startup_timeout_s == 300 + 400_000_000_000 // 200_000_000  # the weights read while it starts
    assert plan.volume_size_gb is None  # p5e: local NVMe


def test_an_explicit_timeout_is_used_as_given(tmp_path):
    [plan] = load_config(
        _write(tmp_path, HUGE + "    model_data_download_timeout_s: 3600\n    engine: {max_model_len: 8192}\n")
    ).plans
    assert plan.download_timeout_s == 3600


def test_weights_too_big_to_load_in_time_are_refused(tmp_path):
    # 400 B parameters in bf16 (800 GB) streamed: nothing to download, but 4,300 s to start at the assumed rate.
    endpoint = HUGE.replace("200000000000", "400000000000").replace("bf16", "fp16")
    endpoint += "    engine: {max_model_len: 4096, stream_weights_from_s3: true}\n"
    message = config_refusal(_write(tmp_path, endpoint))
    assert "the weights are 800.0 GB" in message
    assert "at 200 MB/s into the container's memory (this project's assumption" in message
    assert "needs 4,300 s, above the 3600 s ContainerStartupHealthCheckTimeoutInSeconds allows" in message
    assert "container_startup_health_check_timeout_s" in message


CPU = "  - name: cpu\n    system: hf-fastload\n    model: acme/m\n    instance_type: ml.m5.24xlarge\n"


def test_an_ebs_only_instance_gets_a_volume_sized_from_the_bytes(tmp_path):
    [plan] = load_config(_write(tmp_path, CPU + "    model_parameters: 1000000000\n")).plans
    assert plan.volume_size_gb == 2 + 10  # 2 GB of fp16 weights + the headroom
    [plan] = load_config(_write(tmp_path, CPU + "    model_parameters: 1000000000\n    model_data: tar-gz\n")).plans
    assert plan.volume_size_gb == 4 + 10  # the archive and its extraction


def test_a_volume_above_512_gb_is_refused_naming_what_works(tmp_path):
    [plan] = load_config(
        _write(tmp_path, CPU + "    model_parameters: 150000000000\n    model_data_download_timeout_s: 3600\n")
    ).plans
    assert plan.volume_size_gb == 310  # 300 GB + headroom fits under 512
    message = config_refusal(
        _write(tmp_path, CPU + "    model_parameters: 300000000000\n    model_data_download_timeout_s: 3600\n")
    )
    for part in (
        "the model data is 600.0 GB",
        "needs a 610 GB volume on ml.m5.24xlarge, which has no local NVMe storage",
        "VolumeSizeInGB takes at most 512 (botocore sagemaker ProductionVariantVolumeSizeInGB: 1-512)",
        "an instance type with local NVMe storage",
    ):
        assert part in message, part


def test_a_configured_volume_too_small_for_the_model_data_is_refused(tmp_path):
    message = config_refusal(_write(tmp_path, CPU + "    model_parameters: 20000000000\n    volume_size_gb: 30\n"))
    assert (
        "endpoint 'cpu': volume_size_gb: value 30 is less than the 50 GB the model data needs on the instance "
        "(40.0 GB (40,000,000,000 bytes)" in message
    )
