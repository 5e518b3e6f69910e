"""The load test's numbers: per-request records -> per-concurrency summaries, the SLO evaluation, and the result
written as JSON, Markdown and a latency-vs-throughput plot, kept per artifact content hash.

Definitions (what each number is; AIPerf 0.13.0's names in brackets, from its aiperf/metrics/types/*.py):
  ttft_ms    request sent -> first streamed event (SSE event, LMI line) carrying output text [time_to_first_token]
  itl_ms     gaps between consecutive events carrying output text, each stamped when its bytes arrived, pooled
             over requests                                                        [inter_chunk_latency]
  tpot_ms    per request (last text event - first text event) / (output tokens - 1) [inter_token_latency]
  e2e_ms     request sent -> reply complete (the stream closed)        [request_latency ends at the last text chunk]
  output_tokens_per_s            output tokens of successful requests / wall time of the level
                                 (first request sent -> last reply complete)  [output_token_throughput]
  output_tokens_per_s_per_request  per request: output tokens / e2e       [e2e_output_token_throughput]
  requests_per_s                 successful requests / wall time         [request_throughput]
  usd_per_million_output_tokens  hourly price x instances / 3600 / output_tokens_per_s x 1e6
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from endpoint_config.slo import Slo

PERCENTILES = (50, 90, 95, 99)


@dataclass
class RequestRecord:
    """One measured request. Times are time.perf_counter() seconds; chunk_times are the arrivals of the streamed
    events that carried output text (empty for a target that does not stream)."""

    start: float
    end: float
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    output_tokens_source: str | None = None  # server | tokenizer | stream-lines | approximation
    input_tokens: int | None = None
    error_kind: str | None = None
    error: str | None = None
    # what the output is counted from when the server did not say (load_testing.loadtest.count_output)
    output_text: str | None = None
    line_count: int = 0
    line_source: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in 0..100), interpolated linearly between the closest ranks: statistics' "inclusive"
    method, which is numpy.percentile's default (numpy is not in the pipeline's requirements.txt, statistics is stdlib).
    The repository's one percentile: bench/ imports it too. NaN for no values."""
    xs = sorted(values)
    if not xs:
        return math.nan
    # q/100 as a fraction i/n: the i-th of the n-quantiles' cut points (q=90 -> 9/10), ends outside them.
    share = Fraction(q).limit_denominator(10_000) / 100
    if share <= 0 or len(xs) == 1:
        return xs[0]
    if share >= 1:
        return xs[-1]
    return statistics.quantiles(xs, n=share.denominator, method="inclusive")[share.numerator - 1]


def stats(values: Iterable[float]) -> dict[str, Any]:
    xs = [float(v) for v in values]
    if not xs:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(xs), "mean": sum(xs) / len(xs), "min": min(xs), "max": max(xs)}
    out.update({f"p{q}": percentile(xs, q) for q in PERCENTILES})
    return out


def summarize_level(
    concurrency: int, records: list[RequestRecord], streaming: bool, usd_per_hour: float | None
) -> dict[str, Any]:
    """The numbers of one concurrency level (see the module docstring for each definition)."""
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    wall = (max(r.end for r in records) - min(r.start for r in records)) if records else 0.0
    tokens = sum(r.output_tokens or 0 for r in ok)
    ttft = [(r.chunk_times[0] - r.start) * 1000 for r in ok if r.chunk_times]
    gaps = [(b - a) * 1000 for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    tpot = [
        (r.chunk_times[-1] - r.chunk_times[0]) * 1000 / (r.output_tokens - 1)
        for r in ok
        if len(r.chunk_times) >= 2 and r.output_tokens is not None and r.output_tokens >= 2
    ]
    per_request = [r.output_tokens / (r.end - r.start) for r in ok if r.output_tokens and r.end > r.start]
    throughput = tokens / wall if wall > 0 else math.nan
    level: dict[str, Any] = {
        "concurrency": concurrency,
        "requests": len(records),
        "succeeded": len(ok),
        "errors": len(failed),
        "error_rate": len(failed) / len(records) if records else math.nan,
        "errors_by_kind": dict(Counter(r.error_kind for r in failed)),
        "error_examples": {
            kind: next(r.error for r in failed if r.error_kind == kind)
            for kind in sorted({r.error_kind for r in failed if r.error_kind is not None})
        },
        "wall_s": wall,
        "requests_per_s": len(ok) / wall if wall > 0 else math.nan,
        "output_tokens": tokens,
        "output_tokens_per_s": throughput,
        "output_tokens_per_s_per_request": stats(per_request),
        "output_tokens_per_request": stats(r.output_tokens for r in ok if r.output_tokens is not None),
        "input_tokens_per_request": stats(r.input_tokens for r in ok if r.input_tokens is not None),
        "output_tokens_source": sorted({r.output_tokens_source for r in ok if r.output_tokens_source}),
        "e2e_ms": stats((r.end - r.start) * 1000 for r in ok),
        "ttft_ms": stats(ttft) if streaming else {"n": 0, "not_measured": "the target does not stream"},
        "itl_ms": stats(gaps) if streaming else {"n": 0, "not_measured": "the target does not stream"},
        "tpot_ms": stats(tpot) if streaming else {"n": 0, "not_measured": "the target does not stream"},
    }
    level["usd_per_million_output_tokens"] = usd_per_million_tokens(usd_per_hour, throughput)
    return level


def usd_per_million_tokens(usd_per_hour: float | None, tokens_per_s: float) -> float | None:
    if usd_per_hour is None or not tokens_per_s or math.isnan(tokens_per_s):
        return None
    return usd_per_hour / 3600.0 / tokens_per_s * 1e6


# ---------------------------------------------------------------------------------------------------------------
# SLO


def parse_slo(value: Any, where: str = "slo") -> Slo:
    """A dict (from YAML/JSON), or another model with the same fields, -> Slo, the config's own `slo:` model
    (endpoint_config/slo.py: objectives, the gate's workload, the price); ValueError naming each bad key, its value
    and what is allowed."""
    if isinstance(value, BaseModel) and not isinstance(value, Slo):
        value = value.model_dump()
    try:
        return value if isinstance(value, Slo) else Slo.model_validate(value)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"]) or "(top level)"
            problems.append(f"{where}.{key}: {e['msg']} (got {e.get('input')!r})")
        raise ValueError("; ".join(problems)) from None


def evaluate_slo(result: dict[str, Any], slo: Slo | dict[str, Any]) -> list[str]:
    """Every missed objective, each naming the metric, the concurrency, the measured value and the limit; an
    objective that could not be measured is a miss too (a gate must not pass on what it did not see)."""
    slo = parse_slo(slo)
    levels = {lv["concurrency"]: lv for lv in result.get("levels", [])}
    late = result.get("deadline_passed")
    deadline = (
        [
            f"the load test did not finish within its deadline of {late:g} s (slo.deadline_s): requests unanswered by "
            "then count as errors, levels not reached are not measured"
        ]
        if late
        else []
    )
    if slo.concurrency is not None:
        if slo.concurrency not in levels:
            return deadline + [
                f"no measurement at concurrency {slo.concurrency} (the load test ran "
                f"{', '.join(map(str, sorted(levels))) or 'no level'})"
            ]
        judged = [levels[slo.concurrency]]
    else:
        judged = [levels[c] for c in sorted(levels)]
    if not judged:
        return deadline + ["the result has no concurrency level to judge"]
    misses: list[str] = list(deadline)

    def check(
        level: dict, name: str, value: float | None, limit: float, worse: str, unit: str, reason: str | None = None
    ) -> None:
        at = f"at concurrency {level['concurrency']}"
        if value is None or (isinstance(value, float) and math.isnan(value)):
            misses.append(f"{name} {at}: not measured ({reason or 'no successful request'}); limit {limit:g}{unit}")
        elif (value > limit) if worse == "above" else (value < limit):
            bound = "max" if worse == "above" else "min"
            misses.append(f"{name} {at}: {value:.4g}{unit}, {bound} {limit:g}{unit}")

    for level in judged:
        if slo.p95_ttft_ms is not None:
            ttft = level["ttft_ms"]
            check(level, "p95 TTFT", ttft.get("p95"), slo.p95_ttft_ms, "above", " ms", ttft.get("not_measured"))
        if slo.p95_itl_ms is not None:
            itl = level["itl_ms"]
            check(level, "p95 ITL", itl.get("p95"), slo.p95_itl_ms, "above", " ms", itl.get("not_measured"))
        if slo.p95_e2e_ms is not None:
            check(level, "p95 end-to-end latency", level["e2e_ms"].get("p95"), slo.p95_e2e_ms, "above", " ms")
        # Always judged: the default budget when max_error_rate is not given (endpoint_config/slo.py).
        default = " (default budget: slo.max_error_rate not given)" if slo.max_error_rate is None else ""
        check(level, f"error rate{default}", level["error_rate"], slo.error_budget, "above", "")
        if slo.max_usd_per_million_tokens is not None:
            check(
                level,
                "$ per million output tokens",
                level.get("usd_per_million_output_tokens"),
                slo.max_usd_per_million_tokens,
                "above",
                "",
                None if result.get("price", {}).get("usd_per_hour") is not None else "no instance price given",
            )
        if slo.min_output_tokens_per_s is not None:
            check(
                level,
                "aggregate output tokens/s",
                level["output_tokens_per_s"],
                slo.min_output_tokens_per_s,
                "below",
                "",
            )
    return misses


# ---------------------------------------------------------------------------------------------------------------
# Results: JSON (strict: NaN -> null), Markdown, plot; kept per artifact content hash


def clean_json(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"
    return str(x)


def markdown(result: dict[str, Any]) -> str:
    target, workload, price = result["target"], result["workload"], result.get("price") or {}
    lines = [
        f"# Load test: {target.get('description', target.get('kind'))}",
        "",
        f"{result.get('started_at', '')}; {workload.get('description', '')}.",
        f"Output tokens counted by: {', '.join(sorted({s for lv in result['levels'] for s in lv['output_tokens_source']})) or '-'}.",
        "Price: "
        + (
            f"${price['usd_per_hour']:g}/h ({price.get('source')})"
            if price.get("usd_per_hour") is not None
            else "none given, so no $ per million tokens"
        )
        + ".",
        "",
        "| concurrency | requests | errors | req/s | output tok/s | tok/s per request p50 | TTFT p50 / p90 / p99 ms "
        "| ITL p50 / p90 / p99 ms | TPOT p50 ms | e2e p50 / p90 / p99 ms | $ per M output tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def trio(s: dict) -> str:
        return " / ".join(_fmt(s.get(f"p{q}")) for q in (50, 90, 99)) if s.get("n") else "-"

    for lv in result["levels"]:
        errors = f"{lv['errors']}" + (
            f" ({', '.join(f'{k} {v}' for k, v in lv['errors_by_kind'].items())})" if lv["errors"] else ""
        )
        lines.append(
            f"| {lv['concurrency']} | {lv['requests']} | {errors} | {_fmt(lv['requests_per_s'])} | "
            f"{_fmt(lv['output_tokens_per_s'])} | {_fmt(lv['output_tokens_per_s_per_request'].get('p50'))} | "
            f"{trio(lv['ttft_ms'])} | {trio(lv['itl_ms'])} | {_fmt(lv['tpot_ms'].get('p50'))} | "
            f"{trio(lv['e2e_ms'])} | {_fmt(lv.get('usd_per_million_output_tokens'))} |"
        )
    examples = {k: v for lv in result["levels"] for k, v in lv.get("error_examples", {}).items()}
    if examples:
        lines += ["", "Errors (one example of each kind):"] + [f"- {k}: {v}" for k, v in sorted(examples.items())]
    if result.get("slo_misses") is not None:
        lines += ["", "SLO: " + ("met" if not result["slo_misses"] else "missed")]
        lines += [f"- {m}" for m in result["slo_misses"]]
    lines += ["", "Definitions: " + "; ".join(f"{k}: {v}" for k, v in result.get("definitions", {}).items())]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path:
    """Latency (TTFT and end-to-end, p50 and p99) against aggregate output tokens/s, one point per concurrency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [lv for lv in result["levels"] if lv["succeeded"]]
    xs = [lv["output_tokens_per_s"] for lv in levels]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (("e2e_ms", "end-to-end", "o-"), ("ttft_ms", "time to first token", "s--")):
        for q, alpha in (("p50", 1.0), ("p99", 0.5)):
            ys = [lv[key].get(q) for lv in levels]
            if any(y is not None for y in ys):
                ax.plot(xs, [math.nan if y is None else y for y in ys], style, alpha=alpha, label=f"{label} {q}")
    for x, lv in zip(xs, levels):
        ax.annotate(
            f"c={lv['concurrency']}",
            (x, lv["e2e_ms"].get("p50") or 0),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    ax.set_xlabel("aggregate output tokens/s")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Latency vs throughput: {result['target'].get('description', '')}"[:90], fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_outputs(result: dict[str, Any], out_dir: Path, stem: str = "loadtest") -> dict[str, Path]:
    """<stem>.json, <stem>.md and, where matplotlib is installed, <stem>.png in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{stem}.json", "markdown": out_dir / f"{stem}.md", "plot": out_dir / f"{stem}.png"}
    paths["json"].write_text(json.dumps(clean_json(result), indent=1) + "\n")
    paths["markdown"].write_text(markdown(clean_json(result)))
    try:
        plot(clean_json(result), paths["plot"])
    except ImportError:  # matplotlib is a development dependency; the deploy set (requirements.txt) has none
        del paths["plot"]
    return paths


_HASH = re.compile(r"^[0-9a-f]{8,128}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def save_result(result: dict[str, Any], root: Path, endpoint: str, artifact_hash: str) -> Path:
    """Keep a result beside the artifact it measured: <root>/<endpoint>/<artifact_hash>/<UTC time>.json, so a
    regression names the artifact (the change) that caused it. Returns the path written."""
    if not _NAME.match(endpoint):
        raise ValueError(f"endpoint name {endpoint!r} cannot name a results folder; allowed: letters, digits, . _ -")
    if not _HASH.match(artifact_hash):
        raise ValueError(f"artifact hash {artifact_hash!r} is not a lowercase hex content hash")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = Path(root) / endpoint / artifact_hash / f"{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean_json({**result, "artifact_hash": artifact_hash}), indent=1) + "\n")
    return path


def load_results(root: Path, endpoint: str) -> list[tuple[str, Path, dict[str, Any]]]:
    """Every kept result of an endpoint, oldest first: (artifact hash, path, result)."""
    folder = Path(root) / endpoint
    found = [(p.parent.name, p) for p in folder.glob("*/*.json")] if folder.is_dir() else []
    return [(h, p, json.loads(p.read_text())) for h, p in sorted(found, key=lambda hp: hp[1].name)]


__all__ = [
    "RequestRecord",
    "Slo",
    "evaluate_slo",
    "load_results",
    "markdown",
    "parse_slo",
    "percentile",
    "plot",
    "save_result",
    "stats",
    "summarize_level",
    "usd_per_million_tokens",
    "write_outputs",
]
