"""bench/gpu_ready.py's dry run: the lent-GPU readiness run end to end on the CPU at tiny shapes (checkpoint, the
hf-fastload recipe's build, loads through the artifact's handler, decode at batch 1 and 32), with the packages the
lent machine lacks made unimportable, and its refusals."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT
from hermetic import subprocess_env

# slow: a real build and decode (about 30 s here); make test-fast leaves it out
pytestmark = pytest.mark.slow

# What the lent GPU machine does not have (.library's package list: no web stack, no AWS SDK, no CDK): the run
# must not need them. pydantic it lacks too, but the build needs it: the docs carry its wheels.
ABSENT_THERE = ("fastapi", "starlette", "uvicorn", "boto3", "botocore", "moto", "aws_cdk", "constructs", "jsii")


def python(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """This venv's Python with `args`, in the repository, in an environment built for the test."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_dry(out: Path, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys({ABSENT_THERE!r}))  # None: importing it raises ImportError\n"
        "from bench.gpu_ready import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    argv = ["--dry-run", "--out", str(out), "--work", str(work), "--new-tokens", "4", *extra]
    return python("-c", code, *argv)


def test_dry_run_end_to_end_writes_every_figure(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    proc = run_dry(out, work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_ready.json").read_text())
    assert result["dry_run"] is True and result["device"]["device"] == "cpu"
    assert set(result["steps"]) == {"setup", "checkpoint", "build", "load", "decode"}
    assert all(s["seconds"] >= 0 and s["expected_s"] > 0 for s in result["steps"].values())

    ckpt = result["checkpoint"]
    assert ckpt["shards"] > 1 and ckpt["weight_bytes"] == 2 * ckpt["parameters"]  # bf16, split into shards
    build = result["build"]
    assert build["verified_on"].startswith("cpu") and build["verification"]["greedy_tokens_match"] is True
    assert build["verification"]["max_abs_logit_diff"] <= build["verification"]["tolerance"]

    loads = result["load"]
    for variant in ("ours", "plain", "plain_device_map", "raw_read"):
        for state in ("cold", "warm"):
            s = loads["seconds"][f"{variant}_{state}"]
            assert s["n"] == 1 and s["median"] > 0, (variant, state)
    assert "plain_over_ours_cold" in loads["ratios"] and loads["artifact_bytes"] > 0

    decode = result["decode"]
    assert set(decode["batches"]) == {"1", "32"} and decode["new_tokens"] == 4
    b1, b32 = decode["batches"]["1"], decode["batches"]["32"]
    assert b32["bound_tokens_per_s"] == pytest.approx(32 * b1["bound_tokens_per_s"])
    assert b1["bound_tokens_per_s"] == pytest.approx(decode["bandwidth_bytes_per_s"] / decode["weight_bytes"])
    for r in (b1, b32):
        assert r["end_to_end_tokens_per_s"]["median"] > 0
        rate = r["decode_tokens_per_s"]["median"]  # NaN only when t(N) <= t(1) in every run (noise at tiny shapes)
        assert math.isnan(rate) or r["fraction_of_bound"] == pytest.approx(rate / r["bound_tokens_per_s"])

    md = (out / "gpu_ready.md").read_text()
    for heading in ("# GPU readiness", "## Steps", "## Load time", "## Decode"):
        assert heading in md
    assert "| 32 |" in md
    assert not (work / "checkpoint").exists() and not (work / "artifact").exists()  # scratch removed
    for line in proc.stdout.splitlines():  # every progress line carries the elapsed time
        if line.startswith("["):
            assert line[1:].split("s]")[0].strip().replace(".", "").isdigit()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batches", "1,x"], "--batches '1,x': allowed: positive integers"),
        (["--batches", "0,32"], "each must be 1-1024"),
        (["--new-tokens", "1"], "allowed: 2 or more"),
    ],
)
def test_bad_arguments_are_refused_by_name(tmp_path: Path, argv: list[str], message: str) -> None:
    proc = python("-m", "bench.gpu_ready", "--dry-run", "--out", str(tmp_path / "out"), *argv, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_unwritable_out_is_refused_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_dry(blocker, tmp_path / "work")
    assert proc.returncode == 2 and f"--out {blocker}: cannot write there" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "work").exists()


def test_verify_on_a_device_loads_the_recipe_source_there_and_restores_the_loader(tmp_path: Path) -> None:
    """--verify-on device on a GPU: the recipe's source loads on the device (here the CPU through the same
    device_map path), its check passes there, and the recipe's own loader is back afterwards."""
    from bench import gpu_ready
    from systems import recipe_common

    original = recipe_common.load_pretrained
    log = gpu_ready.Progress(every=60)
    ckpt = gpu_ready.make_checkpoint(tmp_path / "checkpoint", gpu_ready.TINY_LLAMA, "cpu", 64 * 1024, log)
    assert ckpt["shards"] > 1
    index = json.loads((tmp_path / "checkpoint" / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == ckpt["weight_bytes"]
    built = gpu_ready.build_artifact(tmp_path / "checkpoint", tmp_path, "cpu", "ml.p5en.48xlarge")
    assert built["verified_on"] == "cpu" and built["verification"]["device"] == "cpu"
    assert built["verification"]["greedy_tokens_match"] is True
    assert recipe_common.load_pretrained is original
    manifest = json.loads((tmp_path / "artifact" / "manifest.json").read_text())
    assert manifest["system"] == "hf-fastload" and manifest["dtype"] == "bf16"


def test_a_failed_step_is_recorded_and_the_files_still_written(tmp_path: Path, monkeypatch, capsys) -> None:
    """A step the measurements need fails (here the build, made to raise what a refused build raises): the run
    writes what it has, names the step, and exits 1; the checkpoint it made is removed."""
    from artifact import BuildError
    from bench import gpu_ready

    seen_before_the_build: dict = {}

    def refused(*_args, **_kwargs):
        # what a run killed here (the device's time limit) would leave: the figures so far, marked partial
        seen_before_the_build.update(json.loads((out / "gpu_ready.json").read_text()))
        raise BuildError("endpoint 'gpu-ready': refused for the test")

    monkeypatch.setattr(gpu_ready, "build_artifact", refused)
    monkeypatch.delenv("HF_FASTLOAD_DECODE", raising=False)
    monkeypatch.setenv("MAX_BATCH_SIZE", "5")
    out, work = tmp_path / "out", tmp_path / "work"
    assert gpu_ready.main(["--dry-run", "--out", str(out), "--work", str(work)]) == 1
    result = json.loads((out / "gpu_ready.json").read_text())
    assert result["failed"] == {"step": "build", "error": "BuildError: endpoint 'gpu-ready': refused for the test"}
    assert seen_before_the_build["partial"] is True and "partial" not in result
    assert seen_before_the_build["checkpoint"] == result["checkpoint"] and "build" not in seen_before_the_build
    assert "checkpoint" in result and "load" not in result and "decode" not in result
    assert "FAILED in build" in (out / "gpu_ready.md").read_text()
    assert "FAILED build: BuildError" in capsys.readouterr().err
    assert not (work / "checkpoint").exists()
    assert "HF_FASTLOAD_DECODE" not in os.environ and os.environ["MAX_BATCH_SIZE"] == "5"  # the knobs restored


def test_an_unknown_decode_path_is_refused(tmp_path: Path, capsys) -> None:
    from bench import gpu_ready

    assert gpu_ready.main(["--dry-run", "--out", str(tmp_path / "out"), "--decode", "fast"]) == 2
    assert "--decode 'fast': allowed: eager, static-cache, compiled" in capsys.readouterr().err


def test_every_decode_path_has_an_expected_time() -> None:
    """--budget-s plans the decode step by the path asked for (compiled traces first): one entry per handler mode."""
    from bench import gpu_ready
    from systems.hf_fastload.handler import inference as handler

    assert set(gpu_ready.EXPECTED_DECODE_S) == set(handler.DECODE_MODES)
    assert gpu_ready.EXPECTED_DECODE_S["compiled"] > gpu_ready.EXPECTED_DECODE_S["eager"]


@pytest.mark.parametrize("name", ["gpu_ready", "gpu_ready_compiled", "gpu_ready_static_cache"])
def test_the_recorded_h200_runs_are_what_their_json_says(name: str) -> None:
    """bench/results/<name>.md is the report of <name>.json (the lent H200's files, copied unchanged), and the
    JSON is a whole 8B run on that GPU: every step, verified like with like, each decode path as its name says."""
    from bench import gpu_ready

    result = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text())
    assert (ROOT / "bench" / "results" / f"{name}.md").read_text() == gpu_ready.markdown(result)
    assert result["dry_run"] is False and "partial" not in result and "failed" not in result
    assert result["device"]["name"] == "NVIDIA H200"
    assert result["checkpoint"]["parameters"] == gpu_ready.parameter_count(gpu_ready.LLAMA_31_8B)
    assert result["build"]["verification"]["greedy_tokens_match"] is True
    assert result["build"]["verification"]["device"].startswith("cuda")
    assert result["args"]["decode"] == {"gpu_ready": "eager"}.get(
        name, name.removeprefix("gpu_ready_").replace("_", "-")
    )
    assert set(result["decode"]["batches"]) == {"1", "32"}
