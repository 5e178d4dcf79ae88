"""Server-sent events, as the providers' streams send them, decoded from raw bytes."""

from __future__ import annotations

from collections.abc import Iterator

from ..._json import has_long_digits, loads, loads_short
from .failures import invalid_event

__all__ = ["DONE", "SseDecoder"]

DONE: object = object()
"""The ``[DONE]`` marker of a stream (an end-of-stream event, not JSON)."""

_HEAD_KEPT = 65536
"""Bytes of a stream kept until its first event: what is shown when it turns out not to be one."""

_Raw = list[tuple[str, object]]
"""A read's events before their JSON is parsed: (event name, payload bytes or ``DONE``)."""


class SseDecoder:
    """Server-sent events from a byte stream, however its chunks split the lines: ``feed(chunk)``
    gives the (event name, JSON payload) of each ``data:`` line the chunk completes — the name is
    that of the ``event:`` line before it, ``"message"`` when none; ``[DONE]`` comes as ``DONE``.
    Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``, as the format allows. Bytes, not text: the JSON
    parser reads UTF-8. Synchronous, so a stream pays for no generator per line.

    The lines of a read are split at once; each event's JSON is parsed when it is taken, so a read
    holding hundreds of events never holds them all parsed (a stream's garbage stays young).

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

    def feed(self, chunk: bytes) -> Iterator[tuple[str, object]]:
        """The events the chunk completes, each parsed as it is taken."""
        data = self._pending + chunk if self._pending else chunk
        if b"\r" in data:
            lines = data.splitlines(keepends=True)
            # A last line with no end yet (or only a ``\r``, which a ``\n`` may follow) waits.
            self._pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
            lines = [line.rstrip(b"\r\n") for line in lines]
        else:
            lines = data.split(b"\n")
            self._pending = lines.pop()  # what follows the last line end (b"" after one)
        raw = self._raw_events(lines)
        if self.head is not None:  # until the first event only
            self._keep(chunk, raw)
        if not raw:
            return iter(())
        # Integers past 64 bits are looked for once per read, not once per event.
        return self._parsed(raw, has_long_digits(data))

    def _keep(self, chunk: bytes, events: _Raw) -> None:
        head = self.head
        if events or head is None:
            self.head = None
        elif len(head) < _HEAD_KEPT:
            self.head = head + chunk[: _HEAD_KEPT - len(head)]

    def close(self) -> list[tuple[str, object]]:
        """The event of a last line the stream did not end."""
        pending, self._pending = self._pending, b""
        raw = self._raw_events([pending.rstrip(b"\r\n")]) if pending else []
        if raw:
            self.head = None
        return list(self._parsed(raw, True))

    @property
    def not_a_stream(self) -> bool:
        """True when the stream ended having sent bytes but no event at all (call after ``close``)."""
        return self.head is not None and bool(self.head.strip())

    def _raw_events(self, lines: list[bytes]) -> _Raw:
        """The events of complete ``lines`` (without their line ends), payloads unparsed."""
        events: _Raw = []
        event = self._event
        for line in lines:
            if line.startswith(b"data:"):
                # JSON needs no stripping (the parser skips the blanks around it): one copy a line.
                payload = line[5:]
                if b"[DONE]" in payload and payload.strip() == b"[DONE]":
                    events.append((event, DONE))
                elif payload and not payload.isspace():
                    events.append((event, payload))
            elif not line:
                event = "message"
            elif line.startswith(b"event:"):
                event = line[6:].strip().decode("utf-8", "replace")
        self._event = event
        return events

    def _parsed(self, raw: _Raw, long_digits: bool) -> Iterator[tuple[str, object]]:
        read = loads if long_digits else loads_short
        for event, payload in raw:
            if payload is not DONE:
                try:
                    payload = read(payload)  # type: ignore[arg-type]  # the bytes of a data line
                except ValueError as exc:
                    raise invalid_event(self._provider, self._url, exc, payload) from exc  # type: ignore[arg-type]
            yield event, payload
