"""Write the docs' system tables from the systems registry (systems.all_systems()), so a new or changed system shows
in README.md, docs/systems.md and docs/chat.md without a hand edit.

    python tools/readme_tables.py            # rewrite every generated block in place
    python tools/readme_tables.py --check    # exit 1, naming each stale block, if a file differs from the registry

A block sits between `<!-- generated: NAME by tools/readme_tables.py -->` and `<!-- /generated: NAME -->`; the text
between the markers belongs to this tool (tests/test_docs.py runs the check). The columns read each ServingSystem's
own facts: its summary, legacy flag and replacement, image pin or own container, and its stated capabilities.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from systems import ServingSystem, all_systems  # after the path, as a script run from anywhere

TOOL = "tools/readme_tables.py"


def begin_marker(name: str) -> str:
    return f"<!-- generated: {name} by {TOOL} -->"


def end_marker(name: str) -> str:
    return f"<!-- /generated: {name} -->"


def _yes(supported: bool) -> str:
    return "yes" if supported else "no"


def _status(system: ServingSystem) -> str:
    if system.legacy:
        return f"legacy: use `{system.replacement}`" if system.replacement else "legacy"
    return "current"


def _container(system: ServingSystem) -> str:
    if system.image is not None:
        return f"`{system.image.repository}:{system.image.gpu_tag}`"
    assert system.own_container is not None  # ServingSystem.__post_init__: exactly one of the two
    return f"own image, `{system.own_container.dockerfile}`"


def _example_link(system: ServingSystem) -> str:
    """The system's example config (ServingSystem.example_config), as a link from docs/."""
    name = system.example_config.name
    return f"[{name}](../config/examples/{name})"


# How each LocalRun kind reads in the table (local_runtime/__init__.py says what runs for each).
LOCAL_KINDS = {
    "engine": "the engine itself",
    "own-server": "our server, on the CPU",
    "stand-in": "a stand-in",
    "handler": "its handler",
}


def _cell(text: str) -> str:
    """A table cell's text as Markdown shows it: a pipe would end the cell, and `<tool_call>` would be read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]


def systems_table(systems: dict[str, ServingSystem]) -> list[str]:
    """README's "Choosing a system": what each is for, whether it is current, and what it can do."""
    header = ["`system:`", "what it is", "status", "chat", "streams", "inference components", "LoRA adapters"]
    rows = [
        [
            f"`{name}`",
            s.summary,
            _status(s),
            _yes(s.chat.supported),
            _yes(s.streaming.supported),
            _yes(s.inference_components.supported),
            _yes(s.adapters.supported),
        ]
        for name, s in systems.items()
    ]
    return _table(header, rows)


def containers_table(systems: dict[str, ServingSystem]) -> list[str]:
    """docs/systems.md: each system's container and the facts the stacks take from it."""
    header = [
        "`system:`",
        "container",
        "GPU only",
        "tensor parallel",
        "network isolation",
        "runs locally as",
        "example",
    ]
    rows = [
        [
            f"`{name}`",
            _container(s),
            _yes(s.gpu_only),
            _yes(s.tensor_parallel.supported),
            _yes(s.network_isolation),
            LOCAL_KINDS[s.local.kind],
            _example_link(s),
        ]
        for name, s in systems.items()
    ]
    return _table(header, rows)


def _chat_route(system: ServingSystem) -> str:
    if not system.chat.supported:
        return ""
    if system.chat.engine_server:
        return "the engine's own OpenAI server"
    return {"native": "the container's own chat route", "handler": "our handler"}.get(system.chat.route or "", "")


def chat_table(systems: dict[str, ServingSystem]) -> list[str]:
    """docs/chat.md: whether and how each system serves OpenAI chat completions (its ChatCapability)."""
    header = ["`system:`", "chat", "who answers", "tool calls", "forced JSON / tool", "how (its own words)"]
    rows = [
        [
            f"`{name}`",
            _yes(s.chat.supported),
            _chat_route(s),
            _yes(s.chat.tool_calls is not None) if s.chat.supported else "",
            ("yes" if s.chat.constrained_decoding else "refused") if s.chat.supported else "",
            s.chat.note,
        ]
        for name, s in systems.items()
    ]
    return _table(header, rows)


# Each generated block: its name, the file it lives in, and the function that writes its lines.
BLOCKS: dict[str, tuple[str, Callable[[dict[str, ServingSystem]], list[str]]]] = {
    "systems": ("README.md", systems_table),
    "system-containers": ("docs/systems.md", containers_table),
    "chat": ("docs/chat.md", chat_table),
}


def render(text: str, name: str, lines: list[str], path: str) -> str:
    """`text` with block `name` replaced by `lines`; ValueError when the file lacks the block's markers."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path}: no generated block {name!r} (expected {begin!r} ... {end!r})")
    return text[: start + len(begin)] + "\n" + "\n".join(lines) + "\n" + text[stop:]


def rendered_files(root: Path = REPO_ROOT) -> dict[str, tuple[str, str]]:
    """Per file: (its text now, its text with every block regenerated)."""
    systems = all_systems()
    out: dict[str, tuple[str, str]] = {}
    for name, (path, make) in BLOCKS.items():
        current = out[path][1] if path in out else (root / path).read_text()
        original = out[path][0] if path in out else current
        out[path] = (original, render(current, name, make(systems), path))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated block differs from the registry")
    args = parser.parse_args(argv)
    try:
        files = rendered_files()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = [path for path, (now, new) in files.items() if now != new]
    if args.check:
        for path in stale:
            print(f"{path}: a generated system table differs from systems/; run: python {TOOL}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        (REPO_ROOT / path).write_text(files[path][1])
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
