"""Argument validation by pydantic, as the model reads it next: a refused call never reaches the tool, and
its message names what to change. The policies add what pydantic leaves open: invented arguments,
arguments nested too deep, and names that are not the model's to fill (the run's context)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tests.fixtures.tool_rounds import Call, Calls, Outcome
from tools.registry import CallContext, ToolContext, ToolRegistry, ToolSpec


class Opts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int
    mode: Literal["a", "b"] = "a"


class Recorder:
    """The tool's body: records every call it receives."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def spec(self) -> ToolSpec:
        def measure(
            count: Annotated[int, Field(ge=1, le=10, strict=True)],
            ratio: float | None = None,
            unit: Literal["m", "km"] = "m",
            label: Annotated[str | None, Field(min_length=2, max_length=5)] = None,
            tags: list[str] | None = None,
            opts: Opts | None = None,
        ) -> dict[str, Any]:
            received = {"count": count, "ratio": ratio, "unit": unit, "label": label, "tags": tags, "opts": opts}
            self.calls.append(received)
            return {"unit": unit, "count": count}

        return ToolSpec.of(measure, name="measure", description="Measure something.")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def run_one(spec: ToolSpec, args: Any) -> Outcome:
    [outcome] = Calls(ToolRegistry([spec])).run([Call("call-1", spec.name, args)], ToolContext())
    return outcome


REFUSALS = [
    pytest.param({}, "missing required argument 'count'", id="missing-required"),
    pytest.param({"count": 1, "colour": "red"}, "unexpected argument(s) 'colour'; allowed: count,", id="extra"),
    pytest.param({"count": "3"}, "count: Input should be a valid integer", id="string-for-integer"),
    pytest.param({"count": 2.5}, "count: Input should be a valid integer", id="fractional-float"),
    pytest.param({"count": None}, "count: Input should be a valid integer", id="null-for-integer"),
    pytest.param({"count": 1, "unit": "mile"}, "unit: Input should be 'm' or 'km'", id="enum"),
    pytest.param({"count": 0}, "count: Input should be greater than or equal to 1", id="minimum"),
    pytest.param({"count": 11}, "count: Input should be less than or equal to 10", id="maximum"),
    pytest.param({"count": 1, "label": "x"}, "label: String should have at least 2 characters", id="min-length"),
    pytest.param({"count": 1, "label": "toolong"}, "label: String should have at most 5 characters", id="max-length"),
    pytest.param({"count": 1, "tags": "a,b"}, "tags: Input should be a valid list", id="string-for-array"),
    pytest.param({"count": 1, "tags": ["a", 2]}, "tags.1: Input should be a valid string", id="array-item"),
    pytest.param({"count": 1, "opts": {}}, "missing required argument 'opts.depth'", id="nested-required"),
    pytest.param({"count": 1, "opts": {"depth": 1, "mode": "c"}}, "opts.mode: Input should be 'a' or 'b'", id="nested-enum"),
    pytest.param({"count": 1, "opts": {"depth": 1, "x": 1}}, "opts.x: Extra inputs are not permitted", id="nested-extra"),
]


@pytest.mark.parametrize(("args", "expected"), REFUSALS)
def test_invalid_arguments_come_back_as_an_error_and_the_tool_is_not_run(
    recorder: Recorder, args: dict[str, Any], expected: str
) -> None:
    outcome = run_one(recorder.spec(), args)
    assert (outcome.status, outcome.call_id, outcome.name) == ("error", "call-1", "measure")
    assert outcome.content.startswith("Error: invalid arguments for 'measure': ")
    assert expected in outcome.content
    assert recorder.calls == []


def test_all_problems_are_reported_together(recorder: Recorder) -> None:
    outcome = run_one(recorder.spec(), {"count": 0, "unit": "mile", "label": "x"})
    assert all(word in outcome.content for word in ("count:", "unit:", "label:"))


@pytest.mark.parametrize("args", ["count=3", '["count", 3]', "3"])
def test_arguments_that_are_not_a_json_object_are_refused(recorder: Recorder, args: str) -> None:
    """LangChain's parser files such calls under ``invalid_tool_calls``; each still gets its answer."""
    call = Call("c", "measure", args, error="Function measure arguments are not a JSON object")
    [outcome] = Calls(ToolRegistry([recorder.spec()])).run([call], ToolContext())
    assert outcome.status == "error" and "not valid JSON" in outcome.content
    assert recorder.calls == []


def test_valid_arguments_reach_the_tool_with_defaults_filled(recorder: Recorder) -> None:
    outcome = run_one(recorder.spec(), {"count": 3, "opts": {"depth": 2}})
    assert outcome.status == "success"
    [received] = recorder.calls
    assert received["unit"] == "m" and received["opts"] == Opts(depth=2, mode="a")


def test_the_schema_the_model_sees_holds_the_limits(recorder: Recorder) -> None:
    parameters = recorder.spec().parameters
    assert parameters["required"] == ["count"]
    assert parameters["properties"]["count"]["minimum"] == 1 and parameters["properties"]["count"]["maximum"] == 10
    assert parameters["properties"]["unit"]["enum"] == ["m", "km"]


def test_the_model_cannot_smuggle_in_a_tool_context_or_a_runtime() -> None:
    def who(q: str, *, tool_context: CallContext) -> str:
        return tool_context.user_id

    spec = ToolSpec.of(who, name="who", description="Who is asking.")
    assert set(spec.parameters["properties"]) == {"q"}
    for name in ("tool_context", "runtime"):
        outcome = run_one(spec, {"q": "x", name: {"user_id": "root"}})
        assert outcome.status == "error" and f"unexpected argument(s) '{name}'" in outcome.content
    [outcome] = Calls(ToolRegistry([spec])).run([Call("c", "who", {"q": "x"})], ToolContext(user_id="alice"))
    assert (outcome.status, outcome.content) == ("success", "alice")


def test_a_json_schema_tool_has_its_arguments_checked_by_the_jsonschema_validator() -> None:
    """An MCP server's tool is described by a JSON Schema: checked with ``jsonschema``, never sent when wrong."""
    received: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "o": {"type": "object", "required": ["d"]}},
        "required": ["n"],
    }
    spec = ToolSpec.from_schema("remote", "d", schema, lambda **kw: received.append(kw) or "ok")
    wrong = run_one(spec, {"n": "x"})
    assert wrong.status == "error" and "n: 'x' is not of type 'integer'" in wrong.content
    assert "n: 0 is less than the minimum of 1" in run_one(spec, {"n": 0}).content
    assert "missing required argument 'o.d'" in run_one(spec, {"n": 1, "o": {}}).content
    outcome = run_one(spec, {"m": 1})
    assert outcome.status == "error" and "missing required argument 'n'; unexpected argument(s) 'm'" in outcome.content
    assert received == []
    assert run_one(spec, {"n": 2}).status == "success" and received == [{"n": 2}]
