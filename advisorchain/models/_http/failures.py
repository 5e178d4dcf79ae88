"""The one place a provider failure becomes a ``ModelError`` (see the tree in ``advisorchain.errors``).

Both HTTP paths and every adapter hand what went wrong to ``model_error``, in whatever form they
have it — an exception of the HTTP library or the SDK, an error status with its raw body, an error
object inside an answer or a stream, a body that is not what the API sends — so that one failure
reads the same, and is of the same class, whichever path carried the request:

* an error status (or an error object inside a 200 answer): ``ModelStatusError``, or
  ``ContextLengthExceededError`` when the provider says the prompt does not fit the context
  (OpenAI's code ``context_length_exceeded``, Anthropic's "prompt is too long", vLLM's "maximum
  context length", llama.cpp's ``exceed_context_size_error``, Ollama's "exceeded max context
  length"); a body that is not JSON (a proxy's HTML page) is described by its status, content type
  and first line, never as a bare code;
* a connection refused, reset or closed early: ``ModelConnectionError``; a timeout:
  ``ModelTimeoutError``; both name the URL tried (redacted) and what happened, in words that do
  not depend on the HTTP library;
* a 2xx answer that is not JSON, or a stream that is not an event stream: ``InvalidResponseError``.

``incomplete_answer`` and ``invalid_event`` build the two errors the adapters raise on their own
reading of an answer. Nothing here imports an SDK or an HTTP library: failures are recognised by
the names of their classes, so every helper can be tested on plain data.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Literal

from ..._urls import redact_url
from ...errors import (
    ContextLengthExceededError,
    IncompleteAnswerError,
    InvalidResponseError,
    ModelConnectionError,
    ModelError,
    ModelStatusError,
    ModelTimeoutError,
)
from .json import loads

__all__ = [
    "content_type",
    "incomplete_answer",
    "invalid_event",
    "is_context_overflow",
    "model_error",
    "not_an_object",
    "retry_after_seconds",
]

Expected = Literal["JSON", "an event stream"]


def model_error(
    provider: str,
    *,
    url: str | None = None,
    exception: BaseException | None = None,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    error: object = None,
    expected: Expected | None = None,
    mid_stream: bool = False,
    read_timeout: float | None = None,
) -> ModelError:
    """The ModelError for a failure of a request to ``url``, given as one of:

    * ``exception``: what the HTTP library or the SDK raised (an SDK status error is read as its
      status, headers and body; a transport error as a connection failure or timeout —
      ``mid_stream`` when it broke an answer being read, ``read_timeout`` the read timeout in force);
    * ``status`` (400 or more), ``headers`` and the raw body ``content`` of an error answer;
    * ``content`` of a 2xx answer that is not ``expected`` (``"JSON"``, ``"an event stream"``);
    * ``error``: a provider's error object found inside an answer or a stream (``status`` when known).
    """
    if exception is not None:
        return _from_exception(exception, provider, url, mid_stream, read_timeout)
    if content is not None:
        return _from_content(provider, url, status, headers or {}, content, expected)
    return _status_error(provider, status, error, retry_after_seconds(headers))


# -- exceptions ------------------------------------------------------------------------------------

_TRANSPORT_ERRORS = frozenset(
    {"APIConnectionError", "TransportError", "ClientError", "OSError", "TimeoutError", "TimeoutException"}
)
"""The SDKs' connection errors (timeouts included), httpx(2)'s and aiohttp's, and the OS's."""


def _from_exception(
    exc: BaseException, provider: str, url: str | None, mid_stream: bool, read_timeout: float | None
) -> ModelError:
    response = _status_response(exc)
    if response is not None:  # an SDK status error: read as the aiohttp path reads an answer
        return _from_content(
            provider, url, response.status_code, response.headers, _content_of(response), None
        )
    chain = _exception_chain(exc)
    names = {cls.__name__ for error in chain for cls in type(error).__mro__}
    if names & _TRANSPORT_ERRORS:
        return _connection_error(names, chain, provider, url, mid_stream, read_timeout)
    return ModelError(f"{provider} client failed: {type(exc).__name__}: {exc}", provider=provider)


def _status_response(exc: BaseException) -> Any:
    """The HTTP response of an SDK status error (``APIStatusError``), else None."""
    response = getattr(exc, "response", None)
    if isinstance(getattr(exc, "status_code", None), int) and hasattr(response, "status_code"):
        return response
    return None


def _content_of(response: Any) -> bytes:
    try:
        return bytes(response.content)
    except Exception:  # a streamed response the SDK did not read (it always does before raising)
        return b""


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


# -- connections -----------------------------------------------------------------------------------

_TIMEOUT_ERRORS = frozenset({"TimeoutException", "APITimeoutError", "TimeoutError"})
"""httpx's and the SDKs' timeouts; aiohttp's (and asyncio's) are ``TimeoutError``s."""


def _connection_error(
    names: set[str],
    chain: list[BaseException],
    provider: str,
    url: str | None,
    mid_stream: bool,
    read_timeout: float | None,
) -> ModelError:
    where = (" mid-stream" if mid_stream else "") + (f" ({redact_url(url)})" if url else "")
    if names & _TIMEOUT_ERRORS:
        return ModelTimeoutError(
            f"{provider} request timed out{where}: {_timeout_detail(names, chain, read_timeout)}; "
            "raise the client's timeout or retry (advisorchain.models.RetryChatModel)",
            error_type="timeout",
            provider=provider,
        )
    return ModelConnectionError(
        f"{provider} connection failed{where}: {_connection_detail(names, chain)}",
        error_type="connection_error",
        provider=provider,
    )


def _timeout_detail(names: set[str], chain: list[BaseException], read_timeout: float | None) -> str:
    seconds = _read_timeout(chain)
    seconds = read_timeout if seconds is None else seconds
    after = f" after {seconds:g} s" if seconds is not None else ""
    if "ConnectTimeout" in names or "ConnectionTimeoutError" in names:
        return f"no connection{after}"
    if "WriteTimeout" in names:
        return f"the request could not be sent{after}"
    if "PoolTimeout" in names:
        return f"no free connection in the client's pool{after}"
    return f"the server sent nothing more{after} (read timeout; the answer stalled)"


def _read_timeout(chain: list[BaseException]) -> float | None:
    for error in chain:
        try:
            request = getattr(error, "request", None)
        except RuntimeError:  # httpx: .request of an error raised without one
            continue
        extensions = getattr(request, "extensions", None)
        timeouts = extensions.get("timeout") if isinstance(extensions, Mapping) else None
        value = timeouts.get("read") if isinstance(timeouts, Mapping) else None
        if isinstance(value, int | float):
            return float(value)
    return None


_CLOSED_EARLY = frozenset(
    {"RemoteProtocolError", "ServerDisconnectedError", "ClientPayloadError", "IncompleteRead"}
)


def _connection_detail(names: set[str], chain: list[BaseException]) -> str:
    """What happened to the connection, in words that are the same for every HTTP library."""
    if "ConnectionRefusedError" in names:
        return "connection refused (is the server running, and is the URL right?)"
    if "gaierror" in names:
        return "the host name could not be resolved"
    # aiohttp names a reset only in the text of its payload error.
    if names & {"ConnectionResetError", "BrokenPipeError"} or any(
        "ConnectionResetError" in str(e) for e in chain
    ):
        return "connection reset by the server"
    if names & _CLOSED_EARLY:
        return "the server closed the connection before the answer was complete"
    if "ConnectError" in names or "ClientConnectorError" in names:
        detail = next((str(e) for e in chain if str(e) and "Connection error" not in str(e)), "")
        return f"could not connect ({redact_url(detail) if detail else 'no reason given'})"
    detail = next((str(e) for e in chain if str(e) and "Connection error" not in str(e)), "")
    return detail or type(chain[-1]).__name__


# -- answers ---------------------------------------------------------------------------------------


def _from_content(
    provider: str,
    url: str | None,
    status: int | None,
    headers: Mapping[str, str],
    content: bytes,
    expected: Expected | None,
) -> ModelError:
    """An answer's raw body: the provider's error object when it is JSON that has one, else a
    description of what came (status, content type, first line)."""
    text = content.decode("utf-8", "replace")
    body = _json_or_none(text)
    failed = status is not None and status >= 400
    if failed or (isinstance(body, Mapping) and body.get("error") is not None):
        retry_after = retry_after_seconds(headers)
        if isinstance(body, Mapping) and _message_of(_error_object(body)):
            return _status_error(provider, status if failed else None, body, retry_after)
        return ModelStatusError(
            f"{provider} answered {_what_came(status, headers, url)}: {_excerpt(text, headers)}",
            status_code=status if failed else None,
            provider=provider,
            body=body if body is not None else text,
            retry_after=retry_after,
        )
    return InvalidResponseError(
        f"{provider} answered with a body that is not {expected or 'JSON'}: "
        f"{_what_came(status, headers, url)}: {_excerpt(text, headers)}",
        error_type="invalid_response",
        provider=provider,
        body=text,
    )


def _json_or_none(text: str) -> object:
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return loads(text)
    except ValueError:
        return None


def _what_came(status: int | None, headers: Mapping[str, str], url: str | None) -> str:
    kind = content_type(headers) or "no content type"
    where = f" from {redact_url(url)}" if url else ""
    if status is None:
        return f"({kind}){where}"
    return f"HTTP {status} {_phrase(status)} ({kind}){where}"


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "(unknown status)"


def content_type(headers: Mapping[str, str]) -> str:
    """The media type of a response (``text/html``), without its parameters; '' when none."""
    value = headers.get("content-type") or headers.get("Content-Type") or ""
    if not value:
        value = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return value.split(";", 1)[0].strip().lower()


_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_EXCERPT_CHARS = 200


def _excerpt(text: str, headers: Mapping[str, str]) -> str:
    """What a person recognises a body by: an HTML page's title, else its first line (cut short)."""
    if "html" in content_type(headers) or text.lstrip()[:1] == "<":
        title = _TITLE.search(text[:65536])
        if title:
            return f"<title>{_cut(' '.join(title.group(1).split()))}</title>"
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return _cut(line) if line else "(an empty body)"


def _cut(text: str) -> str:
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "…"


# -- the provider's error object -------------------------------------------------------------------

_STATUS_BY_ERROR_TYPE = {
    # Anthropic's error types
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
    # OpenAI's codes (Responses' failed answers and error events)
    "context_length_exceeded": 400,
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "server_is_overloaded": 503,
    # llama.cpp
    "exceed_context_size_error": 400,
}
"""The HTTP status an error type stands for, for an error inside a 200 answer or stream (so that
``RetryChatModel`` treats it as it treats the same failure sent as an HTTP error)."""


def _status_error(provider: str, status: int | None, body: object, retry_after: float | None) -> ModelError:
    """The ModelStatusError (or ContextLengthExceededError) for a provider's error ``body``: its
    message and type when it has them."""
    error = _error_object(body)
    error_type = _str(error.get("type")) or _str(error.get("code"))
    code = _str(error.get("code"))
    if status is None:
        status = _status_in_body(error) or _STATUS_BY_ERROR_TYPE.get(code or error_type or "")
    message = _message_of(error) or f"no message given: {_cut(repr(body))}"
    label = f"{provider} error" + (f" {status}" if status is not None else "")
    if error_type:
        label += f" ({error_type})"
    overflow = is_context_overflow(status, error_type, code, message)
    return (ContextLengthExceededError if overflow else ModelStatusError)(
        f"{label}: {message}",
        status_code=status,
        error_type=error_type,
        provider=provider,
        body=body,
        retry_after=retry_after,
    )


def _error_object(body: object) -> Mapping[str, Any]:
    """The ``{"message", "type", "code"...}`` object of an error body: ``body["error"]`` when it is
    one (``{"error": "text"}`` counts as its message), else the body itself."""
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    if isinstance(inner, Mapping):
        return inner
    if isinstance(inner, str) and inner:
        return {**{k: v for k, v in body.items() if k != "error"}, "message": inner}
    return body


def _message_of(error: Mapping[str, Any]) -> str | None:
    return _str(error.get("message")) or _str(error.get("detail"))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _status_in_body(error: Mapping[str, Any]) -> int | None:
    for key in ("status_code", "code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_OVERFLOW_WORDS = re.compile(
    r"prompt is too long"  # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    r"|prompt too long"  # Ollama: "prompt too long; exceeded max context length by 4 tokens"
    r"|maximum context length"  # OpenAI, vLLM: "This model's maximum context length is 4096 tokens"
    r"|context (?:length|window|size)",  # llama.cpp: "exceeds the available context size"
    re.I,
)


def is_context_overflow(status: int | None, error_type: str | None, code: str | None, message: str) -> bool:
    """True when a provider's error says the prompt does not fit the model's context: by its code
    (any status), or by its wording on a 400 or an error without a status."""
    if (code or "") in _OVERFLOW_CODES or (error_type or "") in _OVERFLOW_CODES:
        return True
    return status in (None, 400) and _OVERFLOW_WORDS.search(message) is not None


# -- what the adapters raise on their own ----------------------------------------------------------


def incomplete_answer(provider: str, url: str | None, missing: str, *, body: Any = None) -> ModelError:
    """The error for an answer that ended before the provider said it was complete (a stream cut
    short): it is never passed off as a short answer."""
    where = f" from {redact_url(url)}" if url else ""
    return IncompleteAnswerError(
        f"{provider} answer{where} is incomplete: {missing}; nothing of it was kept — try again",
        error_type="incomplete_answer",
        provider=provider,
        body=body,
    )


def invalid_event(provider: str, url: str, exc: Exception, payload: bytes) -> ModelError:
    """The error for a stream event whose data is not JSON."""
    shown = payload[:200].decode("utf-8", "replace")
    return InvalidResponseError(
        f"{provider}: a stream event is not JSON ({redact_url(url)}): {exc}: {shown!r}",
        error_type="invalid_response",
        provider=provider,
    )


def not_an_object(provider: str, what: str, data: object) -> ModelError:
    """The error for JSON that should be an object and is not (``what``: "the response body")."""
    return InvalidResponseError(
        f"{provider} sent {what} that is not a JSON object: {str(data)[:200]!r}",
        error_type="invalid_response",
        provider=provider,
    )


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` in seconds or as an
    HTTP date; None when it asks for none (or gives nonsense)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = lower.get(key)
        if raw is None:
            continue
        seconds: float | None
        try:
            seconds = float(raw) * scale
        except ValueError:
            seconds = _seconds_until(raw, now)
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _seconds_until(http_date: str, now: float | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
