"""Tools: the contract (``api``), the ``@tool`` decorator and ``tool_callbacks``, and the manager
that executes tool calls."""

from .api import ToolCallback, ToolContext, ToolDefinition, ToolMetadata

__all__ = ["ToolCallback", "ToolContext", "ToolDefinition", "ToolMetadata"]
