"""Shared fixtures. Synth costs ~5 s the first time in a process and ~0.2 s after, so every configuration is
synthesized once per session and its templates shared by all tests."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
# Synth must not depend on the machine's AWS settings.
for _var in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
    os.environ.pop(_var, None)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAKE_HASH = "ab" * 32


@dataclass
class Synthesized:
    outdir: Path
    templates: dict[str, dict]  # stack name -> template JSON
    stacks: dict[str, object]

    def template(self, stack_name: str):
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[stack_name])

    def resources(self, stack_name: str, type_name: str) -> list[dict]:
        return [r for r in self.templates[stack_name]["Resources"].values() if r["Type"] == type_name]


def cdk_context() -> dict:
    """An App built in-process does not read cdk.json: merge its context so tests see what `cdk synth` sees."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def write_fake_manifest(build_root: Path, name: str, system: str, dtype: str, content_hash: str = FAKE_HASH) -> None:
    """What the stack reads from a build: system, dtype and content hash (synth needs no weights)."""
    d = build_root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({"system": system, "dtype": dtype, "content_hash": content_hash}))


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """synth(config, env=None, build_root=None, allow_unbuilt=True) -> Synthesized, cached per session."""
    import aws_cdk as cdk

    from endpoint_config import load_config
    from stacks import add_stacks

    cache: dict[tuple, Synthesized] = {}

    def _synth(config: str, env: str | None = None, build_root: Path | None = None, allow_unbuilt: bool = True):
        key = (config, env, str(build_root), allow_unbuilt)
        if key not in cache:
            outdir = tmp_path_factory.mktemp("cdkout")
            app = cdk.App(context=cdk_context(), outdir=str(outdir))
            deployment = load_config(ROOT / config, env)
            stacks = add_stacks(
                app, deployment, build_root=build_root or outdir / "no-build", allow_unbuilt=allow_unbuilt
            )
            app.synth()  # raises if cdk-nag finds anything unacknowledged
            templates = {
                name: json.loads((outdir / f"{name}.template.json").read_text()) for name in stacks
            }
            cache[key] = Synthesized(outdir, templates, stacks)
        return cache[key]

    return _synth
