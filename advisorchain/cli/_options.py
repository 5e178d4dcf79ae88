"""The flags that describe an agent, in one place: every command that runs one (``chat``, ``demo``,
and the ones to come) applies the same option set and receives it as one frozen object.

To give every agent command a new flag: add one ``click.option`` to ``_MODEL_FLAGS`` (what builds
the model) or ``_AGENT_FLAGS`` (tools, memory, limits...), the field of the same name to
``ModelOptions`` / ``AgentOptions``, and its use in ``_agent.py``. A command that needs only a model
applies ``model_options``; one that runs the whole agent applies ``agent_options``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar, cast

import click

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentOptions",
    "ModelOptions",
    "agent_options",
    "model_options",
]

F = TypeVar("F", bound=Callable[..., Any])
_T = TypeVar("_T")

DEFAULT_TIMEOUT = 120.0
"""Seconds a server may stay silent (no byte of the answer) before a request is given up."""


@dataclass(frozen=True)
class ModelOptions:
    """What builds the model: ``--model``, ``--base-url``, ``--timeout``."""

    model: str | None
    base_url: str | None
    timeout: float


@dataclass(frozen=True)
class AgentOptions:
    """The whole agent: its model, system message, tools, MCP servers, memory, approvals and the
    knowledge base it answers from."""

    model: ModelOptions
    system: str | None
    tools: tuple[str, ...]
    mcp: tuple[str, ...]
    mcp_url: tuple[str, ...]
    session: str | None
    memory: str | None
    approve_all: bool
    knowledge: str | None = None


def _model_flags(default: str | None, help: str) -> list[Callable[[Any], Any]]:
    return [
        click.option(
            "-m",
            "--model",
            default=default,
            show_default=default is not None,
            envvar="ADVISORCHAIN_MODEL" if default is not None else None,
            help=help,
        ),
        click.option("--base-url", help="Any OpenAI-compatible (or Anthropic-compatible) server."),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=DEFAULT_TIMEOUT,
            show_default=True,
            metavar="SECONDS",
            help="How long the server may stay silent before a request is given up (and retried).",
        ),
    ]


_AGENT_FLAGS: list[Callable[[Any], Any]] = [
    click.option("--system", help="A system message."),
    click.option(
        "--tools", "tools", multiple=True, metavar="MODULE:OBJECT", help="Tools to offer (repeatable)."
    ),
    click.option("--mcp", "mcp", multiple=True, metavar='"COMMAND ARGS"', help="An MCP server over stdio."),
    click.option("--mcp-url", "mcp_url", multiple=True, metavar="URL", help="An MCP server over HTTP."),
    click.option(
        "-y", "--yes", "approve_all", is_flag=True, help="Approve every tool call that needs approval."
    ),
    click.option(
        "--knowledge",
        metavar="URL",
        help="Answer from a knowledge base built by 'advisorchain index': sqlite:///kb.db or "
        "postgresql://… (the sources cited are shown under the answer).",
    ),
]

_MEMORY_FLAGS: list[Callable[[Any], Any]] = [
    click.option("--session", help="Keep the conversation under this name (see 'advisorchain sessions')."),
    click.option(
        "--memory",
        metavar="URL",
        help="Where sessions live: sqlite:///file, postgresql://…, redis://… "
        "(default: SQLite in the data dir).",
    ),
]
_MEMORY_FIELDS = ("session", "memory")

_MODEL_HELP = "provider:name, provider one of openai, openai-responses, anthropic."


def model_options(*, default: str | None = "openai:gpt-4o-mini", help: str = _MODEL_HELP) -> Callable[[F], F]:
    """Adds ``--model``, ``--base-url`` and ``--timeout`` to a command, which receives them as one
    ``ModelOptions`` in its ``model`` argument."""

    def apply(command: F) -> F:
        @functools.wraps(command)
        def unpack(**kwargs: Any) -> Any:
            model = _take(kwargs, ModelOptions)
            return command(**kwargs, model=model)

        return cast(F, _with_flags(unpack, _model_flags(default, help)))

    return apply


def agent_options(
    *, model_default: str | None = "openai:gpt-4o-mini", model_help: str = _MODEL_HELP, memory: bool = True
) -> Callable[[F], F]:
    """Adds every agent flag (the model's included) to a command, which receives them as one
    ``AgentOptions`` in its ``agent`` argument. ``memory=False``: a command whose agent keeps no
    sessions (``--session`` and ``--memory`` are left out, and None)."""

    def apply(command: F) -> F:
        @functools.wraps(command)
        def unpack(**kwargs: Any) -> Any:
            model = _take(kwargs, ModelOptions)
            absent = {} if memory else dict.fromkeys(_MEMORY_FIELDS)
            agent = _take(kwargs, AgentOptions, model=model, **absent)
            return command(**kwargs, agent=agent)

        flags = [*_model_flags(model_default, model_help), *_AGENT_FLAGS, *(_MEMORY_FLAGS if memory else [])]
        return cast(F, _with_flags(unpack, flags))

    return apply


def _take(kwargs: dict[str, Any], cls: type[_T], **given: Any) -> _T:
    """A ``cls`` from the keyword arguments named as its fields (removed from ``kwargs``)."""
    values = {f.name: kwargs.pop(f.name) for f in fields(cls) if f.name not in given}  # type: ignore[arg-type]
    return cls(**values, **given)


def _with_flags(command: Callable[..., Any], flags: list[Callable[[Any], Any]]) -> Any:
    for flag in reversed(flags):
        command = flag(command)
    return command
