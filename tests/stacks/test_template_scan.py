"""cfn-lint and checkov over every template the suite synthesizes (tests/template_scan.py), one run of each.

checkov is a second scanner beside cfn-lint and cdk-nag.

One checkov process per session (its start-up alone takes ~5 s) scans one directory holding
the templates of every example config in every environment, config/local.yaml, its adopting variant, the pipeline
stack and its stages' stacks (tests/template_scan.py, where cfn-lint scans them too), and two canaries: a copy of the
artifact stack whose bucket lost its public access block, versioning and access logging, which shows that the scan
and the skip filter (which accepts two of those checks on other buckets) do report a real problem, and cfn-lint's.
Accepted findings live in checkov-skips.yaml, each with its reason; a failed check it does not list fails here, and
so does an entry that matches nothing.

checkov runs from its own venv (.venv-checkov, `make checkov-env`): it pins an older boto3 than requirements.txt.
CLI flags from `checkov --help` (3.3.30) and the CLI Command Reference (checkov.io/2.Basics/CLI Command Reference):
`--skip-download` downloads nothing from Prisma Cloud (the scan runs offline), `--quiet` leaves passed checks out of
the JSON report (its summary still counts them), `--compact` leaves out code blocks.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import CHECKOV_CANARY as CANARY
from helpers import ROOT
from template_scan import BAD_TIMEOUT, CFN_LINT_CANARY, PIPELINE_PREFIX

# Every test here reads the one scan; one module, so one worker makes it (make test: --dist loadfile).
pytestmark = pytest.mark.slow

SKIP_FILE = ROOT / "checkov-skips.yaml"
# What checkov must report on the canary's bucket: access logging, versioning, the four public access block settings.
# (Not encryption: checkov's CKV_AWS_19 passes a bucket without BucketEncryption, which S3 now encrypts by default.)
CANARY_CHECKS = {"CKV_AWS_18", "CKV_AWS_21", "CKV_AWS_53", "CKV_AWS_54", "CKV_AWS_55", "CKV_AWS_56"}


@dataclass(frozen=True)
class Finding:
    """One failed check: where (template path under the scan dir, resource) and what (check id, name, keys)."""

    check_id: str
    check_name: str
    template: str
    resource_type: str
    logical_id: str
    evaluated_keys: tuple[str, ...]

    def describe(self) -> str:
        keys = f" [{', '.join(self.evaluated_keys)}]" if self.evaluated_keys else ""
        return f"{self.check_id} {self.template} {self.resource_type} {self.logical_id}: {self.check_name}{keys}"


@dataclass(frozen=True)
class Skip:
    """One entry of checkov-skips.yaml (its header explains the scopes)."""

    id: str
    reason: str
    resource_types: tuple[str, ...]
    resources: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()

    def matches(self, finding: Finding) -> bool:
        def any_glob(value: str, globs: tuple[str, ...]) -> bool:
            return not globs or any(fnmatch.fnmatchcase(value, g) for g in globs)

        return (
            finding.check_id == self.id
            and finding.resource_type in self.resource_types
            and any_glob(finding.logical_id, self.resources)
            and any_glob(finding.template, self.templates)
        )


@dataclass(frozen=True)
class Scan:
    summary: dict[str, Any]
    findings: list[Finding]
    templates: dict[str, dict] = field(repr=False)  # path under the scan dir -> template, canaries included


def load_skips(path: Path = SKIP_FILE) -> list[Skip]:
    """The skip file, validated: a skip must name its check, its resource types and a reason."""
    entries = yaml.safe_load(path.read_text())["skips"]
    skips, problems = [], []
    for n, entry in enumerate(entries):
        where = f"{path.name}: skips[{n}] ({entry.get('id')})"
        unknown = set(entry) - {"id", "reason", "resource_types", "resources", "templates"}
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        if not re.fullmatch(r"CKV2?_[A-Z0-9]+_\d+", str(entry.get("id", ""))):
            problems.append(f"{where}: id must be one checkov check id such as CKV_AWS_18")
        if len(str(entry.get("reason", "")).split()) < 12:
            problems.append(f"{where}: reason must say why the check does not apply or what the fix would cost")
        types = entry.get("resource_types") or []
        if not types or not all(re.fullmatch(r"AWS::\w+::\w+", t) for t in types):
            problems.append(f"{where}: resource_types must list CloudFormation types (AWS::S3::Bucket)")
        skips.append(
            Skip(
                id=str(entry.get("id")),
                reason=str(entry.get("reason")),
                resource_types=tuple(types),
                resources=tuple(entry.get("resources") or ()),
                templates=tuple(entry.get("templates") or ()),
            )
        )
    if problems:
        raise ValueError("\n".join(problems))
    return skips


def unskipped(findings: list[Finding], skips: list[Skip]) -> list[Finding]:
    return [f for f in findings if not any(s.matches(f) for s in skips)]


def _report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """checkov's CloudFormation report (exit code 1 means checks failed; anything else is an error)."""
    assert result.returncode in (0, 1), f"checkov exited {result.returncode}:\n{result.stderr[-3000:]}"
    report = json.loads(result.stdout)
    # One framework gives one report object; several give a list of them.
    [cfn] = [r for r in (report if isinstance(report, list) else [report]) if r.get("check_type") == "cloudformation"]
    return cfn


def _findings(report: dict[str, Any]) -> list[Finding]:
    findings = []
    for check in report["results"]["failed_checks"]:
        resource_type, logical_id = check["resource"].split(".", 1)  # "AWS::S3::Bucket.AccessLogs8B620ECA"
        findings.append(
            Finding(
                check_id=check["check_id"],
                check_name=check["check_name"],
                template=check["file_path"].lstrip("/"),  # relative to the scanned directory
                resource_type=resource_type,
                logical_id=logical_id,
                evaluated_keys=tuple(check["check_result"].get("evaluated_keys") or ()),
            )
        )
    return findings


@pytest.fixture(scope="session")
def scan(template_scan) -> Scan:
    """checkov's report on every template of the suite (tests/conftest.py template_scan)."""
    report = _report(template_scan.checkov)
    return Scan(report["summary"], _findings(report), template_scan.templates)


def _real(findings: list[Finding]) -> list[Finding]:
    """Findings on the suite's own templates: not on the canaries (cfn-lint's too, which checkov scans as well)."""
    return [f for f in findings if not f.template.startswith("canary/")]


def test_checkov_scanned_every_resource_of_every_template(scan):
    assert scan.summary["parsing_errors"] == 0, scan.summary
    # A template checkov failed to recognize as CloudFormation would be silently left out: count its resources.
    assert scan.summary["resource_count"] == sum(len(t["Resources"]) for t in scan.templates.values()), scan.summary
    assert scan.summary["passed"] > 1000, scan.summary


def test_no_failed_check_outside_the_skip_file(scan):
    failures = unskipped(_real(scan.findings), load_skips())
    if failures:
        pytest.fail(
            f"checkov: {len(failures)} failed check(s) not in checkov-skips.yaml. Fix "
            "the stack, or add an entry with its reason to checkov-skips.yaml:\n"
            + "\n".join(f.describe() for f in sorted(failures, key=Finding.describe))
        )


def test_every_skip_still_matches_a_failed_check(scan):
    real = _real(scan.findings)  # the canary must not keep a skip alive
    stale = [s for s in load_skips() if not any(s.matches(f) for f in real)]
    if stale:
        pytest.fail(
            "checkov-skips.yaml: entries that match no failed check any more (delete them):\n"
            + "\n".join(
                f"{s.id} types={list(s.resource_types)} resources={list(s.resources)} templates={list(s.templates)}"
                for s in stale
            )
        )


def test_checkov_and_the_skip_filter_report_a_bad_bucket(scan):
    canary = {
        f.check_id
        for f in unskipped(scan.findings, load_skips())
        if f.template == CANARY and f.logical_id == "ArtifactBucket"
    }
    assert CANARY_CHECKS <= canary, f"checkov or the skip filter missed {sorted(CANARY_CHECKS - canary)} on the canary"
    # The same bucket as synthesized passes them: the canary's removals are what checkov reports.
    real = {f.check_id for f in _real(scan.findings) if f.logical_id == "ArtifactBucket"}
    assert not real & CANARY_CHECKS, sorted(real)


def test_skip_file_entries_name_a_check_a_resource_type_and_a_reason(tmp_path):
    assert load_skips()  # the shipped file is well formed
    bad = tmp_path / "skips.yaml"
    bad.write_text(yaml.safe_dump({"skips": [{"id": "CKV_AWS_18", "reason": "no"}, {"id": "cloudformation"}]}))
    with pytest.raises(ValueError) as err:
        load_skips(bad)
    message = str(err.value)
    assert "resource_types must list" in message and "reason must say" in message and "id must be one" in message


# ---------------------------------------------------------------------------------------------------- cfn-lint


def _deploy_role_join(finding: dict) -> bool:
    """The one known finding, in CDK Pipelines' own output: the CloudFormation deploy actions name the target
    account's bootstrap deploy role with Fn::Join (E3703 prefers Fn::Sub, which CDK does not emit there)."""
    return (
        finding["Rule"]["Id"] == "E3703"
        and finding["Location"]["Path"][-2:] == ["Configuration", "RoleArn"]
        and finding["Filename"].endswith(f"{PIPELINE_PREFIX}llm-endpoints-pipeline.template.json")
    )


def test_cfn_lint_passes_on_every_template_the_suite_synthesizes(template_scan):
    """Each example in each environment, config/local.yaml built, the adopting variant, the pipeline and its stages'
    stacks: no finding but the known one, which sits on CloudFormation deploy actions only."""
    paths = [p for p in template_scan.templates if not p.startswith("canary/")]
    assert len(paths) > 30
    findings = template_scan.cfn_lint_findings_on(paths)
    unexpected = [f for f in findings if not _deploy_role_join(f)]
    assert unexpected == [], json.dumps(unexpected, indent=1)[-5000:]
    pipeline = template_scan.templates[f"{PIPELINE_PREFIX}llm-endpoints-pipeline.template.json"]
    [resource] = [r for r in pipeline["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    for f in findings:
        stage, action = f["Location"]["Path"][4], f["Location"]["Path"][6]
        provider = resource["Properties"]["Stages"][stage]["Actions"][action]["ActionTypeId"]["Provider"]
        assert provider == "CloudFormation"


def test_cfn_lint_would_catch_a_bad_timeout(template_scan):
    """The scan's cfn-lint canary: the local endpoint stack with ModelDataDownloadTimeoutInSeconds over 3600."""
    [finding] = template_scan.cfn_lint_findings_on([CFN_LINT_CANARY])
    assert (
        str(BAD_TIMEOUT) in finding["Message"]
        and finding["Location"]["Path"][-1] == "ModelDataDownloadTimeoutInSeconds"
    )
