"""advisorchain: Spring AI's advisor chain and recursive advisors for Python.

The public names below are imported on first use (PEP 562): ``import advisorchain.models.openai``
or ``advisorchain.messages`` loads only what it needs, not every advisor, memory backend and tool
module (and their pydantic and jsonschema), which a process of agents pays once at start-up and a
command line on every run."""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .advisors import (
        AdvisorChain,
        AdvisorParams,
        BaseAdvisor,
        CallAdvisor,
        CallAdvisorChain,
        ChatClientRequest,
        ChatClientResponse,
        ContextCompactionAdvisor,
        HistoryReplacement,
        MemoryAdvisor,
        MessageChatMemoryAdvisor,
        Ordered,
        RequestRetryAdvisor,
        SafeGuardAdvisor,
        SimpleLoggerAdvisor,
        StreamAdvisor,
        StreamAdvisorChain,
        StructuredOutputValidationAdvisor,
        TodoReminderAdvisor,
        ToolAdvisor,
        ToolCallingAdvisor,
        ToolSearchToolCallingAdvisor,
    )
    from .client import (
        AsyncCallResponseSpec,
        AsyncStreamResponseSpec,
        CallResponseSpec,
        ChatClient,
        ChatClientRequestSpec,
        ResponseEntity,
        StreamResponseSpec,
    )
    from .errors import (
        AdvisorChainError,
        ChainConfigurationError,
        ContextLengthExceededError,
        EvaluationFailedError,
        IncompleteAnswerError,
        InvalidResponseError,
        MaxIterationsExceeded,
        ModelConnectionError,
        ModelError,
        ModelStatusError,
        ModelTimeoutError,
        StructuredOutputValidationError,
        SyncInAsyncContextError,
        ToolCallLimitExceeded,
        ToolError,
        ToolExecutionError,
        UnsupportedRequestError,
        UsageLimitExceeded,
        VectorStoreError,
    )
    from .evaluation import (
        Case,
        CaseResult,
        EvaluationReport,
        EvaluationRequest,
        EvaluationResult,
        Evaluator,
        EvaluatorTotals,
        ExpectedAnswerEvaluator,
        FactCheckingEvaluator,
        LLMJudgeEvaluator,
        RelevancyEvaluator,
        SelfRefineEvaluationAdvisor,
        aevaluate_cases,
        evaluate_cases,
    )
    from .memory import (
        AtomicChatMemoryRepository,
        ChatMemory,
        ChatMemoryDecodeError,
        ChatMemoryRepository,
        InMemoryChatMemoryRepository,
        MessageWindowChatMemory,
        PostgresChatMemoryRepository,
        RedisChatMemoryRepository,
        SQLiteChatMemoryRepository,
    )
    from .messages import (
        AssistantMessage,
        Media,
        Message,
        MessageType,
        SystemMessage,
        ToolCall,
        ToolResponse,
        ToolResponseMessage,
        UserMessage,
        message_from_dict,
        message_to_dict,
    )
    from .model import (
        ChatClientMessageAggregator,
        ChatModel,
        ChatOptions,
        ChatResponse,
        ChatResponseMetadata,
        FinishReason,
        Generation,
        Prompt,
        Usage,
    )
    from .output import OutputConverter
    from .testing import FunctionChatModel, ScriptedChatModel
    from .tools import (
        Approved,
        Denied,
        FunctionTool,
        InvalidToolArgumentsError,
        ToolCallback,
        ToolCallingManager,
        ToolContext,
        ToolDefinition,
        ToolExecutionResult,
        ToolMetadata,
        ToolText,
        tool,
        tool_callbacks,
    )
    from .tools.todo import TodoItem, TodoTools
    from .usage import ModelPrice, RunUsage, UsageLimits

__version__ = "0.1.0"

__all__ = [
    "AdvisorChain",
    "AdvisorChainError",
    "AdvisorParams",
    "Approved",
    "AssistantMessage",
    "AsyncCallResponseSpec",
    "AsyncStreamResponseSpec",
    "AtomicChatMemoryRepository",
    "BaseAdvisor",
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
