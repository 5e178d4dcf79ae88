"""Every private attribute of the SDKs, httpx2 and aiohttp that the HTTP stack reads, in one place,
with the check that each is still where it is read.

The aiohttp path stands in for the SDK's own HTTP stack with the SDK client's exact configuration
(``transport``), and one client per event loop is derived from the user's (``loops``): both read
attributes no SDK promises to keep. An SDK release that moves one must fail a test — at the
installed versions (``tests/providers/test_sdk_internals.py``) and at the lower bounds of the
provider extras (``tests/providers/extras_check.py``) — never a user's request: ``missing(client,
sdk_module)`` names what is not where it should be, and ``transport.aiohttp_eligible`` keeps a
client whose needs are not all there on the SDK's own path (logged once).

Three kinds of reads, each listed below with what reads it:

* ``REQUIRED``: the aiohttp path and the per-loop clients cannot work without them;
* ``OPTIONAL``: read with a default (``getattr(x, name, None)``), their absence means "not set"
  (a hook a newer SDK added; a setting an older one lacks). Listed so that they are known, not checked;
* ``AIOHTTP``: aiohttp's own, read on the aiohttp path.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AIOHTTP", "OPTIONAL", "REQUIRED", "Internal", "missing", "missing_in_aiohttp"]

Owner = Literal["sdk module", "client", "http client", "transport", "pool"]


@dataclass(frozen=True, slots=True)
class Internal:
    """One private attribute: where it lives (``owner``), its name (dotted under a module), what
    it must be, and what reads it."""

    owner: Owner
    name: str
    kind: Literal["present", "callable", "coroutine function", "class"]
    read_by: str

    def found(self, objects: dict[str, Any], sdk_module: str) -> bool:
        """Whether the attribute is there, and of its kind, on the given objects."""
        if self.owner == "sdk module":
            module_name, _, attribute = f"{sdk_module}.{self.name}".rpartition(".")
            try:
                owner: Any = importlib.import_module(module_name)
            except ImportError:
                return False
        else:
            owner = objects.get(self.owner)
            attribute = self.name
            if owner is None:
                return False
        if not hasattr(owner, attribute):
            return False
        return _KINDS[self.kind](getattr(owner, attribute))


_KINDS: dict[str, Callable[[Any], bool]] = {
    "present": lambda value: True,
    "callable": callable,
    "coroutine function": inspect.iscoroutinefunction,
    "class": inspect.isclass,
}

_TRANSPORT = "models/_http/transport.py"
_LOOPS = "models/_http/loops.py"
_COMMON = "models/_common.py (the request guard)"

REQUIRED: tuple[Internal, ...] = (
    # The SDK packages (``openai``, ``anthropic``).
    Internal(
        "sdk module", "_base_client.AsyncHttpxClientWrapper", "class", f"{_TRANSPORT}: the default client"
    ),
    Internal("sdk module", "_base_client.get_platform", "callable", f"{_TRANSPORT}: the platform headers"),
    Internal("sdk module", "_models.FinalRequestOptions", "class", f"{_TRANSPORT}: a request's options"),
    # The SDK client.
    Internal("client", "_client", "present", f"{_TRANSPORT}, {_LOOPS}: its httpx2 client"),
    Internal("client", "_prepare_options", "coroutine function", f"{_TRANSPORT}: the SDK's request"),
    Internal("client", "_build_request", "callable", f"{_TRANSPORT}: URL, headers, timeouts"),
    Internal("client", "_platform", "present", f"{_TRANSPORT}: set once, as the SDK sets it"),
    Internal("client", "_idempotency_header", "present", f"{_TRANSPORT}: the idempotency header"),
    Internal("client", "_idempotency_key", "callable", f"{_TRANSPORT}: a key per request"),
    Internal("client", "_should_retry", "callable", f"{_TRANSPORT}: the SDK's retry policy"),
    Internal("client", "_calculate_retry_timeout", "callable", f"{_TRANSPORT}: the SDK's backoff"),
    # httpx2's client, transport and connection pool under the SDK client.
    Internal("http client", "_transport", "present", f"{_TRANSPORT}, {_LOOPS}, {_COMMON}"),
    Internal("http client", "_mounts", "present", f"{_TRANSPORT}: proxies; {_LOOPS}; {_COMMON}"),
    Internal("transport", "_pool", "present", f"{_TRANSPORT}: pool settings; {_LOOPS}: a fresh pool"),
    Internal("pool", "_connections", "present", f"{_LOOPS}: a pool with no connections yet"),
    Internal("pool", "_requests", "present", f"{_LOOPS}: a pool with no requests yet"),
    Internal("pool", "_max_connections", "present", f"{_TRANSPORT}: aiohttp's connection limit"),
    Internal("pool", "_keepalive_expiry", "present", f"{_TRANSPORT}: aiohttp's keep-alive"),
    Internal("pool", "_ssl_context", "present", f"{_TRANSPORT}: TLS settings and CA bundle"),
)
"""What the aiohttp path and the per-loop clients read and cannot do without."""

OPTIONAL: tuple[Internal, ...] = (
    Internal("client", "_provider_runtime", "present", f"{_TRANSPORT}: a hook that keeps the SDK path"),
    Internal("client", "_workload_identity_auth", "present", f"{_TRANSPORT}: keeps the SDK path"),
    Internal("client", "_api_key_provider", "present", f"{_TRANSPORT}: keeps the SDK path"),
    Internal("client", "_token_cache", "present", f"{_TRANSPORT}: keeps the SDK path"),
    Internal("client", "_middleware", "present", f"{_TRANSPORT}: keeps the SDK path"),
    Internal("pool", "_proxy", "present", f"{_TRANSPORT}: a proxy keeps the SDK path"),
    Internal("pool", "_optional_thread_lock", "present", f"{_LOOPS}: a lock of the fresh pool's own"),
    Internal("client", "_calculate_nonstreaming_timeout", "callable", "models/anthropic.py (both paths)"),
    Internal("sdk module", "_constants.DEFAULT_TIMEOUT", "present", "models/anthropic.py (both paths)"),
    Internal("sdk module", "_constants.MODEL_NONSTREAMING_TOKENS", "present", "models/anthropic.py"),
)
"""Read with a default: absent means "not set" (listed so that every private read is known)."""

AIOHTTP: tuple[tuple[str, str, str], ...] = (
    ("BaseConnector", "_close", f"{_TRANSPORT}: a session its loop never closed, closed at collection"),
    ("ClientSession", "_connector", f"{_TRANSPORT}: the same, marked closed"),
)
"""aiohttp's private attributes the aiohttp path reads: (class, attribute, what reads it). Only a
session left unclosed by its loop needs them (errors there are suppressed: its sockets then close
as they are collected), so they are checked by the tests, not before requests."""

_log = logging.getLogger("advisorchain.models")


def _objects(client: Any) -> dict[str, Any]:
    http_client = getattr(client, "_client", None)
    transport = getattr(http_client, "_transport", None)
    return {
        "client": client,
        "http client": http_client,
        "transport": transport,
        "pool": getattr(transport, "_pool", None),
    }


_checked: dict[tuple[Any, ...], tuple[str, ...]] = {}


def missing(client: Any, sdk_module: str) -> list[str]:
    """The required internals that ``client`` (an SDK client of package ``sdk_module``, over the
    SDK's default HTTP client) does not have where they are read, by name; empty when all are
    there. Known per set of classes (an SDK version), so checked once."""
    objects = _objects(client)
    key = (*(type(o) for o in objects.values()), sdk_module)
    found = _checked.get(key)
    if found is None:
        found = tuple(f"{i.owner} {i.name} ({i.kind})" for i in REQUIRED if not i.found(objects, sdk_module))
        _checked[key] = found
        if found:
            _log.warning(
                "%s: this %s version lacks what the aiohttp path reads (%s); requests keep the SDK's "
                "own HTTP stack. Please report it to advisorchain with the SDK version.",
                sdk_module,
                sdk_module,
                "; ".join(found),
            )
    return list(found)


def missing_in_aiohttp(session: Any) -> list[str]:
    """aiohttp's private attributes (``AIOHTTP``) that the installed aiohttp lacks, by name, looked
    for on the classes and on ``session`` (a ``ClientSession``)."""
    import aiohttp

    absent = []
    for class_name, attribute, _ in AIOHTTP:
        cls = getattr(aiohttp, class_name, None)
        owner = session if class_name == "ClientSession" else cls
        if cls is None or not hasattr(owner, attribute):
            absent.append(f"aiohttp.{class_name}.{attribute}")
    return absent
