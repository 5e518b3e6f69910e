"""`python -m bench` (what `make bench` runs): every benchmark once, results in bench/results/.

    python -m bench [--reps 5] [--gptj] [--demo] [--make-test] [--only coldstart,s3coldstart,s3stream,publish,serving,devloop,gpu,loadtest]

The gpu section runs where torch.cuda.is_available() (elsewhere it records that it skipped).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent
# Scratch (random-weight checkpoints, built artifacts, emulator logs) under build/, which every lint and type check
# skips (pyproject.toml): copied artifacts hold copies of our modules (code/chat_contract.py).
SCRATCH = ROOT.parent / "build" / "bench"
SECTIONS = ("coldstart", "s3coldstart", "s3stream", "publish", "serving", "devloop", "gpu", "loadtest")


def log(msg: str) -> None:
    print(msg, flush=True)


def keep_earlier_sections(results: dict, path: Path) -> None:
    """A run of some sections (--only) keeps the other sections of the previous results.json, each marked with
    the date of the run that measured it (results.md says which)."""
    import json

    if not path.is_file():
        return
    earlier = json.loads(path.read_text())
    date = earlier.get("machine", {}).get("date")
    marks = earlier.get("kept_from_earlier_run") or {}
    kept = {k: v for k, v in earlier.get("sections", {}).items() if k not in results["sections"]}
    if kept:
        results["kept_from_earlier_run"] = {k: marks.get(k, date) for k in kept}
        results["sections"] = {**kept, **results["sections"]}
        earlier_seconds = earlier.get("section_seconds", {})
        results["section_seconds"] = {
            **{k: earlier_seconds[k] for k in kept if k in earlier_seconds},
            **results["section_seconds"],
        }


class Terminated(BaseException):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that every section's `finally` (stopping its servers,
    removing its scratch directory) runs on the way out."""


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return _main(argv)
    except (KeyboardInterrupt, Terminated) as e:
        name = "SIGINT" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
        print(f"interrupted ({name}): servers stopped, scratch removed; checkpoints kept in {SCRATCH}", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143


def _main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        p.error(f"--only: unknown section(s) {sorted(unknown)}; allowed: {', '.join(SECTIONS)}")

    if args.report_only:
        import json

        from bench import report

        report.write(json.loads((args.results / "results.json").read_text()), args.results)
        return 0
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    from bench import report

    raw = args.raw.resolve()
    raw.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {"machine": report.machine(), "reps": args.reps, "sections": {}}
    timings: dict[str, float] = {}

    def section(name: str, fn) -> None:
        log(f"== {name}")
        t = time.perf_counter()
        results["sections"][name] = fn()
        timings[name] = time.perf_counter() - t
        results.setdefault("loadavg_after_section", {})[name] = [round(x, 2) for x in os.getloadavg()]
        log(f"   ({timings[name]:.0f} s; load average {os.getloadavg()[0]:.1f})")
        from bench.stats import write_json

        write_json(raw / "partial-results.json", results)  # a later section failing keeps this one's numbers

    _artifact_sections(only, args, raw, section)
    _serving_sections(only, args, raw, section)
    results["section_seconds"] = timings
    results["total_seconds"] = time.perf_counter() - started
    keep_earlier_sections(results, args.results / "results.json")
    report.write(results, args.results)
    log(f"total {results['total_seconds']:.0f} s; wrote {args.results}/results.json, results.md and plots")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5, help="runs per measurement (>= 5 for the report)")
    p.add_argument(
        "--gptj", action="store_true", help="also cold-start the GPT-J-6B shape (12 GB fp16; needs ~24 GiB RAM)"
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="also time one `make demo` (~50 s; the default run stays under 15 min without it)",
    )
    p.add_argument("--make-test", action="store_true", help="also time `make test` (minutes)")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    p.add_argument("--report-only", action="store_true", help="re-render results.md and plots from results.json")
    p.add_argument("--raw", type=Path, default=SCRATCH, help=f"scratch dir (default {SCRATCH}; git-ignored)")
    p.add_argument("--results", type=Path, default=ROOT / "results")
    return p


def _artifact_sections(only: list[str], args: argparse.Namespace, raw: Path, section) -> None:
    """The sections that time artifacts: cold start (local and from S3), S3 streaming, publishing."""
    if "coldstart" in only:
        from bench import coldstart

        log(coldstart.__doc__)
        section("coldstart", lambda: coldstart.bench(raw, "gpt2-large", args.reps, log))
        if args.gptj:
            section("coldstart_gptj", lambda: coldstart.bench(raw, "gptj-6b", args.reps, log))
    if "s3coldstart" in only:
        from bench import coldstart, s3coldstart

        log(s3coldstart.__doc__)

        def run_s3coldstart() -> dict:
            paths = coldstart.prepare(raw, "gpt2-large", log)
            return s3coldstart.bench(raw, paths["c"], paths["b"], args.reps, log)

        section("s3coldstart", run_s3coldstart)
    if "s3stream" in only:
        from bench import coldstart, s3stream

        log(s3stream.__doc__)
        section("s3stream", lambda: s3stream.bench(raw, coldstart.prepare(raw, "gpt2-large", log)["c"], args.reps, log))
    if "publish" in only:
        from bench import publish

        log(publish.__doc__)
        section("publish", lambda: _run_publish(raw, args.reps))


def _run_publish(raw: Path, reps: int) -> dict:
    from bench import coldstart, models, publish

    large = coldstart.prepare(raw, "gpt2-large", log)["c"]
    src124 = models.make_checkpoint("gpt2-124m", raw / "src-gpt2-124m").resolve()
    text = "endpoints:\n" + models.endpoint_yaml("pub-gpt2-124m", src124, dtype="fp16")
    small, _ = models.build(
        text, raw / "config-pub-gpt2-124m.yaml", "pub-gpt2-124m", (raw / "art-pub-gpt2-124m").resolve()
    )
    return publish.bench(raw, large, small, reps, log)


def _serving_sections(only: list[str], args: argparse.Namespace, raw: Path, section) -> None:
    """The sections that time serving and the developer's loop: serving, devloop, gpu, loadtest."""
    if "serving" in only:
        from bench import serving

        log(serving.__doc__)
        section("serving", lambda: _run_serving(raw, args.reps))
    if "devloop" in only:
        from bench import devloop

        log(devloop.__doc__)
        section("devloop", lambda: devloop.bench(raw, args.reps, log, demo=args.demo, make_test=args.make_test))

    if "gpu" in only:
        from bench import gpu

        log(gpu.__doc__)
        section("gpu", lambda: gpu.bench(raw, args.reps, log))

    if "loadtest" in only:
        from bench import loadtest

        log(loadtest.__doc__)
        section("loadtest", lambda: loadtest.bench(raw, args.reps, log))


def _run_serving(raw: Path, reps: int) -> dict:
    from bench import models, serving
    from model_build.tiny_models import make_tiny_model

    tiny = raw / "src-tiny-gpt2"
    if not (tiny / "config.json").is_file():
        make_tiny_model("gpt2", tiny)
    src124 = models.make_checkpoint("gpt2-124m", raw / "src-gpt2-124m").resolve()
    return {
        "tiny-gpt2": serving.bench(raw, "tiny-gpt2", tiny.resolve(), log, rounds=reps, per_worker=2),
        "gpt2-124m": serving.bench(raw, "gpt2-124m", src124, log, rounds=reps, per_worker=1, cell_cap_s=12),
    }


if __name__ == "__main__":
    raise SystemExit(main())
