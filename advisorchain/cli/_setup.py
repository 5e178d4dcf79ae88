"""Turning command-line values into parts: the model, the tools, MCP servers (the memory store:
``_sessions``)."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from typing import Any

import click

from .._urls import redact_url
from ..errors import AdvisorChainError
from ..model import ChatModel

__all__ = [
    "PROVIDERS",
    "CliError",
    "build_model",
    "load_tools",
    "mcp_servers",
    "parse_model",
    "server_of",
]

PROVIDERS = ("openai", "openai-responses", "anthropic")
DATA_DIR_ENV = "ADVISORCHAIN_DATA_DIR"
_KEYS = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_EXTRAS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}


class CliError(AdvisorChainError):
    """A runtime failure the CLI reports in one line (exit code 1)."""


def parse_model(value: str) -> tuple[str, str]:
    """``provider:name`` split in two; a usage error naming the value otherwise."""
    provider, sep, name = value.partition(":")
    if not sep or not name or provider not in PROVIDERS:
        raise click.BadParameter(
            f"{value!r} is not provider:name; use one of "
            + ", ".join(f"{p}:<model>" for p in PROVIDERS)
            + " (e.g. openai:gpt-4o-mini)",
            param_hint="'--model'",
        )
    return provider, name


def build_model(provider: str, name: str, base_url: str | None, timeout: float | None = None) -> ChatModel:
    """The provider's chat model; its key comes from the environment only. ``timeout``: seconds the
    server may stay silent before a request is given up (the SDK's request timeout)."""
    if base_url is None and not os.environ.get(_KEYS[provider]):
        raise CliError(
            f"{_KEYS[provider]} is not set: export it for {provider}:{name}, "
            "or pass --base-url for a server that needs no key"
        )
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    try:
        if provider == "openai":
            from ..models.openai import OpenAIChatModel

            return OpenAIChatModel(name, base_url=base_url, **options)
        if provider == "openai-responses":
            from ..models.openai import OpenAIResponsesChatModel

            return OpenAIResponsesChatModel(name, base_url=base_url, **options)
        from ..models.anthropic import AnthropicChatModel

        return AnthropicChatModel(name, base_url=base_url, **options)
    except ImportError as exc:
        extra = _EXTRAS[provider]
        raise CliError(f"{provider} needs the {extra!r} extra: pip install 'advisorchain[{extra}]'") from exc


def load_tools(specs: tuple[str, ...]) -> list[object]:
    """The objects named by ``module:object`` (functions, ``@tool`` objects, objects with ``@tool``
    methods, lists of these); modules are found from the current directory too."""
    found: list[object] = []
    if specs and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for spec in specs:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise click.BadParameter(
                f"{spec!r} is not module:object (e.g. mytools:get_weather)", param_hint="'--tools'"
            )
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise click.BadParameter(
                f"{spec!r}: cannot import {module_name!r} ({exc}); run from its directory or install it",
                param_hint="'--tools'",
            ) from exc
        obj: Any = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise click.BadParameter(f"{spec!r}: {module_name!r} has no {attr!r}", param_hint="'--tools'")
            obj = getattr(obj, part)
        if isinstance(obj, list | tuple):
            found.extend(obj)
        else:
            found.append(obj)
    return found


def mcp_servers(commands: tuple[str, ...], urls: tuple[str, ...]) -> list[Any]:
    """MCP servers (not entered yet) for ``--mcp "command args"`` and ``--mcp-url URL``."""
    if not commands and not urls:
        return []
    try:
        mcp = importlib.import_module("advisorchain.mcp")
    except ImportError as exc:
        raise CliError(
            f"--mcp/--mcp-url need advisorchain.mcp, which is not available ({exc}); "
            "install it with pip install 'advisorchain[mcp]'"
        ) from exc
    servers: list[Any] = []
    for command in commands:
        parts = shlex.split(command)
        if not parts:
            raise click.BadParameter(f"{command!r} names no command", param_hint="'--mcp'")
        servers.append(mcp.McpServerStdio(parts[0], parts[1:]))
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{redact_url(url)!r} is not an http(s) URL", param_hint="'--mcp-url'")
        servers.append(mcp.McpServerHttp(url))
    return servers


def server_of(model: ChatModel) -> str:
    """The URL a model's requests go to (its SDK client's base URL), or the model's repr."""
    base_url = getattr(getattr(model, "client", None), "base_url", None)
    return str(base_url).rstrip("/") if base_url else repr(model)
