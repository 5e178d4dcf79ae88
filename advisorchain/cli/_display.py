"""What the chat shows while a model works: a spinner until the first token, a line per tool call,
per provider retry and per silent stretch of the server (on stderr), the answer (on stdout), never
on the same line."""

from __future__ import annotations

import itertools
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from ..messages import ToolCall
from ..observability import TOOL_CALL_ARGUMENTS as ARGUMENTS
from ..observability import TOOL_CALL_RESULT as RESULT
from ..tools import Approved, Denied, ToolCallback, ToolContext
from ..tools.callbacks import WrappedTool
from ..usage import RunUsage, Usage

__all__ = [
    "Display",
    "LineReader",
    "ShownTool",
    "approver",
    "read_line",
    "usage_line",
    "watch_provider_retries",
]

_WIDTH = 80


def shorten(text: str, width: int = _WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class Display:
    """The screen of one command: ``out`` for answers, ``err`` for progress lines, trees and errors.

    One lock orders every write, and the spinner only ever redraws (and at the end erases) its own
    line, so a spinner frame, a progress line, a piece of the answer and the user's typed line never
    land on one another."""

    def __init__(self, out: TextIO, err: Console) -> None:
        self.out = out
        self.err = err
        self.lock = threading.RLock()
        self._mid_line = False
        self._in_answer = False
        self._ticker: _Ticker | None = None
        self._drawn = False
        self._silence: tuple[str, float, float] | None = None
        self._quiet_since = time.monotonic()
        self._noticed = False

    def watch_silence(self, server: str, timeout: float) -> None:
        """While waiting, say once per silent stretch that ``server`` has not answered yet (after a
        quarter of ``timeout``, at most 15 s)."""
        self._silence = (server, min(15.0, timeout / 4), timeout)

    def waiting(self, message: str = "thinking…") -> None:
        """Until the next token or event line: a spinner (on a terminal) and the silence watch."""
        with self.lock:
            if self._ticker is not None:
                return
            self._quiet_since = time.monotonic()
            self._noticed = False
            if self.err.is_terminal or self._silence is not None:
                self._ticker = _Ticker(self, message)
                self._ticker.start()

    def stop_spinner(self) -> None:
        """Take the spinner off the screen (its own line only) and stop watching for silence."""
        with self.lock:
            if self._ticker is not None:
                self._ticker.stopped = True
                self._ticker = None
            self._erase()

    def text(self, delta: str, opening: str = "") -> None:
        """Write a piece of the answer (after ``opening`` when it is the answer's first piece)."""
        if not delta:
            return
        with self.lock:
            self.stop_spinner()
            if not self._in_answer:
                self.out.write(opening)
                self._in_answer = True
            self.out.write(delta)
            self.out.flush()
            self._mid_line = not delta.endswith("\n")

    def end_answer(self) -> None:
        """End the answer's line: whatever comes next starts on a line of its own."""
        with self.lock:
            self.stop_spinner()
            if self._mid_line:
                self.out.write("\n")
                self.out.flush()
            self._mid_line = False
            self._in_answer = False

    def footer(self, lines: list[str]) -> None:
        """Lines on ``out`` under the answer, after a blank line (the sources an answer cites)."""
        with self.lock:
            self.end_answer()
            self.out.write("\n" + "".join(f"{line}\n" for line in lines))
            self.out.flush()

    def line(self, text: str) -> None:
        """A whole line on ``err``, plain, below any answer in progress."""
        with self.lock:
            self.end_answer()
            self.err.print(text, markup=False, highlight=False, emoji=False)

    def event(self, line: str, style: str = "dim") -> None:
        """A progress line (tool call, retry) on its own line; the spinner keeps turning below it."""
        with self.lock:
            self.end_answer()
            self.err.print(line, style=style, markup=False, highlight=False)
            self._quiet_since = time.monotonic()
            self._noticed = False
        self.waiting()

    def show(self, renderable: Any) -> None:
        """A block (a trace tree, a table) on stderr, below the answer."""
        with self.lock:
            self.end_answer()
            self.err.print(renderable)

    def error(self, message: str) -> None:
        """One ``error:`` line on stderr."""
        with self.lock:
            self.end_answer()
            self.err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", highlight=False)

    def note(self, message: str) -> None:
        """One dim line on stderr (what a command did)."""
        with self.lock:
            self.end_answer()
            self.err.print(message, style="dim", markup=False, highlight=False)

    def _tick(self, ticker: _Ticker, frame: str) -> None:
        with self.lock:
            if ticker.stopped:
                return
            self._notice_silence()
            if self.err.is_terminal:
                self.err.file.write(f"{_HIDE_CURSOR}\r{frame} {ticker.message}{_CLEAR_LINE}")
                self.err.file.flush()
                self._drawn = True

    def _notice_silence(self) -> None:
        if self._silence is None or self._noticed:
            return
        server, after, timeout = self._silence
        quiet = time.monotonic() - self._quiet_since
        if quiet >= after:
            self._noticed = True
            self._erase()
            self.err.print(
                f"… no reply from {server} for {_seconds(quiet)} s "
                f"(waiting up to {timeout:g} s; --timeout SECONDS)",
                style="yellow",
                markup=False,
                highlight=False,
            )

    def _erase(self) -> None:
        if self._drawn:
            self.err.file.write(f"\r{_CLEAR_LINE}{_SHOW_CURSOR}")
            self.err.file.flush()
            self._drawn = False


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


_CLEAR_LINE = "\x1b[K"
_HIDE_CURSOR = "\x1b[?25l"
_SHOW_CURSOR = "\x1b[?25h"
_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class AgentMarks:
    """``--agents``: each handoff of a turn as one line, and ``[<agent>]`` before each answer."""

    def __init__(self, display: Display) -> None:
        self.display = display
        self.shown = 0

    def opening(self, context: Mapping[str, Any]) -> str:
        """Show the handoffs ``context`` names that were not shown yet; the answer's opening."""
        handoffs = context.get("advisorchain.handoffs") or ()
        for source, target in handoffs[self.shown :]:
            self.display.event(f"↪ handoff {source} -> {target}")
        self.shown = max(self.shown, len(handoffs))
        agent = context.get("advisorchain.active_agent")
        return f"[{agent}] " if isinstance(agent, str) else ""


class _Ticker(threading.Thread):
    """Redraws the spinner every 80 ms and watches for silence, until ``stopped``."""

    def __init__(self, display: Display, message: str) -> None:
        super().__init__(daemon=True, name="advisorchain-spinner")
        self.display = display
        self.message = message
        self.stopped = False

    def run(self) -> None:
        """Tick until stopped."""
        for i in itertools.count():
            if self.stopped:
                return
            self.display._tick(self, _FRAMES[i % len(_FRAMES)])
            time.sleep(0.08)


class ShownTool(WrappedTool):
    """A ToolCallback that shows a line when it runs (and, with ``capture``, puts its arguments and
    result on the current ``execute_tool`` span for the ``--trace`` tree)."""

    def __init__(self, inner: ToolCallback, display: Display, capture: bool) -> None:
        super().__init__(inner)
        self._display = display
        self._capture = capture

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


def read_line(prompt: str, display: Display) -> str | None:
    """One line typed by the user (line editing through readline), ``None`` at end of input. It
    blocks the caller: nothing else of the command runs while the user types."""
    display.stop_spinner()
    try:
        return input(prompt)
    except EOFError:
        return None


LineReader = Callable[[str, Display], "str | None"]
"""How a question to the user is read: ``read_line``, or the REPL's own (Ctrl-C aware) reader."""


def approver(display: Display, approve_all: bool, interactive: bool, read: LineReader = read_line) -> Any:
    """The inline approver: ``--yes`` approves all; on a terminal it asks ``[y/N/reason]``;
    with no terminal to ask it denies, saying how to approve."""

    async def decide(call: ToolCall, context: ToolContext) -> Approved | Denied:
        if approve_all:
            display.event(f"✓ {call.name} approved (--yes)")
            return Approved()
        if not interactive:
            display.event(f"✗ {call.name} denied: no terminal to ask (pass --yes to approve tools)")
            return Denied("no terminal to ask for approval; run again with --yes")
        answer = read(f"Run {call.name} {shorten(call.arguments, 70)}? [y/N/reason] ", display)
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


def usage_line(run: RunUsage | Usage) -> str:
    """What an answer used, for the line under it: ``tokens 350 in / 40 out · cost $0.00043``
    (``cost n/a`` when a model could not be priced); ``· 91% cached`` after the tokens when the run
    read or wrote cache tokens (its cache-read tokens over its prompt tokens, a whole percent rounded
    down); a run's model calls when there were several."""
    usage = run.usage if isinstance(run, RunUsage) else run
    cost = "n/a" if usage.cost is None else f"${usage.cost:f}"
    if usage.total_tokens == 0 and usage.cost is None:  # the model reported no usage
        tokens = "tokens n/a"
    else:
        tokens = f"tokens {usage.prompt_tokens:,} in / {usage.completion_tokens:,} out"
        if usage.cache_read_tokens or usage.cache_write_tokens:  # the run used a prompt cache (§21)
            share = usage.cache_read_tokens * 100 // usage.prompt_tokens if usage.prompt_tokens else 0
            tokens += f" · {share}% cached"
    line = f"{tokens} · cost {cost}"
    if isinstance(run, RunUsage) and run.requests > 1:
        line += f" · {run.requests} model calls"
    return line
