"""The provider SDK clients the adapters send through (``openai.AsyncOpenAI``,
``anthropic.AsyncAnthropic``): built from a key and base URL, or given ready — one rule for every
adapter and for ``OpenAIEmbeddingModel`` — and how the OpenAI endpoints authenticate. The layer
that chat models and embedding models share: ``LoopClients`` (one SDK client per event loop, made
by ``derive_client``) and ``model_error`` (an SDK failure as a ``ModelError``) are reached here.

An SDK is found when its adapter is imported, and imported on first use (building a client,
mapping an error): importing ``openai`` takes about half a second, which a program that only
imports the adapters should not pay."""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._extras import missing_extra
from ..errors import ModelError
from ._http.failures import model_error
from ._http.loops import LoopClients

__all__ = [
    "ANTHROPIC",
    "BEARER_AUTH",
    "LOCAL_SERVER_KEY",
    "LoopClients",
    "OPENAI",
    "SDKS",
    "SdkClient",
    "build_client",
    "client_for",
    "derive_client",
    "model_error",
    "require_sdk",
]


@dataclass(frozen=True, slots=True)
class SdkClient:
    """A provider's SDK as the adapters use it: the package (also the extra that brings it), the
    async client class, the root of its errors, the variable holding the key, and the one holding
    other credentials that stand in for a key, when the SDK reads one."""

    package: str
    client_class: str
    error_class: str
    key_variable: str
    token_variable: str | None = None

    @property
    def qualified_class(self) -> str:
        """``openai.AsyncOpenAI``: how error messages name the client to pass instead."""
        return f"{self.package}.{self.client_class}"


OPENAI = SdkClient("openai", "AsyncOpenAI", "OpenAIError", "OPENAI_API_KEY")
ANTHROPIC = SdkClient(
    "anthropic",
    "AsyncAnthropic",
    "AnthropicError",
    "ANTHROPIC_API_KEY",
    token_variable="ANTHROPIC_AUTH_TOKEN",
)
SDKS: Mapping[str, SdkClient] = {sdk.package: sdk for sdk in (OPENAI, ANTHROPIC)}
"""The SDKs by package name (an adapter's ``_SDK_MODULE``)."""

_HTTP_PACKAGE = "httpx2"
"""The SDKs' HTTP stack: part of what each provider extra must bring."""

LOCAL_SERVER_KEY = "unused"
"""The key sent to a server named by ``base_url`` when none is given (local servers need none; the
SDKs want one)."""

BEARER_AUTH = {"bearer_auth": True}
"""How the OpenAI model endpoints authenticate (the SDK's security option for them: the API key)."""


def require_sdk(module: str, sdk: SdkClient) -> None:
    """At the import of ``module`` (an adapter): the SDK's packages are installed (found, not
    imported), else the ModuleNotFoundError that names the extra to install."""
    for name in (sdk.package, _HTTP_PACKAGE):
        if importlib.util.find_spec(name) is None:
            raise missing_extra(module, sdk.package, ImportError(f"No module named {name!r}", name=name))


def client_for(
    sdk: SdkClient,
    model_class: str,
    model: object,
    client: Any,
    base_url: str | None,
    api_key: str | None,
    max_retries: int | None,
) -> Any:
    """What the constructors of the adapters check and build: a model name, and either a ready
    ``client`` (used as is) or the settings to build one (``build_client``) — not both."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"{model_class} needs a model name, got {model!r}")
    if client is None:
        return build_client(sdk, base_url, api_key, max_retries, model_class=model_class)
    if base_url is not None or api_key is not None or max_retries is not None:
        raise ValueError(
            f"{model_class} takes either a ready `client` or `base_url`/`api_key`/`max_retries` "
            "to build one, not both; configure the client you pass instead"
        )
    return client


def build_client(
    sdk: SdkClient, base_url: str | None, api_key: str | None, max_retries: int | None, *, model_class: str
) -> Any:
    """The SDK's async client from a key (else the SDK's key variable) and base URL. With no key,
    a server named by ``base_url`` gets ``LOCAL_SERVER_KEY``; anywhere else no key is a
    ModelError naming the variable, at construction (unless the SDK's other credentials are set)."""
    key = api_key if api_key is not None else os.environ.get(sdk.key_variable)
    if not key and not _has_token(sdk):
        if base_url is None:
            raise ModelError(
                f"{model_class} has no API key: set {sdk.key_variable} in the environment, pass "
                f"api_key=..., or pass a ready {sdk.qualified_class} as client=",
                provider=sdk.package,
            )
        key = LOCAL_SERVER_KEY
    settings = {"api_key": key or None, "base_url": base_url, "max_retries": max_retries}
    client_class = getattr(importlib.import_module(sdk.package), sdk.client_class)
    return client_class(**{name: value for name, value in settings.items() if value is not None})


def _has_token(sdk: SdkClient) -> bool:
    return sdk.token_variable is not None and bool(os.environ.get(sdk.token_variable))


def derive_client(template: Any, http_client: Any) -> Any:
    """An SDK client configured as ``template`` over another HTTP client (one per event loop, see
    ``LoopClients``): the SDK's own ``copy``."""
    return template.copy(http_client=http_client)
