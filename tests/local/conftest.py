"""Fixtures of the local-emulator tests. `make demo` (about 35 s) and the teardown scenarios (about 25 s) spend most
of their time waiting on the CDK CLI and the emulator, so each runs as a subprocess started when collection finishes,
beside the other tests; their tests wait for them and read what they wrote."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT

from local_emulator import moto_server

HERE = Path(__file__).resolve().parent


@dataclass
class BackgroundRun:
    """A command started now in a fresh work directory (its stdout and stderr kept there), awaited later."""

    process: subprocess.Popen
    workdir: Path

    @classmethod
    def start(cls, command: Callable[[Path], list[str]]) -> BackgroundRun:
        workdir = Path(tempfile.mkdtemp(prefix="background-run-"))
        # The tests' import paths (the repository and tests/), as pytest.ini gives them to this process.
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
        with (workdir / "stdout").open("wb") as out, (workdir / "stderr").open("wb") as err:
            # A session of its own, so close() stops what it started too (the emulator, the CDK CLI).
            process = subprocess.Popen(
                command(workdir), cwd=ROOT, stdout=out, stderr=err, env=env, start_new_session=True
            )
        return cls(process, workdir)

    def wait(self, timeout: float = 600) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once the command has finished."""
        code = self.process.wait(timeout=timeout)
        return code, (self.workdir / "stdout").read_text(), (self.workdir / "stderr").read_text()

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever of its process group is still running
        except ProcessLookupError:
            pass
        self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _demo(workdir: Path) -> list[str]:
    """`python -m local_emulator.demo` (what `make demo` runs), on a free model-server port."""
    return [sys.executable, "-m", "local_emulator.demo", "--port", str(moto_server.free_port()), "--logs", str(workdir / "logs")]


def _teardown(workdir: Path) -> list[str]:
    """tests/local/test_teardown.py's scenarios, run as a script (they write workdir/outcomes.json)."""
    return [sys.executable, str(HERE / "test_teardown.py"), str(workdir)]


# Which runs start early: the module whose collected tests need them, and the command.
RUNS = {"demo": ("test_emulator_demo.py", _demo), "teardown": ("test_teardown.py", _teardown)}
_runs_key = pytest.StashKey[dict[str, BackgroundRun]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    modules = {item.path.name for item in session.items if item.path.parent == HERE}
    session.config.stash[_runs_key] = {
        name: BackgroundRun.start(command) for name, (module, command) in RUNS.items() if module in modules
    }


def _finished(request: pytest.FixtureRequest, name: str) -> BackgroundRun:
    """The run started at collection (or one started now), finished; removed at the end of the session."""
    run = request.config.stash.get(_runs_key, {}).get(name) or BackgroundRun.start(RUNS[name][1])
    request.addfinalizer(run.close)
    run.wait()
    return run


@pytest.fixture(scope="session")
def demo_run(request: pytest.FixtureRequest) -> tuple[int, str, str]:
    """The demo's (exit code, stdout, stderr)."""
    return _finished(request, "demo").wait()


@pytest.fixture(scope="session")
def teardown_outcomes(request: pytest.FixtureRequest) -> dict[str, str]:
    """{scenario name: "ok" or its failure with the traceback} from tests/local/test_teardown.py's scenarios."""
    run = _finished(request, "teardown")
    code, out, err = run.wait()
    outcomes = run.workdir / "outcomes.json"
    assert code == 0 and outcomes.is_file(), f"the teardown scenarios did not finish (exit {code}):\n{out[-3000:]}\n{err[-3000:]}"
    return json.loads(outcomes.read_text())
