"""The vocabulary of argument checks: every constructor and option that takes an int, a number of
seconds or a conversation id checks it here, with one error type
(``ChainConfigurationError``, also a ``ValueError``) and one wording."""

from __future__ import annotations

from datetime import timedelta

from .errors import ChainConfigurationError

__all__ = ["MAX_CONVERSATION_ID_CHARS", "check_conversation_id", "check_int", "check_seconds"]


def check_int(value: object, what: str, *, minimum: int | None = None, optional: bool = False) -> int:
    """``value`` when it is an int (not a bool) of at least ``minimum``; ``optional`` allows None
    (the caller's ``int | None`` then comes back as is)."""
    if value is None and optional:
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int):
        none = " or None" if optional else ""
        raise ChainConfigurationError(f"{what} must be an int{none}, got {value!r}")
    if minimum is not None and value < minimum:
        none = " or None" if optional else ""
        raise ChainConfigurationError(f"{what} must be an int >= {minimum}{none}, got {value!r}")
    return value


def check_seconds(value: object, what: str, *, optional: bool = False) -> float:
    """A positive number of seconds (a ``timedelta`` is converted); ``optional`` allows None."""
    if value is None and optional:
        return value  # type: ignore[return-value]
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        none = " or None" if optional else ""
        raise ChainConfigurationError(f"{what} must be a positive number of seconds{none}, got {value!r}")
    return float(value)


MAX_CONVERSATION_ID_CHARS = 1000
"""The longest conversation id every store takes (SQLite, PostgreSQL and Redis keys included)."""


def check_conversation_id(value: object, what: str = "conversation id") -> str:
    """A conversation id: a non-empty ``str`` of at most 1,000 characters with no NUL and no lone
    surrogate (the one rule of every store and of the ``ChatMemory.CONVERSATION_ID`` param: what
    one store takes, every store takes, and nothing reaches a driver that it would refuse)."""
    if isinstance(value, str) and 0 < len(value) <= MAX_CONVERSATION_ID_CHARS and "\x00" not in value:
        if value.isascii():
            return value
        try:
            value.encode("utf-8")  # a lone surrogate cannot be encoded: no store could keep it
        except UnicodeEncodeError:
            pass
        else:
            return value
    raise ChainConfigurationError(
        f"{what} must be a non-empty str of at most {MAX_CONVERSATION_ID_CHARS:,} characters with no NUL "
        f"and no lone surrogate, got {_shown(value)}; pass e.g. str(your_id), or a hash of a longer key"
    )


def _shown(value: object) -> str:
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:60]!r}... ({len(value):,} characters)"
    return repr(value)
