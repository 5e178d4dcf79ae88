"""What the page shows of a stored conversation, and the JSON it is sent: turns and their steps, the
calls a conversation waits on, values of any shape made JSON, request bodies of any shape."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool_callbacks,
)
from advisorchain.errors import ModelError
from advisorchain.web._service import Refused, TurnRequest, parse_turn
from advisorchain.web._views import arranged, error_line, jsonable, pending_calls, title_of, turns_of
from tests.web.web_helpers import TOOLS

TOOLS_BY_NAME = {t.definition.name: t for t in tool_callbacks(*TOOLS)}


def _conversation() -> list[Any]:
    return [
        SystemMessage("Be brief."),
        UserMessage("Weather and a table?", {"advisorchain.web.turn": "t1"}),
        AssistantMessage("Checking.", [ToolCall("w", "get_weather", '{"city": "Oslo"}')]),
        ToolResponseMessage([ToolResponse("w", "get_weather", "Oslo: sunny")]),
        AssistantMessage(None, [ToolCall("b", "book", '{"place": "X"}')]),
    ]


def test_a_stored_conversation_becomes_turns_of_text_and_tool_calls() -> None:
    (turn,) = turns_of(_conversation())
    assert turn["id"] == "t1" and turn["question"] == "Weather and a table?"
    assert [(s["type"], s.get("state"), s["part"]) for s in turn["steps"]] == [
        ("text", None, 1),
        ("tool", "done", 1),
        ("tool", "waiting", 2),
    ]
    assert turn["steps"][1]["result"] == "Oslo: sunny"


def test_the_calls_a_conversation_waits_on_are_those_that_need_approval() -> None:
    assert [c.id for c in pending_calls(_conversation(), TOOLS_BY_NAME)] == ["b"]
    assert pending_calls(_conversation()[:-1], TOOLS_BY_NAME) == []
    assert pending_calls([], TOOLS_BY_NAME) == []
    weather_only = [UserMessage("q"), AssistantMessage(None, [ToolCall("w", "get_weather", "{}")])]
    assert pending_calls(weather_only, TOOLS_BY_NAME) == []  # an abandoned round, not a wait


def test_a_denied_call_and_a_failed_call_are_errors() -> None:
    messages = [
        UserMessage("q"),
        AssistantMessage(None, [ToolCall("a", "book", "{}"), ToolCall("b", "broken", "{}")]),
        ToolResponseMessage(
            [
                ToolResponse("a", "book", "Error: the user denied this tool call: no"),
                ToolResponse("b", "broken", "Error: tool 'broken' failed with ValueError: x"),
            ]
        ),
    ]
    steps = turns_of(messages)[0]["steps"]
    assert [(s["state"], s["error"]) for s in steps] == [
        ("error", "the user denied this tool call: no"),
        ("error", "tool 'broken' failed with ValueError: x"),
    ]


def test_messages_before_the_first_question_form_a_turn_without_one() -> None:
    (turn,) = turns_of([AssistantMessage("Welcome!")])
    assert turn["question"] is None and turn["steps"][0]["text"] == "Welcome!"


def test_recorded_tool_calls_go_before_the_answer_of_their_run() -> None:
    steps = [{"type": "text", "text": "Answer.", "part": 1}]
    runs = [{"tools": [{"id": "w", "name": "get_weather", "state": "done", "ms": 1.0}]}]
    assert [(s["type"], s.get("id")) for s in arranged(steps, runs)] == [
        ("tool", "w"),
        ("text", None),
        ("run", None),
    ]


def test_each_run_is_shown_after_the_answer_it_ended_with() -> None:
    (turn,) = turns_of(
        [
            UserMessage("Book it"),
            AssistantMessage("Asking.", [ToolCall("b", "book", "{}")]),
            ToolResponseMessage([ToolResponse("b", "book", "booked")]),
            AssistantMessage("Booked."),
        ]
    )
    runs = [
        {"tools": [{"id": "w", "name": "get_weather", "state": "done"}]},
        {"tools": [{"id": "b", "name": "book", "state": "done", "ms": 2.5}]},
    ]
    shown = arranged(turn["steps"], runs)
    assert [(s["type"], s.get("id") or s.get("text") or s.get("index")) for s in shown] == [
        ("tool", "w"),
        ("text", "Asking."),
        ("tool", "b"),
        ("run", 0),
        ("text", "Booked."),
        ("run", 1),
    ]
    assert shown[2]["ms"] == 2.5


def test_runs_that_do_not_pair_with_answers_go_at_the_end() -> None:
    steps = [{"type": "text", "text": "A.", "part": 1}, {"type": "text", "text": "B.", "part": 2}]
    shown = arranged(steps, [{"tools": [{"id": "w", "name": "x", "state": "done"}]}])
    assert [s["type"] for s in shown] == ["text", "tool", "text", "run"]


def test_the_title_is_the_first_question_on_one_short_line() -> None:
    assert title_of([UserMessage("a\n  b")]) == "a b"
    assert title_of([UserMessage("x" * 100)]) == "x" * 59 + "…"
    assert title_of([AssistantMessage("hi")]) is None


def test_an_error_is_one_line() -> None:
    assert error_line(ModelError("down\n(503)")) == "down (503)"
    assert error_line(ValueError("bad\nvalue")) == "ValueError: bad value"
    assert error_line(KeyError()) == "KeyError"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.decimals(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=5)
        | st.frozensets(st.integers(), max_size=3)
    ),
    max_leaves=30,
)


@given(json_values)
def test_any_value_the_chain_leaves_becomes_json(value: Any) -> None:
    json.dumps(jsonable(value))


def test_objects_are_shown_by_their_fields_or_their_text() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque thing"

    assert jsonable(Decimal("0.10")) == "0.10"
    assert jsonable(Opaque()) == "opaque thing"
    assert jsonable(ToolCall("i", "n", "{}")) == {"id": "i", "name": "n", "arguments": "{}"}
    assert len(jsonable("x" * 50_000)) == 20_000


json_bodies = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["text", "approvals", "approved", "reason", "c1", "x"]), inner, max_size=3
        )
    ),
    max_leaves=12,
)


@given(json_bodies)
def test_any_body_is_a_turn_or_a_refusal_with_one_line(body: Any) -> None:
    try:
        turn = parse_turn(body)
    except Refused as refused:
        assert refused.status == 400 and "\n" not in refused.message
    else:
        assert isinstance(turn, TurnRequest)
        assert (turn.text is None) != (turn.approvals is None)


def test_importing_the_package_loads_no_web_server() -> None:
    import subprocess
    import sys

    code = "import sys, advisorchain, advisorchain.cli; print(sorted({'starlette', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
