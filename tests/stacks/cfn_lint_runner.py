"""cfn-lint over synthesized templates and one canary: a copy of one of them with a value made out of bounds, which
proves that cfn-lint checks the property (a run that reports nothing for the canary has not read the schema)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helpers import cfn_lint_findings


def lint_with_canary(
    tmp: Path, templates: Mapping[str, dict], canary: dict, *, ignore_rules: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """cfn-lint's findings (but `ignore_rules`) in `templates` (stack name -> template), and those in `canary`."""
    paths = []
    for stack, template in templates.items():
        paths.append(tmp / f"{stack}.template.json")
        paths[-1].write_text(json.dumps(template))
    canary_path = tmp / "canary.template.json"
    canary_path.write_text(json.dumps(canary))
    findings = [f for f in cfn_lint_findings([*paths, canary_path]) if f["Rule"]["Id"] not in set(ignore_rules)]
    in_canary = [f for f in findings if f["Filename"] == str(canary_path)]
    return [f for f in findings if f["Filename"] != str(canary_path)], in_canary
