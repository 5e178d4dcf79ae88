"""Advisors: the contract (``api``), the chain (``chain``), ``BaseAdvisor`` (``base``) and the
built-in advisors, one module each."""

from ..tools.todo import TodoItem, TodoTools
from . import api
from .api import *  # noqa: F403
from .compaction import ContextCompactionAdvisor
from .history import HistoryReplacement
from .logging import SimpleLoggerAdvisor
from .memory import MessageChatMemoryAdvisor
from .request_retry import RequestRetryAdvisor
from .safeguard import SafeGuardAdvisor
from .structured_output import StructuredOutputValidationAdvisor
from .todo import TodoReminderAdvisor
from .tool_calling import ToolCallingAdvisor
from .tool_search import ToolSearchToolCallingAdvisor

__all__ = [
    "ContextCompactionAdvisor",
    "HistoryReplacement",
    "MessageChatMemoryAdvisor",
    "RequestRetryAdvisor",
    "SafeGuardAdvisor",
    "SimpleLoggerAdvisor",
    "StructuredOutputValidationAdvisor",
    "TodoItem",
    "TodoReminderAdvisor",
    "TodoTools",
    "ToolCallingAdvisor",
    "ToolSearchToolCallingAdvisor",
]
__all__ += api.__all__  # the contract: chain, request/response, BaseAdvisor, Ordered, markers
