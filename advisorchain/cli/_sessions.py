"""The sessions store of the command line: opening it (``--memory``), naming it in every error, and
``advisorchain sessions list|show|delete|repair``, which work on damaged conversations too: an
unreadable stored message is shown as such, never a reason to refuse the rest."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from .._urls import redact_url
from ..errors import AdvisorChainError
from ..memory import ChatMemoryRepository, StoredEntry, drop_unreadable, read_entries
from ..messages import AssistantMessage, Message, ToolResponseMessage
from ._options import debug_option, memory_option
from ._setup import DATA_DIR_ENV, CliError

__all__ = [
    "SessionState",
    "Store",
    "default_sessions_path",
    "open_store",
    "render_message",
    "sessions",
    "sessions_table",
]

_R = TypeVar("_R")


@dataclass
class Store:
    """An open sessions store and the name it goes by in messages (its file, or its URL without
    the password)."""

    repository: ChatMemoryRepository
    label: str
    url: str | None = None

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Failures of the store as one CliError naming it."""
        try:
            yield
        except (click.ClickException, CliError):
            raise
        except AdvisorChainError as exc:
            raise CliError(f"{exc} (memory store {self.label})") from exc
        except Exception as exc:
            raise CliError(f"memory store {self.label}: {type(exc).__name__}: {exc}") from exc

    def list_hint(self) -> str:
        """The command that lists this store's sessions."""
        return "'advisorchain sessions list" + (" --memory URL'" if self.url else "'")

    def close(self) -> None:
        """Release the store's connections."""
        close = getattr(self.repository, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class SessionState:
    """A session as stored: every entry, readable or not."""

    name: str
    entries: list[StoredEntry]

    @property
    def unreadable(self) -> list[StoredEntry]:
        """The entries that cannot be read back."""
        return [e for e in self.entries if not e.readable]

    @property
    def messages(self) -> list[Message]:
        """The messages that read back, oldest first."""
        return [e.message for e in self.entries if e.message is not None]

    def damage(self) -> str:
        """``message 3 unreadable`` / ``messages 1, 3 unreadable`` (positions from 0, oldest first)."""
        positions = [str(e.position) for e in self.unreadable]
        return f"message{'s' if len(positions) > 1 else ''} {', '.join(positions)} unreadable"


def default_sessions_path() -> Path:
    """The SQLite file of sessions: under ``$ADVISORCHAIN_DATA_DIR`` when set, else the user's data
    directory."""
    base = os.environ.get(DATA_DIR_ENV)
    if base:
        directory = Path(base)
    else:
        import platformdirs

        directory = Path(platformdirs.user_data_dir("advisorchain", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "sessions.sqlite3"


def store_label(url: str | None) -> str:
    """How the store named by ``--memory`` is named in messages: the SQLite file's path, or the
    URL with its password hidden."""
    if url is None:
        return str(default_sessions_path())
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    return redact_url(url)


def open_store(url: str | None) -> Store:
    """The store named by ``--memory`` (``sqlite:///file``, ``postgresql://…``, ``redis://…``), the
    default SQLite file when ``url`` is None."""
    from ..memory import PostgresChatMemoryRepository, RedisChatMemoryRepository, SQLiteChatMemoryRepository

    if url is not None and url.startswith("sqlite:///") and not url[len("sqlite:///") :]:
        raise click.BadParameter(
            f"{redact_url(url)!r} names no file; use sqlite:///chat.db", param_hint="'--memory'"
        )
    if url is not None and not url.startswith(
        ("sqlite:///", "postgresql://", "postgres://", "redis://", "rediss://")
    ):
        raise click.BadParameter(
            f"{redact_url(url)!r} is not a store URL; use sqlite:///file.db, postgresql://… or redis://…",
            param_hint="'--memory'",
        )
    label = store_label(url)
    try:
        if url is None or _is_sqlite(url):
            repository: ChatMemoryRepository = SQLiteChatMemoryRepository(Path(label))
        elif url.startswith("postgres"):
            repository = PostgresChatMemoryRepository(url, timeout=5.0)
        else:
            repository = RedisChatMemoryRepository(url)
    except ImportError as exc:
        extra = "postgres" if url and url.startswith("postgres") else "redis"
        raise CliError(f"--memory {label!r} needs pip install 'advisorchain[{extra}]'") from exc
    except Exception as exc:
        hint = " (move that file aside, or pick another store with --memory URL)" if _is_sqlite(url) else ""
        raise CliError(f"cannot open the memory store {label}: {type(exc).__name__}: {exc}{hint}") from exc
    return Store(repository, label, url)


def _is_sqlite(url: str | None) -> bool:
    return url is None or url.startswith("sqlite:///")


def read_session(store: Store, name: str, *, must_exist: bool = True) -> SessionState:
    """Session ``name`` as stored; a CliError naming the store when there is none (``must_exist``)."""
    with store.errors():
        entries = read_entries(store.repository, name)
        if must_exist and not entries and name not in store.repository.find_conversation_ids():
            raise CliError(f"no session {name!r} in {store.label}; {store.list_hint()} shows the saved ones")
    return SessionState(name, entries)


def damaged_error(store: Store, state: SessionState) -> CliError:
    """The one-line error for a session that cannot be continued as it is."""
    first = state.unreadable[0]
    return CliError(
        f"session {state.name!r} in {store.label}: {state.damage()} ({first.error}); "
        f"'advisorchain sessions repair {state.name}' drops {'them' if len(state.unreadable) > 1 else 'it'}, "
        f"'advisorchain sessions show {state.name}' prints the rest"
    )


def repair_session(store: Store, name: str) -> list[StoredEntry]:
    """Drop the session's unreadable messages; the entries dropped."""
    with store.errors():
        return drop_unreadable(store.repository, name)


def orphaned_tool_results(messages: list[Message]) -> list[int]:
    """Indexes of tool results whose tool call is not in the message right before them."""
    orphans: list[int] = []
    for i, message in enumerate(messages):
        if not isinstance(message, ToolResponseMessage):
            continue
        before = messages[i - 1] if i else None
        asked = {c.id for c in before.tool_calls} if isinstance(before, AssistantMessage) else set()
        if any(r.id not in asked for r in message.responses):
            orphans.append(i)
    return orphans


def render_message(message: Message) -> str:
    """One stored message as ``role: text`` (tool calls and results spelled out)."""
    role = message.type.value
    if isinstance(message, ToolResponseMessage):
        return "\n".join(f"tool {r.name} [{r.id}]: {r.response_data}" for r in message.responses)
    text = message.text or ""
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments}) [{c.id}]" for c in message.tool_calls)
        return f"{role}: {text}{' ' if text else ''}asks for {calls}"
    return f"{role}: {text}"


def render_entry(entry: StoredEntry) -> str:
    """A stored entry: its message, or what makes it unreadable."""
    if entry.message is not None:
        return render_message(entry.message)
    return f"unreadable: message {entry.position}: {entry.error}"


def sessions_table(store: Store, current: str | None = None) -> Table | None:
    """The store's sessions (``current`` marked), with their message counts and any damage; None
    when there are none."""
    with store.errors():
        names = sorted(store.repository.find_conversation_ids())
    if not names:
        return None
    table = Table("session", "messages", "state")
    for name in names:
        state = read_session(store, name, must_exist=False)
        shown = f"{name} *" if name == current else name
        table.add_row(
            shown, str(len(state.entries)), f"damaged: {state.damage()}" if state.unreadable else "ok"
        )
    return table


def _console() -> Console:
    """stdout; in a file or pipe not cropped at 80 columns."""
    return Console(highlight=False, soft_wrap=True, width=None if os.isatty(1) else 200)


# -- the commands ----------------------------------------------------------------------------------


def _on_the_store(command: Callable[..., _R]) -> Callable[..., _R]:
    """A sessions command on the ``--memory URL`` store (``--debug`` too): it receives the open
    store, closed when the command returns."""

    @functools.wraps(command)
    def run(memory: str | None, debug: bool, **kwargs: Any) -> _R:
        with open_store(memory) as store:
            return command(store, **kwargs)

    return memory_option(debug_option(run))


def _on_a_session(command: Callable[..., _R]) -> Callable[..., _R]:
    """A sessions command on session ``NAME`` of the store: it receives the open store and the
    session as stored (a CliError naming the store when there is none)."""

    @functools.wraps(command)
    def run(store: Store, name: str, **kwargs: Any) -> _R:
        return command(store, read_session(store, name), **kwargs)

    return click.argument("name")(_on_the_store(run))


@click.group()
def sessions() -> None:
    """List, show, delete and repair saved chat sessions."""


@sessions.command("list")
@_on_the_store
def sessions_list(store: Store) -> None:
    """The saved sessions, with their message counts; a damaged one says which messages are unreadable."""
    table = sessions_table(store)
    if table is None:
        click.echo("No sessions yet: start one with advisorchain chat --session NAME.")
        return
    _console().print(table)


@sessions.command("show")
@_on_a_session
def sessions_show(store: Store, state: SessionState) -> None:
    """Every message of session NAME (an unreadable one is named, with why)."""
    for entry in state.entries:
        click.echo(render_entry(entry))
    if state.unreadable:
        click.echo(
            f"warning: session {state.name!r} in {store.label} has {state.damage()}; "
            f"'advisorchain sessions repair {state.name}' drops the unreadable ones",
            err=True,
        )


@sessions.command("delete")
@_on_a_session
def sessions_delete(store: Store, state: SessionState) -> None:
    """Delete session NAME (damaged or not)."""
    with store.errors():
        store.repository.delete_by_conversation_id(state.name)
    click.echo(f"Deleted session {state.name!r} ({len(state.entries)} messages).")


@sessions.command("repair")
@click.option("-y", "--yes", "yes", is_flag=True, help="Drop the unreadable messages without asking.")
@_on_a_session
def sessions_repair(store: Store, state: SessionState, yes: bool) -> int:
    """Drop the messages of session NAME that cannot be read back (after asking); the others stay
    as they are."""
    name = state.name
    if not state.unreadable:
        click.echo(f"Session {name!r} has no unreadable messages: nothing to repair.")
        return 0
    _describe_repair(store, state)
    if not yes and not _confirm(f"Drop {'them' if len(state.unreadable) > 1 else 'it'}?"):
        click.echo("Nothing changed (pass --yes to repair without asking).")
        return 1
    dropped = repair_session(store, name)
    kept = len(read_session(store, name, must_exist=False).entries)
    positions = ", ".join(str(e.position) for e in dropped) or "none"
    click.echo(f"Dropped {len(dropped)} unreadable message(s) ({positions}) from {name!r}; {kept} kept.")
    return 0


def _describe_repair(store: Store, state: SessionState) -> None:
    readable = len(state.entries) - len(state.unreadable)
    click.echo(
        f"Session {state.name!r} in {store.label}: {len(state.unreadable)} of {len(state.entries)} "
        f"messages cannot be read; the {readable} readable ones stay as they are."
    )
    for entry in state.unreadable:
        click.echo(f"  message {entry.position}: {entry.error}")
    for index in orphaned_tool_results(state.messages):
        click.echo(
            f"  note: after the repair, message {index} (a tool result) has no tool call before it; "
            "a provider may refuse that history"
        )


def _confirm(question: str) -> bool:
    try:
        return click.confirm(question, default=False)
    except click.Abort:  # end of input: nobody to say yes
        click.echo()
        return False
