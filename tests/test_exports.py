from __future__ import annotations

import importlib

import advisorchain

# Every name API.md promises at the top level.
_CONTRACT = [
    "ToolCall",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolResponse",
    "ToolResponseMessage",
    "MessageType",
    "message_to_dict",
    "message_from_dict",
    "ChatOptions",
    "Prompt",
    "Usage",
    "Generation",
    "ChatResponse",
    "ChatResponseMetadata",
    "ChatModel",
    "ChatClientMessageAggregator",
    "Ordered",
    "ChatClientRequest",
    "ChatClientResponse",
    "CallAdvisor",
    "StreamAdvisor",
    "BaseAdvisor",
    "ToolAdvisor",
    "MemoryAdvisor",
    "CallAdvisorChain",
    "StreamAdvisorChain",
    "AdvisorParams",
    "ChatClient",
    "AdvisorChainError",
    "ToolExecutionError",
    "ToolCallLimitExceeded",
    "MaxIterationsExceeded",
    "StructuredOutputValidationError",
    "ModelError",
    "ChainConfigurationError",
    "FunctionChatModel",
    "ScriptedChatModel",
    "ToolDefinition",
    "ToolMetadata",
    "ToolCallback",
    "ToolContext",
    "ChatMemory",
    "ChatMemoryRepository",
]


def test_all_is_sorted_and_unique() -> None:
    assert list(advisorchain.__all__) == sorted(set(advisorchain.__all__))


def test_all_names_exist() -> None:
    missing = [n for n in advisorchain.__all__ if not hasattr(advisorchain, n)]
    assert missing == []


def test_every_public_name_of_the_package_is_in_all() -> None:
    public = {n for n in vars(advisorchain) if not n.startswith("_") and not _is_module(n)}
    assert public - set(advisorchain.__all__) == set()


def test_the_contract_names_are_exported() -> None:
    assert [n for n in _CONTRACT if n not in advisorchain.__all__] == []


def test_submodules_export_their_section_names() -> None:
    for module in ("messages", "model", "advisors", "client", "tools", "memory", "errors", "testing"):
        mod = importlib.import_module(f"advisorchain.{module}")
        names = getattr(mod, "__all__", [])
        assert names, module
        assert all(hasattr(mod, n) for n in names), module


def _is_module(name: str) -> bool:
    return type(getattr(advisorchain, name)).__name__ == "module"
