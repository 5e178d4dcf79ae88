"""The exception tree of advisorchain.

Every error the library raises on purpose derives from one root::

    AdvisorChainError
    ├── ChainConfigurationError (also ValueError)   bad advisors, tools, chain set-up
    ├── SyncInAsyncContextError (also RuntimeError) a sync method used inside a running loop
    ├── ModelError                                  a provider failed (.status_code when HTTP)
    │   └── ContextLengthExceededError              the prompt does not fit the model's context
    ├── ToolExecutionError                          a tool failed and raise_on_error was set
    ├── ToolCallLimitExceeded                       a per-turn tool-call limit was hit
    ├── MaxIterationsExceeded                       the tool loop ran out of iterations
    ├── StructuredOutputValidationError             the answer never matched the schema
    ├── EvaluationFailedError                       self-refinement ran out of attempts
    ├── VectorStoreError                            a vector store failed (retrieval)
    ├── UsageLimitExceeded                          a usage limit (requests, tokens, cost) was hit
    └── ChatMemoryDecodeError (also ValueError)     a stored message cannot be read back
                                                    (advisorchain.memory)
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "AdvisorChainError",
    "ChainConfigurationError",
    "ContextLengthExceededError",
    "EvaluationFailedError",
    "MaxIterationsExceeded",
    "ModelError",
    "StructuredOutputValidationError",
    "SyncInAsyncContextError",
    "ToolCallLimitExceeded",
    "ToolExecutionError",
    "UsageLimitExceeded",
    "VectorStoreError",
]


class AdvisorChainError(Exception):
    """Root of every error advisorchain raises on purpose."""


class ChainConfigurationError(AdvisorChainError, ValueError):
    """The chain, the client or a request was set up wrongly (caught before any model call)."""


class SyncInAsyncContextError(AdvisorChainError, RuntimeError):
    """A blocking method was called from inside a running event loop; use its async form."""


class ModelError(AdvisorChainError):
    """A chat model (provider) failed.

    ``status_code`` is the HTTP status when the failure was an HTTP error, ``error_type`` the
    provider's own error type (``"invalid_request_error"``, ``"not_found_error"``...) when it gave one,
    ``retry_after`` the seconds the provider asked to wait before trying again (``Retry-After``).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        provider: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.status_code = status_code
        self.error_type = error_type
        self.provider = provider
        self.body = body


class ToolExecutionError(AdvisorChainError):
    """A tool call failed (unknown tool, bad arguments, the tool raised, timed out).

    Raised only by a ``ToolCallingManager(raise_on_error=True)``; otherwise the failure becomes an
    error text in the tool's response so the model can correct itself. The original exception, if
    any, is ``__cause__``.
    """

    def __init__(self, message: str, *, tool_name: str, tool_call_id: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id


class ToolCallLimitExceeded(AdvisorChainError):
    """A per-turn tool-call limit of the ToolCallingManager was hit.

    ``tool_name`` names the tool whose own limit was hit, or is None for the total limit;
    ``partial_result`` holds what was executed before the breach: a
    ``advisorchain.tools.ToolExecutionResult`` (typed loosely here, because the error tree sits
    below the tools layer and imports nothing of the package), or None.
    """

    def __init__(
        self,
        message: str,
        *,
        tool_name: str | None,
        limit: int,
        partial_result: Any = None,
    ) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.limit = limit
        self.partial_result = partial_result


class MaxIterationsExceeded(AdvisorChainError):
    """The tool loop reached ``max_iterations`` model calls and the model still asked for tools."""

    def __init__(self, message: str, *, max_iterations: int) -> None:
        super().__init__(message)
        self.max_iterations = max_iterations


class StructuredOutputValidationError(AdvisorChainError):
    """The model's answer is not valid JSON for the requested schema (after every retry).

    ``text`` is the last answer the model gave, ``errors`` the validation errors, as one text.
    """

    def __init__(self, message: str, *, text: str | None, errors: str) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors


class ContextLengthExceededError(ModelError):
    """The provider said the prompt does not fit the model's context window (OpenAI's
    ``context_length_exceeded``, Anthropic's "prompt is too long", the wording of vLLM, llama.cpp and
    Ollama on OpenAI-compatible servers). Compaction (``ContextCompactionAdvisor``) or a
    ``RequestRetryAdvisor`` can shrink the prompt and try again."""


class EvaluationFailedError(AdvisorChainError):
    """A self-refining advisor ran out of attempts and every answer was rejected (``on_failure="raise"``).

    ``results`` holds one ``EvaluationResult`` per attempt, ``answer`` the last answer's text and
    ``response`` the last ``ChatResponse``.
    """

    def __init__(self, message: str, *, results: tuple[Any, ...], answer: str | None, response: Any) -> None:
        super().__init__(message)
        self.results = results
        self.answer = answer
        self.response = response


class VectorStoreError(AdvisorChainError):
    """A vector store failed (connection refused, missing extension, locked or damaged file).

    ``store`` is the store object; the original exception is ``__cause__``.
    """

    def __init__(self, message: str, *, store: Any = None) -> None:
        super().__init__(message)
        self.store = store


class UsageLimitExceeded(AdvisorChainError):
    """A usage limit of the run was hit (``UsageLimits``).

    ``limit_name`` names the limit (``"request_limit"``, ``"cost_limit"``...), ``limit`` its value,
    ``run_usage`` the run's totals (a ``RunUsage``), ``when`` where it was checked and
    ``partial_response`` the last complete ``ChatResponse`` (or None).
    """

    def __init__(
        self,
        message: str,
        *,
        limit_name: str,
        limit: Any,
        run_usage: Any,
        when: Literal["before_request", "after_response", "before_tool_calls"],
        partial_response: Any = None,
    ) -> None:
        super().__init__(message)
        self.limit_name = limit_name
        self.limit = limit
        self.run_usage = run_usage
        self.when = when
        self.partial_response = partial_response
