"""Tools: the contract (``api``), the ``@tool`` decorator and ``tool_callbacks`` (``function``), and
the manager that executes tool calls (``manager``)."""

from typing import TYPE_CHECKING, Any

from .api import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition, ToolMetadata
from .function import FunctionTool, ToolCallbackProvider, tool, tool_callbacks

if TYPE_CHECKING:
    from .manager import ToolCallingManager, ToolExecutionResult

__all__ = [
    "FunctionTool",
    "InvalidToolArgumentsError",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionResult",
    "ToolMetadata",
    "tool",
    "tool_callbacks",
]

_LAZY = frozenset({"ToolCallingManager", "ToolExecutionResult"})


def __getattr__(name: str) -> Any:
    # The manager needs the model layer, which itself imports ``tools.api`` while it loads; importing
    # the manager on first use keeps that cycle open.
    if name in _LAZY:
        from . import manager

        return getattr(manager, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
