"""Tools: the contract (``api``), the ``@tool`` decorator and ``tool_callbacks`` (``function``), and
the manager that executes tool calls (``manager``)."""

from .api import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition, ToolMetadata
from .function import FunctionTool, tool, tool_callbacks
from .manager import ToolCallingManager, ToolExecutionResult

__all__ = [
    "FunctionTool",
    "InvalidToolArgumentsError",
    "ToolCallback",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionResult",
    "ToolMetadata",
    "tool",
    "tool_callbacks",
]
