"""Cache points (API.md §21): ``metadata["cache_point"]`` on a message, ``"5m"`` or ``"1h"``, says
"the prompt up to and including this message is a cacheable prefix". One home for the key, the
values, the check every adapter makes before a request, and the helpers that set and strip a mark.

This module imports only ``messages``: the model layer, the adapters, memory and the advisors
all use it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeVar

from .messages import Message

__all__ = [
    "CACHE_POINT",
    "CACHE_TTLS",
    "CacheTtl",
    "cache_point",
    "check_cache_points",
    "check_ttl",
    "with_cache_point",
    "without_cache_point",
    "without_cache_points",
]

CACHE_POINT: Final = "cache_point"
"""The metadata key of a cache point."""

CacheTtl = Literal["5m", "1h"]
"""The time a cache point's prefix lives: five minutes or one hour."""

CACHE_TTLS: Final[tuple[str, str]] = ("5m", "1h")
"""The values a cache point may have."""

M = TypeVar("M", bound=Message)


def check_ttl(value: object, what: str) -> None:
    """Raise ValueError naming ``value`` (and ``what`` it is) unless it is ``"5m"`` or ``"1h"``."""
    if not isinstance(value, str) or value not in CACHE_TTLS:
        raise ValueError(f'{what} must be "5m" or "1h" (a cache point\'s time to live), got {value!r}')


def cache_point(message: Message) -> str | None:
    """The message's cache point (``"5m"``/``"1h"``), or None when it carries none. Not checked:
    see ``check_cache_points``."""
    value = message.metadata.get(CACHE_POINT)
    return None if value is None else value


def check_cache_points(messages: Sequence[Message]) -> None:
    """Every adapter's check before a request: a cache point other than ``"5m"``/``"1h"`` raises a
    ValueError naming the value and the message (its index in the prompt and its role)."""
    for index, message in enumerate(messages):
        metadata = message.metadata
        if not metadata or CACHE_POINT not in metadata:
            continue
        value = metadata[CACHE_POINT]
        if value is None or (isinstance(value, str) and value in CACHE_TTLS):
            continue
        check_ttl(value, f'metadata["cache_point"] of message {index} ({message.type.value})')


def with_cache_point(message: M, ttl: str) -> M:
    """``message`` marked with ``ttl`` (the same message when it already carries that mark)."""
    metadata = message.metadata
    if metadata.get(CACHE_POINT) == ttl:
        return message
    return _with_metadata(message, {**metadata, CACHE_POINT: ttl})


def without_cache_point(message: M) -> M:
    """``message`` without a cache point (the same message when it carries none); no other
    metadata changes."""
    metadata = message.metadata
    if CACHE_POINT not in metadata:
        return message
    return _with_metadata(message, {k: v for k, v in metadata.items() if k != CACHE_POINT})


def without_cache_points(messages: Sequence[M]) -> list[M]:
    """``messages`` with their cache points taken off (unmarked messages are kept as they are)."""
    return [without_cache_point(m) for m in messages]


def _with_metadata(message: M, metadata: dict[str, Any]) -> M:
    """A copy of ``message`` with ``metadata``, field for field: ``dataclasses.replace`` would run
    the constructor's checks again (microseconds, on every model call of a cached loop)."""
    cls = type(message)
    slots = cls.__dict__.get("__slots__")
    if not slots or hasattr(message, "__dict__"):  # a subclass of a message: built as it builds
        return dataclasses.replace(message, metadata=metadata)
    copied = object.__new__(cls)
    for name in slots:
        object.__setattr__(copied, name, getattr(message, name))
    object.__setattr__(copied, "metadata", metadata)
    return copied
