"""The agents of API.md §18 served (§20), end to end through each protocol's official client: a
triage agent handing off to billing, and an agent tool made by ``client.as_tool``, run by the real
``HandoffAdvisor`` and ``AgentTool`` (no hand-emitted run events)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from advisorchain import AssistantMessage, ChatClient, MessageWindowChatMemory, SystemMessage, ToolCall
from advisorchain.agents import Agent
from advisorchain.model import ChatResponse, ChatResponseMetadata, Generation, Usage
from advisorchain.serve import agui_app
from advisorchain.testing import ScriptedChatModel
from tests.serve.helpers import TOKEN, Served, get_weather, run_agui_client, serve

HANDOFF = "handoff triage -> billing"


def _reply(text: str | None, *calls: ToolCall, prompt: int = 10, completion: int = 2) -> ChatResponse:
    message = AssistantMessage(text, calls)
    finish = "tool_calls" if calls else "stop"
    return ChatResponse(
        (Generation(message, finish),),
        ChatResponseMetadata(finish_reason=finish, usage=Usage(prompt, completion), model="scripted"),
    )


def _graph() -> Agent:
    billing = Agent("billing", instructions="You are billing.", description="Invoices and refunds")
    return Agent("triage", instructions="You are triage.", handoffs=[billing])


def _handoff_client(model: ScriptedChatModel) -> ChatClient:
    return ChatClient(model, default_agent=_graph(), default_tools=[get_weather])


def _handing_off(then: str = "Billing here, your refund is on its way.") -> list[Any]:
    """triage says a word and hands off; billing answers."""
    return [
        _reply("Passing you on.", ToolCall("h1", "transfer_to_billing", "{}")),
        _reply(then),
    ]


@pytest.fixture
def served_agui() -> Iterator[Any]:
    stack: list[Any] = []

    def start(client: Any, **kwargs: Any) -> Served:
        context = serve(agui_app(client, token=TOKEN, **kwargs))
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def _shown(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["type"], e.get("stepName") or e.get("toolCallId") or e.get("delta") or "")
        for e in events
    ]


# -- AG-UI: a handoff ------------------------------------------------------------------------------


def test_agui_a_handoff_is_a_step_pair_between_the_two_agents_text_and_the_next_run_stays_with_billing(
    served_agui: Any,
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([*_handing_off(), _reply("Still billing.")])
    where = served_agui(_handoff_client(model), memory=memory)
    out = run_agui_client(
        where.base + "/",
        [{"user": "I want a refund"}, {"run": {}}, {"user": "and the invoice?"}, {"run": {}}],
        thread_id="t-handoff",
    )
    first, second = out["runs"]
    assert "error" not in first and "error" not in second
    assert _shown(first["events"]) == [
        ("RUN_STARTED", ""),
        ("STEP_STARTED", "round 1"),
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_CONTENT", "Passing"),
        ("TEXT_MESSAGE_CONTENT", " you"),
        ("TEXT_MESSAGE_CONTENT", " on."),
        ("TEXT_MESSAGE_END", ""),
        ("TOOL_CALL_START", "h1"),
        ("TOOL_CALL_ARGS", "h1"),
        ("TOOL_CALL_END", "h1"),
        ("STEP_FINISHED", "round 1"),
        ("TOOL_CALL_RESULT", "h1"),
        ("STEP_STARTED", HANDOFF),
        ("STEP_FINISHED", HANDOFF),
        ("STEP_STARTED", "round 1"),  # billing's first round
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_CONTENT", "Billing"),
        ("TEXT_MESSAGE_CONTENT", " here,"),
        ("TEXT_MESSAGE_CONTENT", " your"),
        ("TEXT_MESSAGE_CONTENT", " refund"),
        ("TEXT_MESSAGE_CONTENT", " is"),
        ("TEXT_MESSAGE_CONTENT", " on"),
        ("TEXT_MESSAGE_CONTENT", " its"),
        ("TEXT_MESSAGE_CONTENT", " way."),
        ("TEXT_MESSAGE_END", ""),
        ("STEP_FINISHED", "round 1"),
        ("RUN_FINISHED", ""),
    ]
    result = next(e for e in first["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "Transferred to billing."
    starts = [e for e in first["events"] if e["type"] == "TEXT_MESSAGE_START"]
    assert len({e["messageId"] for e in starts}) == 2  # one message per agent
    # both agents' rounds are in the run's usage
    (usage,) = first["events"][-1]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (20, 4)
    # billing was sent its own instructions and the handoff round
    assert "transfer_to_billing" in _tool_names(model, 0)
    sent = model.prompts[1].instructions
    assert sent[0] == SystemMessage("You are billing.")
    assert [type(m).__name__ for m in sent[1:]] == ["UserMessage", "AssistantMessage", "ToolResponseMessage"]
    # the next run on the thread goes on with billing (resume from the stored conversation)
    assert [e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["Still", " billing."]
    assert not [e for e in second["events"] if e["type"] == "STEP_STARTED" and e["stepName"].startswith("handoff")]
    assert model.prompts[2].instructions[0] == SystemMessage("You are billing.")
    assert "transfer_to_billing" not in _tool_names(model, 2)
    stored = memory.get("t-handoff")
    answers = [m for m in stored if isinstance(m, AssistantMessage) and m.text]
    assert [(m.text, m.metadata.get("agent")) for m in answers][-1] == ("Still billing.", "billing")
    assert out["messages"][-1]["content"] == "Still billing."



# -- AG-UI: an agent tool --------------------------------------------------------------------------


def _expert_tool(expert_model: ScriptedChatModel) -> Any:
    expert = ChatClient(expert_model, default_tools=[get_weather])
    return expert.as_tool(name="ask_expert", description="Ask the weather expert.")


def test_agui_an_agent_tool_runs_inside_subagent_events_before_its_calls_result_and_counts_in_usage(
    served_agui: Any,
) -> None:
    expert_model = ScriptedChatModel(
        [
            _reply(None, ToolCall("n1", "get_weather", '{"city": "Oslo"}'), prompt=100, completion=20),
            _reply("Sunny in Oslo.", prompt=300, completion=40),
        ]
    )
    model = ScriptedChatModel(
        [
            _reply(None, ToolCall("e1", "ask_expert", '{"input": "weather in Oslo?"}'), prompt=1, completion=2),
            _reply("The expert says it is sunny.", prompt=5, completion=6),
        ]
    )
    where = served_agui(ChatClient(model, default_tools=[_expert_tool(expert_model)]))
    events = run_agui_client(where.base + "/", [{"user": "weather?"}, {"run": {}}])["runs"][0]["events"]
    started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
    child = started["subagentRunId"]
    assert started["name"] == "ask_expert" and started["parentToolCallId"] == "e1"
    shown = [(t, name, e.get("subagentRunId")) for e, (t, name) in zip(events, _shown(events), strict=True)]
    assert shown == [
        ("RUN_STARTED", "", None),
        ("STEP_STARTED", "round 1", None),
        ("TOOL_CALL_START", "e1", None),
        ("TOOL_CALL_ARGS", "e1", None),
        ("TOOL_CALL_END", "e1", None),
        ("SUBAGENT_STARTED", "", child),
        ("STEP_STARTED", "round 1", child),
        ("TOOL_CALL_START", "n1", child),
        ("TOOL_CALL_ARGS", "n1", child),
        ("TOOL_CALL_END", "n1", child),
        ("STEP_FINISHED", "round 1", child),
        ("TOOL_CALL_RESULT", "n1", child),
        ("STEP_STARTED", "round 2", child),
        ("STEP_FINISHED", "round 2", child),
        ("SUBAGENT_FINISHED", "", child),
        ("STEP_FINISHED", "round 1", None),  # the caller's round, closed before its tool results
        ("TOOL_CALL_RESULT", "e1", None),
        ("STEP_STARTED", "round 2", None),
        ("TEXT_MESSAGE_START", "", None),
        ("TEXT_MESSAGE_CONTENT", "The", None),
        ("TEXT_MESSAGE_CONTENT", " expert", None),
        ("TEXT_MESSAGE_CONTENT", " says", None),
        ("TEXT_MESSAGE_CONTENT", " it", None),
        ("TEXT_MESSAGE_CONTENT", " is", None),
        ("TEXT_MESSAGE_CONTENT", " sunny.", None),
        ("TEXT_MESSAGE_END", "", None),
        ("STEP_FINISHED", "round 2", None),
        ("RUN_FINISHED", "", None),
    ]
    assert child != events[0]["runId"]
    results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert results == {"n1": "sunny in Oslo", "e1": "Sunny in Oslo."}
    (usage,) = events[-1]["usage"]  # the caller's two requests and the expert's two
    assert (usage["inputTokens"], usage["outputTokens"]) == (1 + 5 + 100 + 300, 2 + 6 + 20 + 40)
    assert model.prompts[1].instructions[-1].responses[0].response_data == "Sunny in Oslo."


def _tool_names(model: ScriptedChatModel, index: int) -> list[str]:
    options = model.prompts[index].options
    return [c.definition.name for c in (options.tool_callbacks if options is not None else ())]
