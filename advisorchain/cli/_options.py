"""The flags that describe an agent, in one place: every command that runs one (``chat``, ``demo``,
and the ones to come) applies the same option set and receives it as one frozen object.

To give every agent command a new flag: add one ``click.option`` to ``_MODEL_FLAGS`` (what builds
the model), ``_AGENT_FLAGS`` (tools, memory...) or ``_BUDGET_FLAGS`` (what an answer may spend, which
``demo`` takes too through ``budget_options``), the field of the same name to
``ModelOptions`` / ``AgentOptions``, and its use in ``_agent.py``. A command that needs only a model
applies ``model_options``; one that runs the whole agent applies ``agent_options``. ``--memory``
and ``--debug``, which commands without an agent take too, are ``memory_option`` and ``debug_option``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

if TYPE_CHECKING:
    from ..usage import UsageLimits

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentOptions",
    "BudgetOptions",
    "ModelOptions",
    "agent_options",
    "budget_options",
    "debug_option",
    "memory_option",
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
class BudgetOptions:
    """What one answer may spend: ``--max-cost USD``, ``--max-requests N`` (None: no limit)."""

    max_cost: Decimal | None = None
    max_requests: int | None = None

    def limits(self) -> UsageLimits | None:
        """The ``UsageLimits`` of each answer (one request, tool loop included), or None."""
        if self.max_cost is None and self.max_requests is None:
            return None
        from ..usage import UsageLimits

        return UsageLimits(request_limit=self.max_requests, cost_limit=self.max_cost)


@dataclass(frozen=True)
class AgentOptions:
    """The whole agent: its model, system message, tools, MCP servers, memory, approvals, the
    knowledge base it answers from and its budget."""

    model: ModelOptions
    system: str | None
    tools: tuple[str, ...]
    mcp: tuple[str, ...]
    mcp_url: tuple[str, ...]
    session: str | None
    memory: str | None
    approve_all: bool
    knowledge: str | None = None
    budget: BudgetOptions = BudgetOptions()
    cache: bool = False
    """``--cache``: a PromptCacheAdvisor with its defaults (API.md §21)."""
    agents: str | None = None


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
    click.option(
        "--cache",
        is_flag=True,
        help="Ask the provider to cache the stable prefix of each request (a PromptCacheAdvisor); "
        "the cached share is shown beside each answer's tokens.",
    ),
    click.option(
        "--agents",
        "agents",
        metavar="FILE",
        help="A YAML file of agents (name, instructions, description, tools, handoffs, model); the "
        "first one starts and hands the conversation over to the others.",
    ),
]


class _Usd(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click versions
    """A number of US dollars, as a ``Decimal`` (``0.05``; a leading ``$`` is allowed)."""

    name = "usd"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Decimal:
        if isinstance(value, Decimal):
            return value
        try:
            amount = Decimal(str(value).strip().removeprefix("$"))
        except InvalidOperation:
            self.fail(f"{value!r} is not an amount of USD (e.g. 0.05)", param, ctx)
        if not amount.is_finite() or amount < 0:
            self.fail(f"{value!r} is not an amount of USD >= 0", param, ctx)
        return amount


_BUDGET_FLAGS: list[Callable[[Any], Any]] = [
    click.option(
        "--max-cost",
        type=_Usd(),
        metavar="USD",
        help="Stop an answer before it spends more than this (e.g. 0.05); a model without a known "
        "price is then an error.",
    ),
    click.option(
        "--max-requests",
        type=click.IntRange(min=1),
        metavar="N",
        help="At most N model calls per answer (tool rounds and retries included).",
    ),
]

memory_option: Callable[[F], F] = click.option(
    "--memory",
    metavar="URL",
    help="Where sessions live: sqlite:///file, postgresql://…, redis://… (default: SQLite in the data dir).",
)
"""``--memory URL``: the sessions store, for the commands that keep or manage sessions."""

debug_option: Callable[[F], F] = click.option(
    "--debug", is_flag=True, help="Show the traceback of a failure."
)
"""``--debug``: a failure shows its traceback (the command line reads it before the command runs)."""

_MEMORY_FLAGS: list[Callable[[Any], Any]] = [
    click.option("--session", help="Keep the conversation under this name (see 'advisorchain sessions')."),
    memory_option,
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


def budget_options() -> Callable[[F], F]:
    """Adds ``--max-cost`` and ``--max-requests`` (the ones every agent command takes) to a command
    that does not take the whole agent set, which receives them as one ``BudgetOptions`` in its
    ``budget`` argument."""

    def apply(command: F) -> F:
        @functools.wraps(command)
        def unpack(**kwargs: Any) -> Any:
            budget = _take(kwargs, BudgetOptions)
            return command(**kwargs, budget=budget)

        return cast(F, _with_flags(unpack, _BUDGET_FLAGS))

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
            budget = _take(kwargs, BudgetOptions)
            absent = {} if memory else dict.fromkeys(_MEMORY_FIELDS)
            agent = _take(kwargs, AgentOptions, model=model, budget=budget, **absent)
            return command(**kwargs, agent=agent)

        flags = [
            *_model_flags(model_default, model_help),
            *_AGENT_FLAGS,
            *_BUDGET_FLAGS,
            *(_MEMORY_FLAGS if memory else []),
        ]
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
