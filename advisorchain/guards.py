"""What a guard is, what it answers, and how guards are run (the contract of ``advisorchain.guardrails``,
kept below the advisors so the tool loop can run tool guards without importing the guardrail advisors).

A guard is a plain function ``fn(text, context) -> bool | GuardResult`` (sync or async). The runner
here is the one place guards are called: a sync guard in a worker thread, an async one on the loop;
each run is a span ``guardrail <name>`` holding the kind and the verdict, never the text; a guard
that raises or answers junk fails closed with ``GuardrailError``.

In a durable run on Temporal the guards run in the workflow's code, whose loop has no threads: a sync
guard runs inline there, and every guard must be deterministic (the built-in ``pii_guard``,
``keyword_guard`` and ``max_length_guard`` are; ``llm_guard`` calls a model, which workflow code may
not do).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from . import observability as obs
from .errors import GuardrailError, GuardrailTripped

__all__ = [
    "Guard",
    "GuardContext",
    "GuardKind",
    "GuardResult",
    "Verdict",
    "check_guards",
    "guard_name",
    "in_worker_thread",
    "run_guards",
    "trip_text",
]

GuardKind: TypeAlias = Literal["input", "output", "tool_call", "tool_result"]
_KINDS = ("input", "output", "tool_call", "tool_result")

GUARDRAIL_KIND = "advisorchain.guardrail.kind"
GUARDRAIL_PASSED = "advisorchain.guardrail.passed"


@dataclass(frozen=True, slots=True)
class GuardResult:
    """A guard's verdict: ``passed``, a ``message`` for the caller or the model when it trips (never
    the text it found, unless meant), and with ``passed=True`` an optional ``replacement`` — the text
    to use instead (redaction).

    >>> GuardResult(False, "That is off topic.")
    >>> GuardResult(True, replacement="Mail me at [EMAIL].")
    """

    passed: bool
    message: str | None = None
    replacement: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.passed, bool):
            raise TypeError(f"GuardResult.passed must be a bool, got {self.passed!r}")
        for field, value in (("message", self.message), ("replacement", self.replacement)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"GuardResult.{field} must be a str or None, got {type(value).__name__}")
        if self.replacement is not None and not self.passed:
            raise ValueError(
                "GuardResult.replacement is the text to use instead of a text that passed; a guard that "
                "trips gives a message, not a replacement"
            )


class GuardContext(Mapping[str, Any]):
    """What a guard knows besides the text, as a read-only mapping: ``kind`` (``"input"``,
    ``"output"``, ``"tool_call"``, ``"tool_result"``), and when known ``conversation_id``, ``agent``
    (the §18 agent), ``tool_name`` and ``tool_call_id`` (tool kinds). Also readable as attributes
    (None when absent).

    >>> def on_topic(text: str, context: GuardContext) -> bool:
    ...     return context["kind"] != "input" or "weather" in text.lower()
    """

    __slots__ = ("_items",)

    def __init__(
        self,
        kind: GuardKind,
        *,
        conversation_id: str | None = None,
        agent: str | None = None,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
    ) -> None:
        if kind not in _KINDS:
            raise ValueError(f"GuardContext kind must be one of {_KINDS!r}, got {kind!r}")
        items: dict[str, Any] = {"kind": kind}
        for key, value in (
            ("conversation_id", conversation_id),
            ("agent", agent),
            ("tool_name", tool_name),
            ("tool_call_id", tool_call_id),
        ):
            if value is not None:
                items[key] = value
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"GuardContext({self._items!r})"

    @property
    def kind(self) -> GuardKind:
        """What is checked: ``"input"``, ``"output"``, ``"tool_call"`` or ``"tool_result"``."""
        kind: GuardKind = self._items["kind"]
        return kind

    @property
    def conversation_id(self) -> str | None:
        """The conversation's id, when the request names one."""
        return self._items.get("conversation_id")

    @property
    def agent(self) -> str | None:
        """The agent that answered (output) or made the call (tools), when §18 names one."""
        return self._items.get("agent")

    @property
    def tool_name(self) -> str | None:
        """The tool called (tool kinds only)."""
        return self._items.get("tool_name")

    @property
    def tool_call_id(self) -> str | None:
        """The id of the tool call (tool kinds only)."""
        return self._items.get("tool_call_id")


Guard: TypeAlias = Callable[[str, GuardContext], "bool | GuardResult | Awaitable[bool | GuardResult]"]
"""A guard: ``fn(text, context) -> bool | GuardResult``, sync or async."""


def guard_name(guard: object) -> str:
    """A guard's name: ``guard.name`` when that is a str, else its ``__name__`` (else its type's)."""
    name = getattr(guard, "name", None)
    if isinstance(name, str):
        return name
    name = getattr(guard, "__name__", None)
    return name if isinstance(name, str) else type(guard).__name__


def check_guards(guards: Sequence[object], what: str, *, allow_empty: bool = False) -> tuple[Guard, ...]:
    """``guards`` as a tuple, each one callable (else a TypeError naming it)."""
    if isinstance(guards, str | bytes) or not isinstance(guards, Sequence):
        raise TypeError(f"{what} must be a sequence of guard functions, got {guards!r}")
    for guard in guards:
        if not callable(guard):
            raise TypeError(
                f"{what}: {guard!r} is not a guard; a guard is a function fn(text, context) returning a "
                "bool or a GuardResult (sync or async)"
            )
    if not guards and not allow_empty:
        raise ValueError(f"{what} needs at least one guard")
    return tuple(guards)  # type: ignore[arg-type]


async def in_worker_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a worker thread where the running loop has them; inline on a loop that has
    none (a Temporal workflow's, whose code must be deterministic anyway)."""
    if type(asyncio.get_running_loop()).run_in_executor is asyncio.AbstractEventLoop.run_in_executor:
        return fn(*args)  # a loop without executors (Temporal's workflow loop)
    return await asyncio.to_thread(fn, *args)


def _is_async(guard: object) -> bool:
    if inspect.iscoroutinefunction(guard):
        return True
    call = getattr(type(guard), "__call__", None)  # noqa: B004 — a callable object's async __call__
    return call is not None and _async_method(call)


@functools.lru_cache(maxsize=256)
def _async_method(method: object) -> bool:
    return inspect.iscoroutinefunction(method)


def _verdict(value: object, name: str, kind: str) -> GuardResult:
    if value is True or value is False:
        return GuardResult(value)
    if isinstance(value, GuardResult):
        return value
    raise GuardrailError(
        f"guard {name!r} ({kind}) returned {type(value).__name__}; a guard returns a bool or a GuardResult",
        guard=name,
        kind=kind,
    )


async def run_guard(guard: Guard, text: str, context: GuardContext) -> GuardResult:
    """One guard on ``text``: its verdict, or ``GuardrailError`` (fail closed) when it raises or
    answers junk. A sync guard runs in a worker thread, an async one on the loop."""
    name = guard_name(guard)
    kind = context.kind
    with obs.span(f"guardrail {name}", {GUARDRAIL_KIND: kind}) as span:
        try:
            if _is_async(guard):
                value: object = await guard(text, context)  # type: ignore[misc]
            else:
                value = await in_worker_thread(guard, text, context)
                if inspect.isawaitable(value):  # a plain function that returns a coroutine
                    value = await value
            result = _verdict(value, name, kind)
        except GuardrailError:
            if span is not None:
                span.set_attribute(GUARDRAIL_PASSED, False)
            raise
        except Exception as exc:
            if span is not None:
                span.set_attribute(GUARDRAIL_PASSED, False)
            raise GuardrailError(
                f"guard {name!r} ({kind}) failed with {type(exc).__name__}; the run stops (fail closed)",
                guard=name,
                kind=kind,
            ) from exc
        if span is not None:
            span.set_attribute(GUARDRAIL_PASSED, result.passed)
    return result


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verdict of a set of guards on one text: ``text`` is the text to use (the original, or
    every replacement applied), ``tripped`` the first guard that tripped (name, result), if any."""

    text: str
    tripped: tuple[str, GuardResult] | None = None
    replaced_by: str | None = None

    @property
    def passed(self) -> bool:
        """True when no guard tripped."""
        return self.tripped is None


async def run_guards(guards: Sequence[Guard], text: str, context: GuardContext) -> Verdict:
    """Every guard on ``text``, concurrently. The first trip (or failure) to come back decides, and
    the guards still running are cancelled (a sync guard's thread finishes on its own). When every
    guard passed, replacements are applied in guard order: a guard that replaced is asked again
    about the text the guards before it replaced, so the text used passed every guard that
    rewrites."""
    if len(guards) == 1:
        result = await run_guard(guards[0], text, context)
        return _single(guards[0], text, result)
    tasks = [asyncio.ensure_future(run_guard(g, text, context)) for g in guards]
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:  # in guard order among those done
                if task in done:
                    result = task.result()  # a GuardrailError propagates
                    if not result.passed:
                        return Verdict(text, (guard_name(guards[tasks.index(task)]), result))
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        for task in tasks:
            if not task.done():
                with contextlib.suppress(BaseException):
                    await task
    used = text
    replaced_by: str | None = None
    for guard, task in zip(guards, tasks, strict=True):
        result = task.result()
        if result.replacement is None:
            continue
        if replaced_by is not None:
            result = await run_guard(guard, used, context)  # asked again about the text as replaced
            if not result.passed:
                return Verdict(used, (guard_name(guard), result))
        replacement = result.replacement
        if replacement is None:
            continue
        used, replaced_by = replacement, guard_name(guard)
    return Verdict(used, None, replaced_by)


def _single(guard: Guard, text: str, result: GuardResult) -> Verdict:
    if not result.passed:
        return Verdict(text, (guard_name(guard), result))
    if result.replacement is None:
        return Verdict(text)
    return Verdict(result.replacement, None, guard_name(guard))


def trip_text(name: str, kind: str, message: str | None) -> str:
    """The text of a ``GuardrailTripped``: the guard and the kind, then its message (never the text
    it checked)."""
    where = {
        "input": "the input",
        "output": "the output",
        "tool_call": "a tool call",
        "tool_result": "a tool result",
    }
    return f"guardrail {name!r} tripped on {where.get(kind, kind)}" + (f": {message}" if message else "")


def tripped_error(verdict: Verdict, kind: str, partial_response: Any = None) -> GuardrailTripped:
    """The ``GuardrailTripped`` for a verdict that tripped."""
    assert verdict.tripped is not None
    name, result = verdict.tripped
    return GuardrailTripped(
        trip_text(name, kind, result.message),
        guard=name,
        kind=kind,
        message=result.message,
        partial_response=partial_response,
    )
