"""What the provider adapters share in their mapping: request-parameter layering, tool
definitions, finish reasons, lenient readers for provider JSON, and the request guard of
``advisorchain.testing.forbid_model_requests`` (every adapter calls ``check_request_allowed``).
Failures become errors in one place of the HTTP stack (``_http.failures``).

Nothing here imports a provider SDK, so every helper can be tested on plain data.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from .._request_guard import requests_forbidden
from .._tool_types import ToolDefinition
from .._urls import redact_url
from ..errors import ModelError
from ..model import ChatOptions, Prompt, Usage

__all__ = [
    "SDK_OPTION_KEYS",
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "check_request_allowed",
    "finish_reason_or_default",
    "is_loopback_url",
    "layer_params",
    "new_tool_call_id",
    "openai_usage",
    "option_params",
    "read_dict",
    "read_list",
    "request_params",
    "schema_name",
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


def openai_usage(usage: object, prompt_key: str, completion_key: str) -> Usage | None:
    """Usage from an OpenAI ``usage`` object, its counts under ``prompt_key`` and ``completion_key``
    (Chat Completions: ``prompt_tokens``/``completion_tokens``, Responses: ``input_tokens``/
    ``output_tokens``) and the cached prompt tokens under ``<prompt_key>_details.cached_tokens``;
    None when there is none."""
    data = read_dict(usage)
    if not data:
        return None
    cached = read_dict(data.get(f"{prompt_key}_details")).get("cached_tokens")
    return Usage(as_int(data.get(prompt_key)), as_int(data.get(completion_key)), as_int(cached))


def layer_params(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Request parameters from ``layers``, later ones winning; where two layers both give an object
    for the same key (``stream_options``, ``output_config``...) the objects are merged one level,
    and ``tools`` lists are joined (provider tools given in ``extra`` join the request's tools)."""
    params: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        if not params:  # the first layer is taken as it is (a copy), in C
            params.update(layer)
            continue
        for key, value in layer.items():
            old = params.get(key)
            if old is None:  # most keys: nothing under them yet
                params[key] = value
            elif isinstance(old, Mapping) and isinstance(value, Mapping):
                params[key] = {**old, **value}
            elif key == "tools" and isinstance(old, list) and isinstance(value, list | tuple):
                params[key] = [*old, *value]
            else:
                params[key] = value
    return params


def request_params(
    base: Mapping[str, Any], defaults: Mapping[str, Any], request: Mapping[str, Any], prompt: Prompt
) -> dict[str, Any]:
    """A request's fields: the adapter's ``base``, the model's ``defaults``, the ``request``'s own
    fields and ``ChatOptions.extra``, layered in that order (``layer_params``); ``stream`` is the
    adapter's to set and a ``None`` value removes a field."""
    options = prompt.options
    extra = options.extra if options is not None else _EMPTY
    params = layer_params(base, defaults, request, extra)
    params.pop("stream", None)
    for value in params.values():
        if value is None:
            return {k: v for k, v in params.items() if v is not None}
    return params


def schema_name(schema: Mapping[str, Any]) -> str:
    """The name a structured-output schema goes by: its title as the APIs allow a name (letters,
    digits, ``_``, ``-``; 64 at most), else ``result``."""
    title = schema.get("title")
    name = "".join(c for c in title if c.isalnum() or c in "_-")[:64] if isinstance(title, str) else ""
    return name or "result"


def split_sdk_options(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split layered parameters into (JSON body fields, SDK request options); ``params`` itself is
    the body when it holds no SDK option (most requests)."""
    if SDK_OPTION_KEYS.isdisjoint(params):
        return params, {}
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


# -- the request guard of advisorchain.testing (its switch: advisorchain._request_guard) ----------


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
        f"{provider} request to {redact_url(base_url)!r} refused: real model requests are forbidden here "
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
