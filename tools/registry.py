"""The tool registry: the application's whitelist of what the model may ask to run.

The model only proposes calls. The registry decides: unknown names are refused, arguments are checked
against the tool's JSON Schema before the handler runs, and every refusal is worded so the model can
correct itself on the next round.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from tools.nesting import depth_message, too_deep

_NAME = re.compile(
    r"(?=.*[A-Za-z0-9])[A-Za-z0-9_-]{1,64}"
)  # what OpenAI-style endpoints accept as a function name


class ToolError(Exception):
    """A call that could not run; the message is what the model reads in the tool message."""


class DuplicateToolError(ValueError):
    """Raised at registration: two tools may not share a name."""


class UnknownToolError(ToolError):
    """The model asked for a tool that is not registered (or not offered this turn)."""


class ToolArgumentError(ToolError):
    """Arguments that do not match the tool's schema."""


class RunSettings(Protocol):
    """What tools read of the run's settings (the graph's ``Settings`` is one): who calls, with which
    roles and groups, and the knobs of the knowledge tools. Tools take it as given, with no defaults of
    their own, so a value the run does not carry is an error rather than a silent guess."""

    user_id: str
    roles: str
    default_roles: str
    user_roles: str
    role_permissions: str
    feedback_penalty: float

    @property
    def group_list(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class ToolContext:
    """What a handler may know about the run without the model supplying it (hidden from its schema)."""

    user_id: str = "default"
    thread_id: str | None = None
    timezone: str = ""
    settings: RunSettings | None = None  # the run's settings; None outside a run
    run_id: str | None = None
    history: tuple[Any, ...] = ()  # the thread's messages up to this call (read-only), e.g. for feedback
    answers: Any = None  # the thread's recorded answers (message id -> digest and cited chunks), for feedback
    grant: Any = None  # a tools.permissions.Grant; None: derived from ``settings`` (neither: nothing granted)
    # Where side-effecting calls of this tools step are recorded (a stores.tool_effects.StepEffects); None:
    # not recorded, so a re-run of the step runs them again.
    effects: Any = None

    def run_settings(self) -> RunSettings:
        """The run's settings, for a tool that cannot work without them (which store, which groups)."""
        if self.settings is None:
            raise ToolError("this tool needs the run it belongs to (its caller and settings); call it from a run")
        return self.settings


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, a description written for the model, a JSON Schema and the local handler.

    A handler takes the validated arguments as keywords; if it declares a ``tool_context`` parameter it
    also gets the :class:`ToolContext`. It may be sync or async.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    timeout: float | None = None
    permissions: tuple[str, ...] = ()
    requires_approval: bool = False
    source: str = "builtin"
    domain: str = "general"  # for tool search: which area of work the tool belongs to
    always_on: bool = False  # bound every turn, whatever the tool search picks
    # Changes something outside the run (a record, a memory, a document): done once per tool_call_id, a
    # re-run of the tools node (resume after a crash) gets the recorded result (``stores.tool_effects``).
    side_effects: bool = False
    # For approvals: the exact action in words, from the validated arguments and the run's ToolContext.
    describe: Callable[[dict[str, Any], ToolContext], str] | None = field(default=None, compare=False)
    wants_context: bool = field(default=False, compare=False)
    # Why the tool cannot work for a run's settings ("" when it can; None: it always can). Such a tool is
    # not offered to the model, and a call that names it anyway is an error carrying the reason.
    unavailable: Callable[[Any], str] | None = field(default=None, compare=False)

    def unavailable_for(self, settings: Any) -> str:
        """The reason this tool cannot work in a run with ``settings`` ("" when it can, or when unknown)."""
        if self.unavailable is None or settings is None:
            return ""
        return self.unavailable(settings)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(
                f"tool name {self.name!r} must be letters, digits, '_' or '-' (ASCII, 1-64 characters)"
            )
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be a JSON Schema of type 'object'")
        try:
            wants = "tool_context" in inspect.signature(self.handler).parameters
        except (TypeError, ValueError):
            wants = False
        object.__setattr__(self, "wants_context", wants)

    @property
    def is_async(self) -> bool:
        call = getattr(self.handler, "__call__", None)  # noqa: B004 - an object whose __call__ is async
        return inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(call)

    def definition(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry the model sees (name, description, parameters); built once."""
        return self._definition

    @functools.cached_property
    def _definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @classmethod
    def from_langchain(cls, tool: BaseTool, **overrides: Any) -> ToolSpec:
        """Wrap a LangChain tool (e.g. one loaded from an MCP server) so it gets the same checks."""
        params = convert_to_openai_tool(tool)["function"].get("parameters") or {
            "type": "object",
            "properties": {},
        }

        async def call(**kwargs: Any) -> Any:
            return await tool.ainvoke(kwargs)

        return cls(
            name=overrides.pop("name", tool.name),
            description=overrides.pop("description", tool.description or tool.name),
            parameters=params,
            handler=call,
            **{"source": "langchain", **overrides},
        )


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, specs: list[ToolSpec] | None = None) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for spec in specs or []:
            self.register(spec)

    def register(self, spec: ToolSpec) -> ToolSpec:
        if spec.name in self._tools:
            raise DuplicateToolError(f"a tool named {spec.name!r} is already registered")
        self._tools[spec.name] = spec
        return spec

    def tool(
        self, name: str, description: str, parameters: dict[str, Any], **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of :meth:`register`."""

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(
                ToolSpec(name=name, description=description, parameters=parameters, handler=fn, **options)
            )
            return fn

        return wrap

    def get(self, name: str) -> ToolSpec:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(self._tools) or "none"
            raise UnknownToolError(f"unknown tool {name!r}; available tools: {known}") from None

    def find(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        return [spec.definition() for spec in self._tools.values()]


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, expected: str | list[str]) -> bool:
    names = [expected] if isinstance(expected, str) else list(expected)
    for name in names:
        kinds = _JSON_TYPES.get(name)
        if kinds is None:
            return True  # a type we do not know: let the handler decide
        if isinstance(value, bool) and name in {"integer", "number"}:
            continue  # JSON booleans are not numbers
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, kinds):
            return True
    return False


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: booleans never equal numbers (Python's ``True == 1`` does not apply)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _check(value: Any, schema: Any, path: str, problems: list[str]) -> None:
    if schema is False:
        problems.append(f"{path or 'arguments'}: no value is allowed here")
        return
    if not isinstance(schema, dict):
        return  # ``true`` (anything goes) or a form we do not check
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf") or []
        if not any(not _problems(value, option, path) for option in options):
            problems.append(f"{path}: {value!r} matches none of the allowed forms")
        return
    expected = schema.get("type")
    if expected is not None and not _type_ok(value, expected):
        problems.append(f"{path}: expected {expected}, got {type(value).__name__} {value!r:.60}")
        return
    if "enum" in schema and not any(_same_json(value, option) for option in schema["enum"]):
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{path}: must be at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: must be at most {schema['maxLength']} characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: must be ≥ {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: must be ≤ {schema['maximum']}")
    if isinstance(value, dict) and (expected == "object" or "properties" in schema):
        _check_object(value, schema, path, problems)
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", problems)


def _check_object(value: dict[str, Any], schema: dict[str, Any], path: str, problems: list[str]) -> None:
    props: dict[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for name in schema.get("required", []):
        if name not in value:
            problems.append(f"missing required argument '{prefix}{name}'")
    if schema.get("additionalProperties") is False or (path == "" and props):
        extra = sorted(set(value) - set(props))
        if extra:
            allowed = ", ".join(props) or "none"
            problems.append(
                f"unexpected argument(s) {', '.join(repr(prefix + e) for e in extra)}; allowed: {allowed}"
            )
    for name, sub in props.items():
        if name in value:
            _check(value[name], sub, f"{prefix}{name}", problems)


def _problems(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    problems: list[str] = []
    _check(value, schema, path, problems)
    return problems


def validate_arguments(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """Check ``args`` against the tool's schema; return them with defaults filled, or raise ToolArgumentError.

    Extra top-level arguments are refused whenever the schema lists its properties: a model that invents
    an argument has misunderstood the tool, and silently dropping it would hide that.
    """
    if not isinstance(args, dict):
        raise ToolArgumentError(
            f"arguments for {spec.name!r} must be a JSON object, got {type(args).__name__}"
        )
    if too_deep(args):  # before anything below recurses over them
        raise ToolArgumentError(depth_message(f"the arguments for {spec.name!r}"))
    problems = _problems(args, spec.parameters)
    if problems:
        raise ToolArgumentError(f"invalid arguments for {spec.name!r}: " + "; ".join(problems))
    filled = dict(args)
    for name, sub in spec.parameters.get("properties", {}).items():
        if name not in filled and isinstance(sub, dict) and "default" in sub:
            filled[name] = sub["default"]
    return _integers(filled, spec.parameters)


def _integers(value: Any, schema: Any) -> Any:
    """Turn integer-valued floats (``3.0``) into ints wherever the schema expects an integer."""
    if not isinstance(schema, dict):
        return value
    expected = schema.get("type")
    names = [expected] if isinstance(expected, str) else list(expected or [])
    if isinstance(value, float) and value.is_integer() and "integer" in names and "number" not in names:
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _integers(v, props.get(k)) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_integers(v, schema["items"]) for v in value]
    return value
