"""Server-sent events, as the OpenAI-compatible streams send them, decoded from raw bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..errors import ModelError
from ._json import loads

__all__ = ["DONE", "SseDecoder", "sse_events"]

DONE: object = object()
"""The ``[DONE]`` marker of a stream (an end-of-stream event, not JSON)."""


class SseDecoder:
    """Server-sent events from a byte stream, however its chunks split the lines: ``feed(chunk)``
    gives the (event name, JSON payload) of each ``data:`` line the chunk completes — the name is
    that of the ``event:`` line before it, ``"message"`` when none; ``[DONE]`` comes as ``DONE``.
    Lines may end in ``\n``, ``\r\n`` or ``\r``, as the format allows. Bytes, not text: the JSON
    parser reads UTF-8. Synchronous, so a stream pays for no generator per line."""

    __slots__ = ("_event", "_pending", "_provider", "_url")

    def __init__(self, provider: str, url: str) -> None:
        self._provider = provider
        self._url = url
        self._pending = b""
        self._event = "message"

    def feed(self, chunk: bytes) -> list[tuple[str, object]]:
        """The events the chunk completes."""
        lines = (self._pending + chunk if self._pending else chunk).splitlines(keepends=True)
        # A last line with no end yet (or only a ``\r``, which a ``\n`` may follow) waits for more.
        self._pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        return self._events(lines)

    def close(self) -> list[tuple[str, object]]:
        """The event of a last line the stream did not end."""
        pending, self._pending = self._pending, b""
        return self._events([pending]) if pending else []

    def _events(self, lines: list[bytes]) -> list[tuple[str, object]]:
        events: list[tuple[str, object]] = []
        for line in lines:
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    events.append((self._event, DONE))
                elif payload:
                    events.append((self._event, self._parse(payload)))
            elif not line:
                self._event = "message"
            elif line.startswith(b"event:"):
                self._event = line[6:].strip().decode("utf-8", "replace")
        return events

    def _parse(self, payload: bytes) -> object:
        try:
            return loads(payload)
        except ValueError as exc:
            shown = payload[:200].decode("utf-8", "replace")
            raise ModelError(
                f"{self._provider}: a stream event is not JSON ({self._url}): {exc}: {shown!r}",
                error_type="invalid_response",
                provider=self._provider,
            ) from exc


async def sse_events(
    chunks: AsyncIterator[bytes], provider: str, url: str
) -> AsyncIterator[tuple[str, object]]:
    """The (event name, JSON payload) pairs of a server-sent event byte stream (see SseDecoder)."""
    decoder = SseDecoder(provider, url)
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
