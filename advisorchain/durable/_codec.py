"""JSON-safe forms of what crosses a durable seam: prompts (messages, options, tool definitions),
responses and stream chunks. Engines record these values in their history, so they hold data only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .. import errors
from .._tool_types import ToolText
from ..errors import ChainConfigurationError, ModelError
from ..messages import AssistantMessage, UserMessage, message_from_dict, message_to_dict
from ..model import ChatOptions, ChatResponse, ChatResponseMetadata, Generation, Prompt, Usage
from ..tools.api import ToolContext, ToolDefinition, ToolMetadata

__all__ = [
    "DefinedTool",
    "prompt_from_dict",
    "prompt_to_dict",
    "response_from_dict",
    "response_to_dict",
]

_PLAIN_OPTIONS = ("model", "temperature", "max_tokens", "top_p", "output_schema")


@dataclass(frozen=True, slots=True)
class DefinedTool:
    """A tool as the model sees it (definition and metadata), rebuilt inside a model activity or
    step; the model never runs tools, so it has no body."""

    definition: ToolDefinition
    metadata: ToolMetadata = field(default_factory=ToolMetadata)

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        raise ChainConfigurationError(
            f"tool {self.definition.name!r} was called inside a model activity; tools run through "
            "the tool loop (ToolCallingAdvisor), never inside a ChatModel"
        )


def prompt_to_dict(prompt: Prompt) -> dict[str, Any]:
    """The prompt's messages and options; tools travel as their definitions."""
    return {
        "instructions": [message_to_dict(m) for m in prompt.instructions],
        "options": None if prompt.options is None else _options_to_dict(prompt.options),
    }


def prompt_from_dict(data: Mapping[str, Any]) -> Prompt:
    """The Prompt of ``prompt_to_dict``; its tools are DefinedTools (definitions only)."""
    options = data.get("options")
    return Prompt(
        tuple(message_from_dict(m) for m in data["instructions"]),
        None if options is None else _options_from_dict(options),
    )


def _options_to_dict(options: ChatOptions) -> dict[str, Any]:
    data: dict[str, Any] = {name: getattr(options, name) for name in _PLAIN_OPTIONS}
    data["stop"] = None if options.stop is None else list(options.stop)
    data["tools"] = [
        {
            "name": cb.definition.name,
            "description": cb.definition.description,
            "input_schema": dict(cb.definition.input_schema),
            "return_direct": cb.metadata.return_direct,
        }
        for cb in options.tool_callbacks
    ]
    data["tool_context"] = dict(options.tool_context)
    data["extra"] = dict(options.extra)
    if options.cache_key is not None:
        data["cache_key"] = options.cache_key
    return data


def _options_from_dict(data: Mapping[str, Any]) -> ChatOptions:
    tools = tuple(
        DefinedTool(
            ToolDefinition(t["name"], t["description"], t["input_schema"]),
            ToolMetadata(return_direct=t["return_direct"]),
        )
        for t in data["tools"]
    )
    stop = data["stop"]
    return ChatOptions(
        **{name: data[name] for name in _PLAIN_OPTIONS},
        stop=None if stop is None else tuple(stop),
        tool_callbacks=tools,
        tool_context=data["tool_context"],
        extra=data["extra"],
        cache_key=data.get("cache_key"),
    )


def response_to_dict(response: ChatResponse) -> dict[str, Any]:
    """A ChatResponse (or one stream chunk) as a JSON-safe dict."""
    meta = response.metadata
    usage = meta.usage
    return {
        "generations": [
            {"output": message_to_dict(g.output), "finish_reason": g.finish_reason}
            for g in response.generations
        ],
        "id": meta.id,
        "model": meta.model,
        "usage": None if usage is None else _usage_to_list(usage),
        "finish_reason": meta.finish_reason,
        "provider": meta.provider,
    }


def _usage_to_list(usage: Usage) -> list[Any]:
    """``[prompt, completion, cache read, cache write, cost as a string or None]``: the cost kept
    exactly (a Decimal is not JSON), so a resumed run adds up to the same totals."""
    cost = None if usage.cost is None else str(usage.cost)
    counts = [usage.prompt_tokens, usage.completion_tokens, usage.cache_read_tokens, usage.cache_write_tokens]
    return [*counts, cost]


def _usage_from_list(data: Sequence[Any]) -> Usage:
    """The Usage of ``_usage_to_list`` (a two-count list of an older recording too)."""
    counts = [*data[:4], 0, 0][:4]
    cost = data[4] if len(data) > 4 else None
    return Usage(counts[0], counts[1], counts[2], counts[3], None if cost is None else Decimal(cost))


def response_from_dict(data: Mapping[str, Any]) -> ChatResponse:
    """The ChatResponse of ``response_to_dict``."""
    generations = []
    for g in data["generations"]:
        output = message_from_dict(g["output"])
        if not isinstance(output, AssistantMessage):
            raise ValueError(f"a generation must hold an assistant message, got {output!r}")
        generations.append(Generation(output, g["finish_reason"]))
    usage = data["usage"]
    return ChatResponse(
        tuple(generations),
        ChatResponseMetadata(
            data["id"],
            data["model"],
            None if usage is None else _usage_from_list(usage),
            data["finish_reason"],
            data.get("provider"),
        ),
    )


def tool_result_to_dict(result: str) -> dict[str, Any]:
    """A tool's result, its media (a ``ToolText``'s) kept, JSON-safe."""
    media = getattr(result, "media", ())
    if not media:
        return {"result": str(result)}
    return {"result": str(result), "media": message_to_dict(UserMessage("", media=media))["media"]}


def tool_result_from_dict(data: Mapping[str, Any]) -> str:
    """The tool result ``tool_result_to_dict`` made (a ``ToolText`` when it had media)."""
    if not data.get("media"):
        return str(data["result"])
    carrier = message_from_dict({"type": "user", "text": "", "metadata": {}, "media": data["media"]})
    assert isinstance(carrier, UserMessage)
    return ToolText(str(data["result"]), carrier.media)


def model_error_to_dict(error: ModelError) -> dict[str, Any]:
    """A ModelError as a model call's recorded outcome (its class by name, its fields)."""
    return {
        "class": type(error).__name__,
        "message": error.message,
        "status_code": error.status_code,
        "error_type": error.error_type,
        "provider": error.provider,
        "retry_after": error.retry_after,
    }


def model_error_from_dict(data: Mapping[str, Any]) -> ModelError:
    """The ModelError ``model_error_to_dict`` recorded, of the same class (a ModelError for a class
    this version does not know)."""
    cls = getattr(errors, str(data.get("class", "")), ModelError)
    if not (isinstance(cls, type) and issubclass(cls, ModelError)):
        cls = ModelError
    return cls(
        data["message"],
        status_code=data["status_code"],
        error_type=data["error_type"],
        provider=data["provider"],
        retry_after=data.get("retry_after"),
    )
