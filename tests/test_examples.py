"""Every file in config/examples/ synthesizes in every environment it defines, passes cdk-nag and cfn-lint."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from conftest import ROOT

EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))
CASES = [
    (path.relative_to(ROOT).as_posix(), env)
    for path in EXAMPLES
    for env in (list(yaml.safe_load(path.read_text()).get("environments") or {}) or [None])
]


@pytest.fixture(scope="session")
def all_examples(synth):
    return {case: synth(*case) for case in CASES}


@pytest.mark.parametrize("config,env", CASES, ids=[f"{c.split('/')[-1]}:{e}" for c, e in CASES])
def test_example_synthesizes_with_nag_clean(all_examples, config, env):
    synthesized = all_examples[(config, env)]
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    findings = [
        v for plugin in report["pluginReports"] for v in plugin.get("violations", [])
        if not v["ruleName"].startswith("Annotation::llm-endpoints:")
    ]
    assert findings == []
    for name, template in synthesized.templates.items():
        if name.endswith("-artifacts"):
            continue
        types = {r["Type"] for r in template["Resources"].values()}
        assert {"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint"} <= types


def test_cfn_lint_passes_on_every_example_template(all_examples):
    paths = [str(s.outdir / f"{name}.template.json") for s in all_examples.values() for name in s.templates]
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "cfn-lint"), *paths], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_there_is_an_example_per_system():
    from endpoint_config import SYSTEM_NAMES

    systems = {ep["system"] for path in EXAMPLES for ep in yaml.safe_load(path.read_text())["endpoints"]}
    missing = [s for s in SYSTEM_NAMES if s not in systems]
    assert not missing, f"systems without an example config: {missing}"
