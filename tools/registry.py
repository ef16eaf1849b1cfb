"""The tool registry: the application's whitelist of what the model may ask to run.

Tools are LangChain ``BaseTool``s, run by LangGraph's ``ToolNode``; pydantic checks their arguments. The
registry adds what a platform needs to know about each (:class:`ToolSpec`: permissions, approval, side
effects, timeout, where tool search files it), which the policies around every call enforce
(``tools.policies``). The model only proposes calls: unknown names are refused, and every refusal is
worded so the model can correct itself on the next round.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, ValidationError

from tools.workers import run_on_daemon_worker, run_on_thread_loop

# LangChain validates a tool's arguments with its ``runtime`` among them, then dumps them with pydantic,
# which warns on every call that the graph's state (a dataclass) and context are not the dict and None of
# ``ToolRuntime``'s defaults. The values are passed through untouched; the warning is noise for users.
warnings.filterwarnings(
    "ignore",
    message=r"(?s)Pydantic serializer warnings:\s*PydanticSerializationUnexpectedValue\(Expected `(dict\[any, any\]|none)`"
    r" - serialized value may not be as expected \[field_name='(state|context)'",
    category=UserWarning,
)

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
    """Arguments that do not match the tool's schema (said in the words the model can act on)."""


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

    def __repr__(self) -> str:  # the history can be long: tracing shows who and where, not every message
        return f"ToolContext(user_id={self.user_id!r}, thread_id={self.thread_id!r}, run_id={self.run_id!r})"

    def run_settings(self) -> RunSettings:
        """The run's settings, for a tool that cannot work without them (which store, which groups)."""
        if self.settings is None:
            raise ToolError("this tool needs the run it belongs to (its caller and settings); call it from a run")
        return self.settings


CallContext = ToolContext
"""How a handler asks for the run's :class:`ToolContext`: a ``tool_context: CallContext`` parameter. The
tool LangChain sees takes LangGraph's ``runtime: ToolRuntime`` in its place (hidden from the model's
schema, injected by ``ToolNode``), and the context is read from the round riding in its config."""

STEP_KEY = "__kb_agent_tool_step"  # where a round of calls (tools.policies.ToolStep) rides in the run's config


CURRENT_STEP: contextvars.ContextVar[Any] = contextvars.ContextVar("kb_agent_tool_step", default=None)
"""The round a call belongs to (a ``tools.policies.ToolStep``), set around each call by the outermost
policy when the round is not in the run's config: the graph's own ``ToolNode`` node."""


def current_step(runtime: Any) -> Any:
    """The round of a call: from the run's config (``ToolRounds.call``), else the one being run here."""
    config = getattr(runtime, "config", None) or {}
    step = config.get("configurable", {}).get(STEP_KEY)
    return step if step is not None else CURRENT_STEP.get()


def context_of(runtime: Any) -> ToolContext:
    """The run's ToolContext for a call, from its ``ToolRuntime``; none outside the platform's rounds (then
    a tool that needs its caller says so, and nothing needing a permission is granted)."""
    context = getattr(current_step(runtime), "context", None)
    return context if isinstance(context, ToolContext) else ToolContext()


def _optional_not_nullable(schema: dict[str, Any]) -> None:
    """An optional argument is shown as its type, not "that type or null": the model simply leaves it out
    (pydantic still accepts a null), and every round's request is shorter by the difference."""
    for name, prop in list((schema.get("properties") or {}).items()):
        options = prop.get("anyOf") if isinstance(prop, dict) else None
        if not options or prop.get("default", "") is not None or name in (schema.get("required") or []):
            continue
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1 and isinstance(kept[0], dict):
            rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            schema["properties"][name] = {**kept[0], **rest}


def _json_schema_problems(schema: dict[str, Any], args: dict[str, Any]) -> list[str]:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))[:10]
    except SchemaError:  # a server's schema we cannot read: its server checks the arguments
        return []
    problems: list[str] = []
    for error in errors:
        where = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [n for n in error.validator_value if n not in (error.instance or {})]
            problems.extend(f"missing required argument {(where + '.' if where else '') + n!r}" for n in missing)
        else:
            problems.append(f"{where or 'arguments'}: {error.message[:200]}")
    return problems


def _problem(error: Any) -> str:
    """One pydantic error in words the model can act on."""
    where = ".".join(str(p) for p in error.get("loc", ())) or "arguments"
    if error.get("type") == "missing":
        return f"missing required argument {where!r}"
    return f"{where}: {error.get('msg', 'invalid')} (got {error.get('input')!r:.60})"


def _is_async(handler: Callable[..., Any]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def _on_thread_loop(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The blocking form of an async handler, for ``graph.invoke``: run on the calling thread's own loop."""

    def blocking(**kwargs: Any) -> Any:
        return run_on_thread_loop(handler(**kwargs))

    target = handler if inspect.isfunction(handler) or inspect.ismethod(handler) else handler.__call__  # type: ignore[operator]
    try:
        hints = get_type_hints(target, include_extras=True)
    except Exception:  # annotations that do not resolve: LangChain reads the signature alone
        hints = {}
    blocking.__signature__ = inspect.signature(handler)  # type: ignore[attr-defined]
    blocking.__annotations__ = hints
    blocking.__name__ = blocking.__qualname__ = getattr(handler, "__name__", type(handler).__name__)
    blocking.__doc__ = handler.__doc__
    return blocking


def _on_worker(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The awaitable form of a blocking handler: it runs on a daemon worker, so one that hangs past its
    timeout holds neither the event loop's executor nor the process's exit."""

    async def on_worker(**kwargs: Any) -> Any:
        return await run_on_daemon_worker(handler, kwargs)

    return on_worker


def _with_runtime(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` as LangChain should see it: its ``tool_context`` parameter replaced by ``runtime:
    ToolRuntime``, so ``ToolNode`` injects the runtime and the handler still gets the ToolContext."""
    signature = inspect.signature(handler)
    if "tool_context" not in signature.parameters:
        return handler
    hints = get_type_hints(handler, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != "tool_context"
    ]
    params.append(inspect.Parameter("runtime", inspect.Parameter.KEYWORD_ONLY, annotation=ToolRuntime))
    returns = hints.get("return", signature.return_annotation)
    if _is_async(handler):

        async def acall(*args: Any, runtime: ToolRuntime, **kwargs: Any) -> Any:
            return await handler(*args, tool_context=context_of(runtime), **kwargs)

        call: Callable[..., Any] = acall
    else:

        def scall(*args: Any, runtime: ToolRuntime, **kwargs: Any) -> Any:
            return handler(*args, tool_context=context_of(runtime), **kwargs)

        call = scall
    call.__signature__ = signature.replace(parameters=params, return_annotation=returns)  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in params}, "return": returns}
    call.__name__ = call.__qualname__ = handler.__name__
    call.__doc__ = handler.__doc__
    return call


@dataclass(frozen=True)
class ToolSpec:
    """A LangChain tool and the platform's policy for it.

    ``tool`` is any ``BaseTool`` (a ``@tool`` function, an MCP tool, one of ours): LangGraph's ``ToolNode``
    runs it, and pydantic validates its arguments against its schema. The fields below are what the
    policies around each call read: who may run it, whether a person approves it first, whether it changes
    something (then it runs once per call id), how long it may take, and where tool search files it.
    """

    tool: BaseTool
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
    # Why the tool cannot work for a run's settings ("" when it can; None: it always can). Such a tool is
    # not offered to the model, and a call that names it anyway is an error carrying the reason.
    unavailable: Callable[[Any], str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tool, BaseTool):
            raise TypeError(f"a ToolSpec wraps a LangChain BaseTool, got {type(self.tool).__name__}")
        if not _NAME.fullmatch(self.tool.name):
            raise ValueError(
                f"tool name {self.tool.name!r} must be letters, digits, '_' or '-' (ASCII, 1-64 characters)"
            )

    @classmethod
    def of(cls, handler: Callable[..., Any], *, name: str, description: str, **policy: Any) -> ToolSpec:
        """A tool from a typed function: its parameters (``Annotated[..., Field(...)]`` for limits) are
        the pydantic schema; a ``tool_context: CallContext`` parameter gets the run's context."""
        is_async = _is_async(handler)
        handler = _with_runtime(handler)
        tool = StructuredTool.from_function(
            func=_on_thread_loop(handler) if is_async else handler,
            coroutine=handler if is_async else _on_worker(handler),
            name=name,
            description=description,
        )
        return cls(tool, **policy)

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: Callable[..., Any],
        *,
        sync: Callable[..., Any] | None = None,
        **policy: Any,
    ) -> ToolSpec:
        """A tool whose arguments are given as a JSON Schema (an MCP server's, a generated catalog's). Such
        arguments are checked by the tool's own server, not here: LangChain passes them through. An async
        ``handler`` may come with a blocking twin, ``sync``, for ``graph.invoke``."""
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise ValueError(f"tool {name!r}: parameters must be a JSON Schema of type 'object'")
        is_async = _is_async(handler)
        handler = _with_runtime(handler)
        tool = StructuredTool(
            name=name,
            description=description,
            args_schema=parameters,
            func=(sync or _on_thread_loop(handler)) if is_async else handler,
            coroutine=handler if is_async else _on_worker(handler),
        )
        return cls(tool, **policy)

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments the model supplies (injected ones left out)."""
        return self._definition["function"].get("parameters") or {"type": "object", "properties": {}}

    def argument_problems(self, args: dict[str, Any]) -> list[str]:
        """What is wrong with ``args`` for this tool (empty: nothing): pydantic's findings for a typed tool,
        the ``jsonschema`` validator's for a tool described by a JSON Schema (an MCP server's)."""
        schema = self.tool.tool_call_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                schema.model_validate(args)
            except ValidationError as exc:
                return [_problem(error) for error in exc.errors()[:10]]
            return []
        return _json_schema_problems(self.parameters, args)

    def unavailable_for(self, settings: Any) -> str:
        """The reason this tool cannot work in a run with ``settings`` ("" when it can, or when unknown)."""
        if self.unavailable is None or settings is None:
            return ""
        return self.unavailable(settings)

    def definition(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry the model sees (name, description, parameters); built once."""
        return self._definition

    @functools.cached_property
    def _definition(self) -> dict[str, Any]:
        definition = convert_to_openai_tool(self.tool)
        parameters = definition["function"].get("parameters")
        if isinstance(parameters, dict):
            _optional_not_nullable(parameters)
        return definition

    @classmethod
    def from_langchain(cls, tool: BaseTool, *, name: str = "", description: str = "", **policy: Any) -> ToolSpec:
        """An application's LangChain tool (``@tool``), with the platform's defaults unless ``policy`` says;
        ``name``/``description`` rename it (e.g. to avoid a clash) without touching the original."""
        update: dict[str, Any] = {k: v for k, v in (("name", name), ("description", description)) if v}
        if isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None:
            update["func"] = _on_thread_loop(tool.coroutine)  # an async-only tool works under graph.invoke too
        if update:
            tool = tool.model_copy(update=update)
        return cls(tool, **{"source": "langchain", **policy})


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

    def add(self, tool: BaseTool | Callable[..., Any], **policy: Any) -> ToolSpec:
        """Register an application's tool: a ``BaseTool`` (e.g. ``@tool``) or a typed function."""
        if not isinstance(tool, BaseTool):
            tool = StructuredTool.from_function(tool)
        return self.register(ToolSpec.from_langchain(tool, **policy))

    def tools(self) -> list[BaseTool]:
        """The LangChain tools, for LangGraph's ``ToolNode``."""
        return [spec.tool for spec in self._tools.values()]

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
