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
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(ram / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],  # other work on the machine skews timings
    }
    try:
        import torch
        import transformers

        info.update(torch=torch.__version__, transformers=transformers.__version__, cuda=torch.cuda.is_available())
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
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
        rows.append(
            [
                f"({v}) {label}",
                f"{gib[v]:.2f}",
                spread(c["ready_s"][f"{v}_cold"]),
                spread(c["ready_s"][f"{v}_warm"]),
                spread(c["first_token_part_s"][f"{v}_warm"]),
                spread(load_only(c, f"{v}_cold")),
                spread(load_only(c, f"{v}_warm")),
                fmt(c["read_gib_per_s"][f"{v}_cold"]["median"]),
            ]
        )
    r = dict(c["ratios"])
    r.update(load_only_ratios(c))
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in r.items()]
    t = c["targets"]
    return [
        f"## 1. Cold start, artifact to first token ({c['shape']} shape, random weights)",
        "",
        c["method"],
        "",
        table(
            [
                "variant",
                "GiB on disk",
                "cold s: median [min-max]",
                "warm s",
                "of which first token (warm) s",
                "load only, cold s",
                "load only, warm s",
                "cold GiB/s",
            ],
            rows,
        ),
        "",
        "Ratios (median of medians; range = per-run ratios):",
        "",
        table(["ratio", "median", "range"], ratio_rows),
        "",
        '"load only" = ready minus the first-token part, per run. (a) and (c) memory-map safetensors, so part of '
        "their reading happens inside the first token: load-only is a lower bound for them, the ready column is the "
        "measure. (c) computes in fp32 on a CPU (the handler's compute dtype, whatever the stored dtype); (b), the "
        "old recipe, computes in its pickled fp16.",
        "",
        f"Page-cache eviction effective (raw read cold/warm > 1.2): **{c['eviction_effective']}**. "
        f"torch+transformers import in a fresh process (not in the numbers above): "
        f"{spread(c['import_torch_transformers_s'])} s. Torch threads: {c['torch_threads']}.",
        "",
        "Targets: "
        + "; ".join(
            f"{s}: (c) within 1.5x of (d) **{'met' if v['c_within_1.5x_of_d'] else 'missed'}**, (c) >= 3x faster "
            f"than (b) **{'met' if v['c_3x_faster_than_b'] else 'missed'}**"
            for s, v in t.items()
        ),
        "",
    ]


def _publish_md(p: dict[str, Any]) -> list[str]:
    s, m = p["seconds"], p["mib_per_s"]
    names = {
        "plain_upload_c8": "plain upload of the same files, c8 (the emulator's ceiling)",
        "read_cold": "raw read, cold cache (bound)",
        "read_warm": "raw read, warm cache",
        "hash_only": "sha256 of every file",
        "prefix_c8": "publish s3-prefix, max_concurrency 8",
        "prefix_c1": "publish s3-prefix, max_concurrency 1",
        "republish_c8": "re-publish unchanged (c8)",
        "tar_prefix_c8": "small artifact: s3-prefix c8",
        "tar_ours": "small artifact: tar.gz, our packer + upload",
        "tar_ours_pack": "small artifact: our packing only",
        "tar_default_pack": "small artifact: tarfile 'w:gz' defaults, packing only",
        "tar_default_total_est": "small artifact: tarfile defaults pack + our upload",
    }
    rows = [[label, spread(s[k]), fmt(m[k]["median"]) if k in m else "-"] for k, label in names.items() if k in s]
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in p["ratios"].items()]
    return [
        "## 2. Build and publish to the local emulator's S3",
        "",
        p["method"],
        "",
        f"Artifact {p['artifact_bytes'] / 2**20:.0f} MiB (GPT-2-large fp16); small artifact {p['tar_artifact_bytes'] / 2**20:.0f} MiB "
        f"(GPT-2 124M fp16). Packer chosen here: {p['packer']}. Archive sizes: "
        + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in p["tar_sizes"].items())
        + ".",
        "",
        table(["what", "seconds: median [min-max]", "MiB/s (median)"], rows),
        "",
        table(["ratio", "median", "range"], ratio_rows),
        "",
    ] + (
        [
            f"Target: publish (prefix c8) within 10 % of the plain upload: **"
            f"{'met' if p['targets']['publish_within_10pct_of_plain_upload'] else 'missed'}** "
            f"({fmt(p['ratios']['prefix_c8_over_plain_upload_c8']['median'])}x).",
            "",
        ]
        if "targets" in p
        else []
    )


def _s3coldstart_md(c: dict[str, Any]) -> list[str]:
    rows = [
        [f"({v}) {label}", spread(c["seconds"][v]), spread(c["download_seconds"][v])]
        for v, label in c["variants"].items()
    ]
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in c["ratios"].items()]
    t = c["targets"]
    return [
        "## 1b. Cold start from S3: published artifact to first token (local emulator's S3)",
        "",
        c["method"],
        "",
        f"Our artifact {c['artifact_bytes'] / 2**20:.0f} MiB (s3-prefix); the old recipe's pickle "
        f"{c['pickle_bytes'] / 2**20:.0f} MiB, as model.tar.gz {c['old_tar_gz_bytes'] / 2**20:.0f} MiB; "
        f"download concurrency {c['max_concurrency']}.",
        "",
        table(["variant", "seconds to first token: median [min-max]", "of which download"], rows),
        "",
        table(["ratio", "median", "range"], ratio_rows),
        "",
        f"Targets: ours within 1.5x of the download alone **{'met' if t['ours_within_1.5x_of_raw'] else 'missed'}**; "
        f"ours >= 3x faster than the old recipe **{'met' if t['ours_3x_faster_than_old'] else 'missed'}**.",
        "",
    ]


def _s3stream_md(c: dict[str, Any]) -> list[str]:
    out = ["## 1c. Streamed weights: Run:ai Model Streamer vs download then load (local emulator's S3)", ""]
    if "skipped" in c:
        return out + [f"Not run: {c['skipped']}", ""]
    rows = [
        [f"({v}) {label}", spread(c["seconds"][v]), fmt(c["mib_per_s"][v]["median"])]
        for v, label in c["variants"].items()
    ]
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in c["ratios"].items()]
    env = ", ".join(f"{k}={v}" for k, v in c["streamer_env"].items())
    return out + [
        c["method"],
        "",
        f"Artifact {c['artifact_bytes'] / 2**20:.0f} MiB ({(c.get('tensor_bytes') or 0) / 2**20:.0f} MiB of tensors); "
        + ", ".join(f"{k} {v}" for k, v in c["versions"].items())
        + f". Streamer settings (emulator): {env}.",
        "",
        table(["variant", "seconds to every tensor in memory: median [min-max]", "MiB/s (median)"], rows),
        "",
        table(["ratio", "median", "range"], ratio_rows),
        "",
    ]


def _gpu_md(g: dict[str, Any]) -> list[str]:
    out = ["## 5. GPU", ""]
    if "skipped" in g:
        return out + [f"GPU section: {g['skipped']}", ""]
    dev = g["device"]
    bw = g["bandwidth"]["bytes_per_s"]
    out += [
        f"Device: {dev.get('name')} ({dev.get('memory_gib', '-')} GiB, CUDA {dev.get('cuda', '-')}); "
        f"device-to-device copy bandwidth {fmt(bw['median'] / 1e9)} GB/s [{fmt(bw['min'] / 1e9)}-{fmt(bw['max'] / 1e9)}].",
        "",
    ]
    c = g.get("coldstart", {})
    if "error" in c:
        out += [f"Cold start: FAILED: {c['error']}", ""]
    elif c:
        out += _gpu_coldstart_md(c, g["shape"])
    d = g.get("decode", {})
    if "error" in d:
        out += [f"Decode: FAILED: {d['error']}", ""]
    elif d:
        out += _gpu_decode_md(d)
    o = g.get("gpt2_onnxruntime_vs_pytorch", {})
    if "error" in o:
        out += [f"GPT-2 ONNX Runtime vs PyTorch: FAILED: {o['error']}", ""]
    elif o:
        out += _gpu_onnxruntime_md(o)
    return out


def _gpu_coldstart_md(c: dict[str, Any], shape: str) -> list[str]:
    rows = [
        [
            f"{v}: {label}",
            f"{c['bytes'][v] / 2**30:.2f}",
            spread(c["seconds"][f"{v}_cold"]),
            spread(c["seconds"][f"{v}_warm"]),
        ]
        for v, label in c["variants"].items()
    ]
    ratio_rows = [[k, fmt(v["median"]), f"{fmt(v['min'])}-{fmt(v['max'])}"] for k, v in c["ratios"].items()]
    return [
        f"### Cold start to the first token ({shape} shape, fp16)",
        "",
        c["method"],
        "",
        table(["variant", "GiB", "cold s: median [min-max]", "warm s"], rows),
        "",
        table(["ratio", "median", "range"], ratio_rows),
        "",
        f"Page-cache eviction effective: **{c['eviction_effective']}**. Targets: "
        + "; ".join(
            f"{s}: ours within 1.5x of raw **{'met' if v['ours_within_1.5x_of_raw'] else 'missed'}**, ours "
            f">= 3x faster than old **{'met' if v['ours_3x_faster_than_old'] else 'missed'}**"
            for s, v in c["targets"].items()
        ),
        "",
    ]


def _gpu_decode_md(d: dict[str, Any]) -> list[str]:
    rows = []
    for name, by_batch in d["systems"].items():
        if "skipped" in by_batch or "error" in by_batch:
            rows.append([name, "-", by_batch.get("skipped") or "FAILED: " + by_batch["error"][:100], "", "", ""])
            continue
        for b, r in by_batch.items():
            rows.append(
                [
                    name,
                    b,
                    spread(r["decode_tokens_per_s"]),
                    fmt(r["bound_tokens_per_s"]),
                    fmt(r["fraction_of_bound"]),
                    spread(r["end_to_end_tokens_per_s"]),
                ]
            )
    return [
        f"### Decode ({d['new_tokens']} new tokens, weights {d['weight_bytes'] / 2**30:.2f} GiB, {d['dtype']}; "
        f"fast path: {d['fast_path']})",
        "",
        table(
            ["system", "batch", "decode tokens/s", "bound tokens/s", "fraction of bound", "end-to-end tokens/s"],
            rows,
        ),
        "",
        "Fast path's greedy tokens equal HF eager's: "
        + ", ".join(f"batch {b} **{v}**" for b, v in d["tokens_equal"].items())
        + ". Ratios to HF eager: "
        + "; ".join(
            f"{n} " + ", ".join(f"batch {b} {fmt(v['median'])}x" for b, v in r.items())
            for n, r in d["ratios_vs_hf_eager"].items()
        )
        + ".",
        "",
        "Targets: " + "; ".join(f"{k} **{'met' if v else 'missed'}**" for k, v in d["targets"].items()),
        "",
    ]


def _gpu_onnxruntime_md(o: dict[str, Any]) -> list[str]:
    rows = [
        [name, b, spread(r["decode_tokens_per_s"]), spread(r["end_to_end_tokens_per_s"])]
        for name, by_batch in o["systems"].items()
        for b, r in by_batch.items()
    ]
    return [
        f"### GPT-2 ({o.get('shape')}): ONNX Runtime ({', '.join(o['onnxruntime_providers'])}, "
        f"{o['onnx_dtype']}) vs PyTorch ({o['torch_dtype']}), {o['new_tokens']} new tokens",
        "",
        table(["backend", "batch", "decode tokens/s", "end-to-end tokens/s"], rows),
        "",
        "ONNX Runtime / PyTorch decode tokens/s: "
        + ", ".join(f"batch {b} {fmt(v['median'])}x" for b, v in o["ratios_onnxruntime_over_pytorch"].items()),
        "",
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
                rows.append(
                    [
                        system,
                        c,
                        f"{cell['p50_s'] * 1000:.0f}",
                        f"{cell['p90_s'] * 1000:.0f}",
                        f"{cell['p99_s'] * 1000:.0f}",
                        spread(cell["req_per_s"]),
                        spread(cell["tokens_per_s"]),
                        f"{cell['errors']}/{cell['requests']}",
                    ]
                )
        out += [
            f"### {name}: {s['new_tokens']} new tokens per request, {s['rounds']} rounds per cell",
            "",
            table(
                [
                    "server",
                    "concurrency",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "req/s [min-max]",
                    "tokens/s [min-max]",
                    "errors/requests",
                ],
                rows,
            ),
            "",
        ]
        for system, by_c in s.get("ratios_tokens_per_s_vs_hf", {}).items():
            out.append(
                f"- tokens/s of {system} / hf-fastload: "
                + ", ".join(f"c{c} {fmt(v['median'])} ({fmt(v['min'])}-{fmt(v['max'])})" for c, v in by_c.items())
            )
        out.append("")
    return out


def _devloop_md(d: dict[str, Any]) -> list[str]:
    s = d["synth_all_examples"]
    out = [
        "## 4. Developer loop",
        "",
        s["method"],
        "",
        table(
            ["what", "seconds: median [min-max]"],
            [
                [
                    f"synth all {s['cases']} example configs x environments, first pass (incl. import aws_cdk "
                    f"{s['import_aws_cdk_s']:.1f} s)",
                    spread(s["first_pass_s"]),
                ],
                ["same, later passes in the same process", spread(s["later_pass_s"])],
                ["per config x environment, later passes", spread(s["per_case_later_s"])],
            ],
        ),
        "",
        f"first / later pass: {fmt(s['first_over_later']['median'])}",
        "",
    ]
    if "demo" in d:
        out.append(
            f"- one `make demo` (python -m local_emulator.demo): {d['demo']['seconds']:.1f} s, exit {d['demo']['returncode']} (n=1)"
        )
    if "make_test" in d:
        out.append(f"- `make test`: {d['make_test']['seconds']:.1f} s, exit {d['make_test']['returncode']} (n=1)")
    return out + [""]


def _loadtest_md(lt: dict[str, Any]) -> list[str]:
    """bench/loadtest.py: the AIPerf cross-check, the load test's ceiling, the front doors' added latency."""
    out = ["## Load test (`model_build loadtest`), cross-checked against AIPerf", ""]
    cc = lt.get("cross_check") or {}
    if "error" in cc:
        out += [f"Cross-check failed: {cc['error']}", ""]
    elif cc:
        out += _cross_check_md(cc)
    ce = lt.get("ceiling") or {}
    if ce and "error" not in ce:
        out += _ceiling_md(ce)
    fd = lt.get("front_doors") or {}
    if fd and "error" not in fd:
        out += _front_doors_md(fd)
    ls = lt.get("local_server") or {}
    if ls and "error" not in ls:
        out += _local_server_md(ls)
    for name in ("cross_check", "ceiling", "front_doors", "local_server"):
        if "error" in (lt.get(name) or {}):
            out += [f"{name} failed: {lt[name]['error']}", ""]
    return out


def _cross_check_md(cc: dict[str, Any]) -> list[str]:
    srv, wl = cc["server"], cc["workload"]
    out = [
        f"Paced server: first token after {srv['ttft_ms']:g} ms, then one token every {srv['itl_ms']:g} ms, "
        f"{srv['output_tokens']} tokens; {wl['requests']} requests per level after {wl['warmup']} warm-up, "
        f"{wl['input_tokens']} input tokens; AIPerf {cc.get('aiperf_version') or 'not installed'}. "
        f"Expected: TTFT {cc['expected']['ttft_ms']:g} ms, TPOT {cc['expected']['tpot_ms']:g} ms, "
        f"e2e {cc['expected']['e2e_ms']:g} ms.",
        "",
    ]
    rows = []
    for c, cell in cc["levels"].items():
        for name, v in (cell.get("comparison") or {}).items():
            if name == "idle_ms_between_requests_per_slot":
                continue
            rows.append([c, name, v["ours"], v["aiperf"], v["ratio"], "yes" if v["within_10pct"] else "**no**"])
    if not rows:
        return out + ["AIPerf not run: " + "; ".join(str(cell.get("aiperf")) for cell in cc["levels"].values()), ""]
    out += [table(["concurrency", "metric", "ours", "AIPerf", "ours/AIPerf", "within 10 %"], rows), ""]
    out += [
        "Definitions: TPOT (ours) and AIPerf's inter_token_latency are both (last text event - first) / "
        "(tokens - 1) per request; ITL (ours) and inter_chunk_latency both pool the gaps between text "
        "events; AIPerf's request_latency ends at the last text event, ours when the reply ends. Idle time "
        "per concurrency slot between a reply and the next request (wall x concurrency / requests - mean "
        "latency), which moves throughput at equal latency: "
        + "; ".join(
            f"concurrency {c}: ours {fmt(g['ours'])} ms, AIPerf {fmt(g['aiperf'])} ms "
            f"(its credit-to-start p50 {fmt(g['aiperf_credit_to_start_p50_ms'])} ms)"
            for c, cell in cc["levels"].items()
            if (g := (cell.get("comparison") or {}).get("idle_ms_between_requests_per_slot"))
        )
        + "."
    ]
    bare = (cc["levels"].get("1") or {}).get("bare_httpx_ttft_ms")
    if bare:
        out += [
            f"Control for the client's own cost at concurrency 1: a bare httpx streaming loop (no load-test "
            f"bookkeeping, its own process) sees TTFT p50 {fmt(bare['p50'])} ms (min {fmt(bare['min'])}) "
            f"against the same server."
        ]
    return out + [""]


def _ceiling_md(ce: dict[str, Any]) -> list[str]:
    return [
        f"Ceiling ({ce['target']}, {ce['requests_per_level']} requests per level): "
        + ", ".join(
            f"concurrency {c} {fmt(v['requests_per_s'])} req/s (e2e p50 {fmt(v['e2e_ms'].get('p50'))} ms)"
            for c, v in ce["levels"].items()
        )
        + f"; at most {fmt(ce['max_requests_per_s'])} req/s"
        + (
            f"; AIPerf at concurrency {ce['aiperf_reference']['concurrency']}: "
            f"{fmt(ce['aiperf_reference']['requests_per_s'])} req/s"
            if ce.get("aiperf_reference")
            else ""
        )
        + ".",
        "",
    ]


def _front_doors_md(fd: dict[str, Any]) -> list[str]:
    rows = [[k, v["p50"], v["p99"]] for k, v in fd["ms"].items()]
    out = [
        f"Front doors ({fd['server']}; {fd['reps']} interleaved rounds), ms:",
        "",
        table(["call", "p50", "p99"], rows),
        "",
    ]
    for door in ("invoke_function", "stream_function"):
        a = fd[f"{door}_added_ms"]
        out.append(
            f"- {door} adds {fmt(a['p50_difference'])} ms at p50 (paired {fmt(a['paired_p50'])} ms), "
            f"{fmt(a['p99_difference'])} ms at p99: goal 5 ms p50 {'met' if a['goal_5ms_p50_met'] else '**missed**'}"
        )
    out.append("")
    return out


def _local_server_md(ls: dict[str, Any]) -> list[str]:
    """Each sub-measurement on its own line or table: one that failed is named beside the ones that succeeded."""

    def levels_table(res: dict[str, Any]) -> str:
        rows = [
            [
                lv["concurrency"],
                lv["requests"],
                lv["errors"],
                lv["ttft_ms"].get("p50"),
                lv["itl_ms"].get("p50"),
                lv["e2e_ms"].get("p50"),
                lv["output_tokens_per_s"],
            ]
            for lv in res.get("levels", [])
        ]
        headers = ["concurrency", "requests", "errors", "TTFT p50 ms", "ITL p50 ms", "e2e p50 ms", "output tok/s"]
        return table(headers, rows)

    out = [f"Local server ({ls['model']}):", ""]
    for key, title in (
        ("ours_response_stream", "sagemaker-runtime response stream (our load test)"),
        ("ours_openai_route", "SageMaker's OpenAI route, streamed chat (our load test)"),
    ):
        res = ls.get(key)
        if res is None:
            continue
        if "error" in res:
            out += [f"- {title}: **failed**: {res['error']}", ""]
        else:
            out += [f"{title}:", "", levels_table(res), ""]
    route = ls.get("openai_route")
    if isinstance(route, dict) and "error" in route:
        out += [f"- OpenAI route against AIPerf: **failed**: {route['error']}", ""]
    elif isinstance(route, dict) and "comparison" in route:
        rows = [[name, v["ours"], v["aiperf"], v["ratio"]] for name, v in route["comparison"].items() if "ours" in v]
        out += ["OpenAI route, ours against AIPerf:", "", table(["metric", "ours", "AIPerf", "ours/AIPerf"], rows), ""]
    elif route is not None:
        out += [f"OpenAI route against AIPerf: {route}", ""]
    return out


def _front_door_md(fd: dict[str, Any]) -> list[str]:
    from bench import front_door

    return front_door.markdown(fd)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Benchmarks (`make bench`)",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM; Python {m.get('python')}, "
        f"torch {m.get('torch')}, transformers {m.get('transformers')}, CUDA {m.get('cuda')}; {m.get('date')}.",
        "",
        f"Every number: median [min-max] of {results['reps']} runs unless it says n=1. Total runtime "
        f"{sum(results.get('section_seconds', {}).values()):.0f} s, the sum of the sections shown ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in results.get("section_seconds", {}).items())
        + ")"
        + (f"; this run took {results['run_seconds']:.0f} s" if results.get("run_seconds") else "")
        + ".",
        "",
    ]
    sec = results["sections"]
    if m.get("loadavg_at_start"):
        after = results.get("loadavg_after_section") or {}
        lines += [
            f"Load average (1/5/15 min) at the start: {m['loadavg_at_start']}"
            + ("; after each section: " + ", ".join(f"{k} {v}" for k, v in after.items()) if after else "")
            + f" ({m.get('cores')} cores: above that, other work shared the CPU and skews the times).",
            "",
        ]
    kept = results.get("kept_from_earlier_run") or {}
    if kept:
        lines += [
            "Sections kept from an earlier run (not re-run this time): "
            + ", ".join(f"{k} ({v})" for k, v in kept.items())
            + ".",
            "",
        ]
    kept_parts = results.get("kept_from_earlier_run_parts") or {}
    for name, parts in kept_parts.items():
        run = ", ".join((results.get("parts_run") or {}).get(name, []))
        lines += [
            f"Section {name}: only {run} re-run this time"
            + (
                f" ({', '.join(f'{k} {v:.0f} s' for k, v in (results.get('part_seconds') or {}).items())})"
                if results.get("part_seconds")
                else ""
            )
            + "; kept from earlier runs: "
            + ", ".join(f"{k} ({v})" for k, v in parts.items())
            + "; its time is the last full run's.",
            "",
        ]
    if results.get("note"):
        lines += [results["note"], ""]
    renderers = (
        ("coldstart", _coldstart_md),
        ("coldstart_gptj", _coldstart_md),
        ("s3coldstart", _s3coldstart_md),
        ("s3stream", _s3stream_md),
        ("publish", _publish_md),
        ("serving", _serving_md),
        ("devloop", _devloop_md),
        ("gpu", _gpu_md),
        ("loadtest", _loadtest_md),
        ("front_door", _front_door_md),
    )
    for key, render in renderers:  # in the report's order
        if key in sec:
            lines += render(sec[key])
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    sec = results["sections"]
    drawers = (
        ("coldstart.png", _coldstart_plot, sec.get("coldstart")),
        ("publish.png", _publish_plot, sec.get("publish")),
        ("serving_latency.png", _serving_plot, sec.get("serving")),
        ("s3coldstart.png", _s3coldstart_plot, sec.get("s3coldstart")),
    )
    for name, draw, section in drawers:
        if section:
            _save(plt, draw(plt, section), out / name, written)
    d = (sec.get("gpu") or {}).get("decode") or {}
    if d.get("systems"):
        _save(plt, _gpu_decode_plot(plt, d, sec["gpu"]["device"].get("name")), out / "gpu_decode.png", written)
    return written


def _save(plt, fig, path: Path, written: list[Path]) -> None:
    fig.tight_layout()
    written.append(path)
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)


def _coldstart_plot(plt, c: dict[str, Any]):
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(c["variants"])
    for i, state in enumerate(("cold", "warm")):
        med = [c["ready_s"][f"{v}_{state}"]["median"] for v in xs]
        lo = [m - c["ready_s"][f"{v}_{state}"]["min"] for v, m in zip(xs, med)]
        hi = [c["ready_s"][f"{v}_{state}"]["max"] - m for v, m in zip(xs, med)]
        ax.bar([j + i * 0.4 for j in range(len(xs))], med, 0.4, yerr=[lo, hi], capsize=3, label=f"page cache {state}")
    ax.set_xticks(
        [j + 0.2 for j in range(len(xs))],
        ["(a) from_pretrained\nfp32", "(b) torch.load\npickle fp16", "(c) ours\nsafetensors fp16", "(d) raw read"],
    )
    ax.set_ylabel("seconds to first token (median, min-max)")
    ax.set_title(f"Cold start, {c['shape']} shape")
    ax.legend()
    return fig


PUBLISH_PLOT_KEYS = (
    "read_cold",
    "read_warm",
    "hash_only",
    "prefix_c8",
    "prefix_c1",
    "tar_prefix_c8",
    "tar_ours",
    "tar_ours_pack",
    "tar_default_pack",
)


def _publish_plot(plt, p: dict[str, Any]):
    keys = [k for k in PUBLISH_PLOT_KEYS if k in p["mib_per_s"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh(keys, [p["mib_per_s"][k]["median"] for k in keys])
    ax.set_xscale("log")
    ax.set_xlabel("MiB/s (median; log scale)")
    ax.set_title("Publish throughput vs raw disk read (tar*: small artifact)")
    return fig


def _serving_plot(plt, sv: dict[str, Any]):
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
    return fig


def _s3coldstart_plot(plt, s3: dict[str, Any]):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    xs = list(s3["variants"])
    med = [s3["seconds"][v]["median"] for v in xs]
    err = [
        [m - s3["seconds"][v]["min"] for v, m in zip(xs, med)],
        [s3["seconds"][v]["max"] - m for v, m in zip(xs, med)],
    ]
    ax.bar(xs, med, yerr=err, capsize=3, label="to first token")
    ax.bar(xs, [s3["download_seconds"][v]["median"] for v in xs], 0.4, label="of which download")
    ax.set_ylabel("seconds (median, min-max)")
    ax.set_title("Cold start from the emulator's S3")
    ax.legend()
    return fig


def _gpu_decode_plot(plt, d: dict[str, Any], device_name: str | None):
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, by_batch in d["systems"].items():
        if "skipped" in by_batch or "error" in by_batch:
            continue
        bs = list(by_batch)
        ax.plot([int(b) for b in bs], [by_batch[b]["decode_tokens_per_s"]["median"] for b in bs], "o-", label=name)
    first = next(v for v in d["systems"].values() if "skipped" not in v and "error" not in v)
    ax.plot([int(b) for b in first], [first[b]["bound_tokens_per_s"] for b in first], "k--", label="bandwidth bound")
    ax.set_xlabel("batch")
    ax.set_ylabel("decode tokens/s")
    ax.set_title(f"Decode, {device_name}")
    ax.legend(fontsize=7)
    return fig


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results["plots"] = [p.name for p in plots(results, out)]
    write_json(out / "results.json", results)
    (out / "results.md").write_text(markdown(results))


# ---------------------------------------------------------------------------------------------------------------
# The README's figures: one generated block (README_BEGIN..README_END), rewritten by `python -m bench --readme`
# from results.json and compared with it by tests/model_build/test_bench_main.py, as the engine tables are.

README_BEGIN = "<!-- bench-figures: generated by `python -m bench --readme` from bench/results/results.json -->"
README_END = "<!-- /bench-figures -->"


def _med(x: Any) -> str:
    return fmt(x.get("median")) if isinstance(x, dict) else "-"


def _headline(name: str, sec: dict[str, Any]) -> str:
    """The section's figure that answers its question, or what stopped it."""
    if "error" in sec:
        return f"**failed**: {sec['error'][:120]}"
    try:
        if name == "coldstart":
            r, ratio = sec["ready_s"], sec["ratios"]["c_over_d_cold"]
            return (
                f"first token, ours {_med(r['c_cold'])} s cold / {_med(r['c_warm'])} s warm; reading the bytes "
                f"{_med(r['d_cold'])} / {_med(r['d_warm'])} s; ours/read {_med(ratio)}x cold (goal 1.5x)"
            )
        if name == "s3coldstart":
            s, ratio = sec["seconds"], sec["ratios"]["old_over_ours"]
            return (
                f"S3 to first token, ours {_med(s['ours'])} s, old recipe {_med(s['old'])} s, raw "
                f"{_med(s['raw'])} s; old/ours {_med(ratio)}x"
            )
        if name == "s3stream":
            s, ratio = sec["seconds"], sec["ratios"]["stream_over_download_load"]
            return (
                f"streamed {_med(s['stream'])} s, download then load {_med(s['download_load'])} s: "
                f"{_med(ratio)}x (moto copies the object per ranged GET)"
            )
        if name == "publish":
            s, ratio = sec["seconds"], sec["ratios"]["prefix_c8_over_plain_upload_c8"]
            return (
                f"publish {_med(s['prefix_c8'])} s, plain upload {_med(s['plain_upload_c8'])} s: {_med(ratio)}x "
                "(goal 1.1x)"
            )
        if name == "serving":
            hf = sec["gpt2-124m"]["servers"]["hf-fastload"]["cells"]["1"]
            return f"hf-fastload, GPT-2 124M shape, c=1: {_med(hf['tokens_per_s'])} tok/s"
        if name == "devloop":
            s = sec["synth_all_examples"]
            return (
                f"synth of all {s['cases']} example/environment pairs: {_med(s['first_pass_s'])} s first, "
                f"{_med(s['later_pass_s'])} s after"
            )
        if name == "loadtest":
            parts = []
            fd = sec.get("front_doors") or {}
            if "invoke_function_added_ms" in fd:
                parts.append(
                    f"front doors add {fmt(fd['invoke_function_added_ms']['p50_difference'])} ms (invoke) / "
                    f"{fmt(fd['stream_function_added_ms']['p50_difference'])} ms (stream) p50"
                )
            ls = sec.get("local_server") or {}
            for key, label in (("ours_response_stream", "response stream"), ("ours_openai_route", "OpenAI route")):
                res = ls.get(key) or {}
                if "error" in res:
                    parts.append(f"local {label} **failed**")
                elif res.get("levels"):
                    lv = res["levels"][0]
                    parts.append(f"local {label} c=1 TTFT p50 {fmt(lv['ttft_ms'].get('p50'))} ms")
            failed = [k for k, v in sec.items() if isinstance(v, dict) and "error" in v]
            return "; ".join(parts + [f"**failed**: {', '.join(failed)}"] if failed else parts) or "-"
        if name == "gpu":
            return str(sec.get("skipped") or "see results.md")[:120]
        if name == "front_door":
            return _front_door_summary(sec)
    except (KeyError, TypeError, IndexError):
        pass
    return "see results.md"


def _front_door_summary(sec: dict[str, Any]) -> str:
    """The front door's c=32 throughput / the engine's (InvokeEndpoint), and its CPU per request against the
    engine's, per engine measured; a skipped or failed engine says so."""
    if "error" in sec:
        return "**failed**"
    parts = []
    for name, record in [("fast engine", sec), *(sec.get("real_engines") or {}).items()]:
        if "error" in record:
            parts.append(f"{name} **failed**")
        elif "skipped" in record:
            parts.append(f"{name} skipped")
        else:
            invoke = record["doors"]["invoke"]
            cpu = invoke["c32_cpu_ms_per_request"]
            parts.append(
                f"{name} c=32 {fmt(invoke['c32_ratio']['front door'])}x, CPU {fmt(cpu['front door'])} / "
                f"{fmt(cpu['engine'])} ms"
            )
    return "front door / engine (invoke): " + "; ".join(parts)


def readme_block(results: dict[str, Any]) -> str:
    """The README's bench figures: the machine, then per section its headline, when it was measured, the load
    average after it and its time; the total is the sum of the times shown."""
    m = results["machine"]
    kept = results.get("kept_from_earlier_run") or {}
    load = results.get("loadavg_after_section") or {}
    seconds = results.get("section_seconds") or {}
    rows = []
    kept_parts = results.get("kept_from_earlier_run_parts") or {}
    for name, sec in results["sections"].items():
        date = str(kept.get(name) or m.get("date") or "")[:10]
        if kept_parts.get(name):  # some sub-measurements re-run: each date says which
            run = ", ".join((results.get("parts_run") or {}).get(name, []))
            earlier = sorted({str(v)[:10] for v in kept_parts[name].values()})
            date = f"{date} ({run}); {', '.join(earlier)} (the others)"
        after = load.get(name)
        rows.append(
            [
                name,
                _headline(name, sec),
                date,
                fmt(after[0]) if after else "not recorded",
                f"{seconds[name]:.0f} s" if name in seconds else "-",
            ]
        )
    total = sum(seconds.values())
    lines = [
        README_BEGIN,
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM, torch {m.get('torch')}, "
        f"CUDA {m.get('cuda')}. Load average above {m.get('cores')} means other work shared the CPU and the "
        f"times are inflated. Sections' times sum to {total:.0f} s ({total / 60:.0f} min).",
    ]
    if results.get("note"):
        lines.append(f"Note: {results['note']}")
    lines += ["", table(["section", "figure (median of the runs)", "measured", "load after", "time"], rows), README_END]
    return "\n".join(lines)


def replace_readme_block(readme: str, results: dict[str, Any]) -> str:
    start, end = readme.find(README_BEGIN), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {README_BEGIN!r} ... {README_END!r} block")
    return readme[:start] + readme_block(results) + readme[end + len(README_END) :]
