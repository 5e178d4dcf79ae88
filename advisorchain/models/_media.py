"""Media of a user message in each provider's own request format.

Each provider takes its own set of kinds; anything else is a ModelError raised while the request is
built, so nothing is sent. What each accepts (``data`` = the bytes inline, ``url`` = a link the
provider fetches):

============================  ===================================================================
OpenAI Chat Completions       ``image/*`` (data, url), ``application/pdf`` (data),
                              ``audio/wav`` and ``audio/mpeg`` (data)
OpenAI Responses              ``image/*`` and ``application/pdf`` (data, url)
Anthropic Messages            ``image/*`` and ``application/pdf`` (data, url), ``text/plain`` (data)
============================  ===================================================================

What a tool returned besides text (``ToolResponse.media``, an MCP tool's image say) goes to the
model too, never as base64 text: Anthropic takes images and PDFs inside the ``tool_result``; the
OpenAI APIs take them in a user message right after the tool responses, its text naming the tool
call (``_openai_base.MessageWire``). A medium a model takes in neither place is one line in the tool's text
instead, naming its type and size (``tool_media``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._urls import redact_url
from ..errors import ModelError, UnsupportedRequestError
from ..messages import Media, ToolResponse

__all__ = [
    "Convert",
    "anthropic_blocks",
    "describe_media",
    "openai_chat_parts",
    "responses_parts",
    "tool_media",
    "tool_media_heading",
]

Convert = Callable[[Sequence[Media]], list[dict[str, Any]]]
"""A provider's converter of media to its request parts (``openai_chat_parts``...)."""

_PDF = "application/pdf"
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _unsupported(media: Media, provider: str, accepted: str) -> ModelError:
    form = "a URL" if media.url is not None else "inline data"
    return UnsupportedRequestError(
        f"{provider} cannot take {media!r} ({media.mime_type} as {form}) in a user message; it accepts "
        f"{accepted}. Convert the medium, or send it to a model that takes it",
        error_type="unsupported_media",
        provider=provider.split()[0].lower(),
    )


def _is_image(media: Media) -> bool:
    return media.mime_type.startswith("image/")


def _pdf_name(index: int) -> str:
    return f"document-{index + 1}.pdf"


def openai_chat_parts(media: Sequence[Media]) -> list[dict[str, Any]]:
    """Chat Completions content parts for ``media`` (``image_url``, ``file``, ``input_audio``)."""
    parts: list[dict[str, Any]] = []
    for index, item in enumerate(media):
        if _is_image(item):
            parts.append({"type": "image_url", "image_url": {"url": item.data_url()}})
        elif item.mime_type == _PDF and item.data is not None:
            parts.append(
                {"type": "file", "file": {"filename": _pdf_name(index), "file_data": item.data_url()}}
            )
        elif item.mime_type in _AUDIO_FORMATS and item.data is not None:
            parts.append(
                {
                    "type": "input_audio",
                    "input_audio": {"data": item.base64_text, "format": _AUDIO_FORMATS[item.mime_type]},
                }
            )
        else:
            raise _unsupported(
                item,
                "OpenAI Chat Completions",
                "image/* (data or url), application/pdf (data), audio/wav and audio/mpeg (data)",
            )
    return parts


def responses_parts(media: Sequence[Media]) -> list[dict[str, Any]]:
    """Responses API input parts for ``media`` (``input_image``, ``input_file``)."""
    parts: list[dict[str, Any]] = []
    for index, item in enumerate(media):
        if _is_image(item):
            parts.append({"type": "input_image", "image_url": item.data_url(), "detail": "auto"})
        elif item.mime_type == _PDF and item.url is not None:
            parts.append({"type": "input_file", "file_url": item.url})
        elif item.mime_type == _PDF:
            parts.append({"type": "input_file", "filename": _pdf_name(index), "file_data": item.data_url()})
        else:
            raise _unsupported(item, "OpenAI Responses", "image/* and application/pdf (data or url)")
    return parts


def anthropic_blocks(media: Sequence[Media]) -> list[dict[str, Any]]:
    """Messages API content blocks for ``media`` (``image``, ``document``)."""
    blocks: list[dict[str, Any]] = []
    for item in media:
        if _is_image(item) or item.mime_type == _PDF:
            kind = "image" if _is_image(item) else "document"
            if item.url is not None:
                source: dict[str, Any] = {"type": "url", "url": item.url}
            else:
                source = {"type": "base64", "media_type": item.mime_type, "data": item.base64_text}
            blocks.append({"type": kind, "source": source})
        elif item.mime_type == "text/plain" and item.data is not None:
            try:
                text = item.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UnsupportedRequestError(
                    f"Anthropic takes text/plain documents as UTF-8 text, and {item!r} is not UTF-8 "
                    f"({exc}); decode it yourself and send the text",
                    error_type="unsupported_media",
                    provider="anthropic",
                ) from exc
            blocks.append(
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
            )
        else:
            raise _unsupported(
                item, "Anthropic", "image/* and application/pdf (data or url), text/plain (data)"
            )
    return blocks


# -- what a tool returned besides text ---------------------------------------------------------------


def describe_media(media: Media) -> str:
    """One medium in a few words: its type and size (or where it is), never its bytes."""
    where = f"{len(media.data):,} bytes" if media.data is not None else f"at {redact_url(media.url or '')}"
    return f"{media.mime_type}, {where}"


def tool_media(response: ToolResponse, convert: Convert, where: str) -> tuple[str, list[dict[str, Any]]]:
    """A tool response's text and the provider parts of its media that ``convert`` (one of the
    converters above) takes; a medium it refuses becomes a line of the text naming its type and
    size (``where`` says what it could not go in). When the text is empty and media go along, the
    text says so, so that no tool answer is blank."""
    parts: list[dict[str, Any]] = []
    sent: list[str] = []
    notes: list[str] = []
    for medium in response.media:
        try:
            parts.extend(convert([medium]))
        except UnsupportedRequestError:
            notes.append(
                f"[{describe_media(medium)}: not shown, this model takes no {medium.mime_type} {where}]"
            )
        else:
            sent.append(describe_media(medium))
    text = response.response_data
    if not text and sent:
        text = f"[the result is attached: {'; '.join(sent)}]"
    return "\n".join([text, *notes] if text else notes), parts


def tool_media_heading(response: ToolResponse) -> str:
    """The text before a tool call's media in the user message that carries them."""
    return f"Attachments returned by tool call {response.id} ({response.name}):"
