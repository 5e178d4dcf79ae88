"""Handoffs in a whole run (API.md §18): memory inside and outside the loop on stored conversations,
approvals that pause and resume inside an agent, usage and limits over every agent, spans."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SystemMessage,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolResponseMessage,
    UsageLimitExceeded,
    UsageLimits,
    tool,
)
from advisorchain.agents import Agent
from advisorchain.memory.api import ChatMemory
from advisorchain.testing import ScriptedChatModel
from tests.agents.agents_support import MODES, Mode, asks, call, graph, run, with_usage
from tests.support.memory_backends import Backend

INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 10
OUTSIDE = MessageChatMemoryAdvisor.DEFAULT_ORDER


def _script() -> list[Any]:
    return [
        asks(call("transfer_to_billing")),
        asks(call("lookup_invoice", '{"invoice": "7"}')),
        AssistantMessage("Invoice 7 is paid."),
        AssistantMessage("Billing again."),
    ]


def _client(model: ScriptedChatModel, repository: Any, order: int) -> ChatClient:
    triage, _, _ = graph()
    memory = MessageWindowChatMemory(repository, max_messages=50)
    return ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(memory, order=order)], default_agent=triage
    )


def _stored_ok(messages: list[Any]) -> None:
    """Every stored tool-call message is followed by its responses, and every answer names its agent."""
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            assert m.metadata.get("agent") in {"triage", "billing"}, m
            if m.tool_calls:
                after = messages[i + 1]
                assert isinstance(after, ToolResponseMessage)
                assert [r.id for r in after.responses] == [c.id for c in m.tool_calls]


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside", "inside"])
@pytest.mark.parametrize("mode", MODES)
def test_a_conversation_stays_with_the_agent_it_was_handed_to(
    persistent_backend: Backend, order: int, mode: Mode
) -> None:
    model = ScriptedChatModel(_script())
    repository = persistent_backend.repository()
    client = _client(model, repository, order)
    first = run(client.prompt("Is invoice 7 paid?").param(ChatMemory.CONVERSATION_ID, "c1"), mode)
    assert first.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"

    stored = repository.find_by_conversation_id("c1")
    _stored_ok(stored)
    if order == OUTSIDE:  # the user message and the final answer, which names its agent
        assert len(stored) == 2 and stored[1].metadata["agent"] == "billing"
    else:  # every round of every agent
        assert [type(m).__name__ for m in stored] == [
            "UserMessage",
            "AssistantMessage",
            "ToolResponseMessage",
            "AssistantMessage",
            "ToolResponseMessage",
            "AssistantMessage",
        ]
        assert [m.metadata.get("agent") for m in stored if isinstance(m, AssistantMessage)] == [
            "triage",
            "billing",
            "billing",
        ]

    # A new client object over the same store: nothing carried but the conversation id.
    again = _client(model, persistent_backend.repository(), order)
    second = run(again.prompt("And now?").param(ChatMemory.CONVERSATION_ID, "c1"), mode)
    assert second.text == "Billing again."
    assert second.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"
    assert model.prompts[-1].instructions[0] == SystemMessage("You are billing.")
    assert [m for m in model.prompts[-1].instructions if isinstance(m, SystemMessage)] == [
        SystemMessage("You are billing.")
    ]
    _stored_ok(repository.find_by_conversation_id("c1"))


# -- approvals --------------------------------------------------------------------------------------


@tool(requires_approval=True)
def refund_money(invoice: str) -> str:
    """Send the money of an invoice back."""
    return f"refunded {invoice}"


def _approval_graph() -> Agent:
    refunds = Agent("refunds", instructions="You are refunds.", tools=[refund_money])
    return Agent("triage", instructions="You are triage.", handoffs=[refunds])


@pytest.mark.parametrize("mode", MODES)
def test_an_approval_that_pauses_inside_an_agent_resumes_inside_it(mode: Mode) -> None:
    triage = _approval_graph()
    model = ScriptedChatModel(
        [
            asks(call("transfer_to_refunds")),
            asks(call("refund_money", '{"invoice": "7"}', id="r1")),
            AssistantMessage("Refunded."),
        ]
    )
    client = ChatClient(model, default_agent=triage)
    paused = run(client.prompt("refund 7"), mode)
    chat = paused.response.chat_response
    assert chat is not None and chat.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED
    assert paused.response.context[AdvisorParams.ACTIVE_AGENT] == "refunds"
    history = paused.response.context[AdvisorParams.CONVERSATION_HISTORY]
    assert history[-1].metadata["agent"] == "refunds"

    resumed = run(client.prompt().messages(history).tool_approvals({"r1": True}), mode)
    assert resumed.text == "Refunded."
    assert resumed.response.context[AdvisorParams.ACTIVE_AGENT] == "refunds"
    assert model.prompts[-1].instructions[0] == SystemMessage("You are refunds.")
    assert model.prompts[-1].instructions[-1].responses[0].response_data == "refunded 7"  # type: ignore[union-attr]


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside", "inside"])
@pytest.mark.parametrize("mode", ["call", "astream"])
def test_an_approval_inside_an_agent_resumes_from_memory(
    persistent_backend: Backend, order: int, mode: Mode
) -> None:
    triage = _approval_graph()
    model = ScriptedChatModel(
        [
            asks(call("transfer_to_refunds")),
            asks(call("refund_money", '{"invoice": "7"}', id="r1")),
            AssistantMessage("Refunded."),
        ]
    )
    repository = persistent_backend.repository()
    memory = MessageWindowChatMemory(repository, max_messages=50)
    client = ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(memory, order=order)], default_agent=triage
    )
    paused = run(client.prompt("refund 7").param(ChatMemory.CONVERSATION_ID, "a1"), mode)
    assert paused.response.chat_response.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED  # type: ignore[union-attr]
    resumed = run(client.prompt().tool_approvals({"r1": True}).param(ChatMemory.CONVERSATION_ID, "a1"), mode)
    assert resumed.text == "Refunded."
    assert model.prompts[-1].instructions[0] == SystemMessage("You are refunds.")
    _stored_ok_names(repository.find_by_conversation_id("a1"))


def _stored_ok_names(messages: list[Any]) -> None:
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            assert isinstance(messages[i + 1], ToolResponseMessage)


@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_round_waiting_for_approval_hands_over_when_decided(mode: Mode) -> None:
    refunds = Agent("refunds", instructions="You are refunds.")
    triage = Agent("triage", tools=[refund_money], handoffs=[refunds])
    model = ScriptedChatModel(
        [
            asks(call("refund_money", '{"invoice": "7"}', id="r1"), call("transfer_to_refunds", id="h1")),
            "Done.",
        ]
    )
    client = ChatClient(model, default_agent=triage)
    paused = run(client.prompt("refund 7"), mode)
    history = paused.response.context[AdvisorParams.CONVERSATION_HISTORY]
    assert len(model.prompts) == 1
    resumed = run(client.prompt().messages(history).tool_approvals({"r1": False}), mode)
    assert resumed.text == "Done."
    assert resumed.response.context[AdvisorParams.HANDOFFS] == (("triage", "refunds"),)
    last = model.prompts[-1]
    assert last.instructions[0] == SystemMessage("You are refunds.")
    responses = last.instructions[-1].responses  # type: ignore[union-attr]
    assert [r.response_data for r in responses] == [
        "Error: the user denied this tool call",
        "Transferred to refunds.",
    ]


# -- usage and limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_usage_is_summed_over_every_agent(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [
            with_usage(asks(call("transfer_to_billing"))),
            with_usage(asks(call("lookup_invoice", '{"invoice": "7"}'))),
            with_usage("Paid."),
        ]
    )
    ran = run(ChatClient(model).prompt("7?").agent(triage), mode)
    usage = ran.response.chat_response.metadata.usage  # type: ignore[union-attr]
    assert (usage.prompt_tokens, usage.completion_tokens) == (300, 30)  # type: ignore[union-attr]
    totals = ran.response.context[AdvisorParams.RUN_USAGE]
    assert (totals.requests, totals.tool_calls) == (3, 2)  # the handoff call counts as a tool call


@pytest.mark.parametrize("mode", MODES)
def test_a_request_limit_counts_the_whole_run_across_agents(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [
            with_usage(asks(call("transfer_to_billing"))),
            with_usage(asks(call("lookup_invoice", '{"invoice": "7"}'))),
        ]
    )
    client = ChatClient(model, usage_limits=UsageLimits(request_limit=2))
    with pytest.raises(UsageLimitExceeded) as info:
        run(client.prompt("7?").agent(triage), mode)
    assert info.value.limit_name == "request_limit" and info.value.run_usage.requests == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_limit_with_on_exceeded_finish_ends_the_run_inside_the_target(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [
            with_usage(asks(call("transfer_to_billing"))),
            with_usage(asks(call("lookup_invoice", '{"invoice": "7"}'))),
        ]
    )
    client = ChatClient(model, usage_limits=UsageLimits(request_limit=2, on_exceeded="finish"))
    ran = run(client.prompt("7?").agent(triage), mode)
    assert ran.response.chat_response.finish_reason == "usageLimitExceeded"  # type: ignore[union-attr]
    assert ran.response.context[AdvisorParams.RUN_USAGE].requests == 2


@pytest.mark.parametrize("mode", MODES)
def test_tool_call_limits_count_the_turn_across_agents(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [asks(call("transfer_to_billing")), asks(call("lookup_invoice", '{"invoice": "7"}'))]
    )
    loop = ToolCallingAdvisor(ToolCallingManager(max_total_calls=1))
    ran = run(ChatClient(model, default_advisors=[loop]).prompt("7?").agent(triage), mode)
    chat = ran.response.chat_response
    assert chat is not None and chat.finish_reason == "toolCallLimitExceeded"
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"


# -- spans ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_span_under_the_request_span(spans: Any, mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [asks(call("transfer_to_billing")), asks(call("lookup_invoice", '{"invoice": "7"}')), "Paid."]
    )
    run(ChatClient(model).prompt("7?").agent(triage), mode)
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    handoffs = [s for s in finished if s.name.startswith("handoff ")]
    assert [s.name for s in handoffs] == ["handoff triage -> billing"]
    assert dict(handoffs[0].attributes) == {
        "advisorchain.handoff.from": "triage",
        "advisorchain.handoff.to": "billing",
    }
    parent, names = handoffs[0].parent, []
    while parent is not None:
        names.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    assert "advisorchain request" in names
    models = [s for s in finished if s.name.startswith("chat ")]
    assert [s.attributes.get("gen_ai.agent.name") for s in models] == ["triage", "billing", "billing"]
    tools = [s.name for s in finished if s.name.startswith("execute_tool")]
    assert tools == ["execute_tool transfer_to_billing", "execute_tool lookup_invoice"]


# -- a user's own manager, and run events ------------------------------------------------------------


class _AuditingManager:
    """A user's manager: it wraps the library's and notes every call it is given."""

    def __init__(self) -> None:
        self.inner = ToolCallingManager()
        self.seen: list[str] = []

    def resolve_tool_definitions(self, options: Any) -> Any:
        return self.inner.resolve_tool_definitions(options)

    async def execute_tool_calls(self, prompt: Any, chat_response: Any) -> Any:
        self.seen.extend(c.name for g in chat_response.generations for c in g.output.tool_calls)
        return await self.inner.execute_tool_calls(prompt, chat_response)


@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_call_runs_through_a_users_own_manager(mode: Mode) -> None:
    triage, _, _ = graph()
    manager = _AuditingManager()
    model = ScriptedChatModel([asks(call("transfer_to_billing")), AssistantMessage("Billing.")])
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(manager)])  # type: ignore[arg-type]
    ran = run(client.prompt("q").agent(triage), mode)
    assert manager.seen == ["transfer_to_billing"]
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"


def test_a_handoff_and_an_agent_tool_tell_the_runs_listener() -> None:
    from advisorchain.chain.events import HandoffEvent, SubRunFinished, SubRunStarted

    inner_triage, _, _ = graph()
    inner = ChatClient(
        ScriptedChatModel([asks(call("transfer_to_billing")), AssistantMessage("Billing says hi.")])
    )
    helper = inner.as_tool(name="helpdesk", description="Asks the help desk", agent=inner_triage)
    outer_model = ScriptedChatModel([asks(call("helpdesk", '{"input": "hi"}', id="t1")), "done"])
    heard: list[Any] = []
    spec = ChatClient(outer_model, default_tools=[helper]).prompt("q")._run_settings(listener=heard.append)
    assert spec.call().content() == "done"
    ours = [e for e in heard if isinstance(e, SubRunStarted | HandoffEvent | SubRunFinished)]
    assert [type(e) for e in ours] == [SubRunStarted, HandoffEvent, SubRunFinished]
    started, handoff, finished = ours
    inside = heard[heard.index(started) + 1 : heard.index(finished)]
    assert inside and {e.run_id for e in inside} == {started.child_run_id}  # the nested run's events
    assert (started.tool_call_id, started.name) == ("t1", "helpdesk")
    assert (handoff.from_agent, handoff.to_agent) == ("triage", "billing")
    assert handoff.run_id == started.child_run_id == finished.child_run_id != started.run_id
