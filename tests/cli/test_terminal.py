"""``advisorchain chat`` in a real terminal (tmux, the screen captured): the spinner until the first
token, never on the answer's lines nor on the user's; the approval question; the interactive loop.

Where a test needs the screen in a given state (the spinner turning, half an answer shown), the
``held`` server keeps its answer until the test lets it go, so no outcome depends on the machine's
speed."""

from __future__ import annotations

import threading
from collections.abc import Callable

from click.testing import CliRunner

from advisorchain.cli import app
from tests.support.openai_server import ScriptedServer
from tests.support.panes import SPINNER, Pane, exited, prompts
from tests.support.scripts import chat_answer


def test_the_spinner_turns_until_the_first_token_and_never_touches_the_answer(
    terminal: Callable[..., Pane],
) -> None:
    pane = terminal("--model openai:weather+k5+lat1500 -p weather?")
    frames = pane.wait_for(exited)
    final = frames[-1]
    assert "EXIT=0" in final
    answer = [line for line in final if line.startswith("w0")]
    assert answer == ["w0 w1 w2 w3 w4"]  # the streamed answer alone on its line
    assert not any("thinking" in line or any(c in line for c in SPINNER) for line in final)
    assert '→ get_weather {"city": "Paris"}' in final and '→ get_weather {"city": "London"}' in final
    assert final.index(answer[0]) > final.index('→ get_weather {"city": "London"}')


def test_the_typed_question_stays_on_screen_while_waiting_and_after_the_answer(
    terminal: Callable[..., Pane], held: ScriptedServer
) -> None:
    go = threading.Event()
    held.queue(chat_answer("fast ", "answer", hold=go))
    pane = terminal("--model openai:m", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("what is up?", "Enter")
    waiting = pane.wait_for(lambda f: any("thinking…" in line for line in f))[-1]
    assert "you> what is up?" in waiting
    go.set()
    final = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert final[final.index("you> what is up?") + 1] == "fast answer"
    assert not any(c in line for line in final for c in SPINNER)


def test_a_tool_that_needs_approval_is_asked_inline(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5 -p weather?", tools="cli_tools:guarded_weather")
    for asked in (1, 2):
        pane.wait_for(lambda f, n=asked: sum("[y/N/reason]" in line for line in f) == n)
        pane.keys("y", "Enter")
    final = pane.wait_for(exited)[-1]
    assert "EXIT=0" in final
    assert [line for line in final if "[y/N/reason]" in line] == [
        'Run get_weather {"city": "Paris"}? [y/N/reason] y',
        'Run get_weather {"city": "London"}? [y/N/reason] y',
    ]
    assert [line for line in final if line.startswith("w0")] == ["w0 w1 w2 w3 w4"]


def test_interactive_chat_answers_each_line_until_end_of_input(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5 --session live")
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("weather?", "Enter")
    pane.wait_for(lambda f: "w0 w1 w2 w3 w4" in f)
    pane.wait_for(lambda f: prompts(f) == 2)
    pane.keys("C-d")
    final = pane.wait_for(exited)[-1]
    assert "EXIT=0" in final


# -- Ctrl-C --------------------------------------------------------------------------------------


def test_ctrl_c_cancels_the_answer_in_flight_keeps_nothing_of_it_and_returns_to_the_prompt(
    terminal: Callable[..., Pane], held: ScriptedServer
) -> None:
    held.queue(chat_answer("half ", "an ", stall=True))  # two pieces, then silence: the answer is in flight
    held.queue(chat_answer("second answer"))
    pane = terminal("--model openai:m --session trip", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("first question", "Enter")
    pane.wait_for(lambda f: "half an" in f)
    pane.keys("C-c")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert any(line.startswith("half an") for line in screen)  # what was shown stays (the tty echoes ^C)
    assert any(line.startswith("✗ cancelled") for line in screen)
    pane.keys("second question", "Enter")
    screen = pane.wait_for(lambda f: "second answer" in f)[-1]
    assert not exited(screen)
    shown = CliRunner().invoke(app, ["sessions", "show", "trip"])
    assert shown.stdout.splitlines() == ["user: second question", "assistant: second answer"]
    # the second request carried no trace of the cancelled turn
    assert [m["content"] for m in held.wait_for_requests(2)[1].body["messages"]] == ["second question"]


def test_ctrl_c_while_waiting_for_the_first_byte_cancels_too(
    terminal: Callable[..., Pane], held: ScriptedServer
) -> None:
    held.queue(chat_answer(hold=threading.Event()))  # never answers
    pane = terminal("--model openai:m", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("anyone there?", "Enter")
    pane.wait_for(lambda f: any("thinking…" in line for line in f))
    pane.keys("C-c")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert any(line.startswith("✗ cancelled") for line in screen)
    assert not any(c in line for line in screen for c in SPINNER)


def test_one_ctrl_c_at_an_empty_prompt_stays_and_a_second_leaves(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5")
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("C-c")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert "(Ctrl-C again or Ctrl-D to leave)" in screen and not exited(screen)
    pane.keys("C-c")
    assert "EXIT=0" in pane.wait_for(exited)[-1]


def test_ctrl_c_clears_the_line_being_typed(terminal: Callable[..., Pane], held: ScriptedServer) -> None:
    pane = terminal("--model openai:m", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.type("never sent")
    pane.wait_for(lambda f: "you> never sent" in f)
    pane.keys("C-c")
    pane.wait_for(lambda f: prompts(f) == 2)
    pane.keys("sent", "Enter")
    pane.wait_for(lambda f: "ok" in f)
    assert held.user_texts() == ["sent"]


def test_ctrl_c_at_an_approval_question_cancels_that_turn_only(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5 --session asked", tools="cli_tools:guarded_weather")
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("weather?", "Enter")
    pane.wait_for(lambda f: any("[y/N/reason]" in line for line in f))
    pane.keys("C-c")
    pane.wait_for(lambda f: any(line.startswith("✗ cancelled") for line in f) and prompts(f) == 2)
    pane.keys("weather?", "Enter")
    for asked in (2, 3):
        pane.wait_for(lambda f, n=asked: sum("[y/N/reason]" in line for line in f) == n)
        pane.keys("y", "Enter")
    screen = pane.wait_for(lambda f: "w0 w1 w2 w3 w4" in f)[-1]
    assert not exited(screen)
    shown = CliRunner().invoke(app, ["sessions", "show", "asked"]).stdout.splitlines()
    assert shown[0] == "user: weather?" and shown.count("user: weather?") == 1


# -- line editing and history --------------------------------------------------------------------


def test_line_editing_and_history_work_at_the_prompt(terminal: Callable[..., Pane], held: ScriptedServer) -> None:
    pane = terminal("--model openai:m", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.type("helo")
    pane.keys("Left")
    pane.type("l")
    pane.keys("Enter")
    pane.wait_for(lambda f: prompts(f) == 2)
    pane.keys("Up")
    pane.wait_for(lambda f: f.count("you> hello") == 2)
    pane.keys("Enter")
    pane.wait_for(lambda f: prompts(f) == 3)
    assert held.user_texts() == ["hello", "hello"]


# -- slash commands ------------------------------------------------------------------------------


def test_help_and_an_unknown_command_never_reach_the_model(
    terminal: Callable[..., Pane], held: ScriptedServer
) -> None:
    pane = terminal("--model openai:m", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("/help", "Enter")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    for command in ("/new", "/sessions", "/switch NAME", "/trace on|off", "/model provider:name", "/exit"):
        assert any(line.strip().startswith(command) for line in screen), command
    pane.keys("/frobnicate now", "Enter")
    screen = pane.wait_for(lambda f: prompts(f) == 3)[-1]
    assert any(line.startswith("error: unknown command /frobnicate") for line in screen)
    pane.keys("//etc/hosts is what?", "Enter")
    pane.wait_for(lambda f: prompts(f) == 4)
    assert held.user_texts() == ["/etc/hosts is what?"]  # only the // line was sent, with one slash
    pane.keys("/exit", "Enter")
    assert "EXIT=0" in pane.wait_for(exited)[-1]


def test_switch_new_sessions_system_model_and_trace(terminal: Callable[..., Pane], held: ScriptedServer) -> None:
    pane = terminal("--model openai:first", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    steps = [
        "/switch work",
        "one",
        "/system Be brief.",
        "/model openai:second",
        "/trace on",
        "two",
        "/sessions",
        "/new",
        "three",
    ]
    for n, step in enumerate(steps, start=2):
        pane.keys(step, "Enter")
        pane.wait_for(lambda f, n=n: prompts(f) == n)
    screen = pane.capture()
    requests = [r.body for r in held.wait_for_requests(3)]
    assert [r["model"] for r in requests] == ["first", "second", "second"]
    assert [m["content"] for m in requests[1]["messages"]] == ["Be brief.", "one", "ok", "two"]
    assert [m["content"] for m in requests[2]["messages"]] == ["Be brief.", "three"]  # /new: a fresh one
    assert "trace" in screen and any("chat second" in line for line in screen)
    assert any(line.startswith("│ work *") for line in screen)
    listed = CliRunner().invoke(app, ["sessions", "show", "work"]).stdout.splitlines()
    assert listed == ["user: one", "assistant: ok", "user: two", "assistant: ok"]


def test_a_bad_model_keeps_the_current_one(terminal: Callable[..., Pane], held: ScriptedServer) -> None:
    pane = terminal("--model openai:first", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("/model gpt-4o", "Enter")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert any(line.startswith("error: 'gpt-4o' is not provider:name; use one of openai:") for line in screen)
    pane.keys("hi", "Enter")
    pane.wait_for(lambda f: prompts(f) == 3)
    assert held.wait_for_requests(1)[0].body["model"] == "first"


# -- a silent server -------------------------------------------------------------------------------


def test_a_silent_server_is_named_and_the_chat_goes_on(
    terminal: Callable[..., Pane], held: ScriptedServer
) -> None:
    for _ in range(3):  # the request and the SDK's two retries: all unanswered
        held.queue(chat_answer(hold=threading.Event()))
    held.queue(chat_answer("back"))
    pane = terminal("--model openai:m --timeout 1", tools=None, base_url=held.base_url)
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("hello?", "Enter")
    screen = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert any(line.startswith(f"… no reply from {held.base_url} for ") for line in screen)
    errors = [line for line in screen if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: openai request timed out")
    assert "--timeout SECONDS waits longer" in "".join(screen)  # the line wraps at the pane's width
    pane.keys("again", "Enter")
    assert "back" in pane.wait_for(lambda f: prompts(f) == 3)[-1]
