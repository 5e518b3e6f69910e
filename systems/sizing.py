"""An endpoint's volume, download and startup timeouts, sized from its model's bytes, or refused: never clipped.

SageMaker downloads the model data from S3 to the instance within ModelDataDownloadTimeoutInSeconds and the container
must answer /ping within ContainerStartupHealthCheckTimeoutInSeconds; both take 60-3600 s, and VolumeSizeInGB 1-512
(botocore's sagemaker service model: ProductionVariantModelDataDownloadTimeoutInSeconds,
ProductionVariantContainerStartupHealthCheckTimeoutInSeconds, ProductionVariantVolumeSizeInGB; read at run time
below, so a newer botocore's bounds are the ones checked). A size the assumed rates cannot fit is refused when the
config loads, with what would work; a sized value is never cut to the maximum. Why and with what rates:
docs/design/sizing.md.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from endpoint_config import EndpointSpec

# S3 -> instance while SageMaker downloads the model data, and the container reading the weights into GPU memory.
# Both are this project's ASSUMPTIONS, not measured and not documented by AWS (no SageMaker page states either
# rate): conservative figures kept since the first sizing. An explicit timeout in the config is used as given.
DOWNLOAD_BYTES_PER_S = 100e6
LOAD_BYTES_PER_S = 200e6
RATE_SOURCE = "this project's assumption, not measured: docs/design/sizing.md"
# A fixed allowance on top of the bytes: the container's own start, the engine's memory profiling, CUDA graphs.
FIXED_ALLOWANCE_S = 300
# The volume holds the model data as SageMaker writes it (a model.tar.gz archive and its extraction: twice) plus
# this headroom for logs and the container's scratch files (our allowance, unverified).
VOLUME_HEADROOM_GB = 10
GB = 1e9


@functools.lru_cache(maxsize=1)
def sagemaker_bounds() -> dict[str, tuple[int, int]]:
    """(min, max) of the three values, from botocore's sagemaker service model (the model the stacks' SDK and the CLI
    call with)."""
    import botocore.loaders

    shapes = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")["shapes"]

    def bounds(shape: str) -> tuple[int, int]:
        return int(shapes[shape]["min"]), int(shapes[shape]["max"])

    return {
        "ModelDataDownloadTimeoutInSeconds": bounds("ProductionVariantModelDataDownloadTimeoutInSeconds"),
        "ContainerStartupHealthCheckTimeoutInSeconds": bounds(
            "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"
        ),
        "VolumeSizeInGB": bounds("ProductionVariantVolumeSizeInGB"),
    }


def sized_s(floor: int, nbytes: float | None, bytes_per_s: float) -> int:
    """The floor, or the fixed allowance plus the bytes at the rate when that is longer. Not clipped."""
    if not nbytes:
        return floor
    return max(floor, FIXED_ALLOWANCE_S + math.ceil(nbytes / bytes_per_s))


@dataclass(frozen=True)
class Sizing:
    """One endpoint's sizing. weight_bytes: the model's weights (None: not known before a build); basis: where that
    figure came from, for messages; download_bytes: what SageMaker downloads to the instance (the whole artifact, or
    only its small code part when the engine reads the weights from S3 itself: None then); volume_gb: the
    VolumeSizeInGB to render (the config's, else sized on an instance without local NVMe, else None: SageMaker's
    default); problems: each refusal, naming the bytes, the rate, the limit and what works."""

    weight_bytes: float | None
    basis: str
    download_bytes: float | None
    download_timeout_s: int
    startup_timeout_s: int
    volume_gb: int | None
    problems: tuple[str, ...] = ()


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:,.1f} GB ({nbytes:,.0f} bytes)"


def size_endpoint(
    ep: EndpointSpec,
    *,
    pool_specs: list[EndpointSpec],
    weight_bytes: float | None,
    basis: str,
    weights_from_s3: bool,
    default_download_s: int,
    default_startup_s: int,
    streaming_option: str | None,
) -> Sizing:
    """Size `ep` (and its instance pools: the variant's values hold on each) from `weight_bytes`.

    weights_from_s3: the engine reads the weights from S3 itself (staged or streamed), so SageMaker downloads only
    the code part and the weights are read while the container starts (sized at the load rate, Run:ai's streamer
    reading straight to the GPUs; also an assumption). streaming_option: the engine option that turns streaming on
    where the system offers it and the endpoint does not use it (named in a refusal), else None."""
    bounds = sagemaker_bounds()
    download_bytes = None if weights_from_s3 else weight_bytes
    variant = [ep, *pool_specs]
    download_s = max(
        s.model_data_download_timeout_s or sized_s(default_download_s, download_bytes, DOWNLOAD_BYTES_PER_S)
        for s in variant
    )
    startup_s = max(
        s.container_startup_health_check_timeout_s or sized_s(default_startup_s, weight_bytes, LOAD_BYTES_PER_S)
        for s in variant
    )
    where = f"endpoint {ep.name!r}: "
    problems: list[str] = []
    smaller = "a smaller checkpoint (a quantized one: fewer bytes per parameter; or a smaller model)"
    measured = (
        "or, having measured SageMaker's download on an instance type with more network bandwidth, set "
        "model_data_download_timeout_s to what you measured (an explicit value is used as given)"
    )
    low, high = bounds["ModelDataDownloadTimeoutInSeconds"]
    if download_bytes and download_s > high and not any(s.model_data_download_timeout_s for s in variant):
        ways = [smaller]
        if streaming_option is not None:
            ways.insert(0, f"stream the weights from S3 ({streaming_option}: SageMaker then downloads only the code)")
        ways.append(measured)
        problems.append(
            f"{where}the model data is {_gb(download_bytes)} ({basis}); at {DOWNLOAD_BYTES_PER_S / 1e6:.0f} MB/s "
            f"from S3 to the instance ({RATE_SOURCE}) SageMaker's download needs {download_s:,} s "
            f"({FIXED_ALLOWANCE_S} s + the bytes), above the {high} s ModelDataDownloadTimeoutInSeconds allows "
            f"(botocore sagemaker: {low}-{high}). It is not clipped: what works: " + "; ".join(ways)
        )
    low, high = bounds["ContainerStartupHealthCheckTimeoutInSeconds"]
    if weight_bytes and startup_s > high and not any(s.container_startup_health_check_timeout_s for s in variant):
        problems.append(
            f"{where}the weights are {_gb(weight_bytes)} ({basis}); at {LOAD_BYTES_PER_S / 1e6:.0f} MB/s into the "
            f"container's memory ({RATE_SOURCE}) its start needs {startup_s:,} s, above the {high} s "
            f"ContainerStartupHealthCheckTimeoutInSeconds allows (botocore sagemaker: {low}-{high}). It is not "
            f"clipped: what works: {smaller}; or, having measured the container's start, set "
            "container_startup_health_check_timeout_s to it (an explicit value is used as given)"
        )
    volume_gb, volume_problem = _volume(ep, pool_specs, download_bytes, basis, bounds["VolumeSizeInGB"])
    if volume_problem:
        problems.append(where + volume_problem)
    return Sizing(weight_bytes, basis, download_bytes, download_s, startup_s, volume_gb, tuple(problems))


def volume_need_gb(ep: EndpointSpec, download_bytes: float) -> int:
    """The volume the model data needs on the instance: the archive and its extraction for tar-gz, plus headroom."""
    copies = 2 if ep.model_data == "tar-gz" else 1
    return math.ceil(copies * download_bytes / GB) + VOLUME_HEADROOM_GB


def _volume(
    ep: EndpointSpec,
    pool_specs: list[EndpointSpec],
    download_bytes: float | None,
    basis: str,
    bounds: tuple[int, int],
) -> tuple[int | None, str | None]:
    """(VolumeSizeInGB to render, a refusal). On a type with local NVMe SageMaker refuses VolumeSizeInGB (the
    schema's rule, endpoint_config/schema.py) and uses the instance storage: nothing is rendered. Otherwise the
    config's value, checked against the model data, else the need when the bytes are known."""
    if any(s.instance.has_local_nvme for s in [ep, *pool_specs]):
        return None, None
    if not download_bytes:
        return ep.volume_size_gb, None
    need = volume_need_gb(ep, download_bytes)
    low, high = bounds
    archive = (
        "; model_data: s3-prefix stores it once (a tar-gz is stored and extracted)" if ep.model_data == "tar-gz" else ""
    )
    if ep.volume_size_gb is not None:
        if ep.volume_size_gb < need:
            return ep.volume_size_gb, (
                f"volume_size_gb: value {ep.volume_size_gb} is less than the {need} GB the model data needs on the "
                f"instance ({_gb(download_bytes)}, {basis}, + {VOLUME_HEADROOM_GB} GB headroom{archive}); set at "
                f"least {need} (at most {high}) or remove the key to have it sized"
            )
        return ep.volume_size_gb, None
    if need > high:
        return None, (
            f"the model data is {_gb(download_bytes)} ({basis}) and needs a {need} GB volume on "
            f"{ep.instance_type}, which has no local NVMe storage; VolumeSizeInGB takes at most {high} (botocore "
            f"sagemaker ProductionVariantVolumeSizeInGB: {low}-{high}). It is not clipped: what works: an instance "
            "type with local NVMe storage (SageMaker uses it instead of a volume: ml.g5, ml.g6e, ml.p4d, ml.p5 ...); "
            f"a smaller checkpoint{archive}"
        )
    return max(low, need), None


__all__ = [
    "DOWNLOAD_BYTES_PER_S",
    "FIXED_ALLOWANCE_S",
    "LOAD_BYTES_PER_S",
    "RATE_SOURCE",
    "Sizing",
    "VOLUME_HEADROOM_GB",
    "sagemaker_bounds",
    "size_endpoint",
    "sized_s",
    "volume_need_gb",
]
