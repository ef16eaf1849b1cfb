"""The README shows the real graph and every setting."""

from __future__ import annotations

import re
from pathlib import Path

from graph.server import graph
from nodes.settings import env_table

README = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")


def test_readme_diagram_is_the_compiled_graph() -> None:
    block = re.search(r"<!-- graph:start -->\n```mermaid\n(.*?)\n```\n<!-- graph:end -->", README, re.S)
    assert block is not None, "README lost its graph block"
    assert block.group(1) == graph.get_graph().draw_mermaid().rstrip("\n"), (
        "the graph changed: regenerate the README diagram"
    )


def test_readme_documents_every_setting() -> None:
    for variable, _default, _meaning in env_table():
        assert f"`{variable}`" in README


def test_readme_has_the_two_commands() -> None:
    assert 'pip install -e . && kb-agent ask "计算 123 × 456"' in README
    assert 'pip install -e ".[test]" && pytest' in README


def test_readme_settings_table_is_generated_from_the_settings() -> None:
    from dataclasses import fields

    from nodes.context import Context
    from nodes.settings import PER_RUN, settings_markdown

    assert set(PER_RUN) == {f.name for f in fields(Context)}, "every run knob says how it is capped"
    block = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", README, re.S)
    assert block is not None and block.group(1) == settings_markdown(), (
        "settings changed: regenerate the README table from nodes.settings.settings_markdown()"
    )
