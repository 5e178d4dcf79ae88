"""The agents of API.md §18 served (§20), end to end through each protocol's official client: a
triage agent handing off to billing, and an agent tool made by ``client.as_tool``, run by the real
``HandoffAdvisor`` and ``AgentTool`` (no hand-emitted run events)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState

from advisorchain import (
    AssistantMessage,
    ChatClient,
    MessageWindowChatMemory,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
)
from advisorchain.agents import Agent
from advisorchain.model import ChatResponse, ChatResponseMetadata, Generation, Usage
from advisorchain.serve import a2a_app, agui_app, openai_app
from advisorchain.testing import ScriptedChatModel
from tests.serve.helpers import TOKEN, Served, delete_file, get_weather, run_agui_client, serve

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



PICK = {"name": "pick", "description": "Pick a color.", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("with_memory", [True, False])
def test_agui_a_front_end_tool_called_by_billing_after_the_handoff_resumes_with_billing(
    served_agui: Any, with_memory: bool
) -> None:
    # billing's round has no text: its call is a message of its own in the client's thread, not
    # a second call of triage's handoff message (which made the resend answer the handoff again)
    model = ScriptedChatModel(
        [
            _reply("Passing you on.", ToolCall("h1", "transfer_to_billing", "{}")),
            _reply(None, ToolCall("p1", "pick", "{}")),
            _reply("Blue it is."),
        ]
    )
    kwargs = {"memory": MessageWindowChatMemory()} if with_memory else {}
    where = served_agui(_handoff_client(model), **kwargs)
    out = run_agui_client(
        where.base + "/",
        [
            {"user": "pick"},
            {"run": {"tools": [PICK]}},
            {"tool": {"toolCallId": "p1", "content": "blue"}},
            {"run": {"tools": [PICK]}},
        ],
    )
    first, second = out["runs"]
    assert "error" not in first and "error" not in second, second.get("error")
    assert first["events"][-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["p1"]}
    calls = [[c["id"] for c in m.get("toolCalls") or ()] for m in out["messages"] if m["role"] == "assistant"]
    assert calls == [["h1"], ["p1"], []]
    assert out["messages"][-1]["content"] == "Blue it is."
    assert [p.instructions[0] for p in model.prompts] == [
        SystemMessage("You are triage."),
        SystemMessage("You are billing."),
        SystemMessage("You are billing."),
    ]
    sent = model.prompts[2].instructions[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].response_data == "blue"


def test_agui_an_approval_inside_billing_resumes_inside_billing(served_agui: Any) -> None:
    model = ScriptedChatModel(
        [
            _reply("Passing you on.", ToolCall("h1", "transfer_to_billing", "{}")),
            _reply("Deleting.", ToolCall("d1", "delete_file", '{"path": "/a"}')),
            _reply("Deleted it."),
        ]
    )
    client = ChatClient(model, default_agent=_graph(), default_tools=[get_weather, delete_file])
    where = served_agui(client, memory=MessageWindowChatMemory())
    approve = {"interruptId": "approval:d1", "status": "resolved", "payload": {"approved": True}}
    out = run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [approve]}}])
    paused, resumed = out["runs"]
    assert [i["toolCallId"] for i in paused["events"][-1]["outcome"]["interrupts"]] == ["d1"]
    assert [(e["toolCallId"], e["content"]) for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT"] == [
        ("d1", "deleted /a")
    ]
    assert model.prompts[2].instructions[0] == SystemMessage("You are billing.")
    assert out["messages"][-1]["content"] == "Deleted it."


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


def test_agui_the_nested_runs_messages_stay_out_of_the_thread_the_client_resends(served_agui: Any) -> None:
    expert_model = ScriptedChatModel(
        [_reply(None, ToolCall("n1", "get_weather", '{"city": "Oslo"}')), _reply("Sunny in Oslo.")]
    )
    model = ScriptedChatModel(
        [
            _reply(None, ToolCall("e1", "ask_expert", '{"input": "weather in Oslo?"}')),
            _reply("The expert says it is sunny."),
            _reply("You are welcome."),
        ]
    )
    where = served_agui(ChatClient(model, default_tools=[_expert_tool(expert_model)]))
    out = run_agui_client(where.base + "/", [{"user": "weather?"}, {"run": {}}, {"user": "thanks"}, {"run": {}}])
    assert all("error" not in r for r in out["runs"])
    nested = [m for m in out["messages"] if m.get("subagentRunId")]
    assert {m["role"] for m in nested} == {"assistant", "tool"}  # the client files them under the sub-agent
    top_calls = [c["id"] for m in out["messages"] if not m.get("subagentRunId") for c in m.get("toolCalls") or ()]
    assert top_calls == ["e1"]
    # the caller's model is sent its own conversation: the expert's call n1 is not in it
    sent = model.prompts[2].instructions
    assert [type(m).__name__ for m in sent] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
        "UserMessage",
    ]
    assert [c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls] == ["e1"]



# -- OpenAI and A2A: a handoff ---------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
def test_openai_a_handoff_answers_with_billings_text_and_never_shows_the_handoff_call(streaming: bool) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([*_handing_off(), _reply("Still billing.")])
    with serve(openai_app(_handoff_client(model), token=TOKEN, memory=memory)) as where:
        sdk = openai.OpenAI(base_url=f"{where.base}/v1", api_key=TOKEN, max_retries=0)
        asked = [{"role": "user", "content": "I want a refund"}]
        if streaming:
            chunks = list(
                sdk.chat.completions.create(
                    model="x", messages=asked, user="c-1", stream=True, stream_options={"include_usage": True}
                )
            )
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            text = "".join(d.content or "" for d in deltas)
            assert all(d.tool_calls is None for d in deltas)
            assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
            usage = chunks[-1].usage
        else:
            answer = sdk.chat.completions.create(model="x", messages=asked, user="c-1")
            text = answer.choices[0].message.content or ""
            assert answer.choices[0].message.tool_calls is None and answer.choices[0].finish_reason == "stop"
            usage = answer.usage
        # both agents' text, as the stream path gives it (§18); billing answers last
        assert text.endswith("Billing here, your refund is on its way.")
        assert "transfer_to_billing" not in text
        assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (20, 4)
        again = sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "and?"}], user="c-1")
    assert again.choices[0].message.content == "Still billing."
    assert model.prompts[2].instructions[0] == SystemMessage("You are billing.")


async def _a2a_send(where: Served, text: str, *, streaming: bool, context_id: str = "") -> list[StreamResponse]:
    message = Message(
        role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)], context_id=context_id
    )
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        client = await create_client(where.base + "/", ClientConfig(streaming=streaming, httpx_client=http))
        try:
            return [r async for r in client.send_message(SendMessageRequest(message=message))]
        finally:
            await client.close()


@pytest.mark.parametrize("streaming", [False, True])
async def test_a2a_a_handoff_answers_with_billings_text_and_the_next_message_stays_with_billing(
    streaming: bool,
) -> None:
    model = ScriptedChatModel([*_handing_off(), _reply("Still billing.")])
    with serve(a2a_app(_handoff_client(model), token=TOKEN)) as where:
        async with httpx.AsyncClient() as http:
            card = (await http.get(where.base + "/.well-known/agent-card.json")).json()
        responses = await _a2a_send(where, "I want a refund", streaming=streaming)
        if streaming:
            updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
            text = "".join(p.text for u in updates for p in u.artifact.parts)
            states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
            assert states[-1] == TaskState.TASK_STATE_COMPLETED
            context_id = responses[0].task.context_id
        else:
            (response,) = responses
            task = response.task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            text = "".join(p.text for a in task.artifacts for p in a.parts)
            context_id = task.context_id
            assert all("transfer_to_billing" not in str(m) for m in task.history)
        assert text.endswith("Billing here, your refund is on its way.")
        assert "transfer_to_billing" not in text
        (again,) = await _a2a_send(where, "and?", streaming=False, context_id=context_id)
    assert "".join(p.text for a in again.task.artifacts for p in a.parts) == "Still billing."
    assert model.prompts[2].instructions[0] == SystemMessage("You are billing.")
    # the card's skills are the client's own tools, not the handoff tools
    assert [s["id"] for s in card["skills"]] == ["get_weather"]
    assert card["name"] == "triage"


def _tool_names(model: ScriptedChatModel, index: int) -> list[str]:
    options = model.prompts[index].options
    return [c.definition.name for c in (options.tool_callbacks if options is not None else ())]
