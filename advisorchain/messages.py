"""Message types: plain frozen dataclasses with a type tag, and one JSON-safe (de)serialisation pair.

Messages are values: they compare by value and never change. Constructors accept lists where
tuples are stored, and any mapping for ``metadata`` (copied into a plain dict).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "AssistantMessage",
    "Message",
    "MessageType",
    "SystemMessage",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "UserMessage",
    "message_from_dict",
    "message_to_dict",
]


class MessageType(enum.StrEnum):
    """The role of a message in a conversation."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def _frozen_dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if not value else dict(value)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call requested by the model; ``arguments`` is the raw JSON text exactly as sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_dict(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.SYSTEM


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user said."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_dict(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.USER


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both."""

    text: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "metadata", _frozen_dict(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.ASSISTANT

    def has_tool_calls(self) -> bool:
        """True when the model asked for at least one tool call."""
        return bool(self.tool_calls)


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call; ``id`` is the id of the call it answers."""

    id: str
    name: str
    response_data: str


@dataclass(frozen=True, slots=True)
class ToolResponseMessage:
    """The results of the tool calls of one assistant message, in the order of the calls."""

    responses: Sequence[ToolResponse]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.responses) is not tuple:
            object.__setattr__(self, "responses", tuple(self.responses))
        object.__setattr__(self, "metadata", _frozen_dict(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.TOOL


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage


def message_to_dict(message: Message) -> dict[str, Any]:
    """A JSON-safe dict for ``message``; ``message_from_dict`` reads it back exactly."""
    if isinstance(message, AssistantMessage):
        return {
            "type": "assistant",
            "text": message.text,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ],
            "metadata": dict(message.metadata),
        }
    if isinstance(message, ToolResponseMessage):
        return {
            "type": "tool",
            "responses": [
                {"id": r.id, "name": r.name, "response_data": r.response_data} for r in message.responses
            ],
            "metadata": dict(message.metadata),
        }
    if isinstance(message, SystemMessage | UserMessage):
        return {"type": message.type.value, "text": message.text, "metadata": dict(message.metadata)}
    raise TypeError(f"not a message: {message!r}")


def _field(data: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be a JSON object, got {data!r}")
    value = data.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"{what}: field {key!r} must be {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from ``message_to_dict`` output; malformed data raises ValueError."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored message must be a JSON object, got {data!r}")
    kind = data.get("type")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"message metadata must be an object, got {metadata!r}")
    what = f"{kind} message"
    if kind == "user":
        return UserMessage(_field(data, "text", str, what), metadata)
    if kind == "system":
        return SystemMessage(_field(data, "text", str, what), metadata)
    if kind == "assistant":
        calls = _field(data, "tool_calls", list, what)
        return AssistantMessage(
            _field(data, "text", (str, type(None)), what),
            tuple(
                ToolCall(
                    _field(c, "id", str, "tool call"),
                    _field(c, "name", str, "tool call"),
                    _field(c, "arguments", str, "tool call"),
                )
                for c in calls
            ),
            metadata,
        )
    if kind == "tool":
        responses = _field(data, "responses", list, what)
        return ToolResponseMessage(
            tuple(
                ToolResponse(
                    _field(r, "id", str, "tool response"),
                    _field(r, "name", str, "tool response"),
                    _field(r, "response_data", str, "tool response"),
                )
                for r in responses
            ),
            metadata,
        )
    raise ValueError(f"unknown message type {kind!r}; expected one of system, user, assistant, tool")
