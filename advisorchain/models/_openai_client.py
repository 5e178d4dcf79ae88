"""The official OpenAI SDK client, as both OpenAI adapters (Chat Completions and Responses) use it:
built from a key and base URL (or given ready), and how their endpoints authenticate.

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

__all__ = ["BEARER_AUTH", "build_client", "client_for", "require_sdk"]

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


BEARER_AUTH = {"bearer_auth": True}
"""How the model endpoints authenticate (the SDK's security option for them: the API key)."""
