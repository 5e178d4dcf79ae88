"""``advisorchain sessions`` and ``chat --session`` on damaged data: an unreadable stored message is
shown as such and never a reason to refuse the rest; ``sessions repair`` drops only the unreadable
messages, after asking; every error names the store. On SQLite (the default store) and, when their
servers are given, PostgreSQL and Redis."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app
from advisorchain.cli._sessions import Store, open_store, store_label
from advisorchain.memory import MessageWindowChatMemory, read_entries
from advisorchain.messages import AssistantMessage, UserMessage
from tests.support.panes import Pane, exited, prompts

BAD = "{not json"
LATER = '{"type":"user","text":"later","metadata":{}}'


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def _sqlite_inject(path: Path) -> Callable[[str, str], None]:
    def inject(conversation_id: str, raw: str) -> None:
        with sqlite3.connect(path) as conn:
            (seq,) = conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM chat_memory").fetchone()
            conn.execute("INSERT INTO chat_memory VALUES (?, ?, ?)", (conversation_id, seq, raw))
        conn.close()

    return inject


def _postgres_inject(dsn: str) -> Callable[[str, str], None]:
    import psycopg

    def inject(conversation_id: str, raw: str) -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute(
                "INSERT INTO advisorchain_chat_memory "
                "SELECT %s, COALESCE(MAX(seq), -1) + 1, %s FROM advisorchain_chat_memory",
                (conversation_id, raw),
            )

    return inject


def _redis_inject(url: str) -> Callable[[str, str], None]:
    import redis

    def inject(conversation_id: str, raw: str) -> None:
        with redis.Redis.from_url(url) as client:
            client.rpush("advisorchain:chat_memory:" + conversation_id, raw)

    return inject


class Damaged:
    """A session of four stored messages, the third unreadable, in one store (``args`` selects it)."""

    def __init__(self, args: list[str], inject: Callable[[str, str], None], name: str) -> None:
        self.args = args
        self.inject = inject
        self.name = name


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def damaged(request: pytest.FixtureRequest, _cli_env: Path) -> Iterator[Damaged]:
    name = f"trip-{uuid.uuid4().hex[:6]}"
    if request.param == "sqlite":
        args: list[str] = []
        inject = _sqlite_inject(_cli_env / "sessions.sqlite3")
    else:
        env = (
            "ADVISORCHAIN_TEST_POSTGRES_DSN" if request.param == "postgres" else "ADVISORCHAIN_TEST_REDIS_URL"
        )
        url = os.environ.get(env)
        if not url:
            pytest.skip(f'{env} is not set; start the servers with: eval "$(scripts/services.sh start)"')
        args = ["--memory", url]
        inject = _postgres_inject(url) if request.param == "postgres" else _redis_inject(url)
    store = _open(args)
    MessageWindowChatMemory(store.repository).add(name, [UserMessage("hello"), AssistantMessage("hi there")])
    store.close()
    inject(name, BAD)
    inject(name, LATER)
    yield Damaged(args, inject, name)
    run("sessions", "delete", name, *args)


def _open(args: list[str]) -> Store:
    return open_store(args[1] if args else None)


def test_list_shows_a_damaged_session_as_damaged_with_the_position(damaged: Damaged) -> None:
    result = run("sessions", "list", *damaged.args)
    assert result.exit_code == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if damaged.name in line)
    assert "4" in row and "damaged: message 2 unreadable" in row


def test_show_prints_what_it_can_and_names_the_bad_message(damaged: Damaged) -> None:
    result = run("sessions", "show", damaged.name, *damaged.args)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == ["user: hello", "assistant: hi there"]
    assert lines[2].startswith("unreadable: message 2: ") and BAD in lines[2]
    assert lines[3] == "user: later"
    assert f"'advisorchain sessions repair {damaged.name}'" in result.stderr


def test_delete_always_works(damaged: Damaged) -> None:
    result = run("sessions", "delete", damaged.name, *damaged.args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"Deleted session {damaged.name!r} (4 messages)."
    assert damaged.name not in run("sessions", "list", *damaged.args).stdout


def test_repair_asks_and_drops_only_the_unreadable_message(damaged: Damaged) -> None:
    result = run("sessions", "repair", damaged.name, *damaged.args, input="y\n")
    assert result.exit_code == 0, result.stderr
    assert "1 of 4 messages cannot be read" in result.stdout and "message 2: " in result.stdout
    assert f"Dropped 1 unreadable message(s) (2) from {damaged.name!r}; 3 kept." in result.stdout
    assert run("sessions", "show", damaged.name, *damaged.args).stdout.splitlines() == [
        "user: hello",
        "assistant: hi there",
        "user: later",
    ]


@pytest.mark.parametrize("answer", ["n\n", "\n", ""])
def test_repair_declined_changes_nothing(damaged: Damaged, answer: str) -> None:
    result = run("sessions", "repair", damaged.name, *damaged.args, input=answer)
    assert result.exit_code == 1
    assert "Nothing changed (pass --yes to repair without asking)." in result.stdout
    store = _open(damaged.args)
    try:
        assert [e.readable for e in read_entries(store.repository, damaged.name)] == [True, True, False, True]
    finally:
        store.close()


def test_repair_with_yes_does_not_ask(damaged: Damaged) -> None:
    result = run("sessions", "repair", damaged.name, "--yes", *damaged.args)
    assert result.exit_code == 0
    assert "[y/N]" not in result.stdout and "Dropped 1 unreadable message(s)" in result.stdout


def test_repair_of_a_sound_session_has_nothing_to_do(damaged: Damaged) -> None:
    run("sessions", "repair", damaged.name, "--yes", *damaged.args)
    result = run("sessions", "repair", damaged.name, *damaged.args)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"Session {damaged.name!r} has no unreadable messages: nothing to repair."


def test_repair_warns_when_a_tool_result_loses_its_call(_cli_env: Path) -> None:
    inject = _sqlite_inject(_cli_env / "sessions.sqlite3")
    run("sessions", "list")  # creates the store
    inject("t", '{"type":"user","text":"weather?","metadata":{}}')
    inject("t", '{"type":"assistant","text":null,"tool_calls":[{"id":"1","name":"w","arguments":"{}"},]}')
    inject("t", '{"type":"tool","responses":[{"id":"1","name":"w","response_data":"sunny"}],"metadata":{}}')
    result = run("sessions", "repair", "t", "--yes")
    assert result.exit_code == 0
    assert "note: after the repair, message 1 (a tool result) has no tool call before it" in result.stdout


def test_chat_on_a_damaged_session_says_how_to_repair_it(damaged: Damaged, server_url: str) -> None:
    result = run(
        *("chat", "--model", "openai:weather+k5", "--base-url", server_url, "-p", "q"),
        *("--session", damaged.name, *damaged.args),
    )
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: session {damaged.name!r} in ")
    assert "message 2 unreadable" in line and f"'advisorchain sessions repair {damaged.name}'" in line
    assert result.stdout == ""


def test_chat_on_a_terminal_offers_the_repair_and_goes_on(
    terminal: Callable[..., Pane], damaged: Damaged, _cli_env: Path
) -> None:
    memory = " ".join(damaged.args)
    pane = terminal(f"--model openai:weather+k5 --session {damaged.name} {memory}")
    pane.wait_for(lambda f: any("Drop the unreadable messages and go on? [y/N]" in line for line in f))
    pane.keys("y", "Enter")
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("weather?", "Enter")
    pane.wait_for(lambda f: "w0 w1 w2 w3 w4" in f)
    shown = run("sessions", "show", damaged.name, *damaged.args).stdout.splitlines()
    assert shown[:3] == ["user: hello", "assistant: hi there", "user: later"]
    assert shown[3] == "user: weather?"


def test_chat_on_a_terminal_leaves_a_damaged_session_alone_when_told_no(
    terminal: Callable[..., Pane], _cli_env: Path
) -> None:
    run("sessions", "list")
    _sqlite_inject(_cli_env / "sessions.sqlite3")("broken", BAD)
    pane = terminal("--model openai:weather+k5 --session broken")
    pane.wait_for(lambda f: any("[y/N]" in line for line in f))
    pane.keys("n", "Enter")
    final = pane.wait_for(exited)[-1]
    assert "EXIT=1" in final
    assert any(line.startswith("error: session 'broken' in ") for line in final)
    assert run("sessions", "show", "broken").stdout.splitlines() == [
        f"unreadable: message 0: Expecting property name enclosed in double quotes: line 1 column 2 (char 1) "
        f"(stored text: {BAD!r})"
    ]


# -- the store named in every error ------------------------------------------------------------


def test_a_file_that_is_not_sqlite_is_named_in_the_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database " * 100)
    for args in (["sessions", "list"], ["sessions", "show", "x"], ["sessions", "delete", "x"]):
        result = run(*args, "--memory", f"sqlite:///{bad}")
        assert result.exit_code == 1
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"error: cannot open the memory store {bad}: ") and "None" not in line


def test_a_damaged_default_store_is_named_by_its_path(_cli_env: Path) -> None:
    _cli_env.mkdir(parents=True, exist_ok=True)
    (_cli_env / "sessions.sqlite3").write_bytes(b"\x00garbage" * 1000)
    result = run("sessions", "list")
    assert result.exit_code == 1
    assert f"cannot open the memory store {_cli_env / 'sessions.sqlite3'}: " in result.stderr


def test_a_password_in_a_store_url_is_never_shown() -> None:
    assert store_label("postgresql://app:s3cret@db.example/app") == "postgresql://***@db.example/app"
    assert store_label("redis://localhost:6379/0") == "redis://localhost:6379/0"
    assert store_label("sqlite:///chat.db") == "chat.db"


def test_a_store_failure_during_a_turn_names_the_store_and_the_way_out() -> None:
    from advisorchain.cli._agent import describe_failure
    from advisorchain.memory import ChatMemoryDecodeError

    locked = sqlite3.OperationalError("database is locked")
    assert describe_failure(locked, session="s", store_label="/d/sessions.sqlite3") == (
        "memory store /d/sessions.sqlite3: OperationalError: database is locked"
    )
    damaged = ChatMemoryDecodeError("s", 3, "unknown message type 'function'")
    assert describe_failure(damaged, session="s", store_label="/d/sessions.sqlite3") == (
        "session 's' in /d/sessions.sqlite3: unknown message type 'function' (stored message 3); "
        "'advisorchain sessions repair s' drops the unreadable messages"
    )
    assert describe_failure(ValueError("other"), session="s", store_label="/d/sessions.sqlite3") is None
