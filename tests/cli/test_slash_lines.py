"""What a typed line asks for in ``advisorchain chat``: a question, a slash command, or nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from advisorchain.cli._repl import COMMANDS, Command, Send, parse_line


def test_a_plain_line_is_sent_as_typed() -> None:
    assert parse_line("  what is 2/3?  ") == Send("  what is 2/3?  ")


def test_a_slash_line_is_a_command_with_its_argument() -> None:
    assert parse_line("/switch  work ") == Command("switch", "work")
    assert parse_line("/system Be brief. Very.") == Command("system", "Be brief. Very.")
    assert parse_line("/help") == Command("help", "")


def test_a_double_slash_sends_the_line_with_one_slash() -> None:
    assert parse_line("//etc/hosts?") == Send("/etc/hosts?")


def test_a_blank_line_asks_for_nothing() -> None:
    assert parse_line("   ") is None


def test_every_command_of_the_issue_is_there() -> None:
    assert set(COMMANDS) == {"help", "new", "sessions", "switch", "trace", "model", "system", "exit"}


@given(st.text())
def test_no_line_starting_with_one_slash_is_ever_sent(line: str) -> None:
    parsed = parse_line(line)
    stripped = line.strip()
    if parsed is None:
        assert not stripped
    elif isinstance(parsed, Send):
        assert not stripped.startswith("/") or stripped.startswith("//")
        assert parsed.text.strip()
    else:
        assert stripped.startswith("/") and not stripped.startswith("//")
