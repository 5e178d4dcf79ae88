"""Parsing provider JSON: ``orjson`` when it is installed (the ``fast`` extra), the stdlib otherwise.

Only reading goes through here. Request bodies stay the SDK's to serialize, so the bytes on the
wire are the SDK's whichever parser is installed.
"""

from __future__ import annotations

import json
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


def _loads_fast(data: str | bytes) -> Any:
    try:
        return _orjson.loads(data)
    except ValueError:
        # What orjson refuses and the stdlib reads (NaN, integers past 64 bits...) is read as the
        # stdlib reads it; what neither reads raises the stdlib's error.
        return json.loads(data)


loads: Callable[[str | bytes], Any] = _loads_fast if FAST else json.loads
"""Parse one JSON document (``str`` or UTF-8 ``bytes``); a ``ValueError`` when it is not JSON."""
