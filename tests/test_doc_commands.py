"""Every command the docs and the example configs show exists as shown.

The commands: each line of a code block, and each inline code span, of README.md, CONTRIBUTING.md and docs/ that
starts with `make`, `python -m`, `python tools/...` or `cdk`/`npx cdk`, and each such line of the example configs'
header comments (`#   python -m model_build build --config ... --endpoint ...`). For each:

- `make TARGET VAR=value`: `make -n TARGET VAR=value` succeeds (the target exists; nothing runs), and each VAR is one
  the Makefile reads;
- `python -m MODULE [COMMAND] --flag ...` and `python tools/x.py --flag`: `--help` of the module (and of its
  command, when the next word is one of its commands) exits 0 and names every flag shown;
- a literal config path (`--config`, `CONFIG=`, `-c config=`) is a file, a literal `--endpoint` / `--env` / `ENV=` /
  `-c env=` names an endpoint / environment of that file.

What this cannot check, and where it is run instead: that a command succeeds against AWS (`make deploy`, `cdk
deploy`, `model_build publish/smoke/slo-gate/benchmark` need an account: tests/workstation and tests/local run them
against the emulator); the CDK CLI's own options (`cdk bootstrap --trust ...`: its CLI, not ours); commands of other
programs (`aws`, `source`, `export`, `pip`, `curl`, which UNCHECKED lists, and another project's module such as
`python -m vllm.entrypoints.openai.api_server`); a placeholder (`<name>`, `...`, `$CONFIG`, an upper-case `PATH`)
stands for a value and is not checked.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys

import pytest
import yaml
from helpers import ROOT
from hermetic import subprocess_env

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
CONFIGS = sorted((ROOT / "config").rglob("*.yaml"))
FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"^(make\b|python3? (-m |tools/)|\.venv/bin/python -m |(npx )?cdk )")
HEADER_COMMAND = re.compile(r"^#\s{2,}((make|python3? -m|(npx )?cdk) .*)$", re.M)
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|\$|^[A-Z_]+$")
# Programs the docs show that are not ours: not checked here (see the module docstring).
UNCHECKED = {"aws", "source", "export", "pip", "curl"}


def _commands_in(text: str) -> list[str]:
    found = []
    for block in FENCE.finditer(text):
        lines = re.sub(r"\\\n\s*", " ", block.group(2)).splitlines()
        found += [line.strip() for line in lines if COMMAND.match(line.strip())]
    outside = FENCE.sub("", text)
    found += [span.strip() for span in INLINE.findall(outside) if COMMAND.match(span.strip())]
    return found


def shown_commands() -> list[tuple[str, str]]:
    """(where, command) for every command the docs and example headers show, once each per file."""
    out: list[tuple[str, str]] = []
    for path in DOCS:
        out += [(str(path.relative_to(ROOT)), c) for c in dict.fromkeys(_commands_in(path.read_text()))]
    for path in CONFIGS:
        header = re.sub(r"\\\n#\s*", " ", path.read_text())
        out += [(str(path.relative_to(ROOT)), m.group(1).strip()) for m in HEADER_COMMAND.finditer(header)]
    return out


def words(command: str) -> list[str]:
    """The command's words: comments dropped, optional parts' brackets removed, text after `(` a note."""
    command = re.sub(r"<[^>]*>", "<value>", command.split("   (")[0])
    try:
        parts = shlex.split(command, comments=True)
    except ValueError:
        parts = command.split()
    return [p.strip("[]") for p in parts if p.strip("[]")]


def run(args: list[str], timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


@functools.cache
def help_text(*args: str) -> tuple[int, str]:
    done = run([sys.executable, *args, "--help"])
    return done.returncode, done.stdout + done.stderr


@functools.cache
def makefile_variables() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"\$\((?:origin |filter [^,]*,\$\(origin )?([A-Z_]+)\)", text)) | frozenset(
        re.findall(r"^([A-Z_]+)\s*[?:]?=", text, re.M)
    )


@functools.cache
def config_file(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text()) or {}


def config_problems(config: str | None, endpoint: str | None, env: str | None) -> list[str]:
    if config is None or PLACEHOLDER.search(config):
        return []
    if not (ROOT / config).is_file():
        return [f"config {config} is not a file"]
    data = config_file(config)
    problems = []
    names = [ep.get("name") for ep in data.get("endpoints") or []]
    if endpoint and not PLACEHOLDER.search(endpoint) and endpoint not in names:
        problems.append(f"endpoint {endpoint!r} is not in {config} (it has {names})")
    envs = list(data.get("environments") or {})
    if env and not PLACEHOLDER.search(env) and env not in envs:
        problems.append(f"environment {env!r} is not in {config} (it has {envs or 'none'})")
    return problems


def _option(parts: list[str], flag: str) -> str | None:
    for i, part in enumerate(parts):
        if part == flag and i + 1 < len(parts):
            return parts[i + 1]
        if part.startswith(flag + "="):
            return part.split("=", 1)[1]
    return None


def make_problems(parts: list[str]) -> list[str]:
    assignments = dict(p.split("=", 1) for p in parts[1:] if re.match(r"^[A-Z_]+=", p))
    targets = [p for p in parts[1:] if not re.match(r"^[A-Z_]+=", p) and not p.startswith("-")]
    problems = [f"make reads no variable {name}" for name in assignments if name not in makefile_variables()]
    done = run(["make", "-n", *targets, *(f"{k}={v}" for k, v in assignments.items() if not PLACEHOLDER.search(v))])
    if done.returncode != 0:
        problems.append(f"make -n {' '.join(targets)} failed: {done.stderr.strip()[-300:]}")
    return problems + config_problems(assignments.get("CONFIG"), assignments.get("ENDPOINT"), assignments.get("ENV"))


def python_problems(parts: list[str]) -> list[str]:
    if parts[1] == "-m":
        if not (ROOT / parts[2].split(".")[0]).exists() and not (ROOT / f"{parts[2].split('.')[0]}.py").exists():
            return []  # another project's module (vllm's server): not ours to check
        program, rest = ["-m", parts[2]], parts[3:]
    else:
        program, rest = [parts[1]], parts[2:]
    if rest and "|" in rest[0]:  # `build|publish|serve --config PATH`: each of the commands
        return [p for word in rest[0].split("|") for p in python_problems([*parts[: -len(rest)], word, *rest[1:]])]
    code, text = help_text(*program)
    if code != 0:
        return [f"{' '.join(program)} --help exited {code}: {text.strip()[-300:]}"]
    if rest and re.fullmatch(r"[a-z][a-z0-9-]*", rest[0]) and re.search(rf"^\s+{re.escape(rest[0])}\b", text, re.M):
        program, rest = [*program, rest[0]], rest[1:]
        code, text = help_text(*program)
        if code != 0:
            return [f"{' '.join(program)} --help exited {code}: {text.strip()[-300:]}"]
    flags = [p.split("=", 1)[0] for p in rest if p.startswith("--")]
    problems = [f"{' '.join(program)} has no option {flag}" for flag in flags if not re.search(rf"{flag}\b", text)]
    return problems + config_problems(_option(rest, "--config"), _option(rest, "--endpoint"), _option(rest, "--env"))


def cdk_problems(parts: list[str]) -> list[str]:
    context = dict(parts[i + 1].split("=", 1) for i, p in enumerate(parts[:-1]) if p == "-c" and "=" in parts[i + 1])
    return config_problems(context.get("config"), None, context.get("env"))


def problems_of(command: str) -> list[str]:
    parts = words(command)
    if parts[0] == "npx":
        parts = parts[1:]
    if parts[0] == "make":
        return make_problems(parts)
    if parts[0] in {"python", "python3", ".venv/bin/python"}:
        return python_problems(parts)
    if parts[0] == "cdk":
        return cdk_problems(parts)
    assert parts[0] in UNCHECKED, f"no check for {command!r}: add one, or name the program in UNCHECKED"
    return []


COMMANDS = shown_commands()
# About 20 subprocesses (make -n, each module's --help): ~15 s on 2 cores, so `make test` runs it, not the dev loop.
pytestmark = pytest.mark.slow


def test_the_docs_show_commands():
    """The extraction finds what it should: the README's two commands and an example header's build command."""
    shown = {c for _, c in COMMANDS}
    assert {"make demo", "make test"} <= {words(c)[0] + " " + words(c)[1] for c in shown if c.startswith("make ")}
    assert any(" ".join(c.split()).startswith("python -m model_build build --config config/examples/") for c in shown)
    assert len(COMMANDS) > 40


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w}: {c[:60]}" for w, c in COMMANDS])
def test_every_shown_command_exists_as_shown(where, command):
    assert problems_of(command) == [], f"{where}: {command}"


def test_the_check_finds_a_missing_target_flag_endpoint_and_file():
    assert problems_of("make no-such-target")[0].startswith("make -n no-such-target failed")
    assert problems_of("make demo NOSUCHVAR=1") == ["make reads no variable NOSUCHVAR"]
    assert problems_of("python -m model_build build --no-such-flag") == [
        "-m model_build build has no option --no-such-flag"
    ]
    assert problems_of("python -m model_build build --config config/examples/hf-fastload.yaml --endpoint nope") == [
        "endpoint 'nope' is not in config/examples/hf-fastload.yaml (it has ['gptj-fastload'])"
    ]
    assert problems_of("cdk deploy -c config=config/examples/missing.yaml") == [
        "config config/examples/missing.yaml is not a file"
    ]
    assert problems_of("python -m model_build build --config $CONFIG --endpoint <a name>") == []
    assert problems_of("python -m model_build build|publish --config PATH --nope") == [
        "-m model_build build has no option --nope",
        "-m model_build publish has no option --nope",
    ]


def test_a_placeholder_is_not_a_value():
    for value in ("<your config>", "...", "$CONFIG", "PATH"):
        assert PLACEHOLDER.search(value), value
    for value in ("config/local.yaml", "dev", "chat-vllm"):
        assert not PLACEHOLDER.search(value), value
