"""Every example's header gives commands that work (operations review F6: they said `model_build build` then
`cdk deploy --all`, which skipped publish, so the deploy stopped at the artifact check). Each command is parsed and held
to what exists: the make target and its variables, model_build's subcommands and their flags (its own argument
parser), the config's environments and endpoints, the app's stack names, and publish before the endpoint stacks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import ROOT

from deployment import load_config

EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))
COMMAND = re.compile(r"^#\s+((?:make|python -m model_build|npx cdk) .*?)(?:\s{3,}\(.*\))?$")


def header_commands(path: Path) -> list[list[str]]:
    commands = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        found = COMMAND.match(line)
        if found:
            commands.append(shlex.split(found.group(1)))
    return commands


def _model_build_flags(subcommand: str) -> set[str]:
    """The flags model_build's own parser takes for `subcommand` (KeyError for one it does not have)."""
    import argparse

    from model_build.cli import parser

    [sub] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {flag for action in sub.choices[subcommand]._actions for flag in action.option_strings}


def _make_variables() -> set[str]:
    return set(re.findall(r"\$\((\w+)\)", (ROOT / "Makefile").read_text()))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_header_command_is_valid_and_publishes_before_the_endpoints_deploy(path):
    if path.name in ("minimal.yaml", "pipeline.yaml", "vllm-local-tiny-qwen3.yaml"):
        return  # no deploy commands (pipeline.yaml deploys the pipeline, which builds and publishes itself)
    commands = header_commands(path)
    assert commands, f"{path.name}: its header names no command"
    rel = str(path.relative_to(ROOT))
    makes = [c for c in commands if c[0] == "make"]
    assert [c[:2] for c in makes] == [["make", "deploy"]], path.name
    variables = dict(arg.split("=", 1) for arg in makes[0][2:])
    assert set(variables) <= _make_variables() and variables["CONFIG"] == rel
    env = variables["ENV"]
    environment_plan = load_config(path, env, build_root=Path("/nonexistent"))
    order = []
    for command in commands:
        if command[:3] == ["python", "-m", "model_build"]:
            subcommand, args = command[3], command[4:]
            flags = {a for a in args if a.startswith("--")}
            assert flags <= _model_build_flags(subcommand), (path.name, command)
            values = dict(zip(args[::2], args[1::2]))
            assert values["--config"] == rel and values["--env"] == env, command
            environment_plan.endpoint(values["--endpoint"])  # ConfigError for an endpoint the config lacks
            order.append((subcommand, values["--endpoint"]))
        elif command[:3] == ["npx", "cdk", "deploy"]:
            args = command[3:]
            assert args[:4] == ["-c", f"config={rel}", "-c", f"env={env}"], command
            target = args[4]
            assert target == "--all" or target == environment_plan.stack_name("artifacts"), command
            order.append(("cdk", target))
    # A pinned artifact (source "config") or a JumpStart / private-hub model (source "hub") has nothing to build.
    to_build = [p.name for p in environment_plan.plans if p.artifact.source not in ("config", "hub")]
    built = [e for kind, e in order if kind == "build"]
    published = [e for kind, e in order if kind == "publish"]
    assert built == to_build and published == to_build, path.name
    kinds = [kind if kind != "cdk" else f"cdk {e}" for kind, e in order]
    # build, the artifact stack (its bucket), publish into it, then every stack
    if to_build:
        assert kinds.index(f"cdk {environment_plan.stack_name('artifacts')}") < kinds.index("publish"), kinds
    assert kinds[-1] == "cdk --all" and all(k != "publish" for k in kinds[kinds.index("cdk --all") :])
