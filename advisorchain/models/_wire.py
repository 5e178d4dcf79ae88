"""The wire form of each message, built once and reused while the message keeps coming back.

A tool loop sends its whole history every round, and a conversation sends it every turn: the
same message objects, plus a few new ones. Messages are immutable, so the request dicts of a
message never change; ``WireCache`` keeps them by the message's identity (holding the message, so
the identity stays its own) and rebuilds only what is new. Bounded: the oldest entries go first.
Nothing the cache hands out may be changed in place — the adapters serialize the body and drop it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from ..messages import Message

__all__ = ["WireCache"]

Wire = tuple[dict[str, Any], ...]


class WireCache:
    """``convert(messages)``: the request dicts of ``messages`` in order, as ``build(message)``
    makes them (one message may become several dicts), each message built once while cached."""

    __slots__ = ("_build", "_entries", "_size")

    def __init__(self, build: Callable[[Message], Wire], size: int = 4096) -> None:
        self._build = build
        self._size = size
        self._entries: dict[int, tuple[Message, Wire]] = {}

    def convert(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The wire dicts of ``messages`` (shared with earlier requests: read them, never change them)."""
        entries = self._entries
        wire: list[dict[str, Any]] = []
        for message in messages:
            entry = entries.get(id(message))
            if entry is None or entry[0] is not message:
                entry = (message, self._build(message))
                if len(entries) >= self._size:
                    # Another thread may evict at the same time: losing that race loses nothing.
                    with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                        del entries[next(iter(entries))]
                entries[id(message)] = entry
            wire += entry[1]
        return wire

    @property
    def size(self) -> int:
        """How many messages are cached."""
        return len(self._entries)
