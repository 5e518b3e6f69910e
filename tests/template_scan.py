"""Every template the suite synthesizes, written to one directory and scanned there once per session by cfn-lint and
by checkov, side by side (tests/conftest.py's `template_scan` fixture). Each scanner's start-up costs seconds (cfn-lint
loads its schemas, checkov its checks), so one run of each replaces one per test module.

Two canaries sit beside the real templates, so every scan shows it can fail: for checkov, the local artifact stack with
its bucket's public access block, versioning and logging removed; for cfn-lint, the local endpoint stack with a model
download timeout over SageMaker's limit of 3600 s. The tests that read a scan filter its findings by template path.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from helpers import CHECKOV_CANARY, ROOT
from hermetic import subprocess_env

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
CFN_LINT = ROOT / ".venv" / "bin" / "cfn-lint"
CFN_LINT_CANARY = "canary/bad-timeout.template.json"
BAD_TIMEOUT = 7200  # ModelDataDownloadTimeoutInSeconds: SageMaker allows 60 to 3600

# Where each synthesized set sits in the scanned directory (the paths checkov-skips.yaml's globs name).
ADOPTING_PREFIX = "hf-fastload/prod-adopting/"
LOCAL_PREFIX = "local/local/"
PIPELINE_PREFIX = "pipeline-stack/"


def example_path(config: str, env: str | None, stack: str) -> str:
    return f"{Path(config).stem}/{env or 'default'}/{stack}.template.json"


@dataclass
class TemplateScan:
    """The scanned directory, its templates by path under it, and the two scanners' runs."""

    directory: Path
    templates: dict[str, dict]
    cfn_lint: subprocess.CompletedProcess[str]
    checkov: subprocess.CompletedProcess[str]
    cfn_lint_findings_cache: list[dict] = field(default_factory=list)

    def path(self, relative: str) -> str:
        return str(self.directory / relative)

    def cfn_lint_findings(self) -> list[dict]:
        """cfn-lint's findings (its JSON output: Rule, Filename, Location, Message), for every template."""
        if not self.cfn_lint_findings_cache:
            result = self.cfn_lint
            # cfn-lint exits with the levels found OR-ed together (8 informational, 4 warning, 2 error: cfn-lint 1.58
            # cfnlint/runner/cli.py), so always even; an odd code is a crash (an uncaught exception exits 1).
            assert result.returncode % 2 == 0 and result.returncode < 16 and result.stdout.strip(), (
                f"cfn-lint failed to run (exit {result.returncode}):\n{result.stderr[-3000:]}"
            )
            self.cfn_lint_findings_cache.extend(json.loads(result.stdout))
        return self.cfn_lint_findings_cache

    def cfn_lint_findings_on(self, relatives: Iterable[str]) -> list[dict]:
        """The findings on the templates at these paths under the directory."""
        wanted = {str(self.directory / r) for r in relatives}
        assert wanted <= {str(self.directory / r) for r in self.templates}, "a template the scan does not hold"
        return [f for f in self.cfn_lint_findings() if f["Filename"] in wanted]


def checkov_canary(templates: dict[str, dict]) -> dict:
    """The local artifact stack with the artifact bucket's public access block, versioning and logging removed."""
    canary = copy.deepcopy(templates[f"{LOCAL_PREFIX}llm-endpoints-local-artifacts.template.json"])
    props = canary["Resources"]["ArtifactBucket"]["Properties"]
    del props["PublicAccessBlockConfiguration"], props["VersioningConfiguration"], props["LoggingConfiguration"]
    return canary


def cfn_lint_canary(templates: dict[str, dict]) -> dict:
    """The local endpoint stack with a model download timeout SageMaker refuses."""
    canary = copy.deepcopy(templates[f"{LOCAL_PREFIX}llm-endpoints-local-tiny-gpt2.template.json"])
    for resource in canary["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            resource["Properties"]["ProductionVariants"][0]["ModelDataDownloadTimeoutInSeconds"] = BAD_TIMEOUT
    return canary


def scan(templates: dict[str, dict], directory: Path) -> TemplateScan:
    """Write the templates and both canaries under `directory`; run cfn-lint and checkov on them, side by side."""
    templates = {**templates}
    templates[CHECKOV_CANARY] = checkov_canary(templates)
    templates[CFN_LINT_CANARY] = cfn_lint_canary(templates)
    for relative, template in templates.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(template, indent=1))
    cfn_lint = [str(CFN_LINT), "--format", "json", *(str(directory / r) for r in templates)]
    checkov = [
        *(str(CHECKOV), "-d", str(directory), "--framework", "cloudformation", "--skip-download"),
        *("--quiet", "--compact", "-o", "json"),
    ]
    # checkov asks PyPI for a newer release at import unless this is set (checkov/common/util/banner.py).
    env = subprocess_env(CKV_SKIP_PACKAGE_UPDATE_CHECK="true")
    with (
        subprocess.Popen(cfn_lint, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as lint_run,
        subprocess.Popen(checkov, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as checkov_run,
    ):
        lint_out, lint_err = lint_run.communicate(timeout=900)
        checkov_out, checkov_err = checkov_run.communicate(timeout=900)
    return TemplateScan(
        directory,
        templates,
        subprocess.CompletedProcess(cfn_lint, lint_run.returncode, lint_out, lint_err),
        subprocess.CompletedProcess(checkov, checkov_run.returncode, checkov_out, checkov_err),
    )
