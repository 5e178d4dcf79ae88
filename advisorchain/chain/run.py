"""The run: everything one client request owns while its chain works, in one object.

A ``ChatClient`` builds one ``Run`` per request and every chain of that request (the tool loop's
rounds, a recursive advisor's attempts, a compaction's own calls) reaches it as ``chain.run``:

- ``meter``: the budget and the totals (``RunMeter``), which the model link and the tool loop
  count in; a chain built without a client gets an unmetered one, so no code tests for ``None``;
- ``span``: the request span (None when tracing is off);
- per-run slots an advisor declares (``slot(key, factory)``): memory's turn, the citation ledger;
- ``emit(event)``: run events for a listener (served protocols), see ``events``;
- gates (``add_gate``/``wait_gates``): what must finish before any tool of the run runs;
- the requests each advisor received, when an advisor asks for them (``records_hops``).

A run nested in another (an agent called as a tool) names it as ``parent``: its meter counts in
the parent's totals too. ``current_run()`` is the run whose tools are executing in this task, so
code a tool calls can find the run it belongs to.

``call_run`` and ``stream_run`` run a request's whole chain in a run: the request span, the turns
advisors hold for the run (``open_run``), the run's totals on every answer (``RUN_USAGE``) and the
ending of a run whose usage limit says ``on_exceeded="finish"``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Protocol, TypeVar

from .. import observability as obs
from .._run_meter import RunMeter, limit_ending
from .._streams import closing
from ..errors import UsageLimitExceeded
from ..model import ChatClientRequest, ChatClientResponse
from .events import RunEvent, RunListener
from .vocabulary import AdvisorParams

__all__ = ["Run", "RunScope", "call_run", "current_run", "stream_run"]

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[Run | None] = contextvars.ContextVar("advisorchain_run", default=None)
"""The run whose tools execute in this context (set by the tool loop around a round's tools)."""

_IDS = itertools.count(1)
_PREFIX = f"{os.getpid():x}"


def current_run() -> Run | None:
    """The run whose tools are executing in this task or worker thread, if any."""
    return _CURRENT.get()


class Run:
    """One client request's run (see the module docstring)."""

    __slots__ = (
        "_gates",
        "_hops",
        "_id",
        "_slots",
        "advisors",
        "listener",
        "meter",
        "outer",
        "parent",
        "records_hops",
        "span",
    )

    def __init__(
        self,
        meter: RunMeter | None = None,
        *,
        advisors: Sequence[object] = (),
        listener: RunListener | None = None,
        parent: Run | None = None,
        outer: Run | None = None,
    ) -> None:
        self.meter = RunMeter() if meter is None else meter
        self.advisors: tuple[object, ...] = tuple(advisors)
        """The advisors of the request's chain, in order."""
        self.parent = parent
        """The run this one is part of (an agent called as a tool counts in its caller's run)."""
        self.outer = outer if outer is not None else parent
        """The run whose tool started this run's request, if any (nested or not)."""
        self.listener: RunListener | None = (
            listener if listener is not None or parent is None else parent.listener
        )
        self.span: Any = None
        self.records_hops = _records_hops(tuple(map(type, self.advisors)))
        """True when an advisor of the chain reads ``hop_requests`` (the chain then records them)."""
        self._id: str | None = None
        self._slots: dict[object, Any] | None = None
        self._gates: list[asyncio.Future[Any]] | None = None
        self._hops: dict[int, ChatClientRequest] | None = None

    @property
    def id(self) -> str:
        """A unique id of this run (in this process)."""
        if self._id is None:
            self._id = f"run-{_PREFIX}-{next(_IDS)}"
        return self._id

    def __repr__(self) -> str:
        return f"Run({self.id!r}, {self.meter.run_usage().describe()})"

    def slot(self, key: object, factory: Callable[[], T]) -> T:
        """The run's value under ``key`` (an object its owner keeps, e.g. the advisor itself),
        made by ``factory`` on first use."""
        slots = self._slots
        if slots is None:
            slots = self._slots = {}
        try:
            return slots[key]  # type: ignore[no-any-return]
        except KeyError:
            value = slots[key] = factory()
            return value

    def get(self, key: object) -> Any:
        """The run's value under ``key``, or None."""
        return None if self._slots is None else self._slots.get(key)

    def put(self, key: object, value: T) -> T:
        """Set the run's value under ``key`` (replacing any); returns ``value``."""
        if self._slots is None:
            self._slots = {}
        self._slots[key] = value
        return value

    def enclosing(self) -> Iterator[Run]:
        """This run, then the run whose tool started it, and so on outwards."""
        run: Run | None = self
        while run is not None:
            yield run
            run = run.outer

    # -- events ------------------------------------------------------------------------------

    def emit(self, event: RunEvent) -> None:
        """Hand ``event`` to the run's listener (nothing without one)."""
        listener = self.listener
        if listener is not None:
            listener(event)

    # -- gates -------------------------------------------------------------------------------

    def add_gate(self, waiter: asyncio.Future[Any]) -> None:
        """Register ``waiter``: no tool of this run runs before it is done (a failed one raises
        its error where the tools would have run)."""
        if self._gates is None:
            self._gates = []
        self._gates.append(waiter)

    async def wait_gates(self) -> None:
        """Wait for every gate (instant without one); a cancelled wait leaves the gates alone."""
        gates = self._gates
        while gates:
            await asyncio.shield(gates[0])
            gates.pop(0)

    # -- hops --------------------------------------------------------------------------------

    def record_hop(self, advisor: object, request: ChatClientRequest) -> None:
        """Note the request ``advisor`` received (the chain calls this when ``records_hops``)."""
        if self._hops is None:
            self._hops = {}
        self._hops[id(advisor)] = request

    def hop_requests(self) -> tuple[tuple[object, ChatClientRequest], ...]:
        """For each advisor of the chain that received a request, outermost first, the latest
        request it received (recorded only when ``records_hops``)."""
        hops = self._hops or {}
        return tuple((a, hops[id(a)]) for a in self.advisors if id(a) in hops)

    # -- tools -------------------------------------------------------------------------------

    def active(self) -> _Active:
        """``with run.active():`` — this run is ``current_run()`` inside (the tool loop runs a
        round's tools in it)."""
        return _Active(self)

    @property
    def gated(self) -> bool:
        """True while a gate is registered that tools must wait for (``wait_gates``)."""
        return bool(self._gates)


@functools.lru_cache(maxsize=256)
def _records_hops(kinds: tuple[type, ...]) -> bool:
    return any(getattr(kind, "records_hops", False) for kind in kinds)


class _Active:
    """The context manager of ``Run.active`` (a class: it is entered once per tool round)."""

    __slots__ = ("_run", "_token")

    def __init__(self, run: Run) -> None:
        self._run = run

    def __enter__(self) -> Run:
        self._token = _CURRENT.set(self._run)
        return self._run

    def __exit__(self, *exc_info: object) -> None:
        _CURRENT.reset(self._token)


class RunScope(Protocol):
    """What an advisor class may provide to hold something for a whole run (memory holds the
    conversation's turn): ``open_run(advisors, request, run)``, a classmethod entered once per run
    for every advisor of the chain that is an instance of its class, around the whole chain."""

    def __call__(
        self, advisors: Sequence[object], request: ChatClientRequest, run: Run
    ) -> AbstractAsyncContextManager[ChatClientRequest]: ...


# -- running a request's chain in its run -------------------------------------------------------


def call_run(
    run: Run, request: ChatClientRequest, next_call: Callable[[ChatClientRequest], Any]
) -> Coroutine[Any, Any, ChatClientResponse]:
    """``next_call(request)`` (the chain's first hop) in ``run``: its span, the turns advisors
    hold, the run's totals on the answer, the ending of a finished run (a coroutine to await)."""
    if obs.tracing_enabled():
        return _traced_call(run, request, next_call)
    return _call(run, request, next_call)


async def _traced_call(
    run: Run, request: ChatClientRequest, next_call: Callable[[ChatClientRequest], Any]
) -> ChatClientResponse:
    with obs.span("advisorchain request", _request_attributes(run)) as span:
        run.span = span
        try:
            return await _call(run, request, next_call)
        finally:
            obs.record_run(span, run.meter.run_usage())


async def _call(
    run: Run, request: ChatClientRequest, next_call: Callable[[ChatClientRequest], Any]
) -> ChatClientResponse:
    try:
        scopes = _scopes(run)
        if scopes is None:
            response = await next_call(request)
        else:
            async with AsyncExitStack() as stack:
                for scope in scopes:
                    request = await stack.enter_async_context(scope(run.advisors, request, run))
                response = await next_call(request)
    except UsageLimitExceeded as exc:
        response = _ending(run, request, exc)  # on_exceeded="finish" (a limit met outside a tool loop)
    return _finished(response, run.meter, final=True)


def stream_run(
    run: Run,
    request: ChatClientRequest,
    next_stream: Callable[[ChatClientRequest], AsyncIterator[ChatClientResponse]],
) -> AsyncIterator[ChatClientResponse]:
    """``next_stream(request)`` in ``run`` (see ``call_run``); each end of an answer (and a
    context-only chunk) carries the run's totals, and when the last chunk could not, one
    context-only chunk follows with them."""
    source = _held_stream(run, request, next_stream)
    if obs.tracing_enabled():
        return obs.traced_stream("advisorchain request", _spanned(run, source), _request_attributes(run))
    return source


async def _spanned(run: Run, source: AsyncIterator[ChatClientResponse]) -> AsyncIterator[ChatClientResponse]:
    run.span = obs.current_span()
    async with closing(source):
        async for chunk in source:
            yield chunk


async def _held_stream(
    run: Run,
    request: ChatClientRequest,
    next_stream: Callable[[ChatClientRequest], AsyncIterator[ChatClientResponse]],
) -> AsyncIterator[ChatClientResponse]:
    meter = run.meter
    last: ChatClientResponse | None = None
    told, told_at = None, -1  # the last chunk that carried the totals, and the meter's changes then
    ended = False
    try:
        async with AsyncExitStack() as stack:
            for scope in _scopes(run) or ():
                request = await stack.enter_async_context(scope(run.advisors, request, run))
            source = await stack.enter_async_context(closing(next_stream(request)))
            async for chunk in source:
                chat = chunk.chat_response
                if chat is None or chat.metadata.finish_reason is not None:
                    chunk = told = _finished(chunk, meter, final=chat is not None)
                    told_at = meter.changes
                last = chunk
                yield chunk
        ended = True
    except UsageLimitExceeded as exc:
        ending = _finished(_ending(run, request, exc, after_text=last is not None), meter, final=True)
        _record(run)
        yield ending
        return
    finally:
        if not ended:  # failed, cancelled, or closed by its reader: the totals so far
            _record(run)
    _record(run)
    if last is None or last is not told or told_at != meter.changes:
        context = request.context if last is None else last.context
        yield _finished(ChatClientResponse(None, context), meter, final=False)


def _record(run: Run) -> None:
    if run.span is not None:
        obs.record_run(run.span, run.meter.run_usage())


def _request_attributes(run: Run) -> dict[str, object]:
    return {"advisorchain.advisors": [getattr(a, "name", type(a).__name__) for a in run.advisors]}


def _scopes(run: Run) -> list[RunScope] | None:
    """The ``open_run`` of each advisor class of the chain that has one (once per class)."""
    found: list[RunScope] | None = None
    seen: set[object] = set()
    for advisor in run.advisors:
        scope = getattr(type(advisor), "open_run", None)
        if scope is None:
            continue
        key = getattr(scope, "__func__", scope)
        if key in seen:
            continue
        seen.add(key)
        if found is None:
            found = []
        found.append(scope)
    return found


def _ending(
    run: Run, request: ChatClientRequest, error: UsageLimitExceeded, *, after_text: bool = False
) -> ChatClientResponse:
    ending = limit_ending(error, run.meter, after_text=after_text)
    if ending is None:
        raise error
    return ChatClientResponse(ending, request.context)


def _finished(response: ChatClientResponse, meter: RunMeter, *, final: bool) -> ChatClientResponse:
    """``response`` with the run's totals in its context (``RUN_USAGE``) and — for the run's
    answer, when a model reported usage — the run's usage as its usage: summed over everything the
    request made the model do, with its cost."""
    run = meter.run_usage()
    context = {**response.context, AdvisorParams.RUN_USAGE: run}
    chat = response.chat_response
    if final and chat is not None and meter.reported and chat.metadata.usage != run.usage:
        chat = chat.with_usage(run.usage)
    return ChatClientResponse(chat, context)
