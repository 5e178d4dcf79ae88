"""JSON in and out, for the HTTP stack and the tool arguments a model sends: ``orjson`` when it is
installed (the provider extras bring it), the stdlib otherwise — same results either way.
``dumps`` writes request bodies as the SDKs serialize them (compact, UTF-8, no NaN), so the bytes
on the wire are the SDK's whichever is installed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "dumps", "has_long_digits", "loads", "loads_short"]

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # the stdlib parser: same results, more CPU
    _orjson = None

FAST = _orjson is not None
"""True when ``orjson`` parses."""


_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19}")
"""19 digits in a row: maybe an integer past 64 bits, which orjson reads as a float (or refuses)."""


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_ZEROS = b"0" * 19


def has_long_digits(data: str | bytes) -> bool:
    """True when ``data`` holds 19 digits in a row: maybe an integer past 64 bits, which orjson
    would read as a float. Checked once for a whole read of a stream, not per event."""
    if isinstance(data, bytes):
        # Two passes in C (every digit made a 0, then a substring search): a regex costs
        # microseconds per stream event, this a fraction of one.
        return _NINETEEN_ZEROS in data.translate(_DIGITS_AS_ZERO)
    return _LONG_DIGITS_TEXT.search(data) is not None


def _loads_short(data: str | bytes) -> Any:
    try:
        return _orjson.loads(data)
    except ValueError:
        # What orjson refuses and the stdlib reads (NaN, Infinity) is read as the stdlib reads it;
        # what neither reads raises the stdlib's error.
        return json.loads(data)


def _loads_fast(data: str | bytes) -> Any:
    if has_long_digits(data):
        return json.loads(data)  # exact integers of any size, as the stdlib reads them
    return _loads_short(data)


loads: Callable[[str | bytes], Any] = _loads_fast if FAST else json.loads
"""Parse one JSON document (``str`` or UTF-8 ``bytes``); a ``ValueError`` when it is not JSON."""

loads_short: Callable[[str | bytes], Any] = _loads_short if FAST else json.loads
"""``loads`` for text known to hold no 19 digits in a row (``has_long_digits`` is false): the same
result without looking again."""


def _dumps_stdlib(body: object) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _dumps_fast(body: object) -> bytes:
    try:
        return _orjson.dumps(body)  # type: ignore[no-any-return]  # orjson: bytes
    except TypeError:  # what orjson refuses (an int past 64 bits, a str subclass key...)
        return _dumps_stdlib(body)


dumps: Callable[[object], bytes] = _dumps_fast if FAST else _dumps_stdlib
"""A request body as the SDKs serialize it (compact, UTF-8, no NaN): ``orjson`` when installed."""
