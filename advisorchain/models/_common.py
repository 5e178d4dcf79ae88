"""What the provider adapters share: request-parameter layering, tool definitions, finish reasons,
lenient readers for provider JSON, and turning a provider's error body into a ModelError.

Nothing here imports a provider SDK, so every helper can be tested on plain data.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..model import ChatOptions, Prompt
from ..tools.api import ToolDefinition

__all__ = [
    "SDK_OPTION_KEYS",
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "error_from_body",
    "finish_reason_or_default",
    "layer_params",
    "new_tool_call_id",
    "option_params",
    "split_sdk_options",
    "tool_definitions",
]

SDK_OPTION_KEYS = frozenset({"extra_headers", "extra_query", "timeout"})
"""Keys of ``**defaults`` / ``ChatOptions.extra`` that are SDK request options, not body fields."""


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty dict (providers send nulls freely)."""
    return dict(value) if isinstance(value, Mapping) else {}


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
        f"{label}: {message}", status_code=status_code, error_type=error_type, provider=provider, body=body
    )


def _status_in_body(error: Mapping[str, Any]) -> int | None:
    for key in ("status_code", "code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None
