"""Closing async iterators: the one place that knows a stream may or may not have ``aclose``."""

from __future__ import annotations

__all__ = ["close_stream"]


async def close_stream(stream: object) -> None:
    """Close ``stream`` if it can be closed (async generators can; a plain async iterator may not)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
