"""What a tool finds in its ToolContext: the id of the call it runs (everywhere), and no run id
outside a durable run (durable runs add theirs: tests/durable/test_crash_recovery.py)."""

from __future__ import annotations

from advisorchain import AssistantMessage, ChatClient, ScriptedChatModel, ToolCall, ToolContext, tool


def test_each_call_sees_its_own_tool_call_id_and_no_run_id_outside_a_durable_run() -> None:
    seen: list[tuple[object, object, object]] = []

    @tool
    def note(text: str, context: ToolContext) -> str:
        """Note a text."""
        seen.append((text, context["tool_call_id"], context.run_id))
        return "noted"

    calls = [ToolCall("call_a", "note", '{"text": "a"}'), ToolCall("call_b", "note", '{"text": "b"}')]
    model = ScriptedChatModel([AssistantMessage(None, calls), "done"])

    assert ChatClient(model).prompt("note both").tools(note).call().content() == "done"
    assert sorted(seen) == [("a", "call_a", None), ("b", "call_b", None)]
