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
