"""The front door: README.md stays short, every relative link in the docs resolves, and
docs/rules.md is what scripts/rules_catalogue.py makes of the rule registry."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import typer

from infertriage.cli.app import app
from infertriage.diagnose import RULES

ROOT = Path(__file__).resolve().parents[1]
READMES = (ROOT / "README.md", ROOT / "README.zh-CN.md")
PAGES = (*READMES, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
MAX_README_LINES = 300

_LINK = re.compile(r"!?\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file defines (duplicates numbered as GitHub numbers them)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _prose(path):
        found.update(_EXPLICIT_ANCHOR.findall(line))
        match = _HEADING.match(line)
        if not match:
            continue
        slug = _slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (web and mail links left out)."""
    targets = [m for line in _prose(path) for m in _LINK.findall(line)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


def _catalogue() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rules_catalogue", ROOT / "scripts" / "rules_catalogue.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_the_readme_is_short(readme: Path) -> None:
    count = len(readme.read_text(encoding="utf-8").splitlines())
    assert count < MAX_README_LINES, f"{readme.name} has {count} lines: move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_catches_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Real heading\n\n## Two `words`: here\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md) [ok](b.md#two-words-here) [web](https://example.com/x)\n"
        "[gone](c.md) [bad anchor](b.md#nothing)\n```\n[in code](d.md)\n```\n"
        "[self](#local) [self bad](#nowhere)\n\n## Local\n"
    )
    assert broken_links(page) == [
        "c.md: no such file",
        "b.md#nothing: no heading #nothing in b.md",
        "#nowhere: no heading #nowhere in a.md",
    ]


def test_the_readme_links_the_docs() -> None:
    readme = links(ROOT / "README.md")
    assert "docs/index.md" in readme
    for command in _commands():
        assert f"docs/commands/{command}.md" in readme, f"README lists no page for {command}"


def _commands() -> list[str]:
    root = typer.main.get_command(app)
    return sorted(root.commands)  # type: ignore[attr-defined]


def test_every_command_has_its_page() -> None:
    index = links(ROOT / "docs" / "commands" / "index.md")
    for command in _commands():
        assert (ROOT / "docs" / "commands" / f"{command}.md").is_file(), command
        assert f"{command}.md" in index, f"docs/commands/index.md does not link {command}"


def test_the_rules_catalogue_is_the_registry() -> None:
    committed = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == _catalogue().render(), (
        "docs/rules.md differs from the rule registry: run `python scripts/rules_catalogue.py`"
    )


def test_the_catalogue_lists_every_rule_once() -> None:
    text = _catalogue().render()
    for rule_id in RULES:
        assert text.count(f"\n### {rule_id}\n") == 1, rule_id
