"""The vocabulary of argument checks: every constructor and option that takes an int, a number of
seconds or a conversation id checks it here, with one error type
(``ChainConfigurationError``, also a ``ValueError``) and one wording."""

from __future__ import annotations

from datetime import timedelta

from .errors import ChainConfigurationError

__all__ = ["check_conversation_id", "check_int", "check_seconds"]


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


def check_conversation_id(value: object, what: str = "conversation_id") -> str:
    """A conversation id: a non-empty str."""
    if not isinstance(value, str) or not value:
        raise ChainConfigurationError(f"{what} must be a non-empty str conversation id, got {value!r}")
    return value
