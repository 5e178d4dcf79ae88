"""The tool contract (defined in ``advisorchain._tool_types``, below the model layer that carries
tools in ``ChatOptions``; this module is its home inside the ``tools`` package)."""

from .._tool_types import (
    InvalidToolArgumentsError,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    ToolRegistry,
    ToolText,
)

__all__ = [
    "InvalidToolArgumentsError",
    "ToolCallback",
    "ToolContext",
    "ToolDefinition",
    "ToolMetadata",
    "ToolRegistry",
    "ToolText",
]
