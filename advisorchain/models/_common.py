"""What the provider adapters share: request-parameter layering, tool definitions, finish reasons,
lenient readers for provider JSON, turning a provider's error body or a broken connection into a
ModelError, the "answer ended before it was complete" error, and the request guard of
``advisorchain.testing.forbid_model_requests`` (every adapter calls ``check_request_allowed``).

Nothing here imports a provider SDK, so every helper can be tested on plain data.
"""

from __future__ import annotations

import email.utils
import ipaddress
import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from .._tool_types import ToolDefinition
from ..errors import ModelError
from ..model import ChatOptions, Prompt

__all__ = [
    "SDK_OPTION_KEYS",
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "check_request_allowed",
    "connection_error",
    "error_from_body",
    "finish_reason_or_default",
    "incomplete_answer",
    "is_loopback_url",
    "layer_params",
    "new_tool_call_id",
    "option_params",
    "read_dict",
    "read_list",
    "requests_forbidden",
    "retry_after_seconds",
    "set_requests_forbidden",
    "split_sdk_options",
    "tool_definitions",
]

SDK_OPTION_KEYS = frozenset({"extra_headers", "extra_query", "timeout"})
"""Keys of ``**defaults`` / ``ChatOptions.extra`` that are SDK request options, not body fields."""


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty dict (providers send nulls freely)."""
    return dict(value) if isinstance(value, Mapping) else {}


def read_dict(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object — not copied, to be read only — else an empty one: the
    parsers' per-answer and per-chunk reads, where a copy per object is most of the cost."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return _EMPTY


def read_list(value: object) -> Sequence[Any]:
    """``value`` when it is a JSON array — not copied, to be read only — else an empty one."""
    return value if type(value) is list or isinstance(value, tuple) else ()


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def as_list(value: object) -> list[Any]:
    """``value`` when it is a JSON array, else an empty list."""
    return list(value) if isinstance(value, list | tuple) else []


def as_str(value: object) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def as_int(value: object) -> int:
    """``value`` when it is an integer count, else 0 (``bool`` is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def new_tool_call_id() -> str:
    """A made-up tool-call id, for providers that send an empty one (the reply must name it)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def finish_reason_or_default(finish_reason: str | None, has_tool_calls: bool) -> str:
    """The provider's finish reason, or — when it sent none — ``"tool_calls"`` if the model called
    tools and ``"stop"`` otherwise, so that the end of every answer is marked."""
    if finish_reason:
        return finish_reason
    return "tool_calls" if has_tool_calls else "stop"


def layer_params(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Request parameters from ``layers``, later ones winning; where two layers both give an object
    for the same key (``stream_options``, ``output_config``...) the objects are merged one level,
    and ``tools`` lists are joined (provider tools given in ``extra`` join the request's tools)."""
    params: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            old = params.get(key)
            if isinstance(old, Mapping) and isinstance(value, Mapping):
                params[key] = {**old, **value}
            elif key == "tools" and isinstance(old, list) and isinstance(value, list | tuple):
                params[key] = [*old, *value]
            else:
                params[key] = value
    return params


def split_sdk_options(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split layered parameters into (JSON body fields, SDK request options)."""
    body = {k: v for k, v in params.items() if k not in SDK_OPTION_KEYS}
    options = {k: v for k, v in params.items() if k in SDK_OPTION_KEYS}
    return body, options


def tool_definitions(options: ChatOptions | None) -> Sequence[ToolDefinition]:
    """The definitions of the request's tools, in order (resolved once, by the options' registry,
    which also checks that the names are unique)."""
    return options.tool_registry.definitions if options is not None else ()


def option_params(prompt: Prompt, *, max_tokens_key: str, stop_key: str) -> dict[str, Any]:
    """The sampling fields of the prompt's ChatOptions that are set, under the provider's names."""
    options = prompt.options
    if options is None:
        return {}
    params: dict[str, Any] = {}
    if options.model:
        params["model"] = options.model
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if options.max_tokens is not None:
        params[max_tokens_key] = options.max_tokens
    if options.top_p is not None:
        params["top_p"] = options.top_p
    if options.stop is not None:
        params[stop_key] = list(options.stop)
    return params


def error_from_body(
    body: object,
    *,
    provider: str,
    status_code: int | None,
    fallback: str,
    retry_after: float | None = None,
) -> ModelError:
    """A ModelError for a provider error: the provider's message and type when the body has them.

    ``body`` is the provider's error object (``{"message", "type", "code"...}``) or a whole error
    response (``{"error": {...}}``). An integer ``code`` or ``status_code`` inside it stands in for
    a missing HTTP status (errors sent inside a 200 stream)."""
    error = as_dict(body)
    if isinstance(error.get("error"), Mapping):
        error = as_dict(error["error"])
    message = as_str(error.get("message")) or fallback
    error_type = as_str(error.get("type")) or as_str(error.get("code"))
    if status_code is None:
        status_code = _status_in_body(error)
    label = f"{provider} error" + (f" {status_code}" if status_code is not None else "")
    if error_type:
        label += f" ({error_type})"
    return ModelError(
        f"{label}: {message}",
        status_code=status_code,
        error_type=error_type,
        provider=provider,
        body=body,
        retry_after=retry_after,
    )


def _status_in_body(error: Mapping[str, Any]) -> int | None:
    for key in ("status_code", "code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


# -- failures of the connection ----------------------------------------------------------------------


def connection_error(
    exc: BaseException,
    *,
    provider: str,
    url: str | None,
    mid_stream: bool = False,
    read_timeout: float | None = None,
) -> ModelError:
    """A ModelError saying what happened to the connection — timed out (connecting, or waiting
    for the answer), refused, reset, closed early — and the URL tried. ``exc`` is the HTTP
    library's transport error (httpx / httpx2 / aiohttp), or an SDK error caused by one;
    ``read_timeout`` the read timeout in force, when the error does not carry it."""
    chain = _exception_chain(exc)
    names = {cls.__name__ for error in chain for cls in type(error).__mro__}
    where = (" mid-stream" if mid_stream else "") + (f" ({url})" if url else "")
    if names & _TIMEOUT_ERRORS:
        return ModelError(
            f"{provider} request timed out{where}: {_timeout_detail(names, chain, read_timeout)}; "
            "raise the client's timeout or retry (advisorchain.models.RetryChatModel)",
            error_type="timeout",
            provider=provider,
        )
    return ModelError(
        f"{provider} connection failed{where}: {_connection_detail(names, chain)}",
        error_type="connection_error",
        provider=provider,
    )


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


_TIMEOUT_ERRORS = frozenset({"TimeoutException", "APITimeoutError", "TimeoutError"})
"""httpx's and the SDKs' timeouts; aiohttp's (and asyncio's) are ``TimeoutError``s."""


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
        timeouts = as_dict(getattr(request, "extensions", {}).get("timeout"))
        value = timeouts.get("read")
        if isinstance(value, int | float):
            return float(value)
    return None


def _connection_detail(names: set[str], chain: list[BaseException]) -> str:
    if "ConnectionRefusedError" in names:
        return "connection refused (is the server running, and is the URL right?)"
    if "gaierror" in names:
        return "the host name could not be resolved"
    if "ConnectionResetError" in names or "BrokenPipeError" in names:
        return "connection reset by the server"
    detail = next((str(e) for e in chain if str(e) and not str(e).startswith("Connection error")), "")
    if names & {"RemoteProtocolError", "ServerDisconnectedError", "ClientPayloadError"}:
        return f"the server closed the connection early ({detail or 'no reason given'})"
    if "ConnectError" in names or "ClientConnectorError" in names:
        return f"could not connect ({detail or 'no reason given'})"
    return detail or type(chain[-1]).__name__


def incomplete_answer(provider: str, url: str | None, missing: str) -> ModelError:
    """The ModelError for an answer that ended before the provider said it was complete (a stream
    cut short): it is never passed off as a short answer."""
    where = f" from {url}" if url else ""
    return ModelError(
        f"{provider} answer{where} is incomplete: {missing}; nothing of it was kept — try again",
        error_type="incomplete_answer",
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


# -- the request guard of advisorchain.testing ----------------------------------------------------------

_guard_lock = threading.Lock()
_guard_depth = 0


def set_requests_forbidden(forbidden: bool) -> None:
    """Turn the request guard on (nestable) or off again; used by ``advisorchain.testing``."""
    global _guard_depth
    with _guard_lock:
        _guard_depth = _guard_depth + 1 if forbidden else max(0, _guard_depth - 1)


def requests_forbidden() -> bool:
    """True while ``advisorchain.testing.forbid_model_requests`` is in force."""
    return _guard_depth > 0


def is_loopback_url(url: str) -> bool:
    """True for a URL on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_request_allowed(provider: str, client: object) -> None:
    """Called by every provider adapter with its SDK client right before each request: while
    ``advisorchain.testing.forbid_model_requests`` is in force, a request that would leave this
    machine is refused with a ModelError. Loopback servers and clients whose transport sends
    nothing over the network (replay / mock transports) stay allowed."""
    if not requests_forbidden():
        return
    base_url = str(getattr(client, "base_url", "") or "")
    if is_loopback_url(base_url) or not _sends_over_network(getattr(client, "_client", None)):
        return
    raise ModelError(
        f"{provider} request to {base_url!r} refused: real model requests are forbidden here "
        "(advisorchain.testing.forbid_model_requests); use a model from advisorchain.testing, a replay "
        "client (advisorchain.replay), or a server on loopback",
        error_type="requests_forbidden",
        provider=provider,
    )


def _sends_over_network(http_client: object) -> bool:
    if http_client is None:
        return True
    transports = [getattr(http_client, "_transport", None)]
    mounts = getattr(http_client, "_mounts", None)
    if isinstance(mounts, Mapping):
        transports.extend(mounts.values())
    # A connection-pooling transport (httpx's HTTP transport, or the SDKs' aiohttp transport) opens
    # sockets; mock and replay transports do not.
    return any(
        hasattr(t, "_pool") or type(t).__name__ in _NETWORK_TRANSPORTS for t in transports if t is not None
    )


_NETWORK_TRANSPORTS = frozenset({"AiohttpTransport"})
"""Transports without an httpx pool that still send over the network (``DefaultAioHttpClient``'s)."""
