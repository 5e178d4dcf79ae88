"""Message types: plain frozen dataclasses with a type tag, and one JSON-safe (de)serialisation pair.

Messages are values: they compare by value and never change. Constructors accept lists where
tuples are stored, and any mapping for ``metadata`` (copied into a plain dict).
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

__all__ = [
    "AssistantMessage",
    "Media",
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


def _freeze(message: AssistantMessage | ToolResponseMessage, items: str) -> None:
    """A message's ``items`` (its tool calls or responses) as a tuple and its metadata as its own
    dict, so a caller's list or dict changed later cannot change a stored message."""
    value = getattr(message, items)
    if type(value) is not tuple:
        object.__setattr__(message, items, tuple(value))
    object.__setattr__(message, "metadata", _frozen_dict(message.metadata))


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

    type: ClassVar[MessageType] = MessageType.SYSTEM
    """The kind of message (a constant of the class)."""


@dataclass(frozen=True, slots=True, repr=False)
class Media:
    """An image, document or sound attached to a user message: its MIME type and either the bytes
    (``data``) or a URL the provider fetches (``url``) — exactly one of the two.

    >>> Media("image/png", data=Path("chart.png").read_bytes())
    >>> Media("application/pdf", url="https://example.com/report.pdf")
    """

    mime_type: str
    data: bytes | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mime_type, str) or "/" not in self.mime_type.strip("/ "):
            raise ValueError(
                f"Media needs a MIME type such as 'image/png' or 'application/pdf', got {self.mime_type!r}"
            )
        object.__setattr__(self, "mime_type", self.mime_type.strip().lower())
        if (self.data is None) == (self.url is None):
            raise ValueError(
                "Media takes exactly one of data= (the bytes) or url= (a link the provider fetches), "
                f"got {'both' if self.data is not None else 'neither'} for {self.mime_type!r}"
            )
        if self.data is not None:
            if not isinstance(self.data, bytes | bytearray | memoryview):
                raise ValueError(
                    f"Media data must be bytes, got {type(self.data).__name__} for {self.mime_type!r}; "
                    "read files with Path(...).read_bytes()"
                )
            object.__setattr__(self, "data", bytes(self.data))
        elif not isinstance(self.url, str) or not self.url.strip():
            raise ValueError(f"Media url must be a non-empty str, got {self.url!r}")

    def __repr__(self) -> str:
        where = f"url={self.url!r}" if self.url is not None else f"data=<{len(self.data or b'')} bytes>"
        return f"Media({self.mime_type!r}, {where})"

    @property
    def base64_text(self) -> str:
        """The bytes as base64 text ('' for a URL medium)."""
        return base64.b64encode(self.data).decode("ascii") if self.data is not None else ""

    def data_url(self) -> str:
        """A ``data:`` URL for the bytes, or the medium's own URL."""
        if self.url is not None:
            return self.url
        return f"data:{self.mime_type};base64,{self.base64_text}"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user said, with any images or documents attached as ``media``."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    media: Sequence[Media] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_dict(self.metadata))
        if type(self.media) is not tuple:
            if isinstance(self.media, Media):
                raise TypeError("UserMessage media must be a sequence of Media: pass media=[Media(...)]")
            object.__setattr__(self, "media", tuple(self.media))
        for item in self.media:
            if not isinstance(item, Media):
                raise TypeError(
                    f"UserMessage media must hold Media objects, got {item!r}; "
                    "wrap it as Media(mime_type, data=... or url=...)"
                )

    type: ClassVar[MessageType] = MessageType.USER
    """The kind of message (a constant of the class)."""


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both."""

    text: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(self, "tool_calls")

    type: ClassVar[MessageType] = MessageType.ASSISTANT
    """The kind of message (a constant of the class)."""

    def has_tool_calls(self) -> bool:
        """True when the model asked for at least one tool call."""
        return bool(self.tool_calls)


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call; ``id`` is the id of the call it answers. ``media`` holds what a
    tool returned besides text (an MCP tool's image, say): each provider adapter sends it in its own
    way (in the tool result, or in a user message right after the tool responses)."""

    id: str
    name: str
    response_data: str
    media: Sequence[Media] = ()

    def __post_init__(self) -> None:
        if type(self.media) is not tuple:
            object.__setattr__(self, "media", tuple(self.media))


@dataclass(frozen=True, slots=True)
class ToolResponseMessage:
    """The results of the tool calls of one assistant message, in the order of the calls."""

    responses: Sequence[ToolResponse]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(self, "responses")

    type: ClassVar[MessageType] = MessageType.TOOL
    """The kind of message (a constant of the class)."""


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
            "responses": [_tool_response_to_dict(r) for r in message.responses],
            "metadata": dict(message.metadata),
        }
    if isinstance(message, UserMessage):
        data: dict[str, Any] = {"type": "user", "text": message.text, "metadata": dict(message.metadata)}
        if message.media:
            data["media"] = [_media_to_dict(m) for m in message.media]
        return data
    if isinstance(message, SystemMessage):
        return {"type": "system", "text": message.text, "metadata": dict(message.metadata)}
    raise TypeError(f"not a message: {message!r}")


def _tool_response_to_dict(response: ToolResponse) -> dict[str, Any]:
    data: dict[str, Any] = {"id": response.id, "name": response.name, "response_data": response.response_data}
    if response.media:
        data["media"] = [_media_to_dict(m) for m in response.media]
    return data


def _media_list(data: Mapping[str, Any], what: str) -> tuple[Media, ...]:
    media = data.get("media") or []
    if not isinstance(media, list):
        raise ValueError(f"{what}: field 'media' must be a list, got {media!r}")
    return tuple(_media_from_dict(m) for m in media)


def _media_to_dict(media: Media) -> dict[str, Any]:
    if media.url is not None:
        return {"mime_type": media.mime_type, "url": media.url}
    return {"mime_type": media.mime_type, "data": media.base64_text}


def _media_from_dict(data: Any) -> Media:
    mime_type = _field(data, "mime_type", str, "media")
    if data.get("url") is not None:
        return Media(mime_type, url=_field(data, "url", str, "media"))
    encoded = _field(data, "data", str, "media")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"media {mime_type!r}: field 'data' is not base64 ({exc})") from exc
    return Media(mime_type, data=raw)


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
        return UserMessage(_field(data, "text", str, what), metadata, _media_list(data, what))
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
                    _media_list(r, "tool response"),
                )
                for r in responses
            ),
            metadata,
        )
    raise ValueError(f"unknown message type {kind!r}; expected one of system, user, assistant, tool")
