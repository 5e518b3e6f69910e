"""The docs hold together: the README stays a front page, its generated system tables match the registry, and every
relative link and anchor in README.md, CONTRIBUTING.md and docs/ resolves to a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers import ROOT

from tools import readme_tables

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file defines: its headings' slugs (a repeated one gets -1, -2, ...) and HTML anchors."""
    text = FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of each Markdown link outside code, in the file's order."""
    text = path.read_text()
    blanked = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    blanked = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), blanked)
    return [(blanked[: m.start()].count("\n") + 1, m.group(1)) for m in LINK.finditer(blanked)]


def broken_links(path: Path) -> list[str]:
    problems = []
    for line, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < 200, f"README.md has {lines} lines: keep it a front page and move the reference to docs/"


def test_the_generated_system_tables_match_the_registry():
    """`python tools/readme_tables.py --check`, in process: a system added or changed in systems/ without the tables
    rewritten fails here."""
    stale = [path for path, (now, new) in readme_tables.rendered_files().items() if now != new]
    assert stale == [], f"stale generated system tables in {stale}: run python tools/readme_tables.py"


def test_the_table_check_fails_on_a_stale_block_and_names_a_missing_one(tmp_path):
    """The check can fail: a README whose block lost a row differs from the rendering, and a file without the markers
    is an error naming the file and the block."""
    readme = (ROOT / "README.md").read_text()
    rendered = readme_tables.rendered_files()["README.md"][1]
    assert rendered == readme
    row = next(line for line in readme.splitlines() if line.startswith("| `vllm` |"))
    edited = readme.replace(row + "\n", "")
    lines = readme_tables.systems_table(readme_tables.all_systems())
    assert readme_tables.render(edited, "systems", lines, "README.md") == readme
    with pytest.raises(ValueError, match=r"README\.md: no generated block 'systems'"):
        readme_tables.render("no markers here", "systems", lines, "README.md")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# A `code` heading: with punctuation\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-with-punctuation) [ok](other.md#twice-1) [ok](#here) `[not a link](x.md)`\n"
        "# Here\n[gone](missing.md) [bad](other.md#nowhere) [web](https://example.com/x.md)\n"
    )
    original = ROOT
    try:
        globals()["ROOT"] = tmp_path
        problems = broken_links(page)
    finally:
        globals()["ROOT"] = original
    assert [p.split(": ", 2)[1] for p in problems] == ["missing.md", "other.md#nowhere"]


def test_the_readme_example_is_a_valid_config(tmp_path):
    """The front page's YAML is a config the loader accepts, not a sketch."""
    from deployment import load_config

    readme = (ROOT / "README.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert example, "README.md shows no YAML endpoint"
    assert yaml.safe_load(example.group(1))["endpoints"][0]["system"] == "vllm"
    path = tmp_path / "readme.yaml"
    path.write_text(example.group(1))
    load_config(path, "dev", build_root=tmp_path / "build")
