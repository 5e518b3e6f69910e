"""The repository stands alone: no file of it points at notes outside it (a reader of the code could not follow them)."""

from __future__ import annotations

import re
import subprocess

from helpers import ROOT

OUTSIDE = re.compile(r"FACTS\.md|\.\./shared\b")


def test_no_file_refers_to_notes_outside_the_repository():
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in files:
        path = ROOT / name
        if name == "tests/test_repository.py" or not path.is_file() or path.suffix in {".png", ".json"}:
            continue
        text = path.read_text(errors="ignore")
        found += [f"{name}:{text[: m.start()].count(chr(10)) + 1}" for m in OUTSIDE.finditer(text)]
    assert found == [], (
        "state the fact where it is used, with its upstream source, instead of pointing at: " + ", ".join(found)
    )
