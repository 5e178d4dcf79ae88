"""An MCP tool result as what the model is given: its text, and the media beside it.

Every kind of content block has its place — nothing is dropped silently and nothing goes to the
model as base64 text:

* text blocks: the text, in order, one block a line;
* images and audio: ``Media`` on the result (``ToolText.media``), which each provider adapter sends
  in its own way (or names in one line where the model takes no such media);
* an embedded resource: its text (a text resource, or a binary one of a text type), under a line
  naming its URI; a binary one of another type is media when it is an image, audio or PDF, else a
  line naming its URI, type and size;
* a resource link: a line with its name and URI (and type and description when given);
* structured content: its JSON, when the result has no text — unless it only mirrors the content
  blocks (as ``@modelcontextprotocol/server-filesystem``'s ``read_media_file`` does with its
  image); an image or audio inside it is media too, named in the JSON by a placeholder.

A result larger than the server's ``max_result_bytes`` is refused with an error naming both sizes.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

import mcp.types as mcp_types

from .._tool_types import ToolText
from ..messages import Media

__all__ = ["result_size", "tool_text"]

_MEDIA_PREFIXES = ("image/", "audio/")
_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/javascript")


def result_size(result: mcp_types.CallToolResult) -> int:
    """The size of a result as it came: the characters of its texts, base64 data and structured
    content (a close measure of its bytes on the wire, cheap to take on a large result)."""
    size = 0
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            size += len(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            size += len(block.data)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            size += len(
                resource.text if isinstance(resource, mcp_types.TextResourceContents) else resource.blob
            )
        elif isinstance(block, mcp_types.ResourceLink):
            size += len(block.uri) + len(block.name) + len(block.description or "")
    if result.structured_content is not None:
        size += len(json.dumps(result.structured_content, ensure_ascii=False))
    return size


def tool_text(result: mcp_types.CallToolResult) -> ToolText:
    """The result's text and media (see the module docstring)."""
    lines: list[str] = []
    media: list[Media] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            lines.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            _add_binary(block.mime_type, block.data, f"a {block.type}", lines, media)
        elif isinstance(block, mcp_types.EmbeddedResource):
            _add_resource(block.resource, lines, media)
        elif isinstance(block, mcp_types.ResourceLink):
            lines.append(_link_line(block))
    has_text = any(isinstance(b, mcp_types.TextContent) for b in result.content)
    structured = result.structured_content
    if not has_text and structured is not None and not _mirrors(structured, result.content):
        known = {
            b.data for b in result.content if isinstance(b, mcp_types.ImageContent | mcp_types.AudioContent)
        }
        shown = _media_as_placeholders(structured, known, media)
        lines.insert(0, json.dumps(shown, ensure_ascii=False))
    return ToolText("\n".join(lines), media)


def _mirrors(structured: object, blocks: list[mcp_types.ContentBlock]) -> bool:
    """``structured`` is ``{"content": [...]}`` holding the content blocks again, and nothing else."""
    if not isinstance(structured, dict) or set(structured) != {"content"}:
        return False
    items = structured["content"]
    if not isinstance(items, list) or len(items) != len(blocks):
        return False
    dumped = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]
    return all(
        isinstance(item, dict)
        and all(item.get(k) == v for k, v in block.items() if k in ("type", "data", "text"))
        for item, block in zip(items, dumped, strict=True)
    )


def _media_as_placeholders(value: object, known: set[str], media: list[Media]) -> object:
    """``value`` with every image or audio in it (``{"type": "image", "data": ..., "mimeType": ...}``,
    or a string that is the data of an image or audio block of the result) as a placeholder; one not
    among the result's blocks already is added to ``media``."""
    if isinstance(value, str):
        return "[media shown beside this result]" if value in known else value
    if isinstance(value, list):
        return [_media_as_placeholders(item, known, media) for item in value]
    if not isinstance(value, dict):
        return value
    kind, data = value.get("type"), value.get("data")
    if kind in ("image", "audio") and isinstance(data, str):
        mime = str(value.get("mimeType") or value.get("mime_type") or "application/octet-stream")
        attached = f"[{kind} ({mime}), attached]"
        if data in known:
            return attached
        lines: list[str] = []
        _add_binary(mime, data, f"a {kind}", lines, media)
        known.add(data)
        return lines[0] if lines else attached
    return {key: _media_as_placeholders(item, known, media) for key, item in value.items()}


def _add_binary(mime_type: str, data: str, what: str, lines: list[str], media: list[Media]) -> None:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        lines.append(f"[{what} ({mime_type}) whose data is not base64: not shown]")
        return
    mime = (mime_type or "application/octet-stream").lower()
    if mime.startswith(_MEDIA_PREFIXES) or mime == "application/pdf":
        media.append(Media(mime, data=raw))
    else:
        lines.append(f"[{what} ({mime}, {len(raw):,} bytes): not shown]")


def _add_resource(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
    lines: list[str],
    media: list[Media],
) -> None:
    mime = (resource.mime_type or "").lower()
    if isinstance(resource, mcp_types.TextResourceContents):
        lines.extend((f"[resource {resource.uri}]", resource.text))
        return
    if _is_text(mime):
        try:
            text = base64.b64decode(resource.blob, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            pass
        else:
            lines.extend((f"[resource {resource.uri}]", text))
            return
    if mime.startswith(_MEDIA_PREFIXES) or mime == "application/pdf":
        lines.append(f"[resource {resource.uri} ({mime}), attached]")
        _add_binary(mime, resource.blob, f"resource {resource.uri}", lines, media)
        return
    size = len(resource.blob) * 3 // 4
    lines.append(f"[resource {resource.uri} ({mime or 'binary'}, about {size:,} bytes): not shown]")


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def _link_line(link: mcp_types.ResourceLink) -> str:
    details: Iterable[str] = (d for d in (link.mime_type, link.description) if d)
    extra = "; ".join(details)
    return f"[resource link: {link.name} <{link.uri}>" + (f" ({extra})" if extra else "") + "]"
