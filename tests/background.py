"""Commands that need nothing from the tests while they run, run beside them on the machine's second core.

`make test` has two cores and one pytest process, and much of the suite is a subprocess: the CDK CLI, cfn-lint and
checkov on the synthesized templates, `make demo`, the containers' library stacks in their own venvs. Such a command
is submitted to the session's one `Lane` as soon as its inputs exist (most at the first test, see `starts_early`),
the lane runs them one at a time in the order submitted, and the test that checks one waits for its result; those
tests are marked `late` (tests/conftest.py runs them last), so they seldom wait at all. One at a time: started
together, they took the core the tests run on too.

Each command writes its stdout and stderr to files in its own directory (a full pipe never blocks it), which is
also where it may write what its test reads.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


class Background:
    """One command of the lane. `directory` is its own: its stdout and stderr files, and room for what it writes."""

    def __init__(
        self,
        name: str,
        args: list[str],
        *,
        directory: Path,
        cwd: Path = ROOT,
        env: dict | None = None,
        own_session: bool = False,
    ) -> None:
        self.name, self.args, self.directory = name, args, directory
        self._cwd, self._env, self._own_session = cwd, env, own_session
        self._process: subprocess.Popen | None = None
        self._done = threading.Event()
        self._stopped = False

    def run(self) -> None:
        """Run to the end (the lane's thread calls this)."""
        try:
            if self._stopped:
                return
            with (self.directory / "stdout").open("w") as out, (self.directory / "stderr").open("w") as err:
                # own_session: its own process group, so stop() ends what it started too (an emulator, the CDK CLI).
                self._process = subprocess.Popen(
                    self.args,
                    cwd=self._cwd,
                    env=self._env,
                    stdout=out,
                    stderr=err,
                    text=True,
                    start_new_session=self._own_session,
                )
            self._process.wait()
        finally:
            self._done.set()

    def result(self, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """Its exit code and output, once it has run (waiting for the commands before it in the lane too)."""
        if not self._done.wait(timeout):
            self.stop()
            raise TimeoutError(f"background command {self.name!r} did not finish within {timeout} s: {self.args}")
        if self._process is None:
            raise RuntimeError(f"background command {self.name!r} was stopped before it started")
        return subprocess.CompletedProcess(
            self.args,
            self._process.returncode,
            (self.directory / "stdout").read_text(),
            (self.directory / "stderr").read_text(),
        )

    def stop(self) -> None:
        self._stopped = True
        process = self._process
        if process is not None and process.poll() is None:
            if self._own_session:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            else:
                process.kill()
            process.wait()


class Lane:
    """Background commands run one at a time, in the order submitted, by one thread."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pytest-background-"))
        self._jobs: dict[str, Background] = {}
        self._queue: queue.Queue[Background | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="background-lane", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            job.run()

    def submit(
        self,
        name: str,
        args: list[str] | Callable[[Path], list[str]],
        *,
        cwd: Path = ROOT,
        env: dict | None = None,
        own_session: bool = False,
    ) -> Background:
        """Queue a command under a name unique in the session; the same name again is the job already queued.
        `args` may be a function of the command's directory, for a command told where to write."""
        if name not in self._jobs:
            directory = self.root / name
            directory.mkdir(parents=True)
            command = args(directory) if callable(args) else args
            job = Background(name, command, directory=directory, cwd=cwd, env=env, own_session=own_session)
            self._jobs[name] = job
            self._queue.put(job)
        return self._jobs[name]

    def __getitem__(self, name: str) -> Background:
        return self._jobs[name]

    def __contains__(self, name: str) -> bool:
        return name in self._jobs

    def close(self) -> None:
        """Stop what is queued or running, and remove the commands' directories."""
        for job in self._jobs.values():
            job.stop()
        self._queue.put(None)
        self._thread.join(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


_LANE = pytest.StashKey[Lane]()


def lane_of(config: pytest.Config) -> Lane:
    """The session's lane, made on first use (a collection hook may submit before any fixture exists)."""
    if _LANE not in config.stash:
        config.stash[_LANE] = Lane()
    return config.stash[_LANE]


# Starters: functions of a test module (or conftest) that submit its background commands, preparing their inputs in
# this process first (a build, a synth). tests/conftest.py calls each at the session's first test when the session
# runs a test of that module (or of that conftest's folder), so the lane has work from the start.
STARTERS: list[tuple[Path, Callable[[pytest.FixtureRequest], object]]] = []


def starts_early(starter: Callable[[pytest.FixtureRequest], object]) -> Callable[[pytest.FixtureRequest], object]:
    """Register `starter(request)` of the calling module and return it made once-only: its first call runs it, later
    calls (the module's own fixture asking for what it submitted) return the same result or raise the same error, so
    a skip or a failure belongs to the tests that need it, not to the test that happened to come first. The request
    reaches tests/conftest.py's session fixtures (request.getfixturevalue)."""
    import functools
    import sys

    outcome: list[tuple[bool, object]] = []

    @functools.wraps(starter)
    def once(request: pytest.FixtureRequest) -> object:
        if not outcome:
            try:
                outcome.append((True, starter(request)))
            except (Exception, pytest.skip.Exception, pytest.fail.Exception) as err:
                outcome.append((False, err))
        ok, value = outcome[0]
        if not ok:
            raise value  # type: ignore[misc]
        return value

    STARTERS.append((Path(sys.modules[starter.__module__].__file__).resolve(), once))
    return once


def start_all(request: pytest.FixtureRequest) -> None:
    """Call the starters whose module (or conftest folder) has a test in the session; their errors wait for those tests."""
    paths = {item.path.resolve() for item in request.session.items}
    for path, starter in STARTERS:
        wanted = any(p.is_relative_to(path.parent) for p in paths) if path.name == "conftest.py" else path in paths
        if wanted:
            try:
                starter(request)
            except (Exception, pytest.skip.Exception, pytest.fail.Exception):
                pass  # raised again to the tests that ask for it
