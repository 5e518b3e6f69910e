"""Benchmark 1: cold start, artifact on disk -> first generated token, in one process on this machine.

Variants (same model, same machine, interleaved per run so each run sees the same machine state):
  a  from_pretrained(original fp32 checkpoint) + tokenizer + 1-token greedy generate (what a user does)
  b  the old recipe: torch.load(model.pt, weights_only=False) of a pickled whole fp16 model + tokenizer + generate
  c  our artifact (hf-fastload build: fp16 sharded safetensors) via the handler's model_fn + predict_fn(1 token);
     the handler computes in fp32 on a CPU (its compute dtype), so the fp16 weights are widened while loading
  d  raw bound: read every byte of the artifact's files into memory (no parsing, no compute)
Page cache: "cold" evicts each variant's files first (fsync + posix_fadvise(POSIX_FADV_DONTNEED) per file);
"warm" runs right after, on the pages the cold run read. Eviction is checked: (d) cold must be slower than warm.
torch/transformers are imported once before timing; their import cost is measured apart, in fresh processes.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import models
from bench.stats import ratio, summarize

PROMPT = "The quick brown fox"
VARIANTS = {
    "a": "from_pretrained, original fp32 safetensors checkpoint",
    "b": "torch.load(weights_only=False), pickled whole fp16 model (old recipe)",
    "c": "our artifact: fp16 sharded safetensors via handler model_fn + predict_fn (fp32 compute on CPU)",
    "d": "raw bound: read the artifact's bytes into memory",
}


def files_of(path: Path) -> list[Path]:
    path = Path(path)
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())


def evict(paths: list[Path]) -> None:
    """Drop these files' pages from the page cache (fsync first: dirty pages are not dropped)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_all(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        size = p.stat().st_size
        buf = bytearray(size)
        with open(p, "rb", buffering=0) as f:
            view = memoryview(buf)
            n = 0
            while n < size:
                got = f.readinto(view[n:])
                if not got:
                    break
                n += got
        total += n
        del buf
    return total


def make_pickle(source: Path, out: Path) -> Path:
    """The old recipe's artifact: torch.save of the whole model converted to fp16, plus the tokenizer files."""
    target = out / "model.pt"
    if target.is_file():
        return out
    import shutil

    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float16)
    torch.save(model, out / "model.pt.tmp")
    os.replace(out / "model.pt.tmp", target)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy2(source / name, out / name)
    return out


def import_cost(reps: int) -> dict[str, Any]:
    """Seconds to `import torch, transformers` + the model class in a fresh interpreter."""
    code = (
        "import time; t=time.perf_counter(); import torch, transformers; "
        "from transformers import GPT2LMHeadModel, AutoModelForCausalLM; print(time.perf_counter()-t)"
    )
    samples = []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return summarize(samples)


def _first_token_generic(model: Any, tokenizer: Any) -> None:
    import torch

    enc = tokenizer(PROMPT, return_tensors="pt")
    with torch.inference_mode():
        model.generate(**enc, max_new_tokens=1, do_sample=False, pad_token_id=tokenizer.eos_token_id)


def run_variant(name: str, paths: dict[str, Path]) -> tuple[float, float]:
    """(seconds to ready, seconds of the first-token part) of one variant."""
    import torch
    import transformers

    t0 = time.perf_counter()
    if name == "a":
        tok = transformers.AutoTokenizer.from_pretrained(paths["a"])
        model = transformers.AutoModelForCausalLM.from_pretrained(paths["a"]).eval()
        t1 = time.perf_counter()
        _first_token_generic(model, tok)
    elif name == "b":
        tok = transformers.AutoTokenizer.from_pretrained(paths["b"])
        model = torch.load(paths["b"] / "model.pt", weights_only=False).eval()
        t1 = time.perf_counter()
        _first_token_generic(model, tok)
    elif name == "c":
        from systems.hf_fastload.handler import inference as handler

        model = handler.model_fn(str(paths["c"]))
        t1 = time.perf_counter()
        handler.predict_fn({"inputs": PROMPT, "parameters": {"max_new_tokens": 1}}, model)
    elif name == "d":
        read_all(files_of(paths["c"]))
        model = None
        t1 = time.perf_counter()
    else:
        raise ValueError(name)
    t2 = time.perf_counter()
    del model
    gc.collect()
    return t2 - t0, t2 - t1


def prepare(raw: Path, shape: str, log) -> dict[str, Any]:
    """Checkpoint, pickle and built artifact of `shape` under raw/ (each made once, then reused)."""
    t = time.perf_counter()
    source = models.make_checkpoint(shape, raw / f"src-{shape}").resolve()
    made_ckpt = time.perf_counter() - t
    t = time.perf_counter()
    pickle_dir = make_pickle(source, raw / f"pickle-{shape}")
    made_pickle = time.perf_counter() - t
    endpoint = f"bench-{shape}"
    text = "endpoints:\n" + models.endpoint_yaml(endpoint, source)
    artifact, build_s = models.build(text, raw / f"config-{shape}.yaml", endpoint, (raw / f"art-{shape}").resolve())
    log(
        f"  prepared {shape}: checkpoint {made_ckpt:.1f} s, pickle {made_pickle:.1f} s, "
        f"build {'reused' if build_s < 0 else f'{build_s:.1f} s'}"
    )
    return {
        "a": source,
        "b": pickle_dir,
        "c": artifact,
        "config": raw / f"config-{shape}.yaml",
        "endpoint": endpoint,
        "build_s": build_s,
    }


def bench(raw: Path, shape: str, reps: int, log) -> dict[str, Any]:
    import torch

    paths = prepare(raw, shape, log)
    files = {"a": files_of(paths["a"]), "b": files_of(paths["b"]), "c": files_of(paths["c"]), "d": files_of(paths["c"])}
    sizes = {k: sum(p.stat().st_size for p in v) for k, v in files.items()}
    log("  sizes on disk: " + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in sizes.items()))
    for (
        name
    ) in "ad":  # untimed: first-call costs (transformers' lazy imports of GPT-2 + generate, first reads) out of run 1
        run_variant(name, paths)
    ready: dict[tuple[str, str], list[float]] = {(v, s): [] for v in "abcd" for s in ("cold", "warm")}
    first_token: dict[tuple[str, str], list[float]] = {(v, s): [] for v in "abcd" for s in ("cold", "warm")}
    for rep in range(reps):
        for v in "abcd":
            for state in ("cold", "warm"):
                if state == "cold":
                    evict(files[v])
                total, tok = run_variant(v, paths)
                ready[(v, state)].append(total)
                first_token[(v, state)].append(tok)
        log(
            f"  run {rep + 1}/{reps}: "
            + ", ".join(f"{v} {ready[(v, 'cold')][-1]:.2f}/{ready[(v, 'warm')][-1]:.2f} s" for v in "abcd")
            + " (cold/warm)"
        )
    out: dict[str, Any] = {
        "shape": shape,
        "variants": VARIANTS,
        "bytes": sizes,
        "torch_threads": torch.get_num_threads(),
        "method": (
            "seconds from nothing loaded (torch/transformers already imported) to the first generated token "
            "(1-token greedy generate); (d) reads the artifact's bytes only. cold: fsync + "
            "posix_fadvise(POSIX_FADV_DONTNEED) on every file of the variant before the run; warm: the run right "
            f"after. {reps} interleaved runs, after one untimed pass of (a) and (d)."
        ),
        "ready_s": {},
        "first_token_part_s": {},
        "read_gib_per_s": {},
        "ratios": {},
    }
    for (v, s), xs in ready.items():
        out["ready_s"][f"{v}_{s}"] = summarize(xs)
        out["first_token_part_s"][f"{v}_{s}"] = summarize(first_token[(v, s)])
        out["read_gib_per_s"][f"{v}_{s}"] = summarize([sizes[v] / 2**30 / x for x in xs])
    for s in ("cold", "warm"):
        r = out["ready_s"]
        out["ratios"][f"c_over_d_{s}"] = ratio(r[f"c_{s}"], r[f"d_{s}"])
        out["ratios"][f"b_over_c_{s}"] = ratio(r[f"b_{s}"], r[f"c_{s}"])
        out["ratios"][f"a_over_c_{s}"] = ratio(r[f"a_{s}"], r[f"c_{s}"])
    out["ratios"]["d_cold_over_warm"] = ratio(out["ready_s"]["d_cold"], out["ready_s"]["d_warm"])
    out["eviction_effective"] = out["ratios"]["d_cold_over_warm"]["median"] > 1.2
    out["targets"] = {
        s: {
            "c_within_1.5x_of_d": out["ratios"][f"c_over_d_{s}"]["median"] <= 1.5,
            "c_3x_faster_than_b": out["ratios"][f"b_over_c_{s}"]["median"] >= 3.0,
        }
        for s in ("cold", "warm")
    }
    out["import_torch_transformers_s"] = import_cost(reps)
    out["paths"] = {k: str(v) for k, v in paths.items() if k in ("config", "endpoint", "c")}
    out["build_s"] = paths["build_s"]
    return out
