"""The tool contract: what a tool looks like to the model (definition), to the loop (metadata) and
to the caller (an async ``call`` taking the raw argument JSON), and the registry that names the tools
of one request.

It sits at the bottom of the package (next to ``messages``) because the model layer's
``ChatOptions`` carries tools; the public names are re-exported from ``advisorchain.tools``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import ChainConfigurationError, ToolError
from .messages import Media

__all__ = [
    "InvalidToolArgumentsError",
    "ToolCallback",
    "ToolContext",
    "ToolDefinition",
    "ToolMetadata",
    "ToolRegistry",
    "ToolText",
]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model sees of a tool: its name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolMetadata:
    """How the loop treats a tool: ``return_direct`` sends its result straight to the caller;
    ``requires_approval`` runs a call only once a person approved it (see ``advisorchain.tools.Approved``)."""

    return_direct: bool = False
    requires_approval: bool = False


@runtime_checkable
class ToolCallback(Protocol):
    """A tool the loop can run: ``call`` takes the model's raw JSON arguments and returns text."""

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def metadata(self) -> ToolMetadata: ...

    async def call(self, arguments: str, context: ToolContext | None) -> str: ...


class ToolContext(Mapping[str, Any]):
    """A read-only mapping handed to tools: the request's tool context, plus ``conversation_id``
    when the request names a conversation and ``tool_call_id`` (the id of the call being run). A
    tool parameter annotated ``ToolContext`` receives it."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        merged = dict(data or {})
        merged.update(more)
        self._data = merged

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ToolContext({self._data!r})"

    @property
    def conversation_id(self) -> str | None:
        """The conversation this tool call belongs to, when the request named one."""
        value = self._data.get("conversation_id")
        return None if value is None else str(value)

    @property
    def tool_call_id(self) -> str | None:
        """The id of the tool call being run (the model's id for it)."""
        value = self._data.get("tool_call_id")
        return None if value is None else str(value)

    @property
    def run_id(self) -> str | None:
        """The workflow id of the durable run (Temporal, DBOS) this call belongs to, else None.
        With ``self["tool_call_id"]`` it is the key a tool with side effects deduplicates on: a
        crash makes the call in flight run again, with the same key."""
        value = self._data.get("run_id")
        return None if value is None else str(value)


class ToolText(str):
    """A tool's text result that carries media beside it (an MCP tool's image, say).

    It is a ``str``, so it goes wherever a tool's result goes (the ``ToolCallback`` protocol is
    unchanged); the ToolCallingManager copies ``media`` into the call's ``ToolResponse``, and each
    provider adapter sends it in its own way. A tool of your own may return one too::

        return ToolText("The chart is attached.", [Media("image/png", data=png_bytes)])
    """

    media: tuple[Media, ...]

    def __new__(cls, text: str = "", media: Iterable[Media] = ()) -> ToolText:
        value = super().__new__(cls, text)
        value.media = tuple(media)
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolText, (str(self), self.media))

    def __repr__(self) -> str:
        return f"ToolText({str(self)!r}, media={list(self.media)!r})"


class InvalidToolArgumentsError(ToolError, ValueError):
    """The arguments a model sent for a tool are malformed or do not match its input schema.

    Raise it from a ToolCallback's ``call`` to have the ToolCallingManager hand the message to the
    model as an error text it can act on (name the argument and say what to fix).
    """


class ToolRegistry:
    """The tools of one request by name, with their definitions resolved once.

    The one place that enforces unique tool names: two tools with one name raise
    ``ChainConfigurationError`` (a ValueError) naming both. ``ChatOptions`` builds it once, so the
    adapters (definitions) and the ToolCallingManager (lookup) of every round share it.
    """

    __slots__ = ("_by_name", "definitions")

    def __init__(self, callbacks: Iterable[ToolCallback] = ()) -> None:
        by_name: dict[str, ToolCallback] = {}
        definitions: list[ToolDefinition] = []
        for callback in callbacks:
            definition = getattr(callback, "definition", None)
            if not isinstance(definition, ToolDefinition) or not callable(getattr(callback, "call", None)):
                raise ChainConfigurationError(
                    f"{callback!r} is not a ToolCallback (a definition and an async call); turn "
                    "functions and objects into ToolCallbacks with advisorchain.tools.tool_callbacks(...)"
                )
            other = by_name.get(definition.name)
            if other is not None:
                raise ChainConfigurationError(
                    f"two tools are named {definition.name!r} in one request ({other!r} and "
                    f"{callback!r}); tool names must be unique — rename one with @tool(name=...)"
                )
            by_name[definition.name] = callback
            definitions.append(definition)
        self._by_name = by_name
        self.definitions: tuple[ToolDefinition, ...] = tuple(definitions)
        """The tools' definitions, in registration order."""

    def get(self, name: str) -> ToolCallback | None:
        """The tool named ``name``, or None."""
        return self._by_name.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, in registration order."""
        return tuple(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __bool__(self) -> bool:
        return bool(self._by_name)


EMPTY_REGISTRY = ToolRegistry()
