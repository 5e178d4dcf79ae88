"""InputGuardrailAdvisor: the turn's user text checked before anything of the turn reaches the
caller, a tool or a store — with the model call started beside the guards, or after them.

With ``parallel=True`` the rest of the chain runs at once in a task of its own, over the advisors
after this one plus a *hold* at the innermost place: the model's answer (its first chunk, on a
stream) waits there until every guard passed. So no advisor inside — memory, the tool loop, a
validator — sees an answer before the guards passed: nothing is stored and no tool runs, and a trip
cancels the task (the model call in flight with it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from .._streams import closing
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import Ordered, check_order
from ..guards import Guard, GuardContext, Verdict, check_guards, run_guards, tripped_error
from ..messages import AssistantMessage, Message, UserMessage
from ..model import ChatClientRequest, ChatClientResponse
from ._common import OnTrip, check_choice, finish_ending, guard_context_values, meter_usage, rebased

__all__ = ["InputGuardrailAdvisor", "turn_user_text"]

_END: Final = object()


def _turn_start(instructions: Sequence[Message]) -> int:
    for i in range(len(instructions) - 1, -1, -1):
        if isinstance(instructions[i], AssistantMessage):
            return i + 1
    return 0


def turn_user_text(instructions: Sequence[Message]) -> str | None:
    """The turn's user text: every UserMessage after the last assistant message, joined by
    newlines; None when the turn has none (a resume)."""
    users = [m.text for m in instructions[_turn_start(instructions) :] if isinstance(m, UserMessage)]
    return "\n".join(users) if users else None


def _with_user_text(request: ChatClientRequest, text: str) -> ChatClientRequest:
    """``request`` whose turn has one UserMessage with ``text`` in place of the last (its metadata
    and media kept); the turn's other user messages are dropped."""
    instructions = list(request.prompt.instructions)
    start = _turn_start(instructions)
    last = max(i for i in range(start, len(instructions)) if isinstance(instructions[i], UserMessage))
    old = instructions[last]
    assert isinstance(old, UserMessage)
    kept = [
        UserMessage(text, old.metadata, old.media) if i == last else m
        for i, m in enumerate(instructions)
        if i < start or i == last or not isinstance(m, UserMessage)
    ]
    return request.copy(prompt=request.prompt.copy(instructions=kept))


class _Gate:
    """What waits for the guards of a parallel run: the hold's event (the model's answer), and a
    gate of the run (``run.add_gate``), so that no tool runs before the guards passed — also a tool
    round that runs before any model call (a resumed approval)."""

    def __init__(self, chain: CallAdvisorChain | StreamAdvisorChain) -> None:
        self.event = asyncio.Event()
        self.tools: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        chain.run.add_gate(self.tools)

    def open(self) -> None:
        self.event.set()
        if not self.tools.done():
            self.tools.set_result(None)

    def close(self) -> None:
        """After a trip (or the caller gave up): the run's tools never run."""
        if not self.tools.done():
            self.tools.cancel()


class _Hold:
    """The innermost advisor of a parallel run: the model's answer waits here until the guards
    passed (``gate``). Once open, it costs one check per answer."""

    order = Ordered.LOWEST_PRECEDENCE

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate

    @property
    def name(self) -> str:
        return "InputGuardrailAdvisor hold"

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        response = await chain.next_call(request)
        if not self.gate.is_set():
            await self.gate.wait()
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async with closing(chain.next_stream(request)) as stream:
            async for chunk in stream:
                if not self.gate.is_set():
                    await self.gate.wait()
                yield chunk


class InputGuardrailAdvisor:
    """Checks the turn's user text with every guard, concurrently, before anything of the turn
    reaches the caller, a tool or a store.

    ``parallel=True`` (default) starts the rest of the chain beside the guards: no chunk reaches the
    caller and no tool runs until every guard passed; a trip cancels the model call in flight (it
    still counts in ``RunUsage.requests``). ``parallel=False`` runs the rest of the chain only after
    every guard passed. A trip raises ``GuardrailTripped`` — or, with ``on_trip="finish"``, ends the
    run with one answer whose text is the guard's message (finish reason ``guardrailTripped``).
    Either way nothing of the turn is stored. A replacement rewrites the user text the model and
    memory get (with ``parallel=True`` the chain starts again with the new text).

    >>> ChatClient(model, default_advisors=[InputGuardrailAdvisor(pii_guard(), keyword_guard(["hack"]))])
    """

    DEFAULT_ORDER: Final[int] = Ordered.HIGHEST_PRECEDENCE + 100

    def __init__(
        self,
        *guards: Guard,
        parallel: bool = True,
        on_trip: OnTrip = "raise",
        order: int = DEFAULT_ORDER,
    ) -> None:
        self.guards = check_guards(guards, "InputGuardrailAdvisor")
        if not isinstance(parallel, bool):
            raise TypeError(f"parallel must be a bool, got {parallel!r}")
        self.parallel = parallel
        self.on_trip: OnTrip = check_choice(on_trip, "on_trip", ("raise", "finish"))
        self.order = check_order(order, inside=True)

    @property
    def name(self) -> str:
        return "InputGuardrailAdvisor"

    def _context(self, request: ChatClientRequest) -> GuardContext:
        return GuardContext("input", **guard_context_values(request.context))

    def _tripped(self, verdict: Verdict, request: ChatClientRequest, chain: object) -> ChatClientResponse:
        """The finish ending of a trip, or the trip raised."""
        error = tripped_error(verdict, "input")
        if self.on_trip == "raise":
            raise error
        return finish_ending(error.message, request.context, meter_usage(chain))

    # -- call -------------------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        text = turn_user_text(request.prompt.instructions)
        if text is None:  # a resume: no user text to check
            return await chain.next_call(request)
        if not self.parallel:
            verdict = await run_guards(self.guards, text, self._context(request))
            if not verdict.passed:
                return self._tripped(verdict, request, chain)
            return await chain.next_call(self._rewritten(request, text, verdict))
        gate = _Gate(chain)
        held = rebased(chain, (*chain.copy(self).call_advisors, _Hold(gate.event)))
        task = asyncio.ensure_future(held.next_call(request))
        try:
            verdict = await run_guards(self.guards, text, self._context(request))
            if not verdict.passed:
                await _cancel(task)
                return self._tripped(verdict, request, chain)
            if verdict.text != text:  # a replacement: start again with the new text
                await _cancel(task)
                gate.open()
                return await chain.next_call(_with_user_text(request, verdict.text))
            gate.open()
            return await task
        finally:
            gate.close()
            await _cancel(task)

    def _rewritten(self, request: ChatClientRequest, text: str, verdict: Verdict) -> ChatClientRequest:
        return request if verdict.text == text else _with_user_text(request, verdict.text)

    # -- stream -----------------------------------------------------------------------------------

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        text = turn_user_text(request.prompt.instructions)
        if text is None or not self.parallel:
            if text is not None:
                verdict = await run_guards(self.guards, text, self._context(request))
                if not verdict.passed:
                    yield self._tripped(verdict, request, chain)
                    return
                request = self._rewritten(request, text, verdict)
            async with closing(chain.next_stream(request)) as stream:
                async for chunk in stream:
                    yield chunk
            return
        gate = _Gate(chain)
        held = rebased(chain, (*chain.copy(self).stream_advisors, _Hold(gate.event)))
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)
        producer = asyncio.ensure_future(_produce(held.next_stream(request), queue))
        try:
            verdict = await run_guards(self.guards, text, self._context(request))
            if not verdict.passed:
                await _cancel(producer)
                yield self._tripped(verdict, request, chain)
                return
            if verdict.text != text:  # a replacement: start again with the new text
                await _cancel(producer)
                gate.open()
                async with closing(chain.next_stream(_with_user_text(request, verdict.text))) as stream:
                    async for chunk in stream:
                        yield chunk
                return
            gate.open()
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            gate.close()
            await _cancel(producer)


async def _produce(stream: AsyncIterator[ChatClientResponse], queue: asyncio.Queue[Any]) -> None:
    """Run the held stream in a task of its own (so a trip can cancel it wherever it is), handing
    its chunks, then its end or its error, to the advisor's stream."""
    try:
        async with closing(stream):
            async for chunk in stream:
                await queue.put(chunk)
    except Exception as exc:
        await queue.put(exc)
        return
    await queue.put(_END)


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` (when still running) and wait until it has unwound."""
    if not task.done():
        task.cancel()
        await asyncio.wait({task})  # our own cancellation still propagates
    if not task.cancelled():
        task.exception()  # retrieved: an error the caller never needed is not logged as lost
