"""Benchmark 5 (GPU): cold start, decode speed against the memory-bandwidth bound, ONNX Runtime against PyTorch.

Runs where torch.cuda.is_available() (`python -m bench --only gpu`); elsewhere it records why it skipped.
tests/model_build/test_bench.py runs the same functions on the CPU at tiny shapes. What each variant measures, and
how: docs/design/bench.md.
"""

from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench.coldstart import evict, files_of, read_all
from bench.stats import ratio, summarize

PROMPT = "The quick brown fox jumps over the lazy dog and"
VARIANTS = {
    "ours": "our artifact: fp16 sharded safetensors via handler model_fn (straight to the device) + predict_fn",
    "old": "old recipe: torch.load(model.pt, weights_only=False, map_location=device) + 1-token generate",
    "raw": "raw bound: read the artifact's bytes into host memory",
}


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def memory_bandwidth(device: str, nbytes: int, reps: int) -> dict[str, Any]:
    """Bytes/s of a device-to-device copy of `nbytes` (each copy reads and writes nbytes: 2 * nbytes moved)."""
    import torch

    src = torch.ones(nbytes // 2, dtype=torch.float16, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # untimed: first-touch and allocator costs
    sync(device)
    rates = []
    for _ in range(max(reps, 3)):
        t = time.perf_counter()
        dst.copy_(src)
        sync(device)
        rates.append(2 * nbytes / (time.perf_counter() - t))
    del src, dst
    return {
        "bytes_per_s": summarize(rates),
        "copy_bytes": nbytes,
        "method": "torch Tensor.copy_ between two fp16 tensors on the device; 2 * bytes / seconds",
    }


def prepare(raw: Path, shape: str, device: str, log) -> dict[str, Path]:
    """Our artifact and the old recipe's pickle of `shape` (random weights made on `device`, fp16), made once.

    The artifact has the recipe's layout (sharded safetensors, container config, tokenizer, code/, manifest)
    but is written here rather than by the recipe: its verification computes the source model on the CPU in
    fp16 (minutes for 6B parameters) and compares it with the reloaded artifact on the same machine's device."""
    import torch

    import request_contract
    from artifact.manifest import write_manifest
    from bench.models import SHAPES, random_model
    from model_build.tiny_models import write_gpt2_tokenizer
    from systems.hf_fastload.handler import inference as handler
    from systems.hf_fastload.recipe import HANDLER_SOURCE
    from systems.recipe_common import config_for_container

    art, old = raw / f"gpu-art-{shape}", raw / f"gpu-pickle-{shape}"
    if (art / "manifest.json").is_file() and (old / "model.pt").is_file():
        return {"ours": art, "old": old}
    t = time.perf_counter()
    for d in (art, old):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        write_gpt2_tokenizer(d, SHAPES[shape][1]["n_positions"])
    model = random_model(shape, dtype="fp16", device=device)
    model.save_pretrained(art, max_shard_size="2GB", safe_serialization=True)
    config_for_container(art, "fp16")
    (art / "code").mkdir()
    shutil.copyfile(HANDLER_SOURCE, art / "code" / "inference.py")
    shutil.copyfile(request_contract.__file__, art / "code" / "request_contract.py")
    torch.save(model.to("cpu"), old / "model.pt.tmp")  # the old recipe pickled a CPU model
    os.replace(old / "model.pt.tmp", old / "model.pt")
    del model
    gc.collect()
    write_manifest(
        art,
        progress=False,
        system="hf-fastload",
        endpoint=f"bench-gpu-{shape}",
        dtype="fp16",
        compute_dtype=handler.compute_dtype_rule("fp16"),
        weights_format="safetensors",
        verification={"skipped": "bench artifact of random weights (bench/gpu.py prepare)"},
    )
    log(f"  prepared {shape} on {device}: {time.perf_counter() - t:.1f} s")
    return {"ours": art, "old": old}


def first_token(variant: str, paths: dict[str, Path], device: str) -> float:
    """Seconds from nothing loaded to the first generated token (or to all bytes read, for raw)."""
    import torch
    import transformers

    t0 = time.perf_counter()
    model: Any = None
    if variant == "ours":
        from systems.hf_fastload.handler import inference as handler

        model = handler.model_fn(str(paths["ours"]))
        handler.predict_fn({"inputs": PROMPT, "parameters": {"max_new_tokens": 1}}, model)
    elif variant == "old":
        tok = transformers.AutoTokenizer.from_pretrained(paths["old"])
        model = torch.load(paths["old"] / "model.pt", map_location=device, weights_only=False).eval()
        enc = tok(PROMPT, return_tensors="pt").to(device)
        with torch.inference_mode():
            model.generate(**enc, max_new_tokens=1, do_sample=False, pad_token_id=tok.eos_token_id)
    elif variant == "raw":
        read_all(files_of(paths["ours"]))
    else:
        raise ValueError(variant)
    sync(device)
    seconds = time.perf_counter() - t0
    del model
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return seconds


def coldstart(paths: dict[str, Path], device: str, reps: int, log, *, warmup: bool = True) -> dict[str, Any]:
    files = {"ours": files_of(paths["ours"]), "old": files_of(paths["old"]), "raw": files_of(paths["ours"])}
    sizes = {k: sum(p.stat().st_size for p in v) for k, v in files.items()}
    for v in ("raw", "ours") if warmup else ():  # untimed: CUDA context, lazy imports, first reads
        first_token(v, paths, device)
    samples: dict[str, list[float]] = {f"{v}_{s}": [] for v in VARIANTS for s in ("cold", "warm")}
    for rep in range(reps):
        for v in VARIANTS:
            for state in ("cold", "warm"):
                if state == "cold":
                    evict(files[v])
                samples[f"{v}_{state}"].append(first_token(v, paths, device))
        log(
            f"  cold start run {rep + 1}/{reps}: "
            + ", ".join(f"{v} {samples[f'{v}_cold'][-1]:.2f}/{samples[f'{v}_warm'][-1]:.2f} s" for v in VARIANTS)
            + " (cold/warm)"
        )
    s = {k: summarize(v) for k, v in samples.items()}
    ratios = {}
    for state in ("cold", "warm"):
        ratios[f"ours_over_raw_{state}"] = ratio(s[f"ours_{state}"], s[f"raw_{state}"])
        ratios[f"old_over_ours_{state}"] = ratio(s[f"old_{state}"], s[f"ours_{state}"])
    ratios["raw_cold_over_warm"] = ratio(s["raw_cold"], s["raw_warm"])
    return {
        "variants": VARIANTS,
        "bytes": sizes,
        "seconds": s,
        "ratios": ratios,
        "eviction_effective": ratios["raw_cold_over_warm"]["median"] > 1.2,
        "targets": {
            st: {
                "ours_within_1.5x_of_raw": ratios[f"ours_over_raw_{st}"]["median"] <= 1.5,
                "ours_3x_faster_than_old": ratios[f"old_over_ours_{st}"]["median"] >= 3.0,
            }
            for st in ("cold", "warm")
        },
        "method": f"{reps} interleaved runs (ours, old, raw; each cold then warm) after one untimed raw + ours; "
        "cold = fsync + posix_fadvise(POSIX_FADV_DONTNEED) on every file of the variant first",
    }


def _timed(fn, device: str) -> float:
    sync(device)
    t = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t


def decode_rates(generate, batch: int, new_tokens: int, reps: int, device: str, warmup: int = 2) -> dict[str, Any]:
    """`generate(batch, n)` produces n new tokens per row; decode tokens/s = batch*(N-1)/(t(N) - t(1)) per rep."""
    for _ in range(warmup):  # torch.compile traces and CUDA graphs are captured here, not in the numbers
        generate(batch, new_tokens)
        generate(batch, 1)
    rates, e2e = [], []
    for _ in range(reps):
        t1 = _timed(lambda: generate(batch, 1), device)
        tn = _timed(lambda: generate(batch, new_tokens), device)
        if tn > t1:  # at test shapes the difference can drown in noise; such a run gives no decode rate
            rates.append(batch * (new_tokens - 1) / (tn - t1))
        e2e.append(batch * new_tokens / tn)
    return {"decode_tokens_per_s": summarize(rates), "end_to_end_tokens_per_s": summarize(e2e)}


def _handler_generate(bundle: dict):
    from systems.hf_fastload.handler import inference as handler

    def generate(batch: int, n: int) -> list[dict[str, str]]:
        body = {"inputs": [PROMPT] * batch, "parameters": {"max_new_tokens": n, "min_new_tokens": n}}
        generated = handler.predict_fn(body, bundle)
        assert isinstance(generated, list)  # a generation request, not a chat one
        return generated

    return generate


def decode(
    artifact: Path,
    device: str,
    reps: int,
    log,
    *,
    batches=(1, 8),
    new_tokens: int = 64,
    bandwidth: float,
    warmup: int = 2,
    check_tokens: int = 16,
) -> dict[str, Any]:
    """Decode tokens/s of HF eager, our fast path and DeepSpeed kernel injection, against the bandwidth bound."""
    from systems.hf_fastload.handler import inference as handler

    bundle = handler.load_model(artifact, decode="eager")
    model = bundle["model"]
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    fast_mode = "compiled"
    fast_bundle = {**bundle}
    fast_bundle["decode"], fast_bundle["generate_kwargs"] = handler.decode_settings(model, fast_mode)
    paths: dict[str, dict] = {"hf_eager": bundle, "ours_fast": fast_bundle}
    out: dict[str, Any] = {
        "weight_bytes": weight_bytes,
        "dtype": str(bundle["dtype"]),
        "new_tokens": new_tokens,
        "fast_path": fast_bundle["decode"],
        "systems": {},
        "tokens_equal": {},
    }
    for b in batches:  # correctness first: the fast path's greedy tokens equal eager's
        fast_text, eager_text = (_handler_generate(x)(b, check_tokens) for x in (fast_bundle, bundle))
        out["tokens_equal"][str(b)] = fast_text == eager_text
    for name, bnd in paths.items():
        out["systems"][name] = {
            str(b): decode_rates(_handler_generate(bnd), b, new_tokens, reps, device, warmup) for b in batches
        }
    out["systems"]["deepspeed_kernel_injection"] = _deepspeed(bundle, device, batches, new_tokens, reps, warmup)
    for name, by_batch in out["systems"].items():
        if "skipped" in by_batch or "error" in by_batch:
            log(f"  decode {name}: {by_batch.get('skipped') or by_batch.get('error')}")
            continue
        for b, r in by_batch.items():
            bound = int(b) * bandwidth / weight_bytes
            r["bound_tokens_per_s"] = bound
            r["fraction_of_bound"] = r["decode_tokens_per_s"]["median"] / bound  # NaN when no run gave a rate
        log(
            f"  decode {name}: "
            + ", ".join(
                f"batch {b} {r['decode_tokens_per_s']['median']:.1f} tok/s ({r['fraction_of_bound']:.0%} of bound)"
                for b, r in by_batch.items()
            )
        )
    eager = out["systems"]["hf_eager"]
    out["ratios_vs_hf_eager"] = {
        name: {b: ratio(r[b]["decode_tokens_per_s"], eager[b]["decode_tokens_per_s"]) for b in r}
        for name, r in out["systems"].items()
        if name != "hf_eager" and "skipped" not in r and "error" not in r
    }
    first = str(batches[0])
    fast = out["systems"]["ours_fast"][first]
    out["targets"] = {
        f"fast_batch{first}_at_least_75pct_of_bound": fast["fraction_of_bound"] >= 0.75,
        f"fast_batch{first}_at_least_4x_hf_eager": out["ratios_vs_hf_eager"]["ours_fast"][first]["median"] >= 4.0,
    }
    del bundle, fast_bundle, paths, model
    gc.collect()
    return out


def _deepspeed(bundle: dict, device: str, batches, new_tokens: int, reps: int, warmup: int) -> dict[str, Any]:
    """DeepSpeed-Inference kernel injection on the same model, measured last (it replaces the model's blocks)."""
    if not device.startswith("cuda"):
        return {"skipped": "kernel injection needs CUDA"}
    try:
        import deepspeed
        import torch
    except ImportError as err:
        return {"skipped": f"deepspeed does not import here ({err})"}
    try:
        engine = deepspeed.init_inference(bundle["model"], dtype=torch.float16, replace_with_kernel_inject=True)
        injected = {**bundle, "model": engine.module, "generate_kwargs": {}}
        return {str(b): decode_rates(_handler_generate(injected), b, new_tokens, reps, device, warmup) for b in batches}
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"[:500]}


def build_onnx_pair(raw: Path, shape: str, device: str, *, max_batch: int, max_sequence_length: int) -> dict[str, Path]:
    """hf-fastload and tensorrt-byoc artifacts of the same GPT-2 checkpoint (built by their recipes, once)."""
    from bench import models

    dtype = "fp16" if device.startswith("cuda") else "fp32"
    source = models.make_checkpoint(shape, raw / f"src-{shape}").resolve()
    profile = (
        f"    engine: {{tensorrt_profile: {{max_batch: {max_batch}, max_sequence_length: {max_sequence_length}}}}}\n"
    )
    arts = {}
    for system, name, extra, instance in (
        ("hf-fastload", f"onnxcmp-hf-{shape}", "", "ml.g5.xlarge"),
        ("tensorrt-byoc", f"onnxcmp-trt-{shape}", profile, "ml.g4dn.xlarge"),
    ):
        text = "endpoints:\n" + models.endpoint_yaml(
            name, source, dtype=dtype, system=system, instance_type=instance, extra=extra
        )
        arts[system], _ = models.build(text, raw / f"config-{name}.yaml", name, (raw / f"art-{name}").resolve())
    return arts


def onnx_vs_torch(
    trt_artifact: Path,
    torch_artifact: Path,
    device: str,
    reps: int,
    log,
    *,
    batches=(1, 8),
    new_tokens: int = 64,
    warmup: int = 1,
) -> dict[str, Any]:
    """GPT-2: the tensorrt-byoc handler's ONNX Runtime backend against the hf-fastload handler (PyTorch, eager)
    on artifacts of the same checkpoint."""
    from systems.byoc_server.contract import GenerationParameters
    from systems.hf_fastload.handler import inference as handler
    from systems.tensorrt_byoc.handler.engine import OnnxRuntimeBackend
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    trt = TensorRTHandler(backend="onnxruntime")
    trt.load(trt_artifact)
    ort_backend = trt.backend
    assert isinstance(ort_backend, OnnxRuntimeBackend)
    ids = trt.tokenizer.encode(PROMPT, add_special_tokens=False).ids

    def ort_generate(batch: int, n: int) -> list[list[int]]:
        return trt.generate_ids([ids] * batch, GenerationParameters(max_new_tokens=n, min_new_tokens=n))

    torch_bundle = handler.load_model(torch_artifact, decode="eager")
    out: dict[str, Any] = {
        "new_tokens": new_tokens,
        "onnxruntime_providers": list(ort_backend.providers),
        "torch_dtype": str(torch_bundle["dtype"]),
        "onnx_dtype": trt.info.get("dtype"),
        "systems": {},
    }
    out["systems"]["onnxruntime"] = {
        str(b): decode_rates(ort_generate, b, new_tokens, reps, device, warmup) for b in batches
    }
    out["systems"]["pytorch"] = {
        str(b): decode_rates(_handler_generate(torch_bundle), b, new_tokens, reps, device, warmup) for b in batches
    }
    out["ratios_onnxruntime_over_pytorch"] = {
        str(b): ratio(
            out["systems"]["onnxruntime"][str(b)]["decode_tokens_per_s"],
            out["systems"]["pytorch"][str(b)]["decode_tokens_per_s"],
        )
        for b in batches
    }
    log(
        f"  GPT-2 (ORT {', '.join(out['onnxruntime_providers'])}): "
        + ", ".join(
            f"batch {b}: ORT/PyTorch decode tokens/s {out['ratios_onnxruntime_over_pytorch'][str(b)]['median']:.2f}x"
            for b in batches
        )
    )
    return out


def device_description(device: str) -> dict[str, Any]:
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return {
            "device": device,
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
        }
    return {"device": device, "name": "CPU stand-in (test shapes)"}


def bench(
    raw: Path,
    reps: int,
    log,
    *,
    device: str | None = None,
    shape: str = "gptj-6b",
    onnx_shape: str = "gpt2-124m",
    batches=(1, 8),
    new_tokens: int = 64,
    bandwidth_bytes: int = 2 * 2**30,
) -> dict[str, Any]:
    """The whole GPU section. device None: CUDA if available, else a skipped record (the CPU run of `make bench`)."""
    import torch

    if device is None:
        if not torch.cuda.is_available():
            reason = "skipped: torch.cuda.is_available() is False (no GPU on this machine)"
            log(f"  GPU section {reason}")
            return {"skipped": reason}
        device = "cuda"
    out: dict[str, Any] = {"device": device_description(device), "reps": reps, "shape": shape}
    bw = memory_bandwidth(device, bandwidth_bytes, reps)
    out["bandwidth"] = bw
    log(f"  {out['device']['name']}: device-to-device copy {bw['bytes_per_s']['median'] / 1e9:.0f} GB/s")
    paths = prepare(raw, shape, device, log)
    parts = (
        ("coldstart", lambda: coldstart(paths, device, reps, log)),
        (
            "decode",
            lambda: decode(
                paths["ours"],
                device,
                reps,
                log,
                batches=batches,
                new_tokens=new_tokens,
                bandwidth=bw["bytes_per_s"]["median"],
            ),
        ),
        ("gpt2_onnxruntime_vs_pytorch", lambda: _onnx_part(raw, onnx_shape, device, reps, log, batches, new_tokens)),
    )
    for name, run in parts:
        try:
            out[name] = run()
        except Exception as err:
            out[name] = {"error": f"{type(err).__name__}: {err}"[:500]}
            log(f"  {name}: FAILED {out[name]['error']}")
    return out


def _onnx_part(raw: Path, shape: str, device: str, reps: int, log, batches, new_tokens: int) -> dict[str, Any]:
    arts = build_onnx_pair(raw, shape, device, max_batch=max(batches), max_sequence_length=new_tokens + 32)
    out = onnx_vs_torch(
        arts["tensorrt-byoc"], arts["hf-fastload"], device, reps, log, batches=batches, new_tokens=new_tokens
    )
    return {"shape": shape, **out}
