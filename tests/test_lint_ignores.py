"""`make lint` never walks a git-ignored folder: copies of our modules in each folder .gitignore names (the bench's
scratch under build/, a venv, cdk.out/...) leave ruff and mypy, run with the repository's own pyproject.toml, green.

The tree is a small stand-in of the repository in a temporary git repository (every entry of mypy's `files` exists,
with our chat_contract.py and request_contract.py at the root), so mypy checks a handful of files, not 176.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
# The copy that must never be walked: our module plus a line each tool refuses (an unused import for ruff check,
# a spacing ruff format rewrites); as a second chat_contract.py mypy refuses it as a duplicate module.
BAD_TAIL = "\nimport os\nx=1\n"


def _ignored_folders() -> list[str]:
    """Sample paths for every folder pattern of .gitignore: an unanchored one (`build/`) at the root and inside two
    of mypy's folders, an anchored one (`bench/raw/`) where it says; `*` becomes a name."""
    paths: list[str] = []
    for line in (REPO / ".gitignore").read_text().splitlines():
        line = line.strip()
        if not line.endswith("/") or line.startswith("#"):
            continue
        name = line.rstrip("/").replace("*", "x")
        if "/" in name:
            paths.append(name)
        else:
            paths += [name, f"bench/{name}", f"lambda/stream/{name}/deep"]
    return paths


def _stand_in(root: Path) -> list[str]:
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(REPO / ".gitignore", root / ".gitignore")
    for name in ("chat_contract.py", "request_contract.py"):
        shutil.copy(REPO / name, root / name)
    for entry in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]:
        path = root / entry
        if entry.endswith(".py"):
            if not path.exists():
                path.write_text("X: int = 1\n")
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / f"mod_{path.name}.py").write_text("X: int = 1\n")
    folders = _ignored_folders()
    bad = (REPO / "chat_contract.py").read_text() + BAD_TAIL
    for folder in folders:
        # art-x/code/ as the bench lays out an artifact: a folder name that is no identifier ends mypy's package
        # crawl, so the copy is module `chat_contract`, a duplicate of the root one; pkg/ a package beside it.
        for sub in (root / folder / "art-x" / "code", root / folder / "pkg"):
            sub.mkdir(parents=True, exist_ok=True)
            (sub / "chat_contract.py").write_text(bad)
        (root / folder / "pkg" / "__init__.py").write_text("")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return folders


def _lint(root: Path) -> list[subprocess.CompletedProcess[str]]:
    cache = root / ".mypy_cache"
    return [
        subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
        for cmd in (
            [str(VENV_BIN / "ruff"), "format", "--check", "."],
            [str(VENV_BIN / "ruff"), "check", "."],
            [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        )
    ]


@pytest.mark.slow
def test_copies_of_our_modules_in_every_ignored_folder_leave_lint_green(tmp_path: Path) -> None:
    folders = _stand_in(tmp_path)
    assert {"build", "bench/raw", "cdk.out", ".venv-x", "node_modules"} <= set(folders)
    for done in _lint(tmp_path):
        assert done.returncode == 0, f"{done.args}: {done.stdout}{done.stderr}"

    # The same copy in a folder that is not ignored fails all three: the check above can fail.
    walked = tmp_path / "bench" / "scratch" / "art-x"
    walked.mkdir(parents=True)
    (walked / "chat_contract.py").write_text((REPO / "chat_contract.py").read_text() + BAD_TAIL)
    format_check, ruff_check, mypy = _lint(tmp_path)
    assert format_check.returncode == 1 and "bench/scratch/art-x/chat_contract.py" in format_check.stdout
    assert ruff_check.returncode == 1 and "F401" in ruff_check.stdout
    assert mypy.returncode != 0 and "Duplicate module named" in mypy.stdout + mypy.stderr
