"""`python -m bench` itself: an interrupt (SIGTERM, SIGINT) runs each section's cleanup, and the default scratch lies
under build/, which no lint walks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A section as bench's sections are written (s3coldstart, s3stream, publish): a scratch directory and a real moto
# server, both released in `finally`. It runs under bench's own main(), which owns the signal handling under test.
CHILD = """
import shutil, sys, tempfile, time
from pathlib import Path
import bench.__main__ as main_module
from local_emulator import moto_server

def section(argv):
    raw = Path(sys.argv[1])
    scratch = Path(tempfile.mkdtemp(dir=raw, prefix="s3coldstart-"))
    emu = moto_server.start(raw / "moto-logs")
    try:
        print("pid", emu.process.pid, flush=True)
        time.sleep(120)
    finally:
        emu.stop()
        shutil.rmtree(scratch)
    return 0

main_module._main = section
sys.exit(main_module.main([]))
"""


def test_default_scratch_is_under_build() -> None:
    from bench.__main__ import SCRATCH, _parser

    assert SCRATCH == REPO / "build" / "bench" and _parser().parse_args([]).raw == SCRATCH


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_bench_stops_its_servers_and_removes_its_scratch(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("pid "), line + child.stderr.read() if child.stderr else line
    moto_pid = int(line.split()[1])
    assert list(tmp_path.glob("s3coldstart-*"))
    child.send_signal(sig)
    _, err = child.communicate(timeout=30)
    assert child.returncode == code, err
    assert f"interrupted ({sig.name})" in err and "scratch removed" in err
    assert not list(tmp_path.glob("s3coldstart-*"))
    deadline = time.monotonic() + 5
    while _alive(moto_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(moto_pid), "the section's moto server outlived the interrupt"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][0] != "Z"


# ---------------------------------------------------------------------------------------------- its own time


def _committed() -> dict:
    import json

    return json.loads((REPO / "bench" / "results" / "results.json").read_text())


def test_the_readme_figures_are_the_committed_results() -> None:
    """README.md's bench block is what `python -m bench --readme` writes from results.json (as engine-tables-check
    compares the engine tables with their wheels): a new results.json without a rewritten README fails here."""
    from bench import report

    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(report.README_BEGIN) : readme.index(report.README_END) + len(report.README_END)]
    assert block == report.readme_block(_committed()), "stale: run `python -m bench --readme`"


def test_the_advertised_duration_is_the_sum_of_the_sections() -> None:
    import re

    seconds = sum(_committed()["section_seconds"].values())
    help_line = next(line for line in (REPO / "Makefile").read_text().splitlines() if "make bench  -" in line)
    minutes = int(re.search(r"\(~(\d+) min", help_line).group(1))
    assert minutes == round(seconds / 60), (help_line, seconds)


def test_results_md_total_is_the_sum_of_the_sections_it_shows() -> None:
    from bench import report

    results = _committed()
    total = sum(results["section_seconds"].values())
    assert set(results["section_seconds"]) == set(results["sections"])
    assert results["total_seconds"] == pytest.approx(total)
    line = f"Total runtime {total:.0f} s, the sum of the sections shown"
    assert line in report.markdown(results) and line in (REPO / "bench" / "results" / "results.md").read_text()


def test_failed_measurements_names_each_error_record() -> None:
    from bench.__main__ import failed_measurements

    sections = {
        "loadtest": {
            "front_doors": {"ms": {}},
            "local_server": {"ours_response_stream": {"levels": []}, "ours_openai_route": {"error": "HTTP 400"}},
        },
        "serving": {"error": "RuntimeError: boom"},
        "devloop": {"errors": 0},
    }
    assert failed_measurements(sections, ["loadtest", "serving", "devloop"]) == [
        "loadtest.local_server.ours_openai_route: HTTP 400",
        "serving: RuntimeError: boom",
    ]


def test_a_failed_sub_measurement_is_recorded_beside_the_kept_ones_and_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--only loadtest:local_server` with that part failing: exit 1 naming it, the section's other parts kept
    from the previous results.json with their date, and the total still the sum of the sections."""
    import json
    import shutil

    import bench.__main__ as main_module
    from bench import loadtest

    results_dir = tmp_path / "results"
    results_dir.mkdir()
    shutil.copy(REPO / "bench" / "results" / "results.json", results_dir / "results.json")
    before = _committed()

    def broken(raw: Path, log) -> dict:
        raise RuntimeError("the local server did not start")

    monkeypatch.setattr(loadtest, "local_server", broken)
    code = main_module.main(
        ["--only", "loadtest:local_server", "--raw", str(tmp_path / "raw"), "--results", str(results_dir)]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED loadtest.local_server: RuntimeError: the local server did not start" in out
    assert "== loadtest (1/1; last run " in out and out.lstrip().startswith("[ 0:")
    after = json.loads((results_dir / "results.json").read_text())
    lt = after["sections"]["loadtest"]
    assert lt["local_server"] == {"error": "RuntimeError: the local server did not start"}
    for kept in ("cross_check", "ceiling", "front_doors"):
        assert lt[kept] == before["sections"]["loadtest"][kept]
    assert set(after["kept_from_earlier_run_parts"]["loadtest"]) == {"cross_check", "ceiling", "front_doors"}
    assert after["section_seconds"] == before["section_seconds"]  # a part's time is not the section's
    assert after["total_seconds"] == pytest.approx(sum(before["section_seconds"].values()))
    assert "local_server failed: RuntimeError" in (results_dir / "results.md").read_text()


def test_a_section_kept_whole_keeps_the_dates_of_its_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--only front_door` after a `--only loadtest:local_server` run: loadtest is kept whole, and results.md still
    says which of its parts was measured when."""
    import json
    import shutil

    import bench.__main__ as main_module
    from bench import front_door

    results_dir = tmp_path / "results"
    results_dir.mkdir()
    earlier = _committed()
    earlier["parts_run"] = {"loadtest": ["local_server"]}
    earlier["kept_from_earlier_run_parts"] = {"loadtest": {"cross_check": "2026-11-25", "ceiling": "2026-11-25"}}
    earlier["part_seconds"] = {"loadtest:local_server": 504.0}
    earlier["sections"].pop("front_door", None)
    earlier["section_seconds"].pop("front_door", None)
    (results_dir / "results.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(front_door, "bench", lambda raw, log, before=None: {"error": "not measured in this test"})
    main_module.main(["--only", "front_door", "--raw", str(tmp_path / "raw"), "--results", str(results_dir)])
    after = json.loads((results_dir / "results.json").read_text())
    assert after["kept_from_earlier_run_parts"] == earlier["kept_from_earlier_run_parts"]
    assert after["parts_run"] == {"loadtest": ["local_server"]}
    assert after["part_seconds"] == {"loadtest:local_server": 504.0}
    assert "Section loadtest: only local_server re-run" in (results_dir / "results.md").read_text()
    shutil.rmtree(results_dir)
