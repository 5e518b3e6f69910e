"""Benchmark 3: the local container servers under load from a bounded asyncio client (127.0.0.1 only).

Servers (each its own process, one intra-op thread, fp32 on CPU):
  hf-fastload     `python -m model_build serve` (FastAPI around the artifact's code/inference.py)
  deepspeed-byoc  systems/byoc_server app + DeepSpeedHandler, non-injected (no CUDA), DTYPE=fp32
  tensorrt-byoc   systems/byoc_server app + TensorRTHandler on its ONNX Runtime backend
Load: httpx.AsyncClient, `concurrency` requests in flight; each cell is `rounds` rounds of `concurrency *
per_worker` requests, each request 1 prompt with min_new_tokens = max_new_tokens (fixed output length), greedy.
Bounded: a per-cell time cap; requests past it are not sent. Latency percentiles pool every request of a cell;
throughput (req/s, tokens/s) is per round, reported as median [min-max] over rounds.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import models
from bench.stats import latency_summary, ratio, summarize
from local_runtime.process import stop_process

PROMPT = "The quick brown fox jumps over the lazy dog and"
SERVERS = ("hf-fastload", "deepspeed-byoc", "tensorrt-byoc")
REPO = Path(__file__).resolve().parents[1]


def build_all(raw: Path, model_name: str, source: Path) -> dict[str, Path]:
    """hf-fastload, deepspeed-byoc and tensorrt-byoc artifacts of one source model (built once, reused)."""
    defs = {
        "hf-fastload": models.endpoint_yaml("srv-hf", source, dtype="fp32"),
        "deepspeed-byoc": models.endpoint_yaml(
            "srv-ds", source, dtype="fp16", system="deepspeed-byoc", instance_type="ml.g5.2xlarge"
        ),
        "tensorrt-byoc": models.endpoint_yaml(
            "srv-trt", source, dtype="fp32", system="tensorrt-byoc", instance_type="ml.g4dn.xlarge"
        ),
    }
    names = {"hf-fastload": "srv-hf", "deepspeed-byoc": "srv-ds", "tensorrt-byoc": "srv-trt"}
    out = {}
    for system, text in defs.items():
        cfg = raw / f"config-serve-{model_name}-{names[system]}.yaml"
        art, _ = models.build(
            "endpoints:\n" + text, cfg, names[system], (raw / f"serve-{model_name}" / names[system]).resolve()
        )
        out[system] = art
        out[system + ":config"] = cfg
    return out


def start_server(system: str, artifacts: dict[str, Path], port: int, log_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "ORT_INTRA_OP_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    if system == "hf-fastload":
        cmd = [
            sys.executable,
            "-m",
            "model_build",
            "serve",
            "--config",
            str(artifacts[system + ":config"]),
            "--endpoint",
            "srv-hf",
            "--port",
            str(port),
            "--artifact",
            str(artifacts[system]),
        ]
    elif system == "deepspeed-byoc":
        env["DTYPE"] = "fp32"  # the handler's container override: fp16 matmuls on CPU are not what is measured
        cmd = [sys.executable, "-m", "bench.byoc_launch", "deepspeed", str(artifacts[system]), str(port)]
    else:
        cmd = [sys.executable, "-m", "bench.byoc_launch", "tensorrt", str(artifacts[system]), str(port)]
    log = open(log_path, "wb")
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 120) -> float:
    import httpx

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                return time.perf_counter() - t0
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url}/ping not 200 within {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    stop_process(proc, timeout_s=10)


async def load_round(
    url: str, concurrency: int, total: int, new_tokens: int, deadline: float
) -> tuple[list[float], int, float]:
    """`total` requests with `concurrency` in flight; (latencies of 2xx replies, errors, wall seconds)."""
    import httpx

    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens}}
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(i)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            try:
                queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t = time.perf_counter()
            try:
                r = await client.post(f"{url}/invocations", json=body, timeout=120)
                if r.status_code == 200:
                    latencies.append(time.perf_counter() - t)
                else:
                    errors += 1
            except httpx.HTTPError:
                errors += 1

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return latencies, errors, wall


def bench_server(
    url: str, concurrencies: tuple[int, ...], rounds: int, per_worker: int, new_tokens: int, cell_cap_s: float
) -> dict[str, Any]:
    # warm-up: one request (first-call costs out of the numbers)
    asyncio.run(load_round(url, 1, 1, new_tokens, time.perf_counter() + 60))
    cells = {}
    for c in concurrencies:
        deadline = time.perf_counter() + cell_cap_s
        all_lat: list[float] = []
        errors = 0
        rps, tps = [], []
        done = 0
        for _ in range(rounds):
            if time.perf_counter() >= deadline:
                break
            lat, err, wall = asyncio.run(load_round(url, c, c * per_worker, new_tokens, deadline))
            all_lat += lat
            errors += err
            s = latency_summary(lat, err, wall, new_tokens)
            rps.append(s["req_per_s"])
            tps.append(s["tokens_per_s"])
            done += 1
        cell = latency_summary(all_lat, errors, 1.0, new_tokens)
        cell.pop("req_per_s"), cell.pop("tokens_per_s"), cell.pop("wall_s")
        cell.update(rounds=done, req_per_s=summarize(rps), tokens_per_s=summarize(tps), latency_s=summarize(all_lat))
        cells[str(c)] = cell
    return cells


def bench(
    raw: Path,
    model_name: str,
    source: Path,
    log,
    *,
    concurrencies=(1, 4, 8),
    rounds=5,
    per_worker=1,
    new_tokens=32,
    cell_cap_s=40.0,
) -> dict[str, Any]:
    from local_emulator.moto_server import free_port

    artifacts = build_all(raw, model_name, source)
    out: dict[str, Any] = {
        "model": model_name,
        "new_tokens": new_tokens,
        "rounds": rounds,
        "requests_per_round": {str(c): c * per_worker for c in concurrencies},
        "servers": {},
    }
    for system in SERVERS:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(system, artifacts, port, raw / f"server-{model_name}-{system}.log")
        try:
            ready = wait_ready(url, proc)
            cells = bench_server(url, concurrencies, rounds, per_worker, new_tokens, cell_cap_s)
            out["servers"][system] = {"ready_s": ready, "cells": cells}
            log(
                f"  {model_name} {system}: ready {ready:.1f} s; "
                + "; ".join(
                    f"c{c} p50 {v['p50_s'] * 1000:.0f} ms, {v['tokens_per_s']['median']:.0f} tok/s, {v['errors']} err"
                    for c, v in cells.items()
                )
            )
        except Exception as err:
            out["servers"][system] = {"error": f"{type(err).__name__}: {err}"}
            log(f"  {model_name} {system}: FAILED {err} (log {raw / f'server-{model_name}-{system}.log'})")
        finally:
            stop(proc)
    hf = out["servers"].get("hf-fastload", {}).get("cells")
    out["ratios_tokens_per_s_vs_hf"] = {}
    for system in SERVERS[1:]:
        cells = out["servers"].get(system, {}).get("cells")
        if hf and cells:
            out["ratios_tokens_per_s_vs_hf"][system] = {
                c: ratio(cells[c]["tokens_per_s"], hf[c]["tokens_per_s"]) for c in cells if c in hf
            }
    return out
