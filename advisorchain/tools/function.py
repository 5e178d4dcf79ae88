"""Python functions as tools: the ``@tool`` decorator and ``tool_callbacks``.

>>> @tool
... def get_weather(city: Annotated[str, Field(description="City name")]) -> str:
...     '''The current weather in a city.'''
...     return "sunny"
>>> get_weather.definition.name
'get_weather'
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import queue
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload, runtime_checkable

import pydantic_core

from .api import ToolCallback, ToolContext, ToolDefinition, ToolMetadata, ToolRegistry
from .schema import ToolSignature, parse_arguments, tool_signature

__all__ = ["FunctionTool", "ToolCallbackProvider", "tool", "tool_callbacks"]

P = ParamSpec("P")
R = TypeVar("R")

_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _VALID_NAME.match(name):
        raise ValueError(
            f"invalid tool name {name!r}: use 1 to 64 letters, digits, '_' or '-' "
            "(give it one with @tool(name=...))"
        )
    return name


def encode_result(result: Any, tool_name: str | None = None) -> str:
    """A tool's return value as the text the model receives: str as is, None as "", else JSON.

    A value JSON cannot express (an arbitrary object, bytes that are not UTF-8, a circular
    structure) is a TypeError naming the tool and the value; nothing is made up in its place.
    """
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    try:
        return pydantic_core.to_json(result).decode()
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        preview = repr(result)
        preview = preview if len(preview) <= 80 else preview[:80] + "..."
        who = f"tool {tool_name!r}" if tool_name else "a tool"
        raise TypeError(
            f"{who} returned {preview}, which cannot be sent to the model as JSON ({exc}); return a "
            "str or a JSON value (dict, list, number, bool, pydantic model, dataclass)"
        ) from exc


class FunctionTool(Generic[P, R]):
    """A Python function (sync or async) as a ToolCallback; still callable like the function.

    Made by ``@tool``. Used on a method, it binds to the instance like a method does, and
    ``tool_callbacks(obj)`` collects the bound tools of ``obj``. Sync functions run in a worker
    thread, async ones on the event loop; non-str results are JSON-encoded, None becomes "".
    """

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        requires_approval: bool = False,
    ) -> None:
        if not callable(func):
            raise TypeError(f"@tool needs a function, got {func!r}")
        self.func = func
        self._name = _check_name(name if name is not None else getattr(func, "__name__", ""))
        self._description = description if description is not None else (inspect.getdoc(func) or self._name)
        self._metadata = ToolMetadata(return_direct=return_direct, requires_approval=requires_approval)
        self._is_async = inspect.iscoroutinefunction(func)
        self._owner: type | None = None
        self._instance: object | None = None
        self._signature: ToolSignature | None = None
        self._definition: ToolDefinition | None = None
        functools.update_wrapper(self, func)

    def __set_name__(self, owner: type, name: str) -> None:
        # Defined in a class body: a method, whose first parameter (self) is not a tool input.
        self._owner = owner

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> FunctionTool[P, R]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool[..., R]: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> FunctionTool[Any, R]:
        if instance is None or self._owner is None:
            return self
        self._resolve()
        bound = copy.copy(self)
        bound._instance = instance
        return bound

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._instance is not None:
            method: Callable[..., R] = self.func
            return method(self._instance, *args, **kwargs)
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"

    @property
    def name(self) -> str:
        """The tool's name as the model sees it."""
        return self._name

    @property
    def is_unbound_method(self) -> bool:
        """True for a ``@tool`` method read from its class rather than from an instance."""
        return self._owner is not None and self._instance is None

    @property
    def definition(self) -> ToolDefinition:
        """Name, description and input JSON schema."""
        if self._definition is None:
            self._definition = ToolDefinition(self._name, self._description, self._resolve().schema)
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        """``return_direct`` and ``requires_approval``."""
        return self._metadata

    def _resolve(self) -> ToolSignature:
        if self._signature is None:
            self._signature = tool_signature(
                self.func, skip_first=self._owner is not None, tool_name=self._name
            )
        return self._signature

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Run the function with the model's raw JSON ``arguments``; the ToolContext parameter, if
        any, receives ``context``. Bad arguments raise InvalidToolArgumentsError."""
        return await self.call_parsed(parse_arguments(arguments, self._name), context)

    async def call_parsed(self, arguments: Mapping[str, Any], context: ToolContext | None) -> str:
        """``call`` with the arguments already parsed from JSON (the ToolCallingManager parses
        them once and hands them over)."""
        if self.is_unbound_method:
            raise TypeError(
                f"tool {self._name!r} is a method of {self._owner.__name__}; "  # type: ignore[union-attr]
                "use it through an instance (tool_callbacks(obj))"
            )
        signature = self._resolve()
        kwargs = signature.bind(arguments, self._name)
        for param in signature.context_params:
            kwargs[param] = context if context is not None else ToolContext()
        target: Callable[..., Any] = self.func
        if self._instance is not None:
            target = functools.partial(target, self._instance)
        if self._is_async:
            result = await target(**kwargs)
        else:
            result = await _in_tool_thread(target, **kwargs)
        return encode_result(result, self._name)


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Declare a function or method as a tool: ``@tool`` or ``@tool(name=..., description=...,
    return_direct=..., requires_approval=...)``. The name defaults to the function's name, the
    description to its docstring; the input schema comes from the type hints (pydantic)."""

    def decorate(fn: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            fn,
            name=name,
            description=description,
            return_direct=return_direct,
            requires_approval=requires_approval,
        )

    return decorate if func is None else decorate(func)


@runtime_checkable
class ToolCallbackProvider(Protocol):
    """A source whose tools can change over time (an MCP server): ``tool_callbacks(...)`` and every
    request asks it for its current ToolCallbacks, so a ChatClient's ``default_tools`` stay fresh."""

    def get_tool_callbacks(self) -> Sequence[ToolCallback]: ...


def tool_callbacks(*objs: object) -> list[ToolCallback]:
    """Turn functions, objects with ``@tool`` methods (or a ``tool_callbacks()`` method),
    ToolCallbacks, ToolCallbackProviders, and lists of these into one list of ToolCallbacks;
    duplicate names raise ChainConfigurationError (a ValueError)."""
    result = unchecked_tool_callbacks(*objs)
    ToolRegistry(result)  # the one uniqueness check
    return result


def unchecked_tool_callbacks(*objs: object) -> list[ToolCallback]:
    """``tool_callbacks`` without the check of unique names, for a caller whose ``ToolRegistry``
    (a request's ``ChatOptions``) checks them anyway."""
    return [callback for obj in objs for callback in _callbacks_of(obj)]


def _callbacks_of(obj: object) -> list[ToolCallback]:
    if isinstance(obj, FunctionTool):
        if obj.is_unbound_method:
            raise ValueError(
                f"tool {obj.name!r} is a method read from its class; pass an instance of the class "
                "to tool_callbacks(...) instead"
            )
        return [obj]
    if isinstance(obj, ToolCallback):
        return [obj]
    if isinstance(obj, ToolCallbackProvider):
        return list(obj.get_tool_callbacks())
    if isinstance(obj, list | tuple):
        return [cb for item in obj for cb in _callbacks_of(item)]
    if inspect.isfunction(obj):
        return [_function_tool(obj)]
    if inspect.ismethod(obj):
        return [FunctionTool(obj)]
    found = _tool_methods(obj)
    provider = getattr(obj, "tool_callbacks", None)
    if callable(provider):
        found.extend(cb for item in provider() for cb in _callbacks_of(item))
    if not found:
        raise ValueError(
            f"{obj!r} is not a tool: pass a function, a ToolCallback, or an object with @tool methods"
        )
    return found


def _tool_methods(obj: object) -> list[ToolCallback]:
    """The bound ``@tool`` methods of ``obj``, in definition order (base classes first)."""
    names: dict[str, None] = {}
    for klass in reversed(type(obj).__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, FunctionTool | staticmethod) and _is_tool_attr(value):
                names[name] = None
    return [getattr(obj, name) for name in names]


def _is_tool_attr(value: object) -> bool:
    if isinstance(value, staticmethod):
        return isinstance(value.__func__, FunctionTool)
    return True


class _ToolThreads(Executor):
    """Threads for sync tools: an idle thread is reused, and a new one starts when none is idle.

    There is no upper bound on purpose: a sync tool may make a blocking advisorchain call (a
    sub-agent) whose own sync tools need threads while it waits, so any bound can be exhausted by
    enough nested calls at once and every one of them would wait forever. Threads idle for
    ``idle_timeout`` seconds end, so a burst leaves nothing behind.
    """

    def __init__(self, idle_timeout: float = 30.0) -> None:
        self._idle_timeout = idle_timeout
        self._mutex = threading.Lock()
        self._idle = 0
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        future: Future[R] = Future()
        work: _Work = (future, functools.partial(fn, *args, **kwargs))
        with self._mutex:
            if self._idle:
                self._idle -= 1
                self._queue.put(work)
                return future
        threading.Thread(target=self._worker, args=(work,), name="advisorchain-tool", daemon=True).start()
        return future

    def _worker(self, work: _Work) -> None:
        while True:
            future, call = work
            del work
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:
                    self._now_idle()  # before the caller learns the outcome, so its next call reuses us
                    future.set_exception(exc)
                else:
                    self._now_idle()
                    future.set_result(result)
            else:
                self._now_idle()
            del future, call
            try:
                work = self._queue.get(timeout=self._idle_timeout)
                continue
            except queue.Empty:
                pass
            with self._mutex:
                try:  # work handed over just as the wait ended (the submitter counted this thread)
                    work = self._queue.get_nowait()
                except queue.Empty:
                    self._idle -= 1
                    return

    def _now_idle(self) -> None:
        with self._mutex:
            self._idle += 1


_Work = tuple["Future[Any]", Callable[[], Any]]


# Sync tools get threads of their own: a tool that blocks (or that a timeout abandoned) never takes a
# thread from the loop's default pool, which memory I/O uses, and nested blocking calls never wait
# for a thread that one of their callers occupies.
_TOOL_THREADS = _ToolThreads()


async def _in_tool_thread(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``fn(**kwargs)`` in a tool thread, with the caller's context variables (as asyncio.to_thread)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _TOOL_THREADS, functools.partial(context.run, fn, **kwargs)
    )


# A plain (undecorated) function passed to .tools(...) on every request is described once.
_PLAIN_TOOLS: weakref.WeakKeyDictionary[Callable[..., Any], FunctionTool[Any, Any]] = (
    weakref.WeakKeyDictionary()
)


def _function_tool(fn: Callable[..., Any]) -> FunctionTool[Any, Any]:
    cached = _PLAIN_TOOLS.get(fn)
    if cached is None:
        cached = _PLAIN_TOOLS[fn] = FunctionTool(fn)
    return cached
