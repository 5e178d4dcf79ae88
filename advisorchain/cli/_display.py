"""What the chat shows while a model works: a spinner until the first token, a line per tool call
and per provider retry (on stderr), the answer (on stdout), never on the same line."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time
from typing import Any, TextIO

from rich.console import Console
from rich.status import Status

from ..messages import ToolCall
from ..observability import TOOL_CALL_ARGUMENTS as ARGUMENTS
from ..observability import TOOL_CALL_RESULT as RESULT
from ..tools import Approved, Denied, ToolCallback, ToolContext, ToolDefinition, ToolMetadata

__all__ = ["Display", "ShownTool", "ask_line", "watch_provider_retries"]

_WIDTH = 80


def shorten(text: str, width: int = _WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class Display:
    """The screen of one chat: ``err`` for progress and trees, ``out`` for answers."""

    def __init__(self, out: TextIO, err: Console) -> None:
        self.out = out
        self.err = err
        self._status: Status | None = None
        self._mid_line = False

    def waiting(self, message: str = "thinking…") -> None:
        """Show a spinner (on a terminal only) until the next token or event line."""
        if self._status is None and self.err.is_terminal:
            self._status = self.err.status(message, spinner="dots")
            self._status.start()

    def stop_spinner(self) -> None:
        """Take the spinner off the screen."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def text(self, delta: str) -> None:
        """Write a piece of the answer."""
        if not delta:
            return
        self.stop_spinner()
        self.out.write(delta)
        self.out.flush()
        self._mid_line = not delta.endswith("\n")

    def end_answer(self) -> None:
        """End the answer's line."""
        self.stop_spinner()
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
        self._mid_line = False

    def event(self, line: str, style: str = "dim") -> None:
        """A progress line (tool call, retry) on its own line; the spinner keeps turning below it."""
        if self._mid_line:
            self.end_answer()
        self.err.print(line, style=style, markup=False, highlight=False)
        self.waiting()


class ShownTool:
    """A ToolCallback that shows a line when it runs (and, with ``capture``, puts its arguments and
    result on the current ``execute_tool`` span for the ``--trace`` tree)."""

    def __init__(self, inner: ToolCallback, display: Display, capture: bool) -> None:
        self._inner = inner
        self._display = display
        self._capture = capture

    @property
    def definition(self) -> ToolDefinition:
        """The wrapped tool's definition."""
        return self._inner.definition

    @property
    def metadata(self) -> ToolMetadata:
        """The wrapped tool's metadata (approval included)."""
        return self._inner.metadata

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Show the call, run the wrapped tool."""
        from opentelemetry import trace

        name = self._inner.definition.name
        self._display.event(f"→ {name} {shorten(arguments, 70)}")
        span = trace.get_current_span()
        if self._capture and span.is_recording():
            span.set_attribute(ARGUMENTS, shorten(arguments, 500))
        result = await self._inner.call(arguments, context)
        if self._capture and span.is_recording():
            span.set_attribute(RESULT, shorten(result, 500))
        return result


_read_lock = threading.Lock()


async def ask_line(prompt: str, display: Display) -> str | None:
    """One line typed by the user (line editing through readline), ``None`` at end of input.

    The read runs in a daemon thread, so Ctrl-C still reaches the event loop and a pending read never
    keeps the process alive."""
    display.stop_spinner()
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()

    def read() -> None:
        try:
            with _read_lock:
                line: str | None = input(prompt)
        except EOFError:
            line = None
        except BaseException as exc:  # surfaced in the loop
            loop.call_soon_threadsafe(_fail, done, exc)
            return
        loop.call_soon_threadsafe(_resolve, done, line)

    threading.Thread(target=read, daemon=True, name="advisorchain-input").start()
    return await done


def _resolve(future: asyncio.Future[str | None], value: str | None) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[str | None], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def approver(display: Display, approve_all: bool, interactive: bool) -> Any:
    """The inline approver: ``--yes`` approves all; on a terminal it asks ``[y/N/reason]``;
    with no terminal to ask it denies, saying how to approve."""

    async def decide(call: ToolCall, context: ToolContext) -> Approved | Denied:
        if approve_all:
            display.event(f"✓ {call.name} approved (--yes)")
            return Approved()
        if not interactive:
            display.event(f"✗ {call.name} denied: no terminal to ask (pass --yes to approve tools)")
            return Denied("no terminal to ask for approval; run again with --yes")
        answer = await ask_line(f"Run {call.name} {shorten(call.arguments, 70)}? [y/N/reason] ", display)
        display.waiting()
        text = (answer or "").strip()
        if text.lower() in {"y", "yes"}:
            return Approved()
        if text.lower() in {"", "n", "no"}:
            return Denied()
        return Denied(text)

    return decide


_RETRY = re.compile(r"Retrying request(?: to \S+)? in (?P<secs>[0-9.]+) seconds")
_REASONS = (
    (re.compile(r"HTTP status error: (?P<why>\d{3})"), "{why}"),
    (re.compile(r"Encountered a timeout exception"), "timeout"),
    (re.compile(r"Encountered exception: (?P<why>\w+)"), "{why}"),
)


class _RetryHandler(logging.Handler):
    """Turns the official SDKs' retry log records into one progress line each:
    ``retrying in 2.0 s, 429``."""

    def __init__(self, display: Display) -> None:
        super().__init__(logging.DEBUG)
        self.display = display
        self.reason: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Remember why the last request failed; show a line when the SDK retries it."""
        message = record.getMessage()
        retry = _RETRY.search(message)
        if retry is not None:
            why = f", {self.reason}" if self.reason else ""
            self.display.event(f"↻ retrying in {float(retry.group('secs')):.1f} s{why}", style="yellow")
            self.reason = None
            return
        for pattern, shown in _REASONS:
            found = pattern.search(message)
            if found is not None:
                self.reason = shown.format(**found.groupdict())
                return


class watch_provider_retries:
    """While entered, provider retries (from the openai/anthropic SDK loggers) show on ``display``."""

    _LOGGERS = ("openai._base_client", "anthropic._base_client")

    def __init__(self, display: Display) -> None:
        self.handler = _RetryHandler(display)
        self._levels: list[tuple[logging.Logger, int, bool]] = []

    def __enter__(self) -> watch_provider_retries:
        for name in self._LOGGERS:
            logger = logging.getLogger(name)
            self._levels.append((logger, logger.level, logger.propagate))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for logger, level, propagate in self._levels:
            logger.removeHandler(self.handler)
            logger.setLevel(level)
            logger.propagate = propagate
        self._levels.clear()


def stdin_is_terminal() -> bool:
    """True when the user can be asked questions on stdin."""
    return sys.stdin is not None and sys.stdin.isatty()


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` value)."""
    return (time.perf_counter() - start) * 1000.0
