"""The tool contract: what a tool looks like to the model (definition), to the loop (metadata) and
to the caller (an async ``call`` taking the raw argument JSON)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["InvalidToolArgumentsError", "ToolCallback", "ToolContext", "ToolDefinition", "ToolMetadata"]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model sees of a tool: its name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolMetadata:
    """How the loop treats a tool: ``return_direct`` sends its result straight to the caller;
    ``requires_approval`` asks for a human decision before each call runs."""

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
    when the request names a conversation. A tool parameter annotated ``ToolContext`` receives it."""

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


class InvalidToolArgumentsError(ValueError):
    """The arguments a model sent for a tool are malformed or do not match its input schema.

    Raise it from a ToolCallback's ``call`` to have the ToolCallingManager hand the message to the
    model as an error text it can act on (name the argument and say what to fix).
    """
