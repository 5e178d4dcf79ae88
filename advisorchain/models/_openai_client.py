"""The official OpenAI SDK client, as both OpenAI adapters (Chat Completions and Responses) use it:
built from a key and base URL, copied for each event loop, and its errors as ModelErrors.

The SDK is found at import but imported on first use (building a client, mapping an error):
importing ``openai`` takes about half a second, which a program that only imports the adapters
should not pay."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from ._extras import missing_extra

if TYPE_CHECKING:
    import openai

from ..errors import ModelError
from ._common import connection_error, error_from_body, retry_after_seconds
from ._transport import AiohttpPath, HttpPath, SdkPath, aiohttp_eligible

__all__ = [
    "BEARER_AUTH",
    "build_client",
    "client_for",
    "derive_client",
    "http_path",
    "model_error",
    "require_sdk",
]

_SDK_PACKAGES = ("openai", "httpx2")


def require_sdk(module: str) -> None:
    """At the import of an OpenAI adapter ``module``: the SDK's packages are installed (found, not
    imported), else the ModuleNotFoundError that names the extra to install."""
    for name in _SDK_PACKAGES:
        if importlib.util.find_spec(name) is None:
            raise missing_extra(module, "openai", ImportError(f"No module named {name!r}", name=name))


LOCAL_SERVER_KEY = "unused"
"""The key sent to a server named by ``base_url`` when none is given (local servers need none)."""


def build_client(
    base_url: str | None, api_key: str | None, max_retries: int | None, *, model_class: str
) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` from a key (else ``OPENAI_API_KEY``) and base URL; no key is a ModelError
    naming the variable, at construction."""
    import openai

    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    if key is None and base_url is not None:
        key = LOCAL_SERVER_KEY
    kwargs: dict[str, Any] = {}
    if base_url is not None:
        kwargs["base_url"] = base_url
    if max_retries is not None:
        kwargs["max_retries"] = max_retries
    try:
        return openai.AsyncOpenAI(api_key=key, **kwargs)
    except openai.OpenAIError as exc:
        raise ModelError(
            f"{model_class} has no API key: set OPENAI_API_KEY in the environment, pass api_key=..., "
            "or pass a ready openai.AsyncOpenAI as client=",
            provider="openai",
        ) from exc


def client_for(
    model_class: str,
    model: object,
    client: openai.AsyncOpenAI | None,
    base_url: str | None,
    api_key: str | None,
    max_retries: int | None,
) -> openai.AsyncOpenAI:
    """What both OpenAI adapters' constructors check and build: a model name, and either a ready
    ``client`` (used as is) or the settings to build one — not both."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"{model_class} needs a model name, got {model!r}")
    if client is None:
        return build_client(base_url, api_key, max_retries, model_class=model_class)
    if base_url is not None or api_key is not None or max_retries is not None:
        raise ValueError(
            f"{model_class} takes either a ready `client` or `base_url`/`api_key`/`max_retries` "
            "to build one, not both; configure the client you pass instead"
        )
    return client


def derive_client(template: openai.AsyncOpenAI, http_client: Any) -> openai.AsyncOpenAI:
    """A client configured as ``template`` over another HTTP client (one per event loop, see ``_loops``)."""
    return template.copy(http_client=http_client)


def model_error(exc: openai.OpenAIError, provider: str, url: str | None = None) -> ModelError:
    """An SDK error as a ModelError: what happened, the status, the provider's error, the URL tried."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return connection_error(exc, provider=provider, url=url)
    if isinstance(exc, openai.APIStatusError):
        return error_from_body(
            exc.body,
            provider=provider,
            status_code=exc.status_code,
            fallback=exc.message,
            retry_after=retry_after_seconds(exc.response.headers),
        )
    if isinstance(exc, openai.APIError):
        return error_from_body(exc.body, provider=provider, status_code=None, fallback=exc.message)
    return ModelError(f"{provider} client failed: {exc}", provider=provider)


BEARER_AUTH = {"bearer_auth": True}
"""How the model endpoints authenticate (the SDK's security option for them: the API key)."""


def http_path(client: openai.AsyncOpenAI, path: str, *, provider: str) -> HttpPath:
    """How requests of ``client`` to ``path`` travel: aiohttp when it can stand in for the SDK's
    HTTP stack with the same configuration, else the SDK's own (see ``_transport``)."""
    if aiohttp_eligible(client, "openai"):
        return AiohttpPath(client, path, provider=provider, security=BEARER_AUTH, sdk_module="openai")
    import openai

    return SdkPath(
        client, path, provider=provider, security=BEARER_AUTH, sdk_error=openai.OpenAIError, error=_sdk_error
    )


def _sdk_error(exc: Exception, provider: str, url: str) -> ModelError:
    return model_error(exc, provider, url)  # type: ignore[arg-type]  # only OpenAIErrors reach it
