"""Fixtures of the local-emulator tests. `make demo` (about 35 s) and the teardown scenarios (about 25 s) spend most
of their time waiting on the CDK CLI and the emulator, so each runs as a subprocess, the first commands of the
background lane (tests/background.py), submitted when collection finishes; their tests wait for them and read what
they wrote."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from background import Background, lane_of
from helpers import ROOT

from local_emulator import moto_server

HERE = Path(__file__).resolve().parent


def _demo(workdir: Path) -> list[str]:
    """`python -m local_emulator.demo` (what `make demo` runs), on a free model-server port."""
    return [
        sys.executable,
        "-m",
        "local_emulator.demo",
        "--port",
        str(moto_server.free_port()),
        "--logs",
        str(workdir / "logs"),
    ]


def _teardown(workdir: Path) -> list[str]:
    """tests/local/test_teardown.py's scenarios, run as a script (they write workdir/outcomes.json)."""
    return [sys.executable, str(HERE / "test_teardown.py"), str(workdir)]


# Which runs start early: the module whose collected tests need them, and the command.
RUNS = {"demo": ("test_emulator_demo.py", _demo), "teardown": ("test_teardown.py", _teardown)}
# The tests' import paths (the repository and tests/), as pytest.ini gives them to this process.
ENV = {
    **os.environ,
    "PYTHONUNBUFFERED": "1",
    "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
}


def _submit(config: pytest.Config, name: str) -> Background:
    # own_session: stopping it stops what it started too (the emulator, the CDK CLI, the model server).
    return lane_of(config).submit(name, RUNS[name][1], env=ENV, own_session=True)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    """The first commands of the background lane, queued while the rest of the suite is still being collected (both
    runs take tens of seconds; collection takes ten)."""
    if file_path.parent == HERE and not parent.config.option.collectonly:
        for name, (module, _) in RUNS.items():
            if file_path.name == module:
                _submit(parent.config, name)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run none of the session's tests reads (deselected with -k or -m) is stopped."""
    lane = lane_of(session.config)
    modules = {item.path.name for item in session.items if item.path.parent == HERE}
    for name, (module, _) in RUNS.items():
        if name in lane and module not in modules:
            lane[name].stop()


@pytest.fixture(scope="session")
def demo_run(request: pytest.FixtureRequest) -> tuple[int, str, str]:
    """The demo's (exit code, stdout, stderr)."""
    result = _submit(request.config, "demo").result(timeout=600)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="session")
def teardown_outcomes(request: pytest.FixtureRequest) -> dict[str, str]:
    """{scenario name: "ok" or its failure with the traceback} from tests/local/test_teardown.py's scenarios."""
    run = _submit(request.config, "teardown")
    result = run.result(timeout=600)
    outcomes = run.directory / "outcomes.json"
    assert result.returncode == 0 and outcomes.is_file(), (
        f"the teardown scenarios did not finish (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return json.loads(outcomes.read_text())
