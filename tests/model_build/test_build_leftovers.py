"""A killed build leaves its temporary directories behind; the next build in the same directory removes them, and
never one a running build holds. Real processes: a build killed with SIGKILL, another still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hermetic import subprocess_env

from model_build import cli

# A build whose recipe writes a file and then waits: the process is inside build_endpoint, holding its temp dir.
BUILDING = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from types import SimpleNamespace
    import model_build.cli as cli

    class Recipe:
        @staticmethod
        def build(endpoint, engine, tmp, progress):
            (Path(tmp) / "weights.bin").write_bytes(b"0" * 1024)
            print("building", flush=True)
            time.sleep(120)

    cli.recipe_for = lambda system: Recipe
    cli.build_endpoint(SimpleNamespace(system="stand-in"), Path(sys.argv[1]), progress=False, engine=SimpleNamespace())
""")


class QuickRecipe:
    @staticmethod
    def build(endpoint, engine, tmp, progress):
        (Path(tmp) / "manifest.json").write_text("{}")
        return {"content_hash": "ab" * 32}


def start_build(out: Path) -> subprocess.Popen[str]:
    root = Path(cli.__file__).resolve().parent.parent
    process = subprocess.Popen(
        [sys.executable, "-c", BUILDING, str(out)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(PYTHONPATH=str(root)),
    )
    assert process.stdout is not None and process.stdout.readline() == "building\n"
    return process


def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_the_next_build_removes_a_killed_builds_temp_dirs_but_not_a_running_ones(tmp_path, monkeypatch, capsys):
    root = tmp_path / "build"
    killed = start_build(root / "chat")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    running = start_build(root / "summarize")
    try:
        [left] = root.glob(".chat.tmp-*")
        [held] = root.glob(".summarize.tmp-*")
        assert (left / "weights.bin").is_file()  # what a killed build leaves, hidden
        fresh = root / ".other.tmp-abcd1234"  # made this instant: its build may not hold it yet
        fresh.mkdir()
        for path in (left, held):
            age(path, 2 * cli.STALE_AFTER_S)  # old enough: only the lock can protect the running build's

        monkeypatch.setattr(cli, "recipe_for", lambda system: QuickRecipe)
        cli.build_endpoint(SimpleNamespace(system="stand-in"), root / "chat", progress=False, engine=SimpleNamespace())

        assert not left.exists()
        assert held.is_dir() and (held / "weights.bin").is_file()
        assert fresh.is_dir()
        assert (root / "chat" / "manifest.json").is_file()
        assert f"left by a killed build in {root}: removed {left.name}" in capsys.readouterr().err
        assert running.poll() is None  # still building
    finally:
        running.kill()
        running.wait()


def test_a_build_killed_between_its_renames_gets_its_previous_output_back(tmp_path, monkeypatch):
    """Killed after moving the old output aside and before moving the new one in: `chat` is gone, its last good
    version sits in `.chat.old-*/chat`. The next build (of any endpoint there) puts it back."""
    root = tmp_path / "build"
    previous = root / ".chat.old-x1y2z3w4" / "chat"
    previous.mkdir(parents=True)
    (previous / "manifest.json").write_text('{"content_hash": "old"}')
    age(previous.parent, 2 * cli.STALE_AFTER_S)

    monkeypatch.setattr(cli, "recipe_for", lambda system: QuickRecipe)
    cli.build_endpoint(SimpleNamespace(system="stand-in"), root / "summarize", progress=False, engine=SimpleNamespace())

    assert (root / "chat" / "manifest.json").read_text() == '{"content_hash": "old"}'
    assert sorted(p.name for p in root.iterdir()) == ["chat", "summarize"]


def test_a_failed_build_still_leaves_nothing(tmp_path, monkeypatch):
    class Failing:
        @staticmethod
        def build(endpoint, engine, tmp, progress):
            (Path(tmp) / "partial.bin").write_bytes(b"0")
            raise cli.BuildError("verification failed")

    monkeypatch.setattr(cli, "recipe_for", lambda system: Failing)
    with pytest.raises(cli.BuildError):
        cli.build_endpoint(
            SimpleNamespace(system="stand-in"), tmp_path / "out" / "chat", progress=False, engine=SimpleNamespace()
        )
    assert not (tmp_path / "out").exists()
