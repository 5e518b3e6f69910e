"""The machine description, results.md (tables: medians, spreads, ratios) and the PNG plots."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path
from typing import Any

from bench.stats import fmt, ratio, spread, summarize, table, write_json


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = 0
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    info: dict[str, Any] = {
        "cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(ram / 2**30, 1),
        "python": platform.python_version(), "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    try:
        import torch
        import transformers

        info.update(torch=torch.__version__, transformers=transformers.__version__, cuda=torch.cuda.is_available())
    except ImportError:
        pass
    return info


def load_only(c: dict[str, Any], key: str) -> dict[str, Any]:
    """Seconds to loaded-but-not-yet-generated: ready minus the first-token part, per run."""
    total, tok = c["ready_s"][key]["samples"], c["first_token_part_s"][key]["samples"]
    return summarize([a - b for a, b in zip(total, tok)])


def load_only_ratios(c: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for s in ("cold", "warm"):
        lc, lb, ld = load_only(c, f"c_{s}"), load_only(c, f"b_{s}"), load_only(c, f"d_{s}")
        out[f"load_only_c_over_d_{s}"] = ratio(lc, ld)
        out[f"load_only_b_over_c_{s}"] = ratio(lb, lc)
    return out


def _coldstart_md(c: dict[str, Any]) -> list[str]:
    gib = {k: v / 2**30 for k, v in c["bytes"].items()}
    rows = []
    for v, label in c["variants"].items():
        rows.append([
            f"({v}) {label}", f"{gib[v]:.2f}", spread(c["ready_s"][f"{v}_cold"]), spread(c["ready_s"][f"{v}_warm"]),
            spread(c["first_token_part_s"][f"{v}_warm"]), spread(load_only(c, f"{v}_cold")),
            spread(load_only(c, f"{v}_warm")), fmt(c["read_gib_per_s"][f"{v}_cold"]["median"]),
        ])  # fmt: skip
    r = dict(c["ratios"])
    r.update(load_only_ratios(c))
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in r.items()]
    t = c["targets"]
    return [
        f"## 1. Cold start, artifact to first token ({c['shape']} shape, random weights)", "",
        c["method"], "",
        table(["variant", "GiB on disk", "cold s: median [min-max]", "warm s", "of which first token (warm) s",
               "load only, cold s", "load only, warm s", "cold GiB/s"], rows), "",  # fmt: skip
        "Ratios (median of medians; range = per-run ratios):", "",
        table(["ratio", "median", "range"], ratio_rows), "",
        "\"load only\" = ready minus the first-token part, per run. (a) and (c) memory-map safetensors, so part of "
        "their reading happens inside the first token: load-only is a lower bound for them, the ready column is the "
        "measure. The first token of (b) and (c) is an fp16 forward on a CPU without fast fp16 matmuls.", "",
        f"Page-cache eviction effective (raw read cold/warm > 1.2): **{c['eviction_effective']}**. "
        f"torch+transformers import in a fresh process (not in the numbers above): "
        f"{spread(c['import_torch_transformers_s'])} s. Torch threads: {c['torch_threads']}.", "",
        "Targets: " + "; ".join(
            f"{s}: (c) within 1.5x of (d) **{'met' if v['c_within_1.5x_of_d'] else 'missed'}**, (c) >= 3x faster "
            f"than (b) **{'met' if v['c_3x_faster_than_b'] else 'missed'}**" for s, v in t.items()), "",
    ]


def _publish_md(p: dict[str, Any]) -> list[str]:
    s, m = p["seconds"], p["mib_per_s"]
    names = {
        "read_cold": "raw read, cold cache (bound)", "read_warm": "raw read, warm cache", "hash_only": "sha256 of every file",
        "prefix_c8": "publish s3-prefix, max_concurrency 8", "prefix_c1": "publish s3-prefix, max_concurrency 1",
        "republish_c8": "re-publish unchanged (c8)", "tar_prefix_c8": "small artifact: s3-prefix c8",
        "tar_ours": "small artifact: tar.gz, our packer + upload", "tar_ours_pack": "small artifact: our packing only",
        "tar_default_pack": "small artifact: tarfile 'w:gz' defaults, packing only",
        "tar_default_total_est": "small artifact: tarfile defaults pack + our upload",
    }  # fmt: skip
    rows = [[label, spread(s[k]), fmt(m[k]["median"]) if k in m else "-"] for k, label in names.items() if k in s]
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in p["ratios"].items()]
    return [
        "## 2. Build and publish to the local emulator's S3", "",
        p["method"], "",
        f"Artifact {p['artifact_bytes'] / 2**20:.0f} MiB (GPT-2-large fp16); small artifact {p['tar_artifact_bytes'] / 2**20:.0f} MiB "
        f"(GPT-2 124M fp16). Packer chosen here: {p['packer']}. Archive sizes: "
        + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in p["tar_sizes"].items()) + ".", "",
        table(["what", "seconds: median [min-max]", "MiB/s (median)"], rows), "",
        table(["ratio", "median", "range"], ratio_rows), "",
    ]


def _serving_md(sv: dict[str, Any]) -> list[str]:
    out = ["## 3. Serving under load (CPU, fp32, one intra-op thread per server)", ""]
    for name in ("tiny-gpt2", "gpt2-124m"):
        s = sv.get(name)
        if not s:
            continue
        rows = []
        for system, d in s["servers"].items():
            if "error" in d:
                rows.append([system, "-", "FAILED: " + d["error"][:80], "", "", "", "", ""])
                continue
            for c, cell in d["cells"].items():
                rows.append([system, c, f"{cell['p50_s'] * 1000:.0f}", f"{cell['p90_s'] * 1000:.0f}",
                             f"{cell['p99_s'] * 1000:.0f}", spread(cell["req_per_s"]), spread(cell["tokens_per_s"]),
                             f"{cell['errors']}/{cell['requests']}"])  # fmt: skip
        out += [f"### {name}: {s['new_tokens']} new tokens per request, {s['rounds']} rounds per cell", "",
                table(["server", "concurrency", "p50 ms", "p90 ms", "p99 ms", "req/s [min-max]", "tokens/s [min-max]",
                       "errors/requests"], rows), ""]  # fmt: skip
        for system, by_c in s.get("ratios_tokens_per_s_vs_hf", {}).items():
            out.append(f"- tokens/s of {system} / hf-fastload: " + ", ".join(
                f"c{c} {fmt(v['median'])} ({fmt(v['min'])}-{fmt(v['max'])})" for c, v in by_c.items()))
        out.append("")
    gpu = sv.get("gpu", {})
    if gpu:
        out += [f"GPU section: {gpu.get('skipped', 'ran')}", "", "```", gpu.get("plan", ""), "```", ""]
    return out


def _devloop_md(d: dict[str, Any]) -> list[str]:
    s = d["synth_all_examples"]
    out = ["## 4. Developer loop", "", s["method"], "",
           table(["what", "seconds: median [min-max]"], [
               [f"synth all {s['cases']} example configs x environments, first pass (incl. import aws_cdk "
                f"{s['import_aws_cdk_s']:.1f} s)", spread(s["first_pass_s"])],
               ["same, later passes in the same process", spread(s["later_pass_s"])],
               ["per config x environment, later passes", spread(s["per_case_later_s"])],
           ]), "", f"first / later pass: {fmt(s['first_over_later']['median'])}", ""]  # fmt: skip
    if "demo" in d:
        out.append(f"- one `make demo` (python -m local_emulator.demo): {d['demo']['seconds']:.1f} s, exit {d['demo']['returncode']} (n=1)")
    if "make_test" in d:
        out.append(f"- `make test`: {d['make_test']['seconds']:.1f} s, exit {d['make_test']['returncode']} (n=1)")
    return out + [""]


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Benchmarks (`make bench`)", "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM; Python {m.get('python')}, "
        f"torch {m.get('torch')}, transformers {m.get('transformers')}, CUDA {m.get('cuda')}; {m.get('date')}.", "",
        f"Every number: median [min-max] of {results['reps']} runs unless it says n=1. Total runtime "
        f"{results.get('total_seconds', 0):.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in results.get('section_seconds', {}).items()) + ").", "",
    ]  # fmt: skip
    sec = results["sections"]
    for key in ("coldstart", "coldstart_gptj"):
        if key in sec:
            lines += _coldstart_md(sec[key])
    if "publish" in sec:
        lines += _publish_md(sec["publish"])
    if "serving" in sec:
        lines += _serving_md(sec["serving"])
    if "devloop" in sec:
        lines += _devloop_md(sec["devloop"])
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    sec = results["sections"]
    c = sec.get("coldstart")
    if c:
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = list(c["variants"])
        for i, state in enumerate(("cold", "warm")):
            med = [c["ready_s"][f"{v}_{state}"]["median"] for v in xs]
            lo = [m - c["ready_s"][f"{v}_{state}"]["min"] for v, m in zip(xs, med)]
            hi = [c["ready_s"][f"{v}_{state}"]["max"] - m for v, m in zip(xs, med)]
            ax.bar([j + i * 0.4 for j in range(len(xs))], med, 0.4, yerr=[lo, hi], capsize=3, label=f"page cache {state}")
        ax.set_xticks([j + 0.2 for j in range(len(xs))], ["(a) from_pretrained\nfp32", "(b) torch.load\npickle fp16",
                                                          "(c) ours\nsafetensors fp16", "(d) raw read"])  # fmt: skip
        ax.set_ylabel("seconds to first token (median, min-max)")
        ax.set_title(f"Cold start, {c['shape']} shape")
        ax.legend()
        fig.tight_layout()
        written.append(out / "coldstart.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    p = sec.get("publish")
    if p:
        keys = [k for k in ("read_cold", "read_warm", "hash_only", "prefix_c8", "prefix_c1", "tar_prefix_c8", "tar_ours",
                            "tar_ours_pack", "tar_default_pack") if k in p["mib_per_s"]]  # fmt: skip
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.barh(keys, [p["mib_per_s"][k]["median"] for k in keys])
        ax.set_xscale("log")
        ax.set_xlabel("MiB/s (median; log scale)")
        ax.set_title("Publish throughput vs raw disk read (tar*: small artifact)")
        fig.tight_layout()
        written.append(out / "publish.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    sv = sec.get("serving")
    if sv:
        models = [m for m in ("tiny-gpt2", "gpt2-124m") if m in sv]
        fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4), squeeze=False)
        for ax, name in zip(axes[0], models):
            for system, d in sv[name]["servers"].items():
                if "cells" not in d:
                    continue
                cs = [int(c) for c in d["cells"]]
                ax.plot(cs, [d["cells"][str(c)]["p50_s"] * 1000 for c in cs], "o-", label=f"{system} p50")
                ax.plot(cs, [d["cells"][str(c)]["p99_s"] * 1000 for c in cs], "x--", label=f"{system} p99")
            ax.set_xlabel("concurrency")
            ax.set_ylabel("latency ms")
            ax.set_title(f"{name}, {sv[name]['new_tokens']} new tokens")
            ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(out / "serving_latency.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results["plots"] = [p.name for p in plots(results, out)]
    write_json(out / "results.json", results)
    (out / "results.md").write_text(markdown(results))
