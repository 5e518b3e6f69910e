"""The benchmark harness: statistics and report code on tiny inputs, and the GPU and S3 cold-start sections run on
the CPU at tiny shapes (the GPU section's code is the one `make bench` runs where CUDA is; here it cannot rot)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from bench import report
from bench.stats import latency_summary, percentile, ratio, spread, summarize, table, write_json

# slow: the benchmark sections at small shapes (make test-fast leaves them out)
pytestmark = pytest.mark.slow


def test_summarize_median_spread_and_iqr() -> None:
    s = summarize([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (s["n"], s["median"], s["min"], s["max"], s["q1"], s["q3"]) == (5, 3.0, 1.0, 5.0, 2.0, 4.0)
    assert summarize([])["n"] == 0 and math.isnan(summarize([])["median"])
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([10], 99) == 10


def test_ratio_uses_paired_runs_and_falls_back_to_bounds() -> None:
    r = ratio([2.0, 4.0, 6.0], [1.0, 2.0, 2.0])
    assert r["median"] == 2.0 and r["min"] == 2.0 and r["max"] == 3.0
    unpaired = ratio([2.0, 4.0], [1.0, 2.0, 4.0])
    assert unpaired["median"] == 1.5 and unpaired["min"] == 2.0 / 4.0 and unpaired["max"] == 4.0
    assert math.isnan(ratio([1.0], [])["median"])


def test_latency_summary_and_formatting() -> None:
    s = latency_summary([0.1, 0.2, 0.3, 0.4], errors=1, wall_s=2.0, tokens_per_request=32)
    assert s["requests"] == 5 and s["errors"] == 1 and s["req_per_s"] == 2.0 and s["tokens_per_s"] == 64.0
    assert abs(s["p50_s"] - 0.25) < 1e-9
    assert spread(summarize([1.0, 2.0, 3.0])) == "2 [1-3]"
    assert table(["a", "b"], [[1.5, "x"]]).splitlines() == ["| a | b |", "|---|---|", "| 1.5 | x |"]


def _fake_results() -> dict:
    s = summarize([1.0, 1.1, 0.9, 1.0, 1.2])
    variants = {"a": "A", "b": "B", "c": "C", "d": "D"}
    cold = {
        "shape": "tiny",
        "variants": variants,
        "bytes": {v: 2**30 for v in variants},
        "torch_threads": 2,
        "method": "m",
        "ready_s": {f"{v}_{st}": s for v in variants for st in ("cold", "warm")},
        "first_token_part_s": {f"{v}_{st}": s for v in variants for st in ("cold", "warm")},
        "read_gib_per_s": {f"{v}_{st}": s for v in variants for st in ("cold", "warm")},
        "ratios": {"c_over_d_cold": ratio(s, s)},
        "eviction_effective": True,
        "targets": {"cold": {"c_within_1.5x_of_d": True, "c_3x_faster_than_b": False}},
        "import_torch_transformers_s": s,
    }
    keys = (
        "read_cold",
        "read_warm",
        "hash_only",
        "prefix_c8",
        "prefix_c1",
        "republish_c8",
        "tar_prefix_c8",
        "tar_ours",
        "tar_ours_pack",
        "tar_default_pack",
        "tar_default_total_est",
    )
    publish = {
        "method": "m",
        "artifact_bytes": 2**30,
        "tar_artifact_bytes": 2**20,
        "packer": "tarfile",
        "tar_sizes": {"ours": 2**20},
        "seconds": {k: s for k in keys},
        "mib_per_s": {k: s for k in keys[:-1]},
        "ratios": {"c1_over_c8": ratio(s, s)},
    }
    cell = {**latency_summary([0.1, 0.2], 0, 1.0, 32), "req_per_s": s, "tokens_per_s": s, "latency_s": s, "rounds": 5}
    serving = {
        "tiny-gpt2": {
            "new_tokens": 32,
            "rounds": 5,
            "servers": {
                "hf-fastload": {"ready_s": 1.0, "cells": {"1": cell, "4": cell}},
                "deepspeed-byoc": {"error": "boom"},
            },
            "ratios_tokens_per_s_vs_hf": {},
        }
    }
    devloop = {
        "synth_all_examples": {
            "cases": 3,
            "import_aws_cdk_s": 1.0,
            "first_pass_s": s,
            "later_pass_s": s,
            "per_case_later_s": s,
            "first_over_later": ratio(s, s),
            "method": "m",
        },
        "demo": {"seconds": 30.0, "returncode": 0},
    }
    return {
        "machine": report.machine(),
        "reps": 5,
        "total_seconds": 12.0,
        "section_seconds": {"coldstart": 1.0},
        "sections": {
            "coldstart": cold,
            "publish": publish,
            "serving": serving,
            "devloop": devloop,
            "gpu": {"skipped": "no cuda"},
        },
    }


def test_report_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    results = _fake_results()
    results["sections"]["coldstart"]["ratios"]["nan_case"] = {"median": float("nan"), "min": 0.0, "max": 1.0}
    report.write(results, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())  # strict JSON: NaN became null
    assert data["sections"]["coldstart"]["ratios"]["nan_case"]["median"] is None
    md = (tmp_path / "results.md").read_text()
    for text in (
        "## 1. Cold start",
        "## 2. Build and publish",
        "## 3. Serving",
        "## 4. Developer loop",
        "FAILED: boom",
        "**missed**",
        "GPU section: no cuda",
    ):
        assert text in md
    assert sorted(data["plots"]) == ["coldstart.png", "publish.png", "serving_latency.png"]
    for name in data["plots"]:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_json_is_strict(tmp_path: Path) -> None:
    write_json(tmp_path / "r.json", {"x": float("inf"), "y": [float("nan"), 1]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"x": None, "y": [None, 1]}


# ---- the GPU section and the S3 cold start, run for real at tiny shapes on the CPU ------------------------------


def test_gpu_section_runs_at_tiny_shapes_on_cpu(
    tmp_path: Path, tiny_models: dict[str, Path], gpt2_artifact: Path
) -> None:
    """Every part of `python -m bench --only gpu` (cold start, bandwidth, decode with the fast path, ONNX Runtime vs
    PyTorch) at tiny shapes on the CPU, rendered into the report. Numbers at this size mean nothing; the code paths
    and the fast path's tokens do."""
    from bench import gpu, models

    lines: list[str] = []
    assert "skipped" in gpu.bench(tmp_path, 1, lines.append)  # no CUDA here: the section says why it did not run
    paths = gpu.prepare(tmp_path, "tiny-gptj", "cpu", lines.append)
    cold = gpu.coldstart(paths, "cpu", 1, lines.append, warmup=False)
    assert set(cold["seconds"]) == {f"{v}_{s}" for v in gpu.VARIANTS for s in ("cold", "warm")}
    assert cold["seconds"]["ours_cold"]["n"] == 1 and cold["bytes"]["ours"] == cold["bytes"]["raw"] > 0
    bandwidth = gpu.memory_bandwidth("cpu", 2**20, 1)
    assert bandwidth["bytes_per_s"]["median"] > 0
    decode = gpu.decode(
        paths["ours"],
        "cpu",
        1,
        lines.append,
        batches=(2,),
        new_tokens=3,
        bandwidth=bandwidth["bytes_per_s"]["median"],
        warmup=0,
        check_tokens=4,
    )
    assert decode["fast_path"] == "compiled" and decode["tokens_equal"] == {"2": True}  # static cache == eager
    assert decode["systems"]["deepspeed_kernel_injection"] == {"skipped": "kernel injection needs CUDA"}
    assert set(decode["systems"]["ours_fast"]) == {"2"} and decode["weight_bytes"] > 0
    text = "endpoints:\n" + models.endpoint_yaml(
        "trt",
        tiny_models["gpt2"],
        dtype="fp32",
        system="tensorrt-byoc",
        instance_type="ml.g4dn.xlarge",
        extra="    engine: {tensorrt_profile: {max_batch: 2, max_sequence_length: 40}}\n",
    )
    trt, _ = models.build(text, tmp_path / "trt.yaml", "trt", tmp_path / "trt")
    onnx = gpu.onnx_vs_torch(trt, gpt2_artifact, "cpu", 1, lines.append, batches=(2,), new_tokens=3, warmup=0)
    assert onnx["onnxruntime_providers"][-1] == "CPUExecutionProvider" and set(onnx["systems"]) == {
        "onnxruntime",
        "pytorch",
    }
    section = {
        "device": gpu.device_description("cpu"),
        "reps": 1,
        "shape": "tiny-gptj",
        "bandwidth": bandwidth,
        "coldstart": cold,
        "decode": decode,
        "gpt2_onnxruntime_vs_pytorch": {"shape": "tiny-gpt2", **onnx},
    }
    results = {"machine": report.machine(), "reps": 1, "sections": {"gpu": section}}
    report.write(results, tmp_path / "results")
    md = (tmp_path / "results" / "results.md").read_text()
    for heading in ("## 5. GPU", "### Cold start to the first token (tiny-gptj", "### Decode", "### GPT-2 (tiny-gpt2)"):
        assert heading in md
    assert (
        "FAILED" not in md
        and "gpu_decode.png" in json.loads((tmp_path / "results" / "results.json").read_text())["plots"]
    )


def test_s3_cold_start_and_upload_ceiling_against_the_emulator(
    tmp_path: Path, tiny_models: dict[str, Path], gpt2_artifact: Path, emulator
) -> None:
    from bench import coldstart, publish, s3coldstart

    pickle_dir = coldstart.make_pickle(tiny_models["gpt2"], tmp_path / "pickle")
    result = s3coldstart.bench(tmp_path, gpt2_artifact, pickle_dir, 1, lambda _: None, emulator=emulator, warmup=False)
    assert {v: s["n"] for v, s in result["seconds"].items()} == {"ours": 1, "old": 1, "raw": 1}
    assert result["old_tar_gz_bytes"] > 0 and set(result["ratios"]) == {"old_over_ours", "ours_over_raw"}
    md = "\n".join(report._s3coldstart_md(result))
    assert "## 1b. Cold start from S3" in md and "ours >= 3x faster than the old recipe" in md
    # the download lays the prefix out as SageMaker does: key minus prefix, relative to the model directory
    import boto3

    with emulator.activated():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="ceiling")
        assert publish.plain_upload(s3, gpt2_artifact, "ceiling", "p", 4) > 0
        got = s3coldstart.download_prefix(s3, "ceiling", "p/", tmp_path / "down")
    files = sorted(p.relative_to(gpt2_artifact).as_posix() for p in gpt2_artifact.rglob("*") if p.is_file())
    assert (
        sorted(p.relative_to(tmp_path / "down").as_posix() for p in (tmp_path / "down").rglob("*") if p.is_file())
        == files
    )
    assert got == sum((gpt2_artifact / f).stat().st_size for f in files)


def test_streamed_weights_against_download_then_load_from_the_emulator(
    tmp_path: Path, gpt2_artifact: Path, emulator
) -> None:
    """The real streamer (a pinned dev requirement) reads the published shards from the emulator's S3; its tensors
    and small files equal the download's (checked inside bench), and the three variants are timed."""
    from bench import s3stream

    result = s3stream.bench(tmp_path, gpt2_artifact, 1, lambda _: None, emulator=emulator)
    assert "skipped" not in result, result.get("skipped")
    assert {v: s["n"] for v, s in result["seconds"].items()} == {"stream": 1, "download_load": 1, "download": 1}
    assert result["tensor_bytes"] > 0 and set(result["ratios"]) == {
        "stream_over_download_load",
        "stream_over_download",
        "download_load_over_download",
    }
    assert not any(k in os.environ for k in s3stream.STREAMER_ENV)  # the settings do not leak out of the run
    md = "\n".join(report._s3stream_md(result))
    assert "## 1c. Streamed weights" in md and "runai-model-streamer 0.17.0" in md


def test_streamed_tensors_that_differ_are_reported() -> None:
    import torch

    from bench import s3stream

    same = {"tensors": {"w": torch.ones(3, dtype=torch.float16)}, "small_files": ["config.json"]}
    s3stream.check_same(same, {"tensors": {"w": torch.ones(3, dtype=torch.float16)}, "small_files": ["config.json"]})
    with pytest.raises(AssertionError, match=r"differ from the downloaded ones: \['w'\]"):
        s3stream.check_same(
            same, {"tensors": {"w": torch.zeros(3, dtype=torch.float16)}, "small_files": ["config.json"]}
        )
    with pytest.raises(AssertionError, match="differ by name"):
        s3stream.check_same(
            same, {"tensors": {"v": torch.ones(3, dtype=torch.float16)}, "small_files": ["config.json"]}
        )
    with pytest.raises(AssertionError, match="small files differ"):
        s3stream.check_same(same, {"tensors": same["tensors"], "small_files": []})
