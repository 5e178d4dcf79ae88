"""The one bridge from blocking code to the async core.

Every sync method of the library goes through ``run`` or ``iterate``. They run coroutines on one
long-lived event loop in a daemon thread, so async SDK clients (bound to the loop they first ran
on) keep working across many sync calls. Called from inside a running event loop they refuse with
a clear error naming the async form, instead of deadlocking.

Airtight against interrupts and exits:

- The caller's side of a step only schedules callbacks on the loop and waits on a lock the loop
  thread releases once the step has settled. An interrupt (Ctrl-C) landing anywhere on that side
  leaves nothing half-done: the step is cancelled (or never begins), the caller waits until it has
  unwound, and the ``KeyboardInterrupt`` goes on as it came.
- A ``SystemExit`` or ``KeyboardInterrupt`` raised by a step on the loop thread (a tool calling
  ``sys.exit()``, a print to a closed pipe) escapes asyncio's ``run_forever`` after asyncio stored it
  on the step's task; the loop thread runs the loop on, so the step's caller receives it as itself
  and later calls keep working.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

from ._streams import close_stream
from .errors import SyncInAsyncContextError

__all__ = ["iterate", "run"]

T = TypeVar("T")
_POLL = 0.2

_lock = threading.Lock()
_bridge: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    bridge = _bridge
    if bridge is not None and bridge[1].is_alive():
        return bridge[0]
    with _lock:
        return _start_bridge()


def _start_bridge() -> asyncio.AbstractEventLoop:
    global _bridge
    if _bridge is None or not _bridge[1].is_alive():
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=_serve, args=(loop,), name="advisorchain-sync", daemon=True)
        thread.start()
        _bridge = (loop, thread)  # only once it runs: a bridge is never handed out without its thread
    return _bridge[0]


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The bridge thread: run ``loop`` for good, whatever a step raises through it."""
    while not loop.is_closed():
        try:
            loop.run_forever()
        except BaseException:  # already stored on the task that raised it: its caller receives it
            continue
        return


def ensure_no_running_loop(sync_name: str, async_name: str) -> None:
    """Refuse a blocking call made from inside a running event loop."""
    # Asked without catching get_running_loop()'s RuntimeError, which an interrupt landing in the
    # handler would carry along as its context.
    if asyncio._get_running_loop() is None:
        return
    raise SyncInAsyncContextError(
        f"{sync_name} blocks, and was called inside a running event loop; use `{async_name}` there instead"
    )


def run(
    coro: Coroutine[Any, Any, T] | Callable[[], Coroutine[Any, Any, T]], sync_name: str, async_name: str
) -> T:
    """Run ``coro`` to completion from blocking code and return its result.

    Given a coroutine function rather than a coroutine, the coroutine is made on the loop thread:
    then no interrupt, not even one landing before this function's first line, can leave a
    coroutine unawaited.
    """
    try:
        ensure_no_running_loop(sync_name, async_name)
        step = _Step(coro, _bridge_loop(), contextvars.copy_context())
        outcome = step.run()
    except BaseException:
        try:
            made = step
        except UnboundLocalError:  # interrupted (or refused) before the step existed: nothing began
            if isinstance(coro, Coroutine):
                coro.close()
        else:
            made.abandon()
        raise
    result: T = _unwrap(outcome)
    return result


def iterate(source: AsyncIterator[T], sync_name: str, async_name: str) -> Iterator[T]:
    """Iterate an async iterator from blocking code; closing the iterator early (or an interrupt
    while waiting) cancels the pending step and closes ``source``."""
    ensure_no_running_loop(sync_name, async_name)
    loop = _bridge_loop()
    context = contextvars.copy_context()  # every step sees what earlier steps set
    last: list[_Step[T]] = []
    # Made before the first step, so that little stands between an interrupt and the close.
    closing = _Step(functools.partial(_close_when_idle, source, last), loop, context)
    finished = False
    try:
        while True:
            step = _Step(functools.partial(_next, source), loop, context)
            last[:] = (step,)
            ok, item = step.run()
            if ok:
                yield item
            elif isinstance(item, StopAsyncIteration):
                finished = True
                return
            else:
                raise item
    finally:
        if not finished:
            # Cleanup, so an interrupt while it runs leaves it to finish on the loop: the source
            # is closed either way, and steps of later calls queue behind it.
            _unwrap(closing.run(cancel_on_interrupt=False))


def _unwrap(outcome: tuple[bool, Any]) -> Any:
    ok, value = outcome
    if ok:
        return value
    raise value


class _Step(Generic[T]):
    """One coroutine run as a task on the bridge loop (in the caller's context variables: tracing
    spans, held conversation turns) for a blocking caller. Given a coroutine function, the
    coroutine is made on the loop thread, so an interrupt on the caller's side never leaves one
    unawaited.

    The loop thread sets the outcome, then releases ``_settled`` (held from the start): the caller
    waits by acquiring it, and an outcome, once set, is never lost to an interrupt.
    """

    __slots__ = ("_begun", "_context", "_coro", "_loop", "_outcome", "_settled", "_task")

    def __init__(
        self,
        coro: Coroutine[Any, Any, T] | Callable[[], Coroutine[Any, Any, T]],
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
    ) -> None:
        self._coro = coro
        self._loop = loop
        self._context = context
        self._task: asyncio.Task[T] | None = None
        self._begun = False  # read and written on the loop thread only
        self._outcome: tuple[bool, Any] | None = None
        self._settled = threading.Lock()
        self._settled.acquire()

    def run(self, *, cancel_on_interrupt: bool = True) -> tuple[bool, Any]:
        """Start the step and wait for its outcome: ``(True, result)`` or ``(False, exception)``.
        Interrupted while starting or waiting, it cancels the step and waits until it settled, or
        (``cancel_on_interrupt=False``, for cleanup) lets it finish on the loop unwaited for."""
        try:
            self._loop.call_soon_threadsafe(self._begin)
            return self._wait()
        except BaseException:
            if cancel_on_interrupt:
                self.abandon()
            raise

    def abandon(self) -> None:
        """Cancel the step unless it has settled, and wait until it has."""
        if self._outcome is None:
            self._loop.call_soon_threadsafe(self.stop)
            self._wait()

    def stop(self) -> None:
        """(On the loop thread.) Cancel the task, or make sure it never begins."""
        if not self._begun:
            self._begun = True
            if isinstance(self._coro, Coroutine):
                self._coro.close()
            self._settle_with((False, concurrent.futures.CancelledError()))
        elif self._task is not None:
            self._task.cancel()

    @property
    def task(self) -> asyncio.Task[T] | None:
        """(On the loop thread.) The running task, once the step began."""
        return self._task

    def _wait(self) -> tuple[bool, Any]:
        while (outcome := self._outcome) is None:
            # Released once, after the outcome was set. Timed: the kernel may hand a Ctrl-C to
            # another thread (the bridge's own), and Python runs its handler only on the main
            # thread, between bytecodes — an untimed wait would sleep on, never interrupted.
            # (Blocking signals in the bridge thread instead would pass the mask on to every
            # process a step starts.)
            self._settled.acquire(timeout=_POLL)
        return outcome

    def _begin(self) -> None:
        if self._begun:  # stopped before it began
            return
        self._begun = True
        coro = self._coro if isinstance(self._coro, Coroutine) else self._context.run(self._coro)
        self._task = self._loop.create_task(coro, context=self._context)
        self._task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            self._settle_with((False, concurrent.futures.CancelledError()))
        elif (exc := task.exception()) is not None:
            self._settle_with((False, exc))
        else:
            self._settle_with((True, task.result()))

    def _settle_with(self, outcome: tuple[bool, Any]) -> None:
        self._outcome = outcome
        self._settled.release()


async def _close_when_idle(source: AsyncIterator[T], last: list[_Step[T]]) -> None:
    # The last step may still be running (a second interrupt cut its caller's wait short): cancel
    # it and let it unwind, as aclose() on a running async generator is an error.
    for step in last:
        step.stop()
        if (task := step.task) is not None and not task.done():
            await asyncio.wait([task])
    await close_stream(source)


async def _next(source: AsyncIterator[T]) -> T:
    return await anext(source)
