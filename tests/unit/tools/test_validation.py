"""Argument validation, checked both directly and as what the model reads next (the ToolOutcome).

A refused call must not reach the handler, and its message must say what to change.
"""

from __future__ import annotations

from typing import Any

import pytest

from tools.executor import ToolCallRequest, ToolExecutor, ToolOutcome
from tools.registry import (
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolSpec,
    validate_arguments,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "unit": {"type": "string", "enum": ["m", "km"], "default": "m"},
        "label": {"type": "string", "minLength": 2, "maxLength": 5},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}, "mode": {"type": "string", "enum": ["a", "b"]}},
            "required": ["depth"],
            "additionalProperties": False,
        },
        "maybe": {"type": ["string", "null"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["all"]}]},
    },
    "required": ["count"],
}


class Recorder:
    """A handler that records every call it receives."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"received": kwargs}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def spec(recorder: Recorder) -> ToolSpec:
    return ToolSpec(name="measure", description="d", parameters=SCHEMA, handler=recorder)


def run_one(spec: ToolSpec, args: Any) -> ToolOutcome:
    [outcome] = ToolExecutor(ToolRegistry([spec])).run(
        [ToolCallRequest("call-1", spec.name, args)], ToolContext()
    )
    return outcome


# --- what the model sees: refusals through the executor ---------------------------------------------

REFUSALS = [
    pytest.param({}, "missing required argument 'count'", id="missing-required"),
    pytest.param(
        {"count": 1, "colour": "red"}, "unexpected argument(s) 'colour'; allowed: count,", id="extra"
    ),
    pytest.param({"count": "3"}, "count: expected integer, got str '3'", id="string-for-integer"),
    pytest.param({"count": True}, "count: expected integer, got bool True", id="bool-for-integer"),
    pytest.param(
        {"count": 1, "ratio": False}, "ratio: expected number, got bool False", id="bool-for-number"
    ),
    pytest.param({"count": 2.5}, "count: expected integer, got float 2.5", id="fractional-float-for-integer"),
    pytest.param({"count": None}, "count: expected integer, got NoneType None", id="null-for-integer"),
    pytest.param({"count": 1, "flag": "yes"}, "flag: expected boolean, got str", id="string-for-boolean"),
    pytest.param({"count": 1, "unit": "mile"}, "unit: 'mile' is not one of ['m', 'km']", id="enum"),
    pytest.param({"count": 0}, "count: must be ≥ 1", id="minimum"),
    pytest.param({"count": 11}, "count: must be ≤ 10", id="maximum"),
    pytest.param({"count": 1, "label": "x"}, "label: must be at least 2 characters", id="minLength"),
    pytest.param({"count": 1, "label": "toolong"}, "label: must be at most 5 characters", id="maxLength"),
    pytest.param({"count": 1, "tags": "a,b"}, "tags: expected array, got str", id="string-for-array"),
    pytest.param({"count": 1, "tags": ["a", 2]}, "tags[1]: expected string, got int 2", id="array-item"),
    pytest.param({"count": 1, "opts": "deep"}, "opts: expected object, got str", id="string-for-object"),
    pytest.param({"count": 1, "opts": {}}, "missing required argument 'opts.depth'", id="nested-required"),
    pytest.param(
        {"count": 1, "opts": {"depth": "x"}}, "opts.depth: expected integer, got str", id="nested-type"
    ),
    pytest.param(
        {"count": 1, "opts": {"depth": 1, "mode": "c"}}, "opts.mode: 'c' is not one of", id="nested-enum"
    ),
    pytest.param(
        {"count": 1, "opts": {"depth": 1, "x": 1}},
        "unexpected argument(s) 'opts.x'; allowed: depth, mode",
        id="nested-extra",
    ),
    pytest.param({"count": 1, "maybe": 3}, "maybe: expected ['string', 'null'], got int 3", id="type-list"),
    pytest.param(
        {"count": 1, "either": "some"}, "either: 'some' matches none of the allowed forms", id="anyOf"
    ),
]


@pytest.mark.parametrize(("args", "expected"), REFUSALS)
def test_invalid_arguments_come_back_as_an_error_outcome_and_the_handler_is_not_called(
    spec: ToolSpec, recorder: Recorder, args: dict[str, Any], expected: str
) -> None:
    outcome = run_one(spec, args)
    assert outcome.status == "error"
    assert outcome.call_id == "call-1"
    assert outcome.name == "measure"
    assert outcome.content.startswith("Error: invalid arguments for 'measure': ")
    assert expected in outcome.content
    assert outcome.error is not None and expected in outcome.error
    assert recorder.calls == []


@pytest.mark.parametrize(("args", "expected"), REFUSALS)
def test_validate_arguments_raises_tool_argument_error(
    spec: ToolSpec, args: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        validate_arguments(spec, args)
    assert expected in str(info.value)
    assert isinstance(info.value, ToolError)


def test_all_problems_are_reported_together(spec: ToolSpec) -> None:
    with pytest.raises(ToolArgumentError) as info:
        validate_arguments(spec, {"count": 0, "unit": "mile", "extra": 1})
    message = str(info.value)
    assert "unexpected argument(s) 'extra'" in message
    assert "count: must be ≥ 1" in message
    assert "unit: 'mile' is not one of" in message
    assert message.count("; ") >= 2


@pytest.mark.parametrize("args", [None, [], ["count", 1], "count=1", 3, 1.5, True])
def test_non_dict_arguments_are_refused(spec: ToolSpec, recorder: Recorder, args: Any) -> None:
    with pytest.raises(ToolArgumentError, match=r"arguments for 'measure' must be a JSON object, got "):
        validate_arguments(spec, args)
    outcome = run_one(spec, args)
    assert outcome.status == "error"
    assert "must be a JSON object, got " + type(args).__name__ in outcome.content
    assert recorder.calls == []


# --- accepted arguments -------------------------------------------------------------------------------


def test_valid_arguments_reach_the_handler_with_defaults_filled(spec: ToolSpec, recorder: Recorder) -> None:
    outcome = run_one(spec, {"count": 3})
    assert outcome.status == "success"
    assert recorder.calls == [{"count": 3, "unit": "m"}]


def test_defaults_do_not_override_given_values(spec: ToolSpec) -> None:
    assert validate_arguments(spec, {"count": 3, "unit": "km"}) == {"count": 3, "unit": "km"}


def test_validate_arguments_does_not_mutate_its_input(spec: ToolSpec) -> None:
    args = {"count": 3.0}
    validate_arguments(spec, args)
    assert args == {"count": 3.0}
    assert isinstance(args["count"], float)


def test_integer_valued_float_is_accepted_and_converted_to_int(spec: ToolSpec, recorder: Recorder) -> None:
    filled = validate_arguments(spec, {"count": 3.0})
    assert filled["count"] == 3 and type(filled["count"]) is int
    run_one(spec, {"count": 10.0})
    assert type(recorder.calls[0]["count"]) is int


def test_number_accepts_integers_and_floats(spec: ToolSpec) -> None:
    assert validate_arguments(spec, {"count": 1, "ratio": 2})["ratio"] == 2
    assert validate_arguments(spec, {"count": 1, "ratio": 0.25})["ratio"] == 0.25


def test_a_full_valid_call_passes_every_rule(spec: ToolSpec) -> None:
    args = {
        "count": 10,
        "ratio": -1.5,
        "flag": False,
        "unit": "km",
        "label": "ab",
        "tags": [],
        "opts": {"depth": 2, "mode": "b"},
        "maybe": None,
        "either": "all",
    }
    assert validate_arguments(spec, args) == args
    assert validate_arguments(spec, {**args, "tags": ("x", "y"), "maybe": "s", "either": 7})["either"] == 7


def test_schema_without_listed_properties_accepts_any_object() -> None:
    spec = ToolSpec(name="free", description="d", parameters={"type": "object"}, handler=lambda **kw: kw)
    assert validate_arguments(spec, {"anything": [1, 2]}) == {"anything": [1, 2]}


def test_additional_properties_false_without_properties_refuses_everything() -> None:
    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    spec = ToolSpec(name="now", description="d", parameters=closed, handler=lambda: "2024-01-01")
    assert validate_arguments(spec, {}) == {}
    with pytest.raises(ToolArgumentError, match=r"unexpected argument\(s\) 'now'; allowed: none"):
        validate_arguments(spec, {"now": "2024-01-01"})


def test_the_model_cannot_smuggle_in_a_tool_context(recorder: Recorder) -> None:
    params = {"type": "object", "properties": {"q": {"type": "string"}}}

    def handler(q: str, tool_context: ToolContext) -> str:
        return tool_context.user_id

    spec = ToolSpec(name="who", description="d", parameters=params, handler=handler)
    outcome = run_one(spec, {"q": "x", "tool_context": {"user_id": "root"}})
    assert outcome.status == "error"
    assert "unexpected argument(s) 'tool_context'" in outcome.content


# --- regressions (bugs found while writing these tests) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "args", "pick"),
    [
        (
            {
                "type": "object",
                "properties": {"o": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            },
            {"o": {"n": 2.0}},
            lambda filled: filled["o"]["n"],
        ),
        (
            {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}},
            {"xs": [1.0, 2.0]},
            lambda filled: filled["xs"][1],
        ),
        (
            {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}},
            {"n": 2.0},
            lambda filled: filled["n"],
        ),
    ],
    ids=["nested-object", "array-items", "type-list"],
)
def test_integer_valued_floats_are_converted_wherever_an_integer_is_expected(
    schema: dict[str, Any], args: dict[str, Any], pick: Any
) -> None:
    spec = ToolSpec(name="ints", description="d", parameters=schema, handler=lambda **kw: kw)
    assert type(pick(validate_arguments(spec, args))) is int


def test_boolean_property_schemas_are_tolerated() -> None:
    spec = ToolSpec(
        name="mcp",
        description="d",
        parameters={"type": "object", "properties": {"x": True}},
        handler=lambda **kw: kw,
    )
    assert validate_arguments(spec, {"x": 1}) == {"x": 1}


def test_enum_does_not_confuse_booleans_with_numbers() -> None:
    spec = ToolSpec(
        name="lvl",
        description="d",
        parameters={"type": "object", "properties": {"lvl": {"enum": [0, 1]}}},
        handler=lambda **kw: kw,
    )
    with pytest.raises(ToolArgumentError):
        validate_arguments(spec, {"lvl": True})


def test_number_typed_floats_stay_floats() -> None:
    params = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": ["integer", "number"]}}}
    spec = ToolSpec(name="num", description="d", parameters=params, handler=lambda **kw: kw)
    filled = validate_arguments(spec, {"x": 2.0, "y": 3.0})
    assert type(filled["x"]) is float and type(filled["y"]) is float


def test_enum_still_matches_equal_numbers_and_booleans_of_its_own_kind() -> None:
    params = {"type": "object", "properties": {"z": {"enum": [1, True]}}}
    spec = ToolSpec(name="en", description="d", parameters=params, handler=lambda **kw: kw)
    assert validate_arguments(spec, {"z": 1.0}) == {"z": 1.0}
    assert validate_arguments(spec, {"z": True}) == {"z": True}


def test_a_false_property_schema_forbids_the_property() -> None:
    spec = ToolSpec(
        name="nox",
        description="d",
        parameters={"type": "object", "properties": {"x": False}},
        handler=lambda **kw: kw,
    )
    with pytest.raises(ToolArgumentError, match="no value is allowed"):
        validate_arguments(spec, {"x": 1})
