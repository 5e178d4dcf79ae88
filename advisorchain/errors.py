"""The exception tree of advisorchain.

Every error the library raises on purpose derives from one root::

    AdvisorChainError
    ├── ChainConfigurationError (also ValueError)   bad advisors, tools, chain set-up
    ├── SyncInAsyncContextError (also RuntimeError) a sync method used inside a running loop
    ├── ModelError                                  a provider failed (.status_code when HTTP)
    │   ├── ModelStatusError                        the provider answered with an error (4xx/5xx,
    │   │   │                                       or an error inside a 200 answer or stream)
    │   │   └── ContextLengthExceededError          the prompt does not fit the model's context
    │   ├── ModelConnectionError                    no answer: refused, reset, closed early
    │   │   └── ModelTimeoutError                   no answer in time (also a TimeoutError)
    │   ├── IncompleteAnswerError                   the answer ended before it was complete
    │   ├── InvalidResponseError                    the answer is not what the API sends (not JSON,
    │   │                                           not an event stream: a proxy's page, say)
    │   └── UnsupportedRequestError                 the request cannot go to this provider (a media
    │                                               kind, an option it lacks); nothing was sent
    ├── ToolError                                   a tool failed; the model is told the message
    │   ├── InvalidToolArgumentsError (ValueError)  the model's arguments do not fit the tool
    │   │                                           (advisorchain.tools)
    │   └── McpToolError                            an MCP tool failed (advisorchain.mcp)
    ├── ToolExecutionError                          a tool failed and raise_on_error was set
    ├── ToolCallLimitExceeded                       a per-turn tool-call limit was hit
    ├── MaxIterationsExceeded                       the tool loop ran out of iterations
    ├── StructuredOutputValidationError             the answer never matched the schema
    ├── EvaluationFailedError                       self-refinement ran out of attempts
    ├── VectorStoreError                            a vector store failed (retrieval)
    ├── UsageLimitExceeded                          a usage limit (requests, tokens, cost) was hit
    ├── GuardrailTripped                            a guardrail stopped the input, output or a tool
    ├── GuardrailError                              a guardrail failed (raised, returned junk, or
    │                                               a replacement that cannot be applied)
    └── ChatMemoryDecodeError (also ValueError)     a stored message cannot be read back
                                                    (advisorchain.memory)

Every ``ModelError`` keeps ``status_code`` and ``error_type`` (``"timeout"``, ``"connection_error"``,
``"incomplete_answer"``, the provider's own type...), so code written against them keeps working;
the subclasses let a caller ``except`` one kind of failure::

    try:
        answer = client.prompt(question).call().content()
    except ModelTimeoutError:          # or the builtin TimeoutError
        ...                            # try again later, or with a longer timeout
    except ContextLengthExceededError:
        ...                            # shorten the conversation (ContextCompactionAdvisor does it)
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "AdvisorChainError",
    "ChainConfigurationError",
    "ContextLengthExceededError",
    "EvaluationFailedError",
    "GuardrailError",
    "GuardrailTripped",
    "IncompleteAnswerError",
    "InvalidResponseError",
    "MaxIterationsExceeded",
    "ModelConnectionError",
    "ModelError",
    "ModelStatusError",
    "ModelTimeoutError",
    "StructuredOutputValidationError",
    "SyncInAsyncContextError",
    "ToolCallLimitExceeded",
    "ToolError",
    "ToolExecutionError",
    "UnsupportedRequestError",
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


class ModelStatusError(ModelError):
    """The provider answered the request with an error: an HTTP status of 400 or more, or an error
    object inside a 200 answer or stream. ``status_code`` is the status (for an error inside a 200
    answer, the status its error type stands for, or None), ``error_type`` the provider's error
    type or code, ``body`` its error body, ``retry_after`` the wait it asked for."""


class ContextLengthExceededError(ModelStatusError):
    """The provider said the prompt does not fit the model's context window (OpenAI's
    ``context_length_exceeded``, Anthropic's "prompt is too long", the wording of vLLM, llama.cpp and
    Ollama on OpenAI-compatible servers). Compaction (``ContextCompactionAdvisor``) or a
    ``RequestRetryAdvisor`` can shrink the prompt and try again."""


class ModelConnectionError(ModelError):
    """No answer came: the connection was refused, reset or closed before the answer was complete,
    or the host is unknown. ``error_type`` is ``"connection_error"``; the message names the URL
    tried. ``RetryChatModel`` retries it."""


class ModelTimeoutError(ModelConnectionError, TimeoutError):
    """No answer came in time: connecting, sending, waiting for a free connection, or waiting for
    the next bytes of the answer (the client's read timeout). ``error_type`` is ``"timeout"``.
    Also a builtin ``TimeoutError``, so ``except TimeoutError`` catches it."""


class IncompleteAnswerError(ModelError):
    """The provider's answer ended before the provider said it was complete (a stream cut short,
    a Responses answer with status ``incomplete``, an answer with no choices). Nothing of it is
    kept or stored. ``error_type`` is ``"incomplete_answer"``."""


class InvalidResponseError(ModelError):
    """What came back is not what the API sends: a body that is not JSON, a stream that is not an
    event stream (a proxy's or login page, say) or an event that is not JSON. The message says
    what came: status, content type and its first line. ``error_type`` is ``"invalid_response"``."""


class UnsupportedRequestError(ModelError):
    """The request cannot be sent to this provider as it is (a media kind it does not take, an
    option it does not have); raised before anything is sent. ``error_type`` says which
    (``"unsupported_media"``, ``"unsupported_option"``)."""


class ToolError(AdvisorChainError):
    """A tool failed in a way the model is told about: raised from a tool, the model receives
    ``Error: <message>`` as the tool's answer, the message exactly as written (any other exception
    is reported as ``tool 'name' failed with <type>: <message>``). ``InvalidToolArgumentsError``
    (bad arguments) and MCP's ``McpToolError`` derive from it."""


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


class GuardrailTripped(AdvisorChainError):
    """A guardrail stopped the run (``advisorchain.guardrails``).

    ``guard`` is the guard's name, ``kind`` what it checked (``"input"``, ``"output"``,
    ``"tool_call"``, ``"tool_result"``), ``message`` the guard's own message (or None) and
    ``partial_response`` the answer an output guard tripped on (None for an input trip), which never
    reached the caller. The error's text never quotes the checked text unless the guard's message does.
    """

    def __init__(
        self,
        text: str,
        *,
        guard: str,
        kind: str,
        message: str | None = None,
        partial_response: Any = None,
    ) -> None:
        super().__init__(text)
        self.guard = guard
        self.kind = kind
        self.message = message
        self.partial_response = partial_response


class GuardrailError(AdvisorChainError):
    """A guardrail failed: the guard raised (its exception is ``__cause__``), returned something
    that is neither a bool nor a ``GuardResult``, or a replacement could not be applied (a stream
    released sentence by sentence cannot take back text the caller already has). Fail closed: the
    run stops as for a trip, whatever ``on_trip`` says. ``guard`` and ``kind`` as on
    ``GuardrailTripped``."""

    def __init__(self, text: str, *, guard: str, kind: str) -> None:
        super().__init__(text)
        self.guard = guard
        self.kind = kind
