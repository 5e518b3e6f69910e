"""Benchmark 4: the developer loop. Synth of every example config (in one fresh process: the first pass pays
for importing aws_cdk and starting the jsii Node runtime; later passes in the same process do not), one
`make demo` (python -m local_emulator.demo), and optionally `make test`.

    python -m bench.devloop synth PASSES    (child process; prints one JSON line)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import ratio, summarize

REPO = Path(__file__).resolve().parents[1]


def _cases() -> list[tuple[Path, str | None]]:
    import yaml

    cases = []
    for path in sorted((REPO / "config" / "examples").glob("*.yaml")):
        envs = list(yaml.safe_load(path.read_text()).get("environments") or {}) or [None]
        cases += [(path, env) for env in envs]
    return cases


def synth_passes(passes: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import aws_cdk as cdk

    from deployment import load_config
    from stacks import add_stacks

    import_s = time.perf_counter() - t0
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    cases = _cases()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(passes):
            t = time.perf_counter()
            for i, (config, env) in enumerate(cases):
                outdir = Path(tmp) / f"{p}-{i}"
                app = cdk.App(context=context, outdir=str(outdir))
                add_stacks(app, load_config(config, env, build_root=outdir / "no-build"), allow_unbuilt=True)
                app.synth()
            times.append(time.perf_counter() - t)
    return {"import_s": import_s, "pass_s": times, "cases": len(cases)}


def bench(raw: Path, reps: int, log, *, demo: bool = True, make_test: bool = False) -> dict[str, Any]:
    from local_emulator.moto_server import free_port

    out: dict[str, Any] = {}
    res = subprocess.run(
        [sys.executable, "-m", "bench.devloop", "synth", str(reps + 1)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(res.stdout.strip().splitlines()[-1])
    first = [data["import_s"] + data["pass_s"][0]]
    later = data["pass_s"][1:]
    out["synth_all_examples"] = {
        "cases": data["cases"],
        "import_aws_cdk_s": data["import_s"],
        "first_pass_s": summarize(first),
        "later_pass_s": summarize(later),
        "first_over_later": ratio(summarize(first), summarize(later)),
        "per_case_later_s": summarize([x / data["cases"] for x in later]),
        "method": f"one fresh process: import aws_cdk + synth every (example, environment) = pass 1; then {reps} "
        "more passes in the same process (cdk-nag validation included)",
    }
    log(
        f"  synth {data['cases']} example configs: first pass (with import) {first[0]:.1f} s, later passes "
        f"{summarize(later)['median']:.1f} s"
    )
    if demo:
        t = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "local_emulator.demo", "--port", str(free_port())],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        secs = time.perf_counter() - t
        (raw / "demo.log").write_text(r.stdout + r.stderr)
        out["demo"] = {
            "seconds": secs,
            "returncode": r.returncode,
            "n": 1,
            "method": "one `python -m local_emulator.demo --port <free>` (what `make demo` runs), n=1",
        }
        log(f"  make demo (python -m local_emulator.demo): {secs:.1f} s, exit {r.returncode}")
    if make_test:
        t = time.perf_counter()
        r = subprocess.run(["make", "test"], cwd=REPO, capture_output=True, text=True)
        secs = time.perf_counter() - t
        (raw / "make-test.log").write_text(r.stdout + r.stderr)
        out["make_test"] = {"seconds": secs, "returncode": r.returncode, "n": 1}
        log(f"  make test: {secs:.1f} s, exit {r.returncode}")
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "synth":
        print(json.dumps(synth_passes(int(sys.argv[2]))))
    else:
        raise SystemExit(__doc__)
