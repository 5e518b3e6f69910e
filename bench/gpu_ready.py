"""GPU readiness (issue 34 item 6): one prepared run for a lent GPU machine, `python -m bench.gpu_ready --out DIR`.

Makes a Llama-3.1-8B-shaped checkpoint of random bf16 weights offline, builds it with the hf-fastload recipe,
loads it through the artifact's own handler and measures load time against plain `from_pretrained` and decode
tokens/s at batch 1 and 32 against the memory-bandwidth bound. `--dry-run`: the same code path on the CPU at tiny
shapes, in seconds (tests/model_build/test_gpu_ready.py). What each step does, its time budget and what each figure
means: docs/design/bench.md, "GPU readiness".
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# meta-llama/Llama-3.1-8B's config.json on the Hugging Face Hub (the architecture's numbers; the weights are random).
LLAMA_31_8B: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "tie_word_embeddings": False,
    "hidden_act": "silu",
}
# The same architecture at test size: the dry run's model (a few hundred KB, split over several shards).
TINY_LLAMA: dict[str, Any] = {
    **LLAMA_31_8B,
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rope_scaling": {**LLAMA_31_8B["rope_scaling"], "original_max_position_embeddings": 64},
}

# Memory bandwidth by GPU name, from NVIDIA's datasheets (decimal TB/s): H200 (SXM and NVL) "GPU Memory Bandwidth
# 4.8TB/s" (NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/); H100 SXM
# 3.35TB/s (https://www.nvidia.com/en-us/data-center/h100/). Other devices: the copy bandwidth measured in the run.
DATASHEET_BANDWIDTH = {
    "H200": (4.8e12, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e (https://www.nvidia.com/en-us/data-center/h200/)"),
    "H100 80GB HBM3": (
        3.35e12,
        "NVIDIA H100 SXM datasheet: 3.35 TB/s (https://www.nvidia.com/en-us/data-center/h100/)",
    ),
}

PROMPT = "The quick brown fox jumps over the lazy dog and"
LOAD_VARIANTS = {
    "ours": "the artifact's code/inference.py model_fn (local_runtime.artifact_handler.load_handler, as the local "
    "server loads it): tokenizer + safetensors shards straight onto the device",
    "plain": "transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=bfloat16) + tokenizer, then "
    ".to(device): what a script without a device_map does",
    "plain_device_map": "from_pretrained(checkpoint, dtype=bfloat16, device_map={'': device}) + tokenizer",
}
# Expected seconds of each step on one H200 (8B, bf16): the slowest of the three runs of 2026-12-04
# (bench/results/gpu_ready*.json: setup 0.2, checkpoint 27, build 42, load 71, decode 17 eager) with half again
# as margin; printed beside the progress, recorded beside the measured, and what --budget-s plans with.
EXPECTED_S = {"setup": 5, "checkpoint": 45, "build": 65, "load": 110, "decode": 30}
# The decode step by path: compiled traces each batch size first (78 s against eager's 17 s in those runs).
EXPECTED_DECODE_S = {"eager": 30, "static-cache": 30, "compiled": 120}
REQUIRED = ("torch", "transformers", "safetensors", "tokenizers", "yaml", "tqdm", "pydantic")


class ReadyError(Exception):
    """A refusal before any heavy work: exit 2 with this message, no traceback."""


class Progress:
    """Every line with the elapsed time; a step running longer than `every` seconds says so again (never silent)."""

    def __init__(self, every: float = 5.0) -> None:
        self.t0 = time.perf_counter()
        self.every = every
        self.lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self.lock:
            print(f"[{time.perf_counter() - self.t0:6.1f} s] {message}", flush=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    @contextlib.contextmanager
    def step(self, name: str, expected_s: float, record: dict[str, Any]) -> Iterator[None]:
        self(f"== {name} (expected ~{expected_s:.0f} s on one H200)")
        done = threading.Event()
        started = time.perf_counter()

        def beat() -> None:
            while not done.wait(self.every):
                self(f"   ... {name}: {time.perf_counter() - started:.0f} s so far (expected ~{expected_s:.0f} s)")

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
            seconds = time.perf_counter() - started
            record.setdefault("steps", {})[name] = {"seconds": round(seconds, 2), "expected_s": expected_s}
            self(f"== {name}: {seconds:.1f} s")


def check_libraries() -> None:
    """The run needs these importable; the lent machine lacks pydantic (carry its wheels: docs/design/bench.md)."""
    import importlib.util

    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        raise ReadyError(
            f"missing Python packages: {', '.join(missing)}; the build reads the endpoint config with pydantic: "
            "carry the wheels as docs/design/bench.md ('GPU readiness') shows, and put them on PYTHONPATH"
        )


def human(nbytes: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes:.0f} B"


def parameter_count(shape: dict[str, Any]) -> int:
    """LlamaForCausalLM's parameters for `shape` (8,030,261,248 for Llama-3.1-8B), before anything is made."""
    hidden, layers = shape["hidden_size"], shape["num_hidden_layers"]
    kv = hidden // shape["num_attention_heads"] * shape["num_key_value_heads"]
    per_layer = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * shape["intermediate_size"] + 2 * hidden
    embeddings = shape["vocab_size"] * hidden * (1 if shape["tie_word_embeddings"] else 2)
    return embeddings + layers * per_layer + hidden


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def free_device(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# ---- 1. the checkpoint -------------------------------------------------------------------------------------------


def make_checkpoint(
    out: Path, shape: dict[str, Any], device: str, shard_bytes: int, log: Progress, *, seed: int = 0
) -> dict[str, Any]:
    """A transformers checkpoint of `shape` (LlamaForCausalLM) with random bf16 weights, as a user downloads one:
    config.json, sharded model-0000i-of-0000n.safetensors with their index, an offline tokenizer (byte-level BPE,
    model_build.tiny_models; the model keeps the shape's vocabulary). Each shard's tensors are drawn on `device`
    (a GPU draws 16 GB in well under a second) and copied to host memory one shard at a time, so host memory
    holds at most one shard (plus safetensors' write buffer)."""
    import torch
    import transformers
    from safetensors.torch import save_file

    from model_build.tiny_models import EOS, write_gpt2_tokenizer

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_gpt2_tokenizer(tmp, min(shape["max_position_embeddings"], 8192))
    eos = json.loads((tmp / "vocab.json").read_text())[EOS]
    config = transformers.LlamaConfig(**shape, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp)
    with torch.device("meta"):
        skeleton = transformers.LlamaForCausalLM(config)
    params = [(name, tuple(p.shape)) for name, p in skeleton.named_parameters()]
    del skeleton
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, dims in params:
        nbytes = math.prod(dims) * 2
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, dims))
        size += nbytes
    generator = torch.Generator(device=device).manual_seed(seed)
    weight_map, total = {}, 0
    started = time.perf_counter()
    for i, shard in enumerate(shards, 1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for name, dims in shard:
            if name.endswith("norm.weight"):  # RMSNorm scales: ones, as initialized
                t = torch.ones(dims, dtype=torch.bfloat16, device=device)
            else:  # Llama's initializer_range 0.02
                t = torch.randn(dims, generator=generator, dtype=torch.float32, device=device).mul_(0.02)
                t = t.to(torch.bfloat16)
            tensors[name] = t.cpu()
            del t
            weight_map[name] = file
        nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
        save_file(tensors, tmp / file, metadata={"format": "pt"})
        del tensors
        total += nbytes
        rate = total / max(time.perf_counter() - started, 1e-9)
        log(f"   shard {i}/{len(shards)}: {human(nbytes)} written, {human(total)} in all, {human(rate)}/s")
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    free_device(device)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return {
        "path": str(out),
        "parameters": sum(math.prod(d) for _, d in params),
        "weight_bytes": total,
        "shards": len(shards),
        "dtype": "bf16",
        "drawn_on": device,
    }


# ---- 2. the build: the hf-fastload recipe, as `python -m model_build build` runs it ---------------------------------


@contextlib.contextmanager
def source_loaded_on(device: str | None) -> Iterator[None]:
    """With a device, the recipe's source model is loaded there instead of on the CPU (recipe_common.load_pretrained,
    the one loader run_recipe calls), so its reference run and its comparison with the reloaded artifact (made
    like with like, on the source's device) take seconds on the GPU instead of minutes of CPU for 8B. None: the
    recipe untouched (the CPU, as a CodeBuild build runs it)."""
    if device is None:
        yield
        return
    from systems import recipe_common
    from systems.hf_fastload.handler.inference import TORCH_DTYPES, dtype_kwargs

    original = recipe_common.load_pretrained

    def load_on_device(path: Path, dtype: str, *, encoder_decoder: bool = False) -> tuple[Any, Any]:
        import transformers

        assert not encoder_decoder, "the readiness run builds a decoder-only model"
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, device_map={"": device}, **dtype_kwargs(TORCH_DTYPES[dtype])
        ).eval()
        return model, transformers.AutoTokenizer.from_pretrained(path)

    recipe_common.load_pretrained = load_on_device
    try:
        yield
    finally:
        recipe_common.load_pretrained = original


def build_artifact(checkpoint: Path, work: Path, verify_on: str | None, instance_type: str) -> dict[str, Any]:
    """The hf-fastload artifact of `checkpoint`, built by model_build.cli.build_endpoint (what `python -m model_build
    build` calls) from an EndpointSpec made here: the recipe's write, reload and compare, then the manifest. Not
    through deployment.load_config: its config checks read botocore's service models, which the lent machine lacks."""
    from endpoint_config import EndpointSpec
    from model_build.cli import build_endpoint

    spec = EndpointSpec(
        name="gpu-ready",
        system="hf-fastload",
        model=str(checkpoint.resolve()),
        dtype="bf16",
        instance_type=instance_type,
    )
    art = (work / "artifact").resolve()
    started = time.perf_counter()
    with source_loaded_on(verify_on):
        manifest = build_endpoint(spec, art, progress=True)
    return {
        "path": str(art),
        "seconds": round(time.perf_counter() - started, 2),
        "verification": manifest.get("verification"),
        "verified_on": verify_on or "cpu (the recipe unchanged)",
        "bytes": sum(p.stat().st_size for p in art.rglob("*") if p.is_file()),
        "instance_type": instance_type,
    }


# ---- 3. load time ---------------------------------------------------------------------------------------------------


def load_once(variant: str, checkpoint: Path, artifact: Path, device: str) -> tuple[float, Any]:
    """Seconds until the model is on `device` with its tokenizer, and what was loaded (the handler's bundle for ours)."""
    import torch
    import transformers

    sync(device)
    t0 = time.perf_counter()
    if variant == "ours":
        from local_runtime.artifact_handler import load_handler

        loaded: Any = load_handler(artifact).model_fn(str(artifact))
    elif variant == "plain":
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16).to(device)
        loaded = (model, tokenizer)
    elif variant == "plain_device_map":
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            checkpoint, dtype=torch.bfloat16, device_map={"": device}
        )
        loaded = (model, tokenizer)
    else:
        raise ValueError(variant)
    sync(device)
    return time.perf_counter() - t0, loaded


def measure_loads(checkpoint: Path, artifact: Path, device: str, reps: int, log: Progress) -> dict[str, Any]:
    """Each variant cold (its files evicted from the page cache first) then warm, interleaved; plus the raw read of
    the artifact's bytes cold and warm (the disk's and the page cache's bound, and the proof that eviction worked)."""
    from bench.coldstart import evict, files_of, read_all
    from bench.stats import ratio, summarize

    files = {"ours": files_of(artifact), "plain": files_of(checkpoint), "plain_device_map": files_of(checkpoint)}
    samples: dict[str, list[float]] = {f"{v}_{s}": [] for v in [*LOAD_VARIANTS, "raw_read"] for s in ("cold", "warm")}
    for rep in range(reps):
        for state in ("cold", "warm"):
            if state == "cold":
                evict(files["ours"])
            t = time.perf_counter()
            nbytes = read_all(files["ours"])
            samples[f"raw_read_{state}"].append(time.perf_counter() - t)
            log(f"   raw read {state}: {nbytes / 1e9:.2f} GB in {samples[f'raw_read_{state}'][-1]:.2f} s")
        for variant in LOAD_VARIANTS:
            for state in ("cold", "warm"):
                if state == "cold":
                    evict(files[variant])
                took, loaded = load_once(variant, checkpoint, artifact, device)
                samples[f"{variant}_{state}"].append(took)
                del loaded
                free_device(device)
                log(f"   load {variant} {state} (run {rep + 1}/{reps}): {took:.2f} s")
    seconds = {k: summarize(v) for k, v in samples.items()}
    ratios = {
        f"{v}_over_ours_{s}": ratio(seconds[f"{v}_{s}"], seconds[f"ours_{s}"])
        for v in LOAD_VARIANTS
        if v != "ours"
        for s in ("cold", "warm")
    }
    ratios["raw_read_cold_over_warm"] = ratio(seconds["raw_read_cold"], seconds["raw_read_warm"])
    return {
        "variants": LOAD_VARIANTS,
        "seconds": seconds,
        "ratios": ratios,
        "artifact_bytes": sum(p.stat().st_size for p in files["ours"]),
        "checkpoint_bytes": sum(p.stat().st_size for p in files["plain"]),
        "cache": "cold = fsync + posix_fadvise(POSIX_FADV_DONTNEED) on every file of the variant first (no root "
        "needed); eviction_effective says whether the cold raw read was slower than the warm one",
        "eviction_effective": ratios["raw_read_cold_over_warm"]["median"] > 1.2,
        "method": f"{reps} run(s); per run: raw read cold then warm, then each variant cold then warm",
    }


# ---- 4. decode ------------------------------------------------------------------------------------------------------


def measure_decode(
    artifact: Path,
    device: str,
    batches: list[int],
    new_tokens: int,
    reps: int,
    bandwidth: dict[str, Any],
    log: Progress,
) -> dict[str, Any]:
    """Decode tokens/s through the handler's predict_fn (greedy, exactly `new_tokens` per row), at each batch size,
    against the bound batch * bandwidth / weight bytes (every decode step reads every weight once)."""
    from bench.gpu import decode_rates
    from local_runtime.artifact_handler import load_handler

    handler = load_handler(artifact)
    bundle = handler.model_fn(str(artifact))
    model = bundle["model"]
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    prompt_tokens = len(bundle["tokenizer"](PROMPT)["input_ids"])
    kv_bytes_per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 2

    def generate(batch: int, n: int) -> Any:
        body = {"inputs": [PROMPT] * batch, "parameters": {"max_new_tokens": n, "min_new_tokens": n}}
        return handler.predict_fn(body, bundle)

    out: dict[str, Any] = {
        "decode_path": bundle["decode"],
        "dtype": str(bundle["dtype"]),
        "weight_bytes": weight_bytes,
        "kv_cache_bytes_per_token": kv_bytes_per_token,
        "new_tokens": new_tokens,
        "bandwidth_bytes_per_s": bandwidth["bound_bytes_per_s"],
        "bandwidth_source": bandwidth["bound_source"],
        "bound": "batch * bandwidth / weight_bytes: every decode step reads every weight once (KV cache reads left "
        "out: kv_bytes_last_step says how much they add)",
        "batches": {},
    }
    for batch in batches:
        rates = decode_rates(generate, batch, new_tokens, reps, device, warmup=1)
        bound = batch * bandwidth["bound_bytes_per_s"] / weight_bytes
        median = rates["decode_tokens_per_s"]["median"]
        rates["bound_tokens_per_s"] = bound
        rates["fraction_of_bound"] = median / bound if median == median else math.nan
        # the KV cache read at the last step (prompt + new tokens per row): what the weights-only bound leaves out
        rates["kv_bytes_last_step"] = batch * (prompt_tokens + new_tokens) * kv_bytes_per_token
        out["batches"][str(batch)] = rates
        log(
            f"   decode batch {batch}: {median:.1f} tokens/s, bound {bound:.0f} tokens/s "
            f"({rates['fraction_of_bound']:.1%} of it)"
        )
    bundle.clear()  # the model goes with it (generate above holds the dict, not the model)
    del model
    free_device(device)
    return out


def bandwidth_of(device: str, log: Progress, copy_bytes: int) -> dict[str, Any]:
    """The bound's bandwidth: the datasheet's for a known GPU, else the device-to-device copy measured here."""
    from bench.gpu import device_description, memory_bandwidth

    described = device_description(device)
    measured = memory_bandwidth(device, copy_bytes, 3)
    found = next((v for k, v in DATASHEET_BANDWIDTH.items() if k in described["name"]), None)
    bw, source = found if found else (measured["bytes_per_s"]["median"], "measured in this run (copy)")
    log(
        f"   {described['name']}: copy {measured['bytes_per_s']['median'] / 1e9:.0f} GB/s measured; "
        f"bound uses {bw / 1e9:.0f} GB/s ({source})"
    )
    return {"device": described, "measured_copy": measured, "bound_bytes_per_s": bw, "bound_source": source}


# ---- report ---------------------------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    from bench.stats import table

    lines = [
        "# GPU readiness",
        "",
        f"Run {result['date']} on {result.get('device', {}).get('name', '?')} "
        f"({'dry run, tiny shapes' if result['dry_run'] else '8B'}); total {result['total_s']:.0f} s. "
        "What each figure means: docs/design/bench.md, 'GPU readiness'.",
        "",
    ]
    if "failed" in result:
        lines += [f"FAILED in {result['failed']['step']}: {result['failed']['error']}", ""]
    if "checkpoint" in result:
        ckpt = result["checkpoint"]
        lines += [
            f"Checkpoint: {ckpt['parameters']:,} parameters, {human(ckpt['weight_bytes'])} bf16 in {ckpt['shards']} "
            "shards.",
            "",
        ]
    if "build" in result:
        lines += [f"Build: {result['build']['seconds']:.0f} s, verified on {result['build']['verified_on']}.", ""]
    lines += [
        "## Steps",
        "",
        table(
            ["step", "seconds", "expected on H200 (s)"],
            [[k, v["seconds"], v["expected_s"]] for k, v in result.get("steps", {}).items()],
        ),
    ]
    loads = result.get("load")
    if isinstance(loads, dict) and "seconds" in loads:
        s = loads["seconds"]
        lines += [
            "",
            f"## Load time (model on the device with its tokenizer; eviction effective: {loads['eviction_effective']})",
            "",
            table(
                ["variant", "cold s (median)", "warm s (median)"],
                [
                    [v, f"{s[f'{v}_cold']['median']:.2f}", f"{s[f'{v}_warm']['median']:.2f}"]
                    for v in [*LOAD_VARIANTS, "raw_read"]
                ],
            ),
        ]
    decode = result.get("decode")
    if isinstance(decode, dict) and "batches" in decode:
        lines += [
            "",
            f"## Decode ({decode['decode_path']} path, {decode['new_tokens']} new tokens, bound from "
            f"{decode['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s: {decode['bandwidth_source']})",
            "",
            table(
                ["batch", "decode tokens/s (median)", "bound tokens/s", "fraction of bound"],
                [
                    [
                        b,
                        f"{r['decode_tokens_per_s']['median']:.1f}",
                        f"{r['bound_tokens_per_s']:.0f}",
                        f"{r['fraction_of_bound']:.1%}",
                    ]
                    for b, r in decode["batches"].items()
                ],
            ),
        ]
    for name in ("load", "decode"):
        if isinstance(result.get(name), dict) and ("skipped" in result[name] or "error" in result[name]):
            lines += ["", f"{name}: {result[name].get('skipped') or result[name].get('error')}"]
    return "\n".join(lines) + "\n"


# ---- the run --------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_ready", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for gpu_ready.json and gpu_ready.md")
    p.add_argument("--work", type=Path, default=Path("build/gpu_ready"), help="scratch (checkpoint, artifact)")
    p.add_argument("--dry-run", action="store_true", help="tiny Llama on the CPU: the same code path in seconds")
    p.add_argument("--device", help="default: cuda when available (else cpu; the dry run: cpu)")
    p.add_argument(
        "--verify-on",
        choices=("device", "cpu"),
        default="device",
        help="where the recipe's source model and its check run: device (seconds on a GPU) or cpu "
        "(the recipe unchanged, as a CodeBuild build runs it: minutes of CPU for 8B)",
    )
    p.add_argument(
        "--decode",
        default="eager",
        help="the handler's decode path: eager (the container's default), static-cache or compiled "
        "(HF_FASTLOAD_DECODE; compiled adds torch.compile's minutes to the decode step)",
    )
    p.add_argument("--batches", default="1,32", help="decode batch sizes, comma-separated (default 1,32)")
    p.add_argument("--new-tokens", type=int, help="decode tokens per row (default 64; the dry run: 8)")
    p.add_argument("--reps", type=int, help="decode repetitions (default 3; the dry run: 1)")
    p.add_argument("--load-reps", type=int, default=1, help="cold + warm load rounds (default 1)")
    p.add_argument("--shard-gb", type=float, default=5.0, help="checkpoint shard size, GB (default 5, as the Hub's)")
    p.add_argument("--budget-s", type=float, default=570.0, help="skip a step that would end past this (default 570)")
    p.add_argument("--keep", action="store_true", help="keep the checkpoint and artifact under --work")
    args = p.parse_args(argv)
    args.new_tokens = args.new_tokens or (8 if args.dry_run else 64)
    args.reps = args.reps or (1 if args.dry_run else 3)
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        p.error(f"--batches {args.batches!r}: allowed: positive integers separated by commas, e.g. 1,32")
    if not args.batches or min(args.batches) < 1 or max(args.batches) > 1024:
        p.error(f"--batches {args.batches}: each must be 1-1024 (request_contract's MAX_BATCH_SIZE range)")
    for name in ("new_tokens", "reps", "load_reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: allowed: 1 or more")
    if args.new_tokens < 2:
        p.error(f"--new-tokens {args.new_tokens}: allowed: 2 or more (the decode rate is t(N) - t(1))")
    if args.shard_gb <= 0:
        p.error(f"--shard-gb {args.shard_gb}: allowed: more than 0")
    return args


def preflight(args: argparse.Namespace, device: str, weight_bytes: int) -> None:
    """Refuse early what would fail late: the output folder, disk for checkpoint + artifact, the device's memory."""
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        probe = args.out / ".gpu_ready_probe"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ReadyError(f"--out {args.out}: cannot write there ({err.strerror}); allowed: a writable folder") from None
    args.work.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.work).free
    if free < 2.2 * weight_bytes:
        raise ReadyError(
            f"--work {args.work}: {free / 1e9:.1f} GB free; the checkpoint and its artifact need "
            f"{2.2 * weight_bytes / 1e9:.1f} GB; allowed: a folder on a disk with that much free"
        )
    if device.startswith("cuda"):
        import torch

        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        if total < 1.5 * weight_bytes:
            raise ReadyError(
                f"{device}: {total / 2**30:.0f} GiB; the 8B model needs about {1.5 * weight_bytes / 2**30:.0f} GiB"
            )


def write_partial(out: Path, result: dict[str, Any]) -> None:
    """The figures so far, after every step: a run killed at the device's time limit still returns what it measured
    (main replaces this file with the whole result, `partial` gone)."""
    tmp = out / "gpu_ready.json.tmp"
    tmp.write_text(json.dumps({**result, "partial": True}, indent=2, default=str) + "\n")
    tmp.replace(out / "gpu_ready.json")


def run(args: argparse.Namespace, log: Progress) -> dict[str, Any]:
    check_libraries()
    import torch
    import transformers

    import request_contract
    from systems.hf_fastload.handler import inference as handler

    if args.decode not in handler.DECODE_MODES:
        raise ReadyError(f"--decode {args.decode!r}: allowed: {', '.join(handler.DECODE_MODES)}")
    device = args.device or ("cpu" if args.dry_run or not torch.cuda.is_available() else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ReadyError(f"--device {device}: torch.cuda.is_available() is False here; allowed: cpu, or run on a GPU")
    shape = TINY_LLAMA if args.dry_run else LLAMA_31_8B
    shard_bytes = 64 * 1024 if args.dry_run else int(args.shard_gb * 1e9)
    preflight(args, device, 2 * parameter_count(shape))
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "dry_run": args.dry_run,
        "libraries": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "shape": {k: v for k, v in shape.items() if k != "rope_scaling"},
        "args": {
            "batches": args.batches,
            "new_tokens": args.new_tokens,
            "reps": args.reps,
            "load_reps": args.load_reps,
            "verify_on": args.verify_on,
            "decode": args.decode,
        },
    }
    expected = {**EXPECTED_S, "decode": EXPECTED_DECODE_S[args.decode]}  # one per DECODE_MODES (a test holds it)
    log(
        f"device {device}, torch {torch.__version__}, transformers {transformers.__version__}; plan: "
        + ", ".join(f"{k} ~{v} s" for k, v in expected.items())
        + f" (budget {args.budget_s:.0f} s)"
    )
    work = args.work
    # The container's knobs, read by the handler: its decode path (HF_FASTLOAD_DECODE, at model_fn), and its batch
    # limit (request_contract's MAX_BATCH_SIZE, default 8, per request), which must admit the largest batch.
    knobs = {handler.DECODE_ENV: args.decode, request_contract.ENV_MAX_BATCH_SIZE: str(max(args.batches))}
    saved = {k: os.environ.get(k) for k in knobs}
    os.environ.update(knobs)
    step = "setup"
    try:
        with log.step("setup", expected["setup"], result):
            bw = bandwidth_of(device, log, 64 * 2**20 if args.dry_run else 2 * 2**30)
            result["device"] = bw.pop("device")
            result["bandwidth"] = bw
        write_partial(args.out, result)
        step = "checkpoint"
        with log.step("checkpoint", expected["checkpoint"], result):
            result["checkpoint"] = make_checkpoint(work / "checkpoint", shape, device, shard_bytes, log)
        write_partial(args.out, result)
        verify_on = device if args.verify_on == "device" and device != "cpu" else None
        step = "build"
        with log.step("build", expected["build"], result):
            result["build"] = build_artifact(work / "checkpoint", work, verify_on, "ml.p5en.48xlarge")
        write_partial(args.out, result)
        checkpoint, artifact = work / "checkpoint", Path(result["build"]["path"])
        for name, measure in (
            ("load", lambda: measure_loads(checkpoint, artifact, device, args.load_reps, log)),
            ("decode", lambda: measure_decode(artifact, device, args.batches, args.new_tokens, args.reps, bw, log)),
        ):
            if log.elapsed() + expected[name] > args.budget_s:
                result[name] = {
                    "skipped": f"at {log.elapsed():.0f} s, ~{expected[name]} s more would pass "
                    f"--budget-s {args.budget_s:.0f}"
                }
                log(f"== {name}: skipped ({result[name]['skipped']})")
                continue
            with log.step(name, expected[name], result):
                try:
                    result[name] = measure()
                except Exception as err:  # recorded beside the other figures; the run exits 1 naming it
                    result[name] = {"error": f"{type(err).__name__}: {err}"[:800]}
                    log(f"   {name} FAILED: {result[name]['error']}")
            write_partial(args.out, result)
    except Exception as err:  # a step the measurements need failed: recorded, the files still written, exit 1
        result["failed"] = {"step": step, "error": f"{type(err).__name__}: {err}"[:800]}
        log(f"   {step} FAILED: {result['failed']['error']}")
    finally:
        for k, v in saved.items():  # as they were: an in-process caller's environment is not ours to keep
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if not args.keep:
            shutil.rmtree(work / "checkpoint", ignore_errors=True)
            shutil.rmtree(work / "artifact", ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = Progress()
    try:
        result = run(args, log)
    except ReadyError as err:
        print(f"gpu_ready: {err}", file=sys.stderr)
        return 2
    result["total_s"] = round(log.elapsed(), 1)
    (args.out / "gpu_ready.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (args.out / "gpu_ready.md").write_text(markdown(result))
    log(f"wrote {args.out / 'gpu_ready.json'} and {args.out / 'gpu_ready.md'}")
    failed = [
        (n, result[n]["error"]) for n in ("load", "decode") if isinstance(result.get(n), dict) and "error" in result[n]
    ]
    if "failed" in result:
        failed.insert(0, (result["failed"]["step"], result["failed"]["error"]))
    for name, error in failed:
        print(f"FAILED {name}: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
