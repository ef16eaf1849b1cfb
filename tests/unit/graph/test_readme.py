"""The docs show the real graph and every setting, the README stays short, and no link is dangling."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from graph.server import graph
from nodes.settings import env_table

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
CONFIGURATION = ROOT / "docs" / "configuration.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_README_LINES = 200

# [text](target) outside code; an image's ![alt](target) too. Code spans and blocks are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_readme_has_the_two_commands() -> None:
    readme = text(README)
    assert 'pip install -e . && kb-agent ask "计算 123 × 456"' in readme
    assert 'pip install -e ".[test]" && pytest' in readme


def test_readme_is_at_most_200_lines() -> None:
    lines = text(README).count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move the detail into docs/"


def test_diagram_is_the_compiled_graph() -> None:
    block = re.search(
        r"<!-- graph:start -->\n```mermaid\n(.*?)\n```\n<!-- graph:end -->", text(ARCHITECTURE), re.S
    )
    assert block is not None, "docs/architecture.md lost its graph block"
    assert block.group(1) == graph.get_graph().draw_mermaid().rstrip("\n"), (
        "the graph changed: regenerate the diagram in docs/architecture.md"
    )


def test_configuration_documents_every_setting() -> None:
    configuration = text(CONFIGURATION)
    missing = [
        variable for variable, _default, _meaning in env_table() if f"`{variable}`" not in configuration
    ]
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_settings_table_is_generated_from_the_settings() -> None:
    from dataclasses import fields

    from nodes.context import Context
    from nodes.settings import PER_RUN, settings_markdown

    assert set(PER_RUN) == {f.name for f in fields(Context)}, "every run knob says how it is capped"
    block = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", text(CONFIGURATION), re.S)
    assert block is not None and block.group(1) == settings_markdown(), (
        "settings changed: regenerate the table in docs/configuration.md from nodes.settings.settings_markdown()"
    )


def anchors(markdown: str) -> set[str]:
    """The ids GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", markdown), re.M):
        plain = CODE_SPAN.sub(lambda m: m.group(0)[1:-1], heading)
        slug = "".join(c for c in plain.lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
        found.add(slug.replace(" ", "-"))
    return found


def relative_links(markdown: str) -> list[str]:
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    return [t for t in LINK.findall(prose) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize(
    "page", [README, ROOT / "ARCHITECTURE.md", *DOCS], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_relative_link_points_at_a_file(page: Path) -> None:
    broken = []
    for target in relative_links(text(page)):
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(text(dest)):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_link_check_sees_links() -> None:
    """Guards the check above against a pattern that silently matches nothing."""
    sample = "See [a](docs/a.md), [b](../b.md#two-words) and [web](https://x.y); `[c](c.md)` is code."
    assert relative_links(sample) == ["docs/a.md", "../b.md#two-words"]
    assert anchors("# Title\n## Two words\n### `kb-agent serve`: replicas\n```\n# not a heading\n```") == {
        "title",
        "two-words",
        "kb-agent-serve-replicas",
    }
    assert len(relative_links(text(README))) >= len(DOCS), "README.md should link to every page in docs/"
