from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    message_from_dict,
    message_to_dict,
)
from advisorchain.messages import Message


def test_each_message_reports_its_type() -> None:
    assert SystemMessage("s").type is MessageType.SYSTEM
    assert UserMessage("u").type is MessageType.USER
    assert AssistantMessage("a").type is MessageType.ASSISTANT
    assert ToolResponseMessage([]).type is MessageType.TOOL


def test_messages_compare_by_value_and_lists_become_tuples() -> None:
    a = AssistantMessage("x", [ToolCall("1", "f", "{}")], {"k": 1})
    b = AssistantMessage("x", (ToolCall("1", "f", "{}"),), {"k": 1})
    assert a == b
    assert isinstance(a.tool_calls, tuple)
    assert isinstance(ToolResponseMessage([ToolResponse("1", "f", "r")]).responses, tuple)


def test_messages_are_immutable() -> None:
    m = UserMessage("hi")
    with pytest.raises(AttributeError):
        m.text = "changed"  # type: ignore[misc]


def test_metadata_is_copied_so_the_caller_cannot_change_a_message() -> None:
    meta = {"a": 1}
    m = UserMessage("hi", meta)
    meta["a"] = 2
    assert m.metadata == {"a": 1}


def test_has_tool_calls() -> None:
    assert not AssistantMessage("x").has_tool_calls()
    assert AssistantMessage(None, [ToolCall("1", "f", "{")]).has_tool_calls()


def test_tool_call_keeps_malformed_arguments_verbatim() -> None:
    call = ToolCall("1", "f", '{"city": "Par')
    assert message_from_dict(message_to_dict(AssistantMessage(None, [call]))) == AssistantMessage(
        None, [call]
    )


def test_dict_form_is_json_safe() -> None:
    m = ToolResponseMessage([ToolResponse("c1", "weather", "sunny")], {"k": [1, 2]})
    assert json.loads(json.dumps(message_to_dict(m))) == message_to_dict(m)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"type": "robot", "text": "x"}, "unknown message type 'robot'"),
        ({"type": "user"}, "field 'text' must be str"),
        (
            {"type": "assistant", "text": None, "tool_calls": [{"id": 1, "name": "f", "arguments": "{}"}]},
            "'id'",
        ),
        ({"type": "tool", "responses": "nope"}, "'responses' must be list"),
        ({"type": "user", "text": "x", "metadata": [1]}, "metadata must be an object"),
        (["user"], "must be a JSON object"),
    ],
)
def test_malformed_dicts_raise_a_clear_value_error(data: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        message_from_dict(data)


_text = st.text(max_size=30)
_meta = st.dictionaries(
    st.text(max_size=5), st.one_of(st.none(), st.integers(), _text, st.booleans()), max_size=3
)
_calls = st.lists(st.builds(ToolCall, _text, _text, _text), max_size=3)
_messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(SystemMessage, _text, _meta),
    st.builds(UserMessage, _text, _meta),
    st.builds(AssistantMessage, st.one_of(st.none(), _text), _calls, _meta),
    st.builds(ToolResponseMessage, st.lists(st.builds(ToolResponse, _text, _text, _text), max_size=3), _meta),
)


@given(_messages)
def test_every_message_round_trips_through_its_dict_and_json(message: Message) -> None:
    data = json.loads(json.dumps(message_to_dict(message)))
    assert message_from_dict(data) == message
