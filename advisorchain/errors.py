"""The exception tree of advisorchain.

Every error the library raises on purpose derives from one root::

    AdvisorChainError
    ├── ChainConfigurationError (also ValueError)   bad advisors, tools, chain set-up
    ├── SyncInAsyncContextError (also RuntimeError) a sync method used inside a running loop
    ├── ModelError                                  a provider failed (.status_code when HTTP)
    ├── ToolExecutionError                          a tool failed and raise_on_error was set
    ├── ToolCallLimitExceeded                       a per-turn tool-call limit was hit
    ├── MaxIterationsExceeded                       the tool loop ran out of iterations
    ├── StructuredOutputValidationError             the answer never matched the schema
    └── ChatMemoryDecodeError (also ValueError)     a stored message cannot be read back
                                                    (advisorchain.memory)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdvisorChainError",
    "ChainConfigurationError",
    "MaxIterationsExceeded",
    "ModelError",
    "StructuredOutputValidationError",
    "SyncInAsyncContextError",
    "ToolCallLimitExceeded",
    "ToolExecutionError",
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
