"""The repository stands on its own: no file points outside it or names an issue of a tracker its
reader cannot see, every relative link in the docs resolves to a file of the repository, and every
``docs/protocol.md §N`` citation names a section that exists. Files are those git tracks (plus new
ones not yet ignored), so a fresh clone sees the same."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"\.\./shared|DESIGN\.md|DESIGN §|ARCHITECTURE\.md|/work/|/home/[a-z]")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CITATION = re.compile(r"protocol\.md §(\d+)")
ISSUE = re.compile(r"\bissues?[ -]?#?\d+\b|\(issue[:)]", re.IGNORECASE)


def _files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=30).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary files carry no references


def test_no_file_points_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in _files() if p != this
             for m in [OUTSIDE.search(_text(p) or "")] if m]
    assert found == []


def test_no_file_names_an_issue_by_number() -> None:
    this = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in _files() if p != this and p.suffix != ".json"
             for m in [ISSUE.search(_text(p) or "")] if m]
    assert found == []


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for path in (p for p in _files() if p.suffix == ".md"):
        for target in LINK.findall(_text(path) or ""):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} → {target}")
    assert broken == []


def test_every_protocol_citation_names_a_section_that_exists() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "protocol.md").read_text(), re.MULTILINE))
    assert {str(n) for n in range(1, 12)} <= sections
    cited = {(str(p.relative_to(ROOT)), n) for p in _files() for n in CITATION.findall(_text(p) or "")}
    assert cited and [c for c in cited if c[1] not in sections] == []
