"""cfn-lint over synthesized templates and one canary: a copy of one of them with a value made out of bounds, which
proves that cfn-lint checks the property (a run that reports nothing for the canary has not read the schema)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hermetic import subprocess_env

CFN_LINT = Path(sys.executable).parent / "cfn-lint"  # the venv running the suite (cfn-lint 1.58)


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
    result = subprocess.run(
        [str(CFN_LINT), "--format", "json", *map(str, paths), str(canary_path)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # cfn-lint exits with the levels found OR-ed together (2 error, 4 warning, 8 informational); anything else broke.
    assert result.returncode in (0, 2, 4, 6, 8, 10, 12, 14), result.stderr[-3000:]
    findings = [f for f in json.loads(result.stdout) if f["Rule"]["Id"] not in set(ignore_rules)]
    in_canary = [f for f in findings if f["Filename"] == str(canary_path)]
    return [f for f in findings if f["Filename"] != str(canary_path)], in_canary
