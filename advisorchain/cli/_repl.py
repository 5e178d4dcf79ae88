"""``advisorchain chat`` on a terminal: a prompt to keep open all day.

Lines are questions; a line starting with ``/`` is a command (``/help`` lists them, ``//`` sends a
line that starts with a slash). Ctrl-C cancels the answer in flight (nothing of that turn is kept)
or clears the line being typed; a second Ctrl-C at an empty prompt, ``/exit`` or Ctrl-D leaves.

The prompt is read with ``input()`` (readline: line editing and history) on the thread that runs the
event loop, so Ctrl-C reaches it as a KeyboardInterrupt, which readline answers by clearing the line;
while a turn runs, the same Ctrl-C cancels the turn's task instead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.text import Text

from ..errors import AdvisorChainError
from ._agent import Agent, ask, describe_failure
from ._display import Display
from ._sessions import (
    SessionState,
    Store,
    damaged_error,
    open_store,
    read_session,
    repair_session,
    sessions_table,
)
from ._setup import DATA_DIR_ENV, CliError

__all__ = ["COMMANDS", "Command", "Interrupts", "Repl", "Send", "parse_line"]


@dataclass(frozen=True)
class Send:
    """A line to send to the model."""

    text: str


@dataclass(frozen=True)
class Command:
    """A slash command: ``/name argument``."""

    name: str
    argument: str


def parse_line(line: str) -> Send | Command | None:
    """What a typed line asks for: a question, a command, or nothing (a blank line). ``//`` at the
    start sends the rest with one slash."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("//"):
        return Send(text[1:])
    if text.startswith("/"):
        name, _, argument = text[1:].partition(" ")
        return Command(name, argument.strip())
    return Send(line)


COMMANDS: dict[str, tuple[str, str]] = {
    "help": ("", "these commands"),
    "new": ("", "start a fresh conversation (not saved; /switch NAME starts a saved one)"),
    "sessions": ("", "the saved sessions (* marks this one)"),
    "switch": ("NAME", "continue session NAME, or start it when there is none by that name"),
    "trace": ("on|off", "show the tree of spans after each answer"),
    "model": ("provider:name", "use another model (--base-url kept for the same provider)"),
    "system": ("TEXT", "the system message from now on (/system alone shows it)"),
    "exit": ("", "leave (so do Ctrl-D and Ctrl-C twice at an empty prompt)"),
}
"""The slash commands: name -> (argument, what it does)."""

_ALIASES = {"quit": "exit", "q": "exit", "?": "help"}


class Interrupts:
    """Where Ctrl-C goes: at a prompt, a KeyboardInterrupt inside ``input()`` (readline clears the
    line); during a turn, the turn's cancellation; during a turn already cancelling, out (exit)."""

    def __init__(self) -> None:
        self.turn: asyncio.Task[Any] | None = None
        self.reading = False
        self.typed = ""

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Route Ctrl-C here while entered."""
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.reading:
            self.typed = _typed_so_far()
            raise KeyboardInterrupt
        turn = self.turn
        if turn is not None and not turn.done() and not turn.cancelling():
            turn.cancel()
            turn.get_loop().call_soon_threadsafe(lambda: None)  # wake the loop if it sleeps in select()
            return
        raise KeyboardInterrupt

    def read(self, prompt: str, display: Display) -> str | None:
        """A line typed at ``prompt`` (None at end of input); Ctrl-C raises KeyboardInterrupt, with
        what was typed in ``typed``."""
        display.stop_spinner()
        self.typed = ""
        self.reading = True
        try:
            return input(prompt)
        except EOFError:
            return None
        finally:
            self.reading = False

    def read_in_turn(self, prompt: str, display: Display) -> str | None:
        """A question asked during a turn (a tool approval): Ctrl-C there cancels the turn. The
        answer stays out of the prompt's history."""
        try:
            answer = self.read(prompt, display)
        except KeyboardInterrupt:
            display.out.write("\n")
            if self.turn is not None and self.turn is not asyncio.current_task():
                self.turn.cancel()  # asked from a task of the turn's own: cancel the whole turn
            # one cancellation only: a second one would cut short the turn's own clean-up
            raise asyncio.CancelledError from None
        if answer:
            _forget_last_history_line()
        return answer

    async def run(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run ``work`` as the cancellable turn; True when it finished, False when Ctrl-C cancelled it."""
        task = asyncio.create_task(work)
        self.turn = task
        try:
            await asyncio.wait([task])
        finally:
            self.turn = None
        if task.cancelled():
            return False
        task.result()
        return True


def _typed_so_far() -> str:
    try:
        import readline
    except ImportError:
        return ""
    return readline.get_line_buffer()


@dataclass
class Conversation:
    """Where the turns go: a conversation id, saved as a session or kept only while chat runs."""

    id: str
    session: str | None


@dataclass(eq=False)
class Repl:
    """The interactive chat: a prompt, slash commands, turns that Ctrl-C cancels."""

    agent: Agent
    display: Display
    interrupts: Interrupts
    conversation: Conversation
    _: KW_ONLY
    store: Store | None
    memory_url: str | None
    stream: bool
    collector: Any
    debug: bool = False
    armed: bool = field(default=False, init=False)
    """The last thing that happened was a Ctrl-C: one more at an empty prompt leaves."""

    def __post_init__(self) -> None:
        self._handlers: dict[str, Callable[[str], Coroutine[Any, Any, bool]]] = {
            "help": self._help,
            "new": self._new,
            "sessions": self._sessions,
            "switch": self._switch,
            "trace": self._trace,
            "model": self._model,
            "system": self._system,
            "exit": self._exit,
        }

    async def run(self) -> int:
        """Prompt until the user leaves; the exit code (0)."""
        self._greet()
        _load_history()
        try:
            while True:
                try:
                    line = self.interrupts.read("you> ", self.display)
                except KeyboardInterrupt:
                    if self._ctrl_c_at_prompt():
                        return 0
                    continue
                if line is None:  # Ctrl-D
                    self.display.out.write("\n")
                    return 0
                parsed = parse_line(line)
                if parsed is None:
                    continue
                self.armed = False
                if not await self._dispatch(parsed):
                    return 0
        finally:
            _save_history()

    def _greet(self) -> None:
        where = f", session {self.conversation.session!r}" if self.conversation.session else ""
        self.display.note(
            f"advisorchain chat with {self.agent.model.label}{where}; {len(self.agent.tools)} tool(s). "
            "/help for commands, Ctrl-D to quit."
        )

    def _ctrl_c_at_prompt(self) -> bool:
        """True when this Ctrl-C leaves (a second one in a row at an empty prompt)."""
        self.display.out.write("\n")
        self.display.out.flush()
        if self.armed and not self.interrupts.typed.strip():
            return True
        self.armed = True
        if not self.interrupts.typed.strip():
            self.display.note("(Ctrl-C again or Ctrl-D to leave)")
        return False

    async def _dispatch(self, parsed: Send | Command) -> bool:
        """Handle one line; False when it asks to leave."""
        if isinstance(parsed, Command):
            name = _ALIASES.get(parsed.name, parsed.name)
            handler = self._handlers.get(name)
            if handler is None:
                self.display.error(
                    f"unknown command /{parsed.name}; /help lists the commands "
                    "(start a line with // to send it with a leading /)"
                )
                return True
            return await handler(parsed.argument)
        finished = await self.interrupts.run(self._turn(parsed.text))
        if not finished:
            self.display.end_answer()
            self.display.note(
                "✗ cancelled: this question and its answer are not kept (Ctrl-C again to leave)"
            )
            self.armed = True
        return True

    async def _turn(self, question: str) -> None:
        try:
            await ask(
                self.agent,
                self.conversation.id,
                question,
                self.display,
                stream=self.stream,
                collector=self.collector,
            )
        except Exception as exc:  # one failed turn never ends the chat
            self.display.error(self._explain(exc))
            if self.debug:
                self.display.show(Text(traceback.format_exc().rstrip()))

    def _explain(self, exc: Exception) -> str:
        explained = describe_failure(exc, session=self.conversation.session, store_label=self._store_label())
        if explained is not None:
            return explained
        if isinstance(exc, AdvisorChainError):
            return str(exc)
        return f"{type(exc).__name__}: {exc}" + (
            "" if self.debug else " (run again with --debug for the traceback)"
        )

    def _store_label(self) -> str | None:
        return self.store.label if self.store is not None and self.conversation.session else None

    # -- the commands: each returns False to leave ----------------------------------------------

    async def _help(self, argument: str) -> bool:
        width = max(len(f"/{n} {a}".strip()) for n, (a, _) in COMMANDS.items())
        for name, (arg, what) in COMMANDS.items():
            self.display.note(f"  {f'/{name} {arg}'.strip():<{width}}  {what}")
        self.display.note(f"  {'//text':<{width}}  send a line that starts with /")
        return True

    async def _new(self, argument: str) -> bool:
        if argument:
            self.display.error("/new takes no name; /switch NAME starts a saved session")
            return True
        from ..memory import InMemoryChatMemoryRepository

        self.agent.use_repository(InMemoryChatMemoryRepository())
        self.conversation = Conversation("chat", None)
        self.display.note("a fresh conversation (not saved; /switch NAME saves one)")
        return True

    async def _sessions(self, argument: str) -> bool:
        store = self._open_store()
        if store is None:
            return True
        table = sessions_table(store, current=self.conversation.session)
        if table is None:
            self.display.note("no saved sessions yet: /switch NAME starts one")
        else:
            self.display.show(table)
        return True

    async def _switch(self, argument: str) -> bool:
        if not argument or " " in argument:
            self.display.error("usage: /switch NAME (one word)")
            return True
        store = self._open_store()
        if store is None:
            return True
        try:
            state = read_session(store, argument, must_exist=False)
            if state.unreadable and not offer_repair(store, state, self.interrupts, self.display):
                self.display.error(str(damaged_error(store, state)))
                return True
        except CliError as exc:
            self.display.error(str(exc))
            return True
        self.agent.use_repository(store.repository)
        self.conversation = Conversation(argument, argument)
        count = len(state.entries) - len(state.unreadable)
        self.display.note(f"session {argument!r}: " + (f"{count} message(s) so far" if count else "new"))
        return True

    async def _trace(self, argument: str) -> bool:
        if argument not in {"on", "off", ""}:
            self.display.error("usage: /trace on|off")
            return True
        if argument == "on" and self.collector is None:
            try:
                self.collector = install_collector()
            except CliError as exc:
                self.display.error(str(exc))
                return True
        if argument == "off":
            self.collector = None
        self.display.note(f"trace {'on' if self.collector is not None else 'off'}")
        return True

    async def _model(self, argument: str) -> bool:
        if not argument:
            self.display.note(f"model {self.agent.model.label}")
            return True
        try:
            await self.agent.switch_model(argument)
        except (click.BadParameter, CliError) as exc:
            self.display.error(str(exc))
            return True
        self.display.note(f"model {self.agent.model.label}")
        return True

    async def _system(self, argument: str) -> bool:
        if argument:
            self.agent.system = argument
        shown = self.agent.system if self.agent.system is not None else "(none)"
        self.display.note(f"system message: {shown}")
        return True

    async def _exit(self, argument: str) -> bool:
        return False

    def _open_store(self) -> Store | None:
        if self.store is None:
            try:
                self.store = open_store(self.memory_url)
            except (CliError, click.BadParameter) as exc:
                self.display.error(str(exc))
                return None
        return self.store


def offer_repair(store: Store, state: SessionState, interrupts: Interrupts | None, display: Display) -> bool:
    """On a terminal, ask whether to drop a damaged session's unreadable messages (and do it); True
    when the session is readable now."""
    display.note(f"session {state.name!r} in {store.label} has {state.damage()}:")
    for entry in state.unreadable:
        display.note(f"  message {entry.position}: {entry.error}")
    question = "Drop the unreadable messages and go on? [y/N] "
    try:
        answer = interrupts.read(question, display) if interrupts is not None else input(question)
    except (KeyboardInterrupt, EOFError):
        display.out.write("\n")
        return False
    if answer:
        _forget_last_history_line()
    if (answer or "").strip().lower() not in {"y", "yes"}:
        return False
    dropped = repair_session(store, state.name)
    display.note(f"dropped {len(dropped)} unreadable message(s) from session {state.name!r}")
    return True


def install_collector() -> Any:
    """The span collector of ``--trace`` (a CliError naming the extra when the SDK is missing)."""
    try:
        from ._trace import SpanCollector
    except ImportError as exc:
        raise CliError(
            f"--trace needs the OpenTelemetry SDK ({exc}): pip install 'advisorchain[cli]'"
        ) from exc
    return SpanCollector.install()


def _forget_last_history_line() -> None:
    try:
        import readline
    except ImportError:
        return
    length = readline.get_current_history_length()
    if length:
        readline.remove_history_item(length - 1)


def _history_file() -> Path | None:
    base = os.environ.get(DATA_DIR_ENV)
    if base:
        return Path(base) / "chat_history"
    try:
        import platformdirs

        return Path(platformdirs.user_data_dir("advisorchain", appauthor=False)) / "chat_history"
    except OSError:
        return None


def _load_history() -> None:
    try:
        import readline
    except ImportError:  # no line editing on this platform
        return
    path = _history_file()
    if path is not None and path.exists():
        readline.read_history_file(path)


def _save_history() -> None:
    try:
        import readline
    except ImportError:
        return
    path = _history_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(path)
