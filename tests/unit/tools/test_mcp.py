"""The bridge's pure parts: the names tools get, and the text a tool result becomes."""

from __future__ import annotations

import re

from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from tools.mcp_translate import assign_tool_names, result_text, safe_tool_name

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_names_keep_the_tools_own_name_when_nothing_clashes() -> None:
    names = assign_tool_names({"a": ["read", "write"], "b": ["search"]}, {})
    assert names == {("a", "read"): "read", ("a", "write"): "write", ("b", "search"): "search"}


def test_a_name_on_two_servers_is_prefixed_on_both() -> None:
    names = assign_tool_names({"a": ["read", "x"], "b": ["read"]}, {"b": "bee"})
    assert names == {("a", "read"): "a_read", ("a", "x"): "x", ("b", "read"): "bee_read"}


def test_a_name_already_registered_is_prefixed() -> None:
    names = assign_tool_names({"a": ["calculator"]}, {}, existing=["calculator"])
    assert names == {("a", "calculator"): "a_calculator"}


def test_a_prefixed_name_never_takes_a_plain_one() -> None:
    # "a_read" is a real tool of server c; server a's clashing "read" must not steal its name.
    names = assign_tool_names({"a": ["read"], "b": ["read"], "c": ["a_read"]}, {})
    assert names[("c", "a_read")] == "a_read"
    assert names[("a", "read")] == "a_read_2" and names[("b", "read")] == "b_read"


def test_unsafe_characters_and_long_names_are_fixed() -> None:
    assert safe_tool_name("files.read/all") == "files_read_all"
    assert safe_tool_name("检索") == "tool"
    assert len(safe_tool_name("x" * 100)) == 64
    names = assign_tool_names({"s" * 40: ["t" * 60], "other": ["t" * 60]}, {})
    assert all(VALID.fullmatch(name) for name in names.values())
    assert len(set(names.values())) == 2


def test_two_tools_that_sanitise_to_one_name_both_survive() -> None:
    names = assign_tool_names({"a": ["get.x", "get_x"]}, {})
    assert len(set(names.values())) == 2 and all(VALID.fullmatch(n) for n in names.values())


def test_text_parts_are_joined_and_other_content_described() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="one"),
            ImageContent(type="image", data="AAAA", mimeType="image/png"),
            ResourceLink(type="resource_link", name="doc", uri="file:///tmp/doc.txt"),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="memo://b", blob="AAAA", mimeType="application/pdf"),
            ),
            TextContent(type="text", text="two"),
        ]
    )
    assert result_text(result).splitlines() == [
        "one",
        "[image: image/png, 3 bytes, not shown]",
        "[resource link: doc file:///tmp/doc.txt]",
        "[binary resource memo://b, application/pdf]",
        "two",
    ]


def test_structured_content_is_json_when_there_is_no_text() -> None:
    only = CallToolResult(content=[], structuredContent={"answer": 42, "名": "值"})
    assert result_text(only) == '{"answer": 42, "名": "值"}'
    both = CallToolResult(content=[TextContent(type="text", text="42")], structuredContent={"result": 42})
    assert result_text(both) == "42"  # the server's own text wins: it is what it meant the reader to see
