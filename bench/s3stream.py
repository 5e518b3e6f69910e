"""Benchmark 7: streamed weights (Run:ai Model Streamer) against download-then-load, from the local emulator's S3.

Variants `stream`, `download_load` and `download`, interleaved per run; `STREAMER_ENV` gives them the same request
shape. The variants in full, and their sources (vLLM, runai-model-streamer versions): docs/design/bench.md.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.coldstart import files_of
from bench.s3coldstart import download_prefix
from bench.stats import ratio, summarize

BUCKET = "bench-stream"
PREFIX = "ours/"
MiB = 2**20
CONCURRENCY = 8
PART_BYTES = 64 * MiB
VARIANTS = {
    "stream": "Run:ai Model Streamer: s3:// shards straight to CPU tensors (+ pull of the small files)",
    "download_load": "download of the prefix (8 x 64 MiB ranged GETs) + safetensors load into CPU tensors",
    "download": "download of the prefix only",
}
STREAMER_ENV = {
    # An S3-compatible endpoint (the emulator) is addressed by path, not virtual host (env-vars.md).
    "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",
    # Same request shape as the download: 8 readers, 64 MiB ranges. The emulator copies the whole object for every
    # ranged GET under one lock (moto 5.2.5, moto/s3/models.py FakeKey.value), so its cost grows with the number of
    # requests: at the streamer's defaults (8 MiB chunks, and the native S3 client splitting reads into 8 MiB parts)
    # one 1.4 GiB load took 438 s in a trial here (3.4 MiB/s, load average 7) against ~26 s for the download idle.
    "RUNAI_STREAMER_CONCURRENCY": str(CONCURRENCY),
    "RUNAI_STREAMER_CHUNK_BYTESIZE": str(PART_BYTES),
    # At most one 64 MiB chunk in flight per reader, so 8 requests at once as the download: the native client
    # derives a window from a 10 Gbps target (187.5 MB here, "S3 in-flight window" in its DEBUG log), and every
    # concurrent ranged GET holds its own copy of the whole object in the emulator's memory.
    "RUNAI_STREAMER_S3_MAX_INFLIGHT_MIB": str(PART_BYTES // MiB),
    # The native client's own part size (undocumented; read by the 0.17.0 library, which logs "with a part size of
    # 67108864 bytes" with RUNAI_STREAMER_LOG_LEVEL=DEBUG when set): else each 64 MiB chunk is fetched as 8 MiB parts.
    "RUNAI_STREAMER_S3_CLIENT_PART_SIZE": str(PART_BYTES),
    # The native client aborts a transfer slower than its low-speed limit for this long (default 1000 ms); the
    # emulator takes seconds to its first byte under 8 concurrent ranges, which failed every load with "failure to
    # meet throughput minimum". Real S3 needs none of these settings (8 readers is the default there).
    "RUNAI_STREAMER_S3_REQUEST_TIMEOUT_MS": "120000",
}


def streamer_env() -> contextlib.AbstractContextManager:
    """The streamer's settings in this process's environment for a block, the environment restored after."""
    from unittest import mock

    return mock.patch.dict(os.environ, STREAMER_ENV)


def stream(url: str, dest: Path) -> dict[str, Any]:
    """The streamer's load: small files to `dest`, every shard's tensors into memory."""
    from runai_model_streamer import SafetensorsStreamer, list_safetensors, pull_files

    pull_files(url, str(dest), ignore_pattern=["*.safetensors"])
    tensors = {}
    with SafetensorsStreamer() as streamer:
        streamer.stream_files(list_safetensors(url))  # device "cpu"; owned tensors stay valid after the loop
        for name, tensor in streamer.get_tensors():
            tensors[name] = tensor
    return tensors


def download_load(s3: Any, dest: Path, load: bool) -> dict[str, Any]:
    from safetensors.torch import load_file

    download_prefix(s3, BUCKET, PREFIX, dest, CONCURRENCY)
    tensors: dict[str, Any] = {}
    if load:
        for shard in sorted(dest.glob("*.safetensors")):
            tensors.update(load_file(shard, backend="pread"))
    return tensors


def run_variant(variant: str, s3: Any, scratch: Path) -> tuple[float, dict[str, Any]]:
    dest = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{variant}-"))
    try:
        t0 = time.perf_counter()
        if variant == "stream":
            tensors = stream(f"s3://{BUCKET}/{PREFIX}", dest)
        elif variant in ("download_load", "download"):
            tensors = download_load(s3, dest, load=variant == "download_load")
        else:
            raise ValueError(variant)
        seconds = time.perf_counter() - t0
        files = sorted(p.relative_to(dest).as_posix() for p in files_of(dest) if p.suffix != ".safetensors")
        return seconds, {"tensors": tensors, "small_files": files}
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def check_same(streamed: dict[str, Any], loaded: dict[str, Any]) -> None:
    """The streamer's tensors equal safetensors' (names, dtypes, values); the same small files reached the disk."""
    import torch

    a, b = streamed["tensors"], loaded["tensors"]
    if a.keys() != b.keys():
        raise AssertionError(f"streamed tensors differ by name: {sorted(a.keys() ^ b.keys())[:5]}")
    bad = [k for k in a if a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k])]
    if bad:
        raise AssertionError(f"streamed tensors differ from the downloaded ones: {bad[:5]}")
    if streamed["small_files"] != loaded["small_files"]:
        raise AssertionError(f"small files differ: {streamed['small_files']} vs {loaded['small_files']}")


def streamer_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("runai-model-streamer", "runai-model-streamer-s3"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def bench(raw: Path, artifact: Path, reps: int, log, *, emulator: Any = None, warmup: bool = True) -> dict[str, Any]:
    """Publish once, check once that both paths give the same tensors, then `reps` interleaved runs."""
    import boto3
    from botocore.config import Config

    from local_emulator import moto_server
    from model_build.publish import publish_artifact

    versions = streamer_versions()
    if "not installed" in versions.values():
        return {"skipped": f"runai-model-streamer not installed ({versions}); `make install` installs it"}
    scratch = Path(tempfile.mkdtemp(dir=raw, prefix="s3stream-"))
    emu = emulator or moto_server.start(raw / "moto-logs-s3stream")
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        with emu.activated(), streamer_env():
            emu.reset()
            s3 = boto3.client("s3", config=Config(max_pool_connections=CONCURRENCY + 4))
            s3.create_bucket(Bucket=BUCKET)
            publish_artifact(
                artifact, BUCKET, PREFIX.rstrip("/"), s3_client=s3, max_concurrency=CONCURRENCY, progress=False
            )
            if warmup:  # untimed: imports, first calls, and the equality check
                _, streamed = run_variant("stream", s3, scratch)
                _, loaded = run_variant("download_load", s3, scratch)
                check_same(streamed, loaded)
                tensor_bytes = sum(t.numel() * t.element_size() for t in streamed["tensors"].values())
                del streamed, loaded
                gc.collect()
            for rep in range(reps):
                for v in VARIANTS:
                    seconds, got = run_variant(v, s3, scratch)
                    samples[v].append(seconds)
                    del got
                    gc.collect()
                log(
                    f"  streamed weights run {rep + 1}/{reps}: "
                    + ", ".join(f"{v} {samples[v][-1]:.2f} s" for v in VARIANTS)
                    + f" (load average {os.getloadavg()[0]:.1f})"
                )
            emu.reset()
    finally:
        if emulator is None:
            emu.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    s = {v: summarize(x) for v, x in samples.items()}
    ratios = {
        "stream_over_download_load": ratio(s["stream"], s["download_load"]),
        "stream_over_download": ratio(s["stream"], s["download"]),
        "download_load_over_download": ratio(s["download_load"], s["download"]),
    }
    size = sum(p.stat().st_size for p in files_of(artifact))
    return {
        "variants": VARIANTS,
        "versions": versions,
        "streamer_env": STREAMER_ENV,
        "artifact_bytes": size,
        "tensor_bytes": tensor_bytes if warmup else None,
        "seconds": s,
        "mib_per_s": {v: summarize([size / MiB / x for x in xs]) for v, xs in samples.items()},
        "ratios": ratios,
        "method": (
            f"published once (model_build.publish, s3-prefix) to a moto S3 server on 127.0.0.1; one untimed stream + "
            f"download_load whose tensors and small files are compared equal; then {reps} interleaved runs, each "
            "from nothing on disk to every tensor in CPU memory (torch/transformers imported)"
        ),
    }
