"""`python -m bench` (what `make bench` runs): every benchmark once, results in bench/results/.

    python -m bench [--reps 5] [--gptj] [--demo] [--make-test] [--only SECTION[:PART],...] [--front-door-before DIR]

SECTION is one of coldstart, s3coldstart, s3stream, publish, serving, devloop, gpu, loadtest, front_door; loadtest:PART runs
one of its sub-measurements (cross_check, ceiling, front_doors, local_server) and keeps the others' figures from
the previous results.json. Each section prints its number, the time it took last run and the elapsed time; a
failed section or sub-measurement is recorded beside the others and makes the run exit 1, naming it.
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
SECTIONS = ("coldstart", "s3coldstart", "s3stream", "publish", "serving", "devloop", "gpu", "loadtest", "front_door")


STARTED = time.monotonic()
PARTS = {"loadtest": ("cross_check", "ceiling", "front_doors", "local_server")}


def log(msg: str) -> None:
    """Every line of the run, prefixed with the time since it started: a user never waits in silence."""
    elapsed = int(time.monotonic() - STARTED)
    print(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] {msg}", flush=True)


def failed_measurements(sections: dict, names: list[str]) -> list[str]:
    """'section.sub.part: error' for every {"error": ...} record under the named sections (a section that raised,
    or a sub-measurement that failed while the others were measured)."""
    found: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("error"), str):
                found.append(f"{path}: {node['error'][:300]}")
            for key, value in node.items():
                walk(value, f"{path}.{key}")

    for name in names:
        walk(sections.get(name), name)
    return found


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
    earlier_seconds = earlier.get("section_seconds", {})
    part_marks = earlier.get("kept_from_earlier_run_parts") or {}
    for name, parts in (results.get("parts_run") or {}).items():
        # a run of some sub-measurements: the section's other ones, and its time, are the previous run's
        before = earlier.get("sections", {}).get(name) or {}
        others = {k: v for k, v in before.items() if k not in parts}
        results["sections"][name] = {**others, **results["sections"][name]}
        section_date = marks.get(name, date)
        results.setdefault("kept_from_earlier_run_parts", {})[name] = {
            k: (part_marks.get(name) or {}).get(k, section_date) for k in others
        }
        if name in results["section_seconds"]:
            results.setdefault("part_seconds", {})[f"{name}:{'+'.join(parts)}"] = results["section_seconds"][name]
        if name in earlier_seconds:
            results["section_seconds"][name] = earlier_seconds[name]
    if kept:
        earlier_load = earlier.get("loadavg_after_section") or {}
        results["loadavg_after_section"] = {
            **{k: earlier_load[k] for k in kept if k in earlier_load},
            **(results.get("loadavg_after_section") or {}),
        }
        results["kept_from_earlier_run"] = {k: marks.get(k, date) for k in kept}
        # a kept section measured part by part keeps saying which part is of which run
        for key in ("kept_from_earlier_run_parts", "parts_run"):
            carried = {k: v for k, v in (earlier.get(key) or {}).items() if k in kept}
            if carried:
                results[key] = {**carried, **(results.get(key) or {})}
        carried_seconds = {k: v for k, v in (earlier.get("part_seconds") or {}).items() if k.split(":", 1)[0] in kept}
        if carried_seconds:
            results["part_seconds"] = {**carried_seconds, **(results.get("part_seconds") or {})}
        results["sections"] = {**kept, **results["sections"]}
        results["section_seconds"] = {
            **{k: earlier_seconds[k] for k in kept if k in earlier_seconds},
            **results["section_seconds"],
        }
    # results.md's total is the sum of the sections it shows (each measured in the run its date names)
    results["total_seconds"] = sum(results["section_seconds"].values())


class Terminated(BaseException):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that every section's `finally` (stopping its servers,
    removing its scratch directory) runs on the way out."""


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return _main(argv)
    except (KeyboardInterrupt, Terminated) as e:
        name = "SIGINT" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
        print(f"interrupted ({name}): servers stopped, scratch removed; checkpoints kept in {SCRATCH}", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    only = list(dict.fromkeys(c.split(":", 1)[0] for c in chosen))
    unknown = set(only) - set(SECTIONS)
    if unknown:
        p.error(f"--only: unknown section(s) {sorted(unknown)}; allowed: {', '.join(SECTIONS)}")
    parts: dict[str, list[str]] = {}
    for c in chosen:
        if ":" in c:
            name, part = c.split(":", 1)
            if part not in PARTS.get(name, ()):
                allowed = ", ".join(f"{n}:{x}" for n, xs in PARTS.items() for x in xs)
                p.error(f"--only: unknown sub-measurement {c!r}; allowed: {allowed}")
            parts.setdefault(name, []).append(part)
    if any(c == name for c in chosen for name in parts):
        p.error("--only: name a section or some of its sub-measurements, not both")
    args.parts = parts

    if args.report_only or args.readme:
        import json

        from bench import report

        recorded = json.loads((args.results / "results.json").read_text())
        if args.report_only:
            report.write(recorded, args.results)
        if args.readme:
            readme = ROOT.parent / "README.md"
            readme.write_text(report.replace_readme_block(readme.read_text(), recorded))
            log(f"rewrote the bench figures in {readme} from {args.results / 'results.json'}")
        return 0
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    from bench import report

    raw = args.raw.resolve()
    raw.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": report.machine(), "reps": args.reps, "sections": {}}
    if parts:
        results["parts_run"] = parts
    if args.note:
        results["note"] = args.note
    timings: dict[str, float] = {}
    last = _last_section_seconds(args.results / "results.json")
    planned = [n for n in SECTIONS if n in only] + (["coldstart_gptj"] if args.gptj and "coldstart" in only else [])
    expected = sum(last.get(n, 0) for n in planned)
    log(
        f"sections: {', '.join(planned)}; the last run's times for them sum to {expected / 60:.0f} min "
        f"({args.results / 'results.json'}; more under load)"
    )

    def section(name: str, fn) -> None:
        index = planned.index(name) + 1 if name in planned else len(timings) + 1
        took_before = f"; last run {last[name]:.0f} s" if name in last else ""
        log(f"== {name} ({index}/{len(planned)}{took_before})")
        t = time.perf_counter()
        try:
            results["sections"][name] = fn()
        except Exception as err:  # recorded; the other sections still run, and the run exits 1 naming it
            results["sections"][name] = {"error": f"{type(err).__name__}: {err}"}
            log(f"   {name}: FAILED {type(err).__name__}: {err}")
        timings[name] = time.perf_counter() - t
        results.setdefault("loadavg_after_section", {})[name] = [round(x, 2) for x in os.getloadavg()]
        log(f"   {name} took {timings[name]:.0f} s; load average {os.getloadavg()[0]:.1f}")
        from bench.stats import write_json

        write_json(raw / "partial-results.json", results)  # a later section failing keeps this one's numbers

    _artifact_sections(only, args, raw, section)
    _serving_sections(only, args, raw, section)
    results["section_seconds"] = timings
    results["run_seconds"] = time.monotonic() - STARTED
    keep_earlier_sections(results, args.results / "results.json")
    results["total_seconds"] = sum(results["section_seconds"].values())
    report.write(results, args.results)
    log(f"this run {results['run_seconds']:.0f} s; wrote {args.results}/results.json, results.md and plots")
    failed = failed_measurements(results["sections"], list(timings))
    for line in failed:
        log(f"FAILED {line}")
    return 1 if failed else 0


def _last_section_seconds(path: Path) -> dict[str, float]:
    import json

    try:
        return dict(json.loads(path.read_text()).get("section_seconds") or {})
    except (OSError, ValueError):
        return {}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5, help="runs per measurement (>= 5 for the report)")
    p.add_argument(
        "--gptj", action="store_true", help="also cold-start the GPT-J-6B shape (12 GB fp16; needs ~24 GiB RAM)"
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="also time one `make demo` (~50 s more)",
    )
    p.add_argument("--make-test", action="store_true", help="also time `make test` (minutes)")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    p.add_argument("--note", default="", help="a line for results.md about this run (e.g. the machine was shared)")
    p.add_argument("--readme", action="store_true", help="rewrite README.md's bench figures from results.json")
    p.add_argument("--report-only", action="store_true", help="re-render results.md and plots from results.json")
    p.add_argument("--raw", type=Path, default=SCRATCH, help=f"scratch dir (default {SCRATCH}; git-ignored)")
    p.add_argument("--results", type=Path, default=ROOT / "results")
    p.add_argument(
        "--front-door-before",
        type=Path,
        help="front_door: also measure the local_runtime/ in this folder (e.g. an earlier commit's), interleaved",
    )
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
        section("loadtest", lambda: loadtest.bench(raw, args.reps, log, parts=args.parts.get("loadtest")))

    if "front_door" in only:
        from bench import front_door

        log(front_door.__doc__)
        before = args.front_door_before.resolve() if args.front_door_before else None
        section("front_door", lambda: front_door.bench(raw, log, before=before))


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
