"""Bases of the package's own ToolCallbacks, so that each rule they share has one home: a tool whose
definition and metadata are fixed when it is made, a tool that wraps another (and shows the model
and the loop what the wrapped one shows), and a built-in tool that answers bad arguments with an
``Error: ...`` text for the model instead of raising."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from .api import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition, ToolMetadata
from .schema import parse_arguments

__all__ = ["FixedTool", "ParsedTool", "WrappedTool"]


class FixedTool:
    """A ToolCallback whose definition and metadata are fixed when it is made (subclasses add
    ``call``)."""

    __slots__ = ("_definition", "_metadata")

    def __init__(self, definition: ToolDefinition, metadata: ToolMetadata | None = None) -> None:
        self._definition = definition
        self._metadata = metadata or ToolMetadata()

    @property
    def definition(self) -> ToolDefinition:
        """The tool's name, description and input schema."""
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        """How the loop treats the tool (return direct, approval)."""
        return self._metadata


class WrappedTool:
    """A ToolCallback around ``inner``: the model sees the wrapped tool's definition, the loop its
    metadata (approval and return direct included); subclasses add ``call``."""

    __slots__ = ("_inner",)

    def __init__(self, inner: ToolCallback) -> None:
        self._inner = inner

    @property
    def definition(self) -> ToolDefinition:
        """The wrapped tool's definition."""
        return self._inner.definition

    @property
    def metadata(self) -> ToolMetadata:
        """The wrapped tool's metadata."""
        return self._inner.metadata


class ParsedTool(FixedTool, ABC):
    """A built-in tool that reads a JSON object: arguments that are not one answer the model with
    ``Error: ...`` (it can correct itself); ``call_parsed`` gets the parsed object (the
    ToolCallingManager hands it over directly when it parsed the arguments already)."""

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Parse ``arguments`` and run ``call_parsed``; bad arguments are an ``Error: ...`` text."""
        try:
            parsed = parse_arguments(arguments, self.definition.name)
        except InvalidToolArgumentsError as exc:
            return f"Error: {exc}"
        return await self.call_parsed(parsed, context)

    @abstractmethod
    async def call_parsed(self, args: Mapping[str, Any], context: ToolContext | None) -> str:
        """Run the tool on its parsed arguments."""
