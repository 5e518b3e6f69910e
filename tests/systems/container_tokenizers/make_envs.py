"""Build .venv-tokenizers: the transformers/tokenizers of every serving container, for
tests/systems/test_container_tokenizers.py (which loads each system's built tokenizer with them).

The stacks come from the code, not from a list here: for every system of systems.REGISTRY, its container's
requirements (systems.container_tokenizer.python_stack_of: ImagePin.python_stack or OWN_CONTAINER_STACKS). Each
gives its oldest versions (what model_build writes for) and, where a requirement has an upper bound, the newest
that the bound allows (resolved by pip). Tokenizer loading needs no torch, so each variant is only transformers,
tokenizers and their small dependencies, installed with --target into its own folder; one base venv holds numpy
(1.26.4, the DJL and deepspeed-byoc images' numpy), which they share. A folder whose pins are unchanged is kept.

Usage: python tests/systems/container_tokenizers/make_envs.py [ROOT]   (default <repo>/.venv-tokenizers)
Runs with the project venv's python (it imports `systems`); the base venv uses python3.11 (or python3).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_ROOT = REPO / ".venv-tokenizers"
BASE_PINS = ("numpy==1.26.4",)


@dataclass(frozen=True)
class Variant:
    """One set of library versions a container may hold, and the systems whose container that is."""

    key: str  # its folder under the root
    pins: tuple[str, ...]  # pip requirements
    systems: tuple[str, ...]
    transformers: bool  # False: the container reads tokenizer.json with `tokenizers` alone


def _version(floor: tuple[int, ...]) -> str:
    return ".".join(map(str, floor))


def variants() -> list[Variant]:
    """Every (oldest, newest) library set of every system's container, systems sharing one set merged."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from systems import REGISTRY, get_system
    from systems.container_tokenizer import python_stack_of

    found: dict[tuple[str, ...], list[str]] = {}
    kinds: dict[tuple[str, ...], tuple[str, bool]] = {}
    for name in REGISTRY:
        stack = python_stack_of(get_system(name))
        has_transformers = stack.transformers is not None
        oldest = ([f"transformers=={_version(stack.transformers_floor)}"] if has_transformers else []) + [
            f"tokenizers=={_version(stack.tokenizers_floor)}"
        ]
        requirements = ([f"transformers{stack.transformers}"] if has_transformers else []) + [
            f"tokenizers{stack.tokenizers}"
        ]
        candidates = [("oldest", tuple(oldest))]
        if any("<" in r for r in requirements):  # bounded above: the newest allowed differs from the oldest
            candidates.append(("newest", tuple(requirements)))
        for kind, pins in candidates:
            found.setdefault(pins, []).append(name)
            kinds[pins] = (kind, has_transformers)
    out = []
    for pins, systems in found.items():
        kind, has_transformers = kinds[pins]
        key = kind + "-" + re.sub(r"[^A-Za-z0-9.]+", "_", "-".join(pins)).strip("_")
        out.append(Variant(key=key, pins=pins, systems=tuple(systems), transformers=has_transformers))
    return sorted(out, key=lambda v: v.key)


def base_python(root: Path) -> Path:
    return root / "base" / "bin" / "python"


def _run(args: list[str], log: Path) -> str:
    proc = subprocess.run(args, capture_output=True, text=True)
    with log.open("a") as out:
        out.write(f"$ {' '.join(args)}\n{proc.stdout}\n{proc.stderr}\n")
    if proc.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        tail = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines() if noise not in line)[-3000:]
        sys.exit(f"make_envs.py: {' '.join(args[:6])} ... failed (log: {log}):\n{tail}")
    return proc.stdout


def build(root: Path = DEFAULT_ROOT) -> dict[str, Path]:
    """Create what is missing or out of date; {variant key: folder to put first on sys.path}."""
    root.mkdir(parents=True, exist_ok=True)
    log = root / "pip.log"
    log.write_text("")  # this run's commands only
    python = base_python(root)
    stamp = root / "base" / ".pins"
    if not (python.is_file() and stamp.is_file() and stamp.read_text() == "\n".join(BASE_PINS)):
        shutil.rmtree(root / "base", ignore_errors=True)
        interpreter = shutil.which("python3.11") or shutil.which("python3") or sys.executable
        _run([interpreter, "-m", "venv", str(root / "base")], log)
        _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *BASE_PINS], log)
        stamp.write_text("\n".join(BASE_PINS))
    folders = {}
    for variant in variants():
        folder = root / variant.key
        stamp = folder / ".pins"
        if not (stamp.is_file() and stamp.read_text() == "\n".join(variant.pins)):
            shutil.rmtree(folder, ignore_errors=True)
            # What the pins need beyond the base venv (numpy), resolved against it, then installed on their own.
            report = json.loads(
                _run(
                    [
                        str(python),
                        "-m",
                        "pip",
                        "install",
                        "--disable-pip-version-check",
                        "--dry-run",
                        "--quiet",
                        "--report",
                        "-",
                        *variant.pins,
                    ],
                    log,
                )
            )
            exact = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in report["install"]]
            _run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "-q",
                    "--no-deps",
                    "--no-compile",
                    "--target",
                    str(folder),
                    *exact,
                ],
                log,
            )
            stamp.write_text("\n".join(variant.pins))
        folders[variant.key] = folder
    for stale in root.glob("*est-*"):  # variants of pins no container has any more
        if stale.is_dir() and stale.name.startswith(("oldest-", "newest-")) and stale.name not in folders:
            shutil.rmtree(stale)
    return folders


if __name__ == "__main__":
    built = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_ROOT)
    print(f"tokenizer envs up to date: {len(built)} variants in {DEFAULT_ROOT if len(sys.argv) < 2 else sys.argv[1]}")
