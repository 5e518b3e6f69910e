"""Statistics and report writing: medians, spreads, ratios, markdown tables, results.json. No timing here."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The repository's one percentile (statistics' inclusive method = numpy's default), re-exported for bench's callers.
from load_testing.report import percentile


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """median, min, max, q1, q3 (IQR), n and the raw samples of one measurement."""
    xs = [float(v) for v in values]
    if not xs:
        return {
            "n": 0,
            "median": math.nan,
            "min": math.nan,
            "max": math.nan,
            "q1": math.nan,
            "q3": math.nan,
            "samples": [],
        }
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "q1": percentile(xs, 25),
        "q3": percentile(xs, 75),
        "samples": [round(x, 6) for x in xs],
    }


def ratio(numerator: dict[str, Any] | Sequence[float], denominator: dict[str, Any] | Sequence[float]) -> dict[str, Any]:
    """Ratio of medians, with a spread: the range of per-run ratios when both have the same number of
    runs (runs are interleaved, so run i of each variant saw the same machine state), else min/max bounds."""
    a = numerator if isinstance(numerator, dict) else summarize(numerator)
    b = denominator if isinstance(denominator, dict) else summarize(denominator)
    if not a["n"] or not b["n"] or b["median"] == 0:
        return {"median": math.nan, "min": math.nan, "max": math.nan}
    if a["n"] == b["n"] and all(x > 0 for x in b["samples"]):
        per_run = [x / y for x, y in zip(a["samples"], b["samples"])]
        return {
            "median": a["median"] / b["median"],
            "min": min(per_run),
            "max": max(per_run),
            "per_run_median": statistics.median(per_run),
        }
    return {
        "median": a["median"] / b["median"],
        "min": a["min"] / b["max"] if b["max"] else math.nan,
        "max": a["max"] / b["min"] if b["min"] else math.nan,
    }


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isnan(x):
            return "-"
        if x == 0:
            return "0"
        if abs(x) >= 100:
            return f"{x:.0f}"
        return f"{x:.{digits}g}"
    return str(x)


def spread(s: dict[str, Any]) -> str:
    """'median [min-max]' of a summary."""
    if not s.get("n"):
        return "-"
    return f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        out.append("| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in row) + " |")
    return "\n".join(out)


def latency_summary(
    latencies_s: Sequence[float], errors: int, wall_s: float, tokens_per_request: int
) -> dict[str, Any]:
    """Serving numbers of one load window: p50/p90/p99 latency (s), req/s, tokens/s, errors."""
    ok = len(latencies_s)
    return {
        "requests": ok + errors,
        "errors": errors,
        "p50_s": percentile(latencies_s, 50),
        "p90_s": percentile(latencies_s, 90),
        "p99_s": percentile(latencies_s, 99),
        "req_per_s": ok / wall_s if wall_s > 0 else math.nan,
        "tokens_per_s": ok * tokens_per_request / wall_s if wall_s > 0 else math.nan,
        "wall_s": wall_s,
    }


def _clean(obj: Any) -> Any:
    """JSON without NaN (null instead), so results.json stays strict JSON."""
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(results), indent=1, sort_keys=False) + "\n")
