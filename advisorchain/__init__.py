"""advisorchain: Spring AI's advisor chain and recursive advisors for Python.

The public names below are imported on first use (PEP 562): ``import advisorchain.models.openai``
or ``advisorchain.messages`` loads only what it needs, not every advisor, memory backend and tool
module (and their pydantic and jsonschema), which a process of agents pays once at start-up and a
command line on every run."""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:  # the names of __all__, for type checkers (at run time: __getattr__)
    from .advisors import *  # noqa: F403
    from .agents import *  # noqa: F403
    from .client import *  # noqa: F403
    from .errors import *  # noqa: F403
    from .evaluation import *  # noqa: F403
    from .memory import *  # noqa: F403
    from .messages import *  # noqa: F403
    from .model import *  # noqa: F403
    from .output import *  # noqa: F403
    from .testing import *  # noqa: F403
    from .tools import *  # noqa: F403
    from .tools.todo import *  # noqa: F403
    from .usage import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "AdvisorChain",
    "AdvisorChainError",
    "AdvisorParams",
    "Agent",
    "Approved",
    "AssistantMessage",
    "AsyncCallResponseSpec",
    "AsyncStreamResponseSpec",
    "AtomicChatMemoryRepository",
    "BaseAdvisor",
    "CacheReport",
    "CallAdvisor",
    "CallAdvisorChain",
    "CallResponseSpec",
    "Case",
    "CaseResult",
    "ChainConfigurationError",
    "ChatClient",
    "ChatClientMessageAggregator",
    "ChatClientRequest",
    "ChatClientRequestSpec",
    "ChatClientResponse",
    "ChatMemory",
    "ChatMemoryDecodeError",
    "ChatMemoryRepository",
    "ChatModel",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "ContextCompactionAdvisor",
    "ContextLengthExceededError",
    "Denied",
    "EvaluationFailedError",
    "EvaluationReport",
    "EvaluationRequest",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorTotals",
    "ExpectedAnswerEvaluator",
    "FactCheckingEvaluator",
    "FinishReason",
    "FunctionChatModel",
    "FunctionTool",
    "Generation",
    "Handoff",
    "HandoffAdvisor",
    "HistoryReplacement",
    "InMemoryChatMemoryRepository",
    "IncompleteAnswerError",
    "InvalidResponseError",
    "InvalidToolArgumentsError",
    "LLMJudgeEvaluator",
    "MaxIterationsExceeded",
    "Media",
    "MemoryAdvisor",
    "Message",
    "MessageChatMemoryAdvisor",
    "MessageType",
    "MessageWindowChatMemory",
    "ModelConnectionError",
    "ModelError",
    "ModelPrice",
    "ModelStatusError",
    "ModelTimeoutError",
    "Ordered",
    "OutputConverter",
    "PostgresChatMemoryRepository",
    "Prompt",
    "PromptCacheAdvisor",
    "RedisChatMemoryRepository",
    "RelevancyEvaluator",
    "RequestRetryAdvisor",
    "ResponseEntity",
    "RunUsage",
    "SQLiteChatMemoryRepository",
    "SafeGuardAdvisor",
    "ScriptedChatModel",
    "SelfRefineEvaluationAdvisor",
    "SimpleLoggerAdvisor",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "StreamResponseSpec",
    "StructuredOutputValidationAdvisor",
    "StructuredOutputValidationError",
    "SyncInAsyncContextError",
    "SystemMessage",
    "TodoItem",
    "TodoReminderAdvisor",
    "TodoTools",
    "ToolAdvisor",
    "ToolCall",
    "ToolCallLimitExceeded",
    "ToolCallback",
    "ToolCallingAdvisor",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolMetadata",
    "ToolResponse",
    "ToolResponseMessage",
    "ToolSearchToolCallingAdvisor",
    "ToolText",
    "UnsupportedRequestError",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserMessage",
    "VectorStoreError",
    "__version__",
    "aevaluate_cases",
    "evaluate_cases",
    "message_from_dict",
    "message_to_dict",
    "tool",
    "tool_callbacks",
]


# Where the public names live, lightest first: a name is looked up in these modules in turn.
_HOMES = (
    ".errors",
    ".messages",
    ".model",
    ".usage",
    ".output",
    ".client",
    ".advisors",
    ".tools",
    ".tools.todo",
    ".memory",
    ".testing",
    ".evaluation",
    ".agents",
)


def __getattr__(name: str) -> _typing.Any:
    if name not in __all__:
        raise AttributeError(f"module 'advisorchain' has no attribute {name!r}")
    for home in _HOMES:
        module = _importlib.import_module(home, __name__)
        if hasattr(module, name):
            value = getattr(module, name)
            globals()[name] = value  # found once: later lookups are plain attribute reads
            return value
    raise AttributeError(f"advisorchain.__all__ names {name!r}, but none of its modules defines it")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
