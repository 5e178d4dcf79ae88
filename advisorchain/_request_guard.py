"""The switch of the request guard that ``advisorchain.testing.forbid_model_requests`` turns on: while
it is on, every provider adapter refuses a request that would leave this machine (the adapters'
check is ``advisorchain.models._common.check_request_allowed``)."""

from __future__ import annotations

import threading

__all__ = ["requests_forbidden", "set_requests_forbidden"]

_guard_lock = threading.Lock()
_guard_depth = 0


def set_requests_forbidden(forbidden: bool) -> None:
    """Turn the request guard on (nestable) or off again; used by ``advisorchain.testing``."""
    global _guard_depth
    with _guard_lock:
        _guard_depth = _guard_depth + 1 if forbidden else max(0, _guard_depth - 1)


def requests_forbidden() -> bool:
    """True while ``advisorchain.testing.forbid_model_requests`` is in force."""
    return _guard_depth > 0
