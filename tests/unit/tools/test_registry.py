"""The registry is the whitelist: names are unique and well-formed, schemas are objects, and what the
model sees (``definitions()``) is exactly the OpenAI ``tools`` format."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.tools import tool

from tests.fixtures.tool_rounds import Call, Calls
from tools.builtin import builtin_registry
from tools.registry import (
    DuplicateToolError,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolSpec,
    UnknownToolError,
)

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def _noop() -> str:
    return "ok"


def _spec(name: str = "noop", handler: Any = _noop, **kw: Any) -> ToolSpec:
    return ToolSpec.from_schema(
        name=name, description=f"{name} tool", parameters=kw.pop("parameters", OBJ), handler=handler, **kw
    )


# --- registration -------------------------------------------------------------------------------


def test_duplicate_name_is_refused_at_registration() -> None:
    registry = ToolRegistry([_spec("alpha")])
    with pytest.raises(DuplicateToolError, match="'alpha' is already registered"):
        registry.register(_spec("alpha", handler=lambda: "other"))
    assert len(registry) == 1
    assert registry.get("alpha").tool.func is _noop  # the first registration is kept


def test_duplicate_names_in_the_constructor_list_are_refused() -> None:
    with pytest.raises(DuplicateToolError):
        ToolRegistry([_spec("alpha"), _spec("alpha")])


def test_duplicate_tool_error_is_a_value_error_not_a_tool_error() -> None:
    # A programming mistake at start-up, not something the model should read.
    assert issubclass(DuplicateToolError, ValueError)
    assert not issubclass(DuplicateToolError, ToolError)


def test_unknown_name_raises_unknown_tool_error_listing_the_available_tools() -> None:
    registry = ToolRegistry([_spec("alpha"), _spec("beta")])
    with pytest.raises(UnknownToolError) as info:
        registry.get("gamma")
    message = str(info.value)
    assert "'gamma'" in message
    assert "available tools: alpha, beta" in message
    assert isinstance(info.value, ToolError)  # so the executor hands the message to the model verbatim


def test_unknown_name_in_an_empty_registry_says_none_are_available() -> None:
    with pytest.raises(UnknownToolError, match="available tools: none"):
        ToolRegistry().get("anything")


def test_find_contains_len_iter_and_names_follow_registration_order() -> None:
    specs = [_spec("zeta"), _spec("alpha"), _spec("mid-dle")]
    registry = ToolRegistry(specs)
    assert registry.names() == ["zeta", "alpha", "mid-dle"]
    assert list(registry) == specs
    assert len(registry) == 3
    assert "alpha" in registry
    assert "missing" not in registry
    assert registry.find("missing") is None
    assert registry.find("zeta") is specs[0]


def test_register_returns_the_spec() -> None:
    spec = _spec()
    assert ToolRegistry().register(spec) is spec


# --- ToolSpec construction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["ok", "snake_case", "kebab-case", "Mixed123", "a", "_x", "9lives", "x" * 64]
)
def test_valid_names_are_accepted(name: str) -> None:
    assert _spec(name).name == name


@pytest.mark.parametrize(
    "name",
    ["", "has space", "dot.name", "slash/name", "semi;colon", "quote'", "tab\tname", "new\nline", "-", "_"],
)
def test_invalid_names_are_refused_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="must be letters, digits"):
        _spec(name)


@pytest.mark.parametrize("name", ["计算器", "café", "x²", "x" * 65])
def test_names_outside_the_openai_name_pattern_are_refused(name: str) -> None:
    # Regression: str.isalnum() accepted any Unicode letter/digit and had no length cap, so the provider
    # rejected the whole request at call time instead of the registry refusing the tool up front.
    with pytest.raises(ValueError):
        _spec(name)


@pytest.mark.parametrize(
    "parameters",
    [
        {},
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}},
        {"properties": {"x": {"type": "string"}}},  # properties but no type
        {"type": ["object", "null"]},
    ],
)
def test_non_object_schemas_are_refused_at_construction(parameters: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="JSON Schema of type 'object'"):
        _spec(parameters=parameters)


def test_spec_is_frozen() -> None:
    spec = _spec()
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


# --- definitions (what the model sees) ----------------------------------------------------------


def test_definitions_produce_the_openai_tools_format() -> None:
    params = {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "query"}},
        "required": ["q"],
    }
    registry = ToolRegistry([_spec("search", parameters=params), _spec("noop")])
    definitions = registry.definitions()
    assert definitions == [
        {
            "type": "function",
            "function": {"name": "search", "description": "search tool", "parameters": params},
        },
        {"type": "function", "function": {"name": "noop", "description": "noop tool", "parameters": OBJ}},
    ]
    # Only the three OpenAI keys: no handler, timeout, permissions … leak to the model.
    for entry in definitions:
        assert set(entry) == {"type", "function"}
        assert set(entry["function"]) == {"name", "description", "parameters"}
    json.dumps(definitions)  # serialisable as the request body


def test_definition_does_not_expose_tool_context() -> None:
    def handler(q: str, tool_context: ToolContext) -> str:
        return q

    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    spec = _spec("ctx", handler=handler, parameters=params)
    assert "tool_context" not in json.dumps(spec.definition())


def test_builtin_registry_offers_calculator_and_current_date() -> None:
    registry = builtin_registry()
    assert registry.names() == ["calculator", "get_current_date"]
    for entry in registry.definitions():
        assert entry["type"] == "function"
        assert entry["function"]["parameters"]["type"] == "object"
        assert entry["function"]["description"]
    # Each call gets a fresh registry, so one app adding a tool does not leak into another.
    registry.register(_spec("extra"))
    assert "extra" not in builtin_registry()


# --- application tools ---------------------------------------------------------------------------


def test_add_registers_a_typed_function_or_a_langchain_tool_with_the_platform_defaults() -> None:
    registry = ToolRegistry()

    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    spec = registry.add(double, timeout=2.5, requires_approval=True)
    assert registry.get("double") is spec
    assert spec.description == "Double a number."
    assert spec.parameters["required"] == ["n"] and spec.parameters["properties"]["n"]["type"] == "integer"
    assert (spec.timeout, spec.requires_approval, spec.permissions, spec.source) == (2.5, True, (), "langchain")
    assert registry.tools() == [spec.tool]
    with pytest.raises(DuplicateToolError):
        registry.add(double)


def test_an_invalid_tool_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must be letters, digits"):
        ToolSpec.of(_noop, name="bad name", description="d")


def test_a_tool_context_parameter_is_hidden_from_the_model_and_async_handlers_get_a_blocking_twin() -> None:
    async def whoami(*, tool_context: ToolContext) -> str:
        return tool_context.user_id

    spec = ToolSpec.of(whoami, name="whoami", description="Who is asking.")
    assert spec.parameters.get("properties", {}) == {}
    assert spec.tool.coroutine is not None and spec.tool.func is not None  # graph.invoke runs it too
    [outcome] = Calls(ToolRegistry([spec])).run([Call("c", "whoami", {})], ToolContext(user_id="u7"))
    assert (outcome.status, outcome.content) == ("success", "u7")


# --- from_langchain -----------------------------------------------------------------------------


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    await asyncio.sleep(0)
    return text.upper() + "!"


@tool
def no_args() -> str:
    """Return a constant."""
    return "constant"


def test_from_langchain_wraps_a_tool_function() -> None:
    spec = ToolSpec.from_langchain(add)
    assert spec.name == "add"
    assert spec.description == "Add two integers."
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["a"]
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.definition()["function"]["name"] == "add"


def test_from_langchain_applies_overrides() -> None:
    spec = ToolSpec.from_langchain(add, name="plus", description="Sum.", timeout=1.5, source="mcp")
    assert (spec.name, spec.description, spec.timeout, spec.source) == ("plus", "Sum.", 1.5, "mcp")


def test_from_langchain_tool_without_arguments_gets_an_object_schema() -> None:
    spec = ToolSpec.from_langchain(no_args)
    assert spec.parameters["type"] == "object"
    assert spec.parameters.get("properties", {}) == {}


def test_wrapped_langchain_tools_run_through_the_executor_with_the_same_checks() -> None:
    registry = ToolRegistry([ToolSpec.from_langchain(t) for t in (add, shout, no_args)])
    calls = [
        Call("c1", "add", {"a": 3}),  # default b=2 filled
        Call("c2", "add", {"a": 3, "b": 4.0}),  # integer-valued float accepted
        Call("c3", "shout", {"text": "hi"}),
        Call("c4", "no_args", {}),
        Call("c5", "add", {"a": "three"}),  # refused by our validation, not by LangChain
        Call("c6", "add", {"a": 1, "c": 2}),  # invented argument refused
    ]
    outcomes = Calls(registry).run(calls, ToolContext())
    assert [o.call_id for o in outcomes] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert [(o.status, o.content) for o in outcomes[:4]] == [
        ("success", "5"),
        ("success", "7"),
        ("success", "HI!"),
        ("success", "constant"),
    ]
    assert outcomes[4].status == "error"
    assert "a: Input should be a valid integer" in outcomes[4].content
    assert outcomes[5].status == "error"
    assert "unexpected argument(s) 'c'" in outcomes[5].content
