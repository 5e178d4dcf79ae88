"""Parsing provider JSON: ``orjson`` when it is installed (the ``fast`` extra), the stdlib otherwise.

Only reading goes through here. Request bodies stay the SDK's to serialize, so the bytes on the
wire are the SDK's whichever parser is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "loads"]

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # the stdlib parser: same results, more CPU
    _orjson = None

FAST = _orjson is not None
"""True when ``orjson`` parses."""


_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")
_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19}")
"""19 digits in a row: maybe an integer past 64 bits, which orjson reads as a float (or refuses)."""


def _loads_fast(data: str | bytes) -> Any:
    long_digits = _LONG_DIGITS_BYTES if isinstance(data, bytes) else _LONG_DIGITS_TEXT
    if long_digits.search(data) is not None:  # type: ignore[arg-type]
        return json.loads(data)  # exact integers of any size, as the stdlib reads them
    try:
        return _orjson.loads(data)
    except ValueError:
        # What orjson refuses and the stdlib reads (NaN, Infinity) is read as the stdlib reads it;
        # what neither reads raises the stdlib's error.
        return json.loads(data)


loads: Callable[[str | bytes], Any] = _loads_fast if FAST else json.loads
"""Parse one JSON document (``str`` or UTF-8 ``bytes``); a ``ValueError`` when it is not JSON."""
