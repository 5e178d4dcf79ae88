"""Server-sent events, as the providers' streams send them, decoded from raw bytes."""

from __future__ import annotations

from .failures import invalid_event
from .json import loads

__all__ = ["DONE", "SseDecoder"]

DONE: object = object()
"""The ``[DONE]`` marker of a stream (an end-of-stream event, not JSON)."""

_HEAD_KEPT = 65536
"""Bytes of a stream kept until its first event: what is shown when it turns out not to be one."""


class SseDecoder:
    """Server-sent events from a byte stream, however its chunks split the lines: ``feed(chunk)``
    gives the (event name, JSON payload) of each ``data:`` line the chunk completes — the name is
    that of the ``event:`` line before it, ``"message"`` when none; ``[DONE]`` comes as ``DONE``.
    Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``, as the format allows. Bytes, not text: the JSON
    parser reads UTF-8. Synchronous, so a stream pays for no generator per line.

    Until the first event, the bytes are kept (``head``, up to 64 KB): a body that never had an
    event (an HTML page, a JSON error) is then reported as what it is (``not_a_stream``)."""

    __slots__ = ("_event", "_pending", "_provider", "_url", "head")

    def __init__(self, provider: str, url: str) -> None:
        self._provider = provider
        self._url = url
        self._pending = b""
        self._event = "message"
        self.head: bytes | None = b""
        """The stream's first bytes while no event has come; None from the first event on."""

    def feed(self, chunk: bytes) -> list[tuple[str, object]]:
        """The events the chunk completes."""
        lines = (self._pending + chunk if self._pending else chunk).splitlines(keepends=True)
        # A last line with no end yet (or only a ``\r``, which a ``\n`` may follow) waits for more.
        self._pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        events = self._events(lines)
        if self.head is not None:  # until the first event only
            self._keep(chunk, events)
        return events

    def _keep(self, chunk: bytes, events: list[tuple[str, object]]) -> None:
        head = self.head
        if events or head is None:
            self.head = None
        elif len(head) < _HEAD_KEPT:
            self.head = head + chunk[: _HEAD_KEPT - len(head)]

    def close(self) -> list[tuple[str, object]]:
        """The event of a last line the stream did not end."""
        pending, self._pending = self._pending, b""
        events = self._events([pending]) if pending else []
        if events:
            self.head = None
        return events

    @property
    def not_a_stream(self) -> bool:
        """True when the stream ended having sent bytes but no event at all (call after ``close``)."""
        return self.head is not None and bool(self.head.strip())

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
            raise invalid_event(self._provider, self._url, exc, payload) from exc
