"""Advisors: the contract (``api``), the chain (``chain``), ``BaseAdvisor`` (``base``) and the
built-in advisors, one module each."""

from ..tools.todo import TodoItem, TodoTools
from .api import (
    AdvisorChain,
    AdvisorParams,
    BaseAdvisor,
    CallAdvisor,
    CallAdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    MemoryAdvisor,
    Ordered,
    StreamAdvisor,
    StreamAdvisorChain,
    ToolAdvisor,
)
from .compaction import ContextCompactionAdvisor
from .history import HistoryReplacement
from .logging import SimpleLoggerAdvisor
from .memory import MessageChatMemoryAdvisor
from .prompt_cache import CacheReport, PromptCacheAdvisor
from .request_retry import RequestRetryAdvisor
from .safeguard import SafeGuardAdvisor
from .structured_output import StructuredOutputValidationAdvisor
from .todo import TodoReminderAdvisor
from .tool_calling import ToolCallingAdvisor
from .tool_search import ToolSearchToolCallingAdvisor

__all__ = [
    # the contract (api): the chain and what travels it
    "CallAdvisor",
    "StreamAdvisor",
    "AdvisorChain",
    "CallAdvisorChain",
    "StreamAdvisorChain",
    "ChatClientRequest",
    "ChatClientResponse",
    "BaseAdvisor",
    "Ordered",
    "AdvisorParams",
    "ToolAdvisor",
    "MemoryAdvisor",
    # the built-in advisors
    "ToolCallingAdvisor",
    "ToolSearchToolCallingAdvisor",
    "StructuredOutputValidationAdvisor",
    "MessageChatMemoryAdvisor",
    "ContextCompactionAdvisor",
    "HistoryReplacement",
    "RequestRetryAdvisor",
    "PromptCacheAdvisor",
    "CacheReport",
    "SafeGuardAdvisor",
    "SimpleLoggerAdvisor",
    "TodoReminderAdvisor",
    "TodoItem",
    "TodoTools",
]
