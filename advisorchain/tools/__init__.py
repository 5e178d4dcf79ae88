"""Tools: the contract (``api``), the ``@tool`` decorator and ``tool_callbacks`` (``function``), the
manager that executes tool calls (``manager``), and approval decisions (``approvals``)."""

from .api import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition, ToolMetadata, ToolText
from .approvals import Approved, Denied
from .function import FunctionTool, ToolCallbackProvider, tool, tool_callbacks
from .manager import ToolCallingManager, ToolCallingManagerProtocol, ToolExecutionResult

__all__ = [
    "Approved",
    "Denied",
    "FunctionTool",
    "InvalidToolArgumentsError",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolCallingManager",
    "ToolCallingManagerProtocol",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionResult",
    "ToolMetadata",
    "ToolText",
    "tool",
    "tool_callbacks",
]
