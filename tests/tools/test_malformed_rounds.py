"""ToolCallingAdvisor(max_malformed_rounds=...) (API.md §6)."""

from __future__ import annotations

import pytest

from advisorchain import AssistantMessage, ChatClient, ToolCall, ToolCallingAdvisor, ToolExecutionError, tool
from advisorchain.testing import ScriptedChatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _bad(n: int) -> AssistantMessage:
    return AssistantMessage(None, [ToolCall(f"c{n}", "add", "{'a': 1, 'b': 2,}")])


def _good(n: int) -> AssistantMessage:
    return AssistantMessage(None, [ToolCall(f"c{n}", "add", '{"a": 1, "b": 2}')])


async def _run(model: ScriptedChatModel, path: str, **kwargs: int) -> str | None:
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(**kwargs)])
    spec = client.prompt("add 1 and 2").tools(add)
    if path == "call":
        return await spec.acall().content()
    return "".join([t async for t in spec.astream().content()])


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_malformed_round_tells_the_model_the_parse_error_and_strict_json_rules(path: str) -> None:
    model = ScriptedChatModel([_bad(1), "3"])
    assert await _run(model, path) == "3"
    response = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[union-attr]
    assert response.startswith("Error: the arguments of tool 'add' are not valid JSON")
    assert "double quotes" in response and "no trailing commas" in response


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_the_nth_malformed_round_in_a_row_raises_naming_the_tool_and_quoting_the_arguments(
    path: str,
) -> None:
    model = ScriptedChatModel([_bad(1), _bad(2), _bad(3), "never"])
    with pytest.raises(ToolExecutionError, match=r"3 rounds in a row.*'add'.*\{'a': 1, 'b': 2,\}") as caught:
        await _run(model, path)
    assert (caught.value.tool_name, caught.value.tool_call_id) == ("add", "c3")
    assert len(model.prompts) == 3


async def test_a_round_that_parses_resets_the_count() -> None:
    model = ScriptedChatModel([_bad(1), _bad(2), _good(3), _bad(4), _bad(5), "3"])
    assert await _run(model, "call") == "3"
    assert len(model.prompts) == 6


async def test_a_round_with_one_parsable_call_is_not_malformed() -> None:
    mixed = AssistantMessage(None, [ToolCall("x", "add", "{oops"), ToolCall("y", "add", '{"a": 1, "b": 1}')])
    model = ScriptedChatModel([mixed, mixed, "done"])
    assert await _run(model, "call", max_malformed_rounds=1) == "done"


async def test_max_malformed_rounds_one_raises_on_the_first_malformed_round() -> None:
    with pytest.raises(ToolExecutionError, match="1 rounds in a row"):
        await _run(ScriptedChatModel([_bad(1), "never"]), "call", max_malformed_rounds=1)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, None])
def test_max_malformed_rounds_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(ValueError, match="max_malformed_rounds must be an int"):
        ToolCallingAdvisor(max_malformed_rounds=value)  # type: ignore[arg-type]
