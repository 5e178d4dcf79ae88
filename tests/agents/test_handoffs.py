"""Handoffs (API.md §18): the graph's checks, the request each agent's model is sent, the handoff
round, the context and metadata the caller gets, on call and stream, sync and async."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatOptions,
    HandoffAdvisor,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.agents import Agent, Handoff
from advisorchain.testing import ScriptedChatModel
from tests.agents.agents_support import MODES, Mode, asks, call, graph, lookup_invoice, run

# -- Agent and Handoff ------------------------------------------------------------------------------


@given(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True))
def test_any_name_of_the_pattern_is_an_agent_name(name: str) -> None:
    assert Agent(name).name == name


@given(
    st.text().filter(
        lambda s: not (0 < len(s) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in s))
    )
)
def test_a_name_outside_the_pattern_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="Agent name"):
        Agent(name)


@pytest.mark.parametrize("name", [None, 3, b"billing", ["billing"]])
def test_a_name_that_is_not_a_str_is_a_type_error(name: object) -> None:
    with pytest.raises(TypeError, match="Agent name must be a str"):
        Agent(name)  # type: ignore[arg-type]


def test_an_agent_is_frozen() -> None:
    agent = Agent("a")
    with pytest.raises(AttributeError):
        agent.name = "b"  # type: ignore[misc]


def test_two_different_agents_with_one_name_fail_before_any_model_call() -> None:
    model = ScriptedChatModel([])
    twin_a, twin_b = Agent("billing"), Agent("billing")  # equal in every field, two objects
    root = Agent("triage", handoffs=[twin_a, Handoff(twin_b, tool_name="other")])
    with pytest.raises(ChainConfigurationError, match="'billing'"):
        ChatClient(model).prompt("hi").agent(root)
    with pytest.raises(ChainConfigurationError, match="two different agents are named 'billing'"):
        HandoffAdvisor(root)
    with pytest.raises(ChainConfigurationError, match="'billing'"):
        ChatClient(model, default_agent=root)
    assert model.prompts == []


def test_two_handoffs_with_one_tool_name_name_the_agent_and_the_tool() -> None:
    a, b = Agent("a"), Agent("b")
    root = Agent("root", handoffs=[Handoff(a, tool_name="go"), Handoff(b, tool_name="go")])
    with pytest.raises(ChainConfigurationError, match=r"agent 'root' .*tool name 'go'"):
        HandoffAdvisor(root)


def test_a_handoff_to_a_name_outside_the_graph_fails() -> None:
    root = Agent("root", handoffs=["nobody"])
    with pytest.raises(ChainConfigurationError, match="'nobody'"):
        ChatClient(ScriptedChatModel([])).prompt("hi").agent(root)


def test_a_handoff_tool_clashing_with_a_request_tool_fails_before_any_model_call() -> None:
    from advisorchain import tool

    @tool
    def transfer_to_billing() -> str:
        """A user's tool that happens to carry the handoff's name."""
        return "x"

    triage, _, _ = graph()
    model = ScriptedChatModel([])
    spec = ChatClient(model).prompt("hi").agent(triage).tools(transfer_to_billing)
    with pytest.raises(ChainConfigurationError, match="'transfer_to_billing'"):
        spec.call().content()
    assert model.prompts == []


@pytest.mark.parametrize("bad", [None, "triage", 3])
def test_agent_takes_only_an_agent(bad: object) -> None:
    with pytest.raises(TypeError, match="Agent"):
        ChatClient(ScriptedChatModel([])).prompt("hi").agent(bad)  # type: ignore[arg-type]


# -- the handoff ------------------------------------------------------------------------------------


def _handoff_script() -> list[object]:
    return [
        asks(call("transfer_to_billing"), text="Let me get billing."),
        asks(call("lookup_invoice", '{"invoice": "7"}')),
        AssistantMessage("Invoice 7 is 42 EUR."),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_runs_the_rest_of_the_chain_with_the_target(mode: Mode) -> None:
    triage, billing, _ = graph()
    model = ScriptedChatModel(_handoff_script())  # type: ignore[arg-type]
    client = ChatClient(model, default_system="The client's own system text.")
    ran = run(client.prompt("Is my invoice 7 paid?").agent(triage), mode)

    assert ran.text == (
        "Let me get billing.Invoice 7 is 42 EUR." if "stream" in mode else "Invoice 7 is 42 EUR."
    )
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"
    assert ran.response.context[AdvisorParams.HANDOFFS] == (("triage", "billing"),)
    assert ran.response.chat_response.result.output.metadata["agent"] == "billing"  # type: ignore[union-attr]
    assert len(model.prompts) == 3  # the old agent's model is not called again

    first, second, third = model.prompts
    assert first.instructions == (SystemMessage("You are triage."), UserMessage("Is my invoice 7 paid?"))
    assert [c.definition.name for c in first.options.tool_callbacks] == [
        "transfer_to_billing",
        "transfer_to_refunds",
    ]  # type: ignore[union-attr]
    handoff_round = second.instructions[-2:]
    assert second.instructions[:2] == (
        SystemMessage("You are billing."),
        UserMessage("Is my invoice 7 paid?"),
    )
    assert isinstance(handoff_round[0], AssistantMessage)
    assert handoff_round[0].metadata["agent"] == "triage"
    assert (
        handoff_round[1]
        == ToolResponseMessage(
            [("call_transfer_to_billing", "transfer_to_billing", "Transferred to billing.")]  # type: ignore[list-item]
        )
        or handoff_round[1].responses[0].response_data == "Transferred to billing."
    )  # type: ignore[union-attr]
    assert [c.definition.name for c in second.options.tool_callbacks] == [
        "lookup_invoice",
        "transfer_to_triage",
    ]  # type: ignore[union-attr]
    assert third.instructions[0] == SystemMessage("You are billing.")
    assert billing.name == "billing"


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stream_never_shows_a_handoff_call_and_every_chunk_names_its_agent(mode: Mode) -> None:
    triage, _, _ = graph()
    client = ChatClient(ScriptedChatModel(_handoff_script()))  # type: ignore[arg-type]
    ran = run(client.prompt("Is my invoice 7 paid?").agent(triage), mode)
    with_response = [c for c in ran.chunks if c.chat_response is not None]
    assert not any(c.chat_response.has_tool_calls() for c in with_response)  # type: ignore[union-attr]
    agents = [g.output.metadata.get("agent") for c in with_response for g in c.chat_response.generations]  # type: ignore[union-attr]
    assert set(agents) == {"triage", "billing"} and None not in agents
    assert agents.index("billing") > agents.index("triage")
    last = ran.chunks[-1]
    assert last.context[AdvisorParams.ACTIVE_AGENT] == "billing"
    assert last.context[AdvisorParams.HANDOFFS] == (("triage", "billing"),)


def test_the_handoff_tool_has_no_parameters_and_the_description_rule() -> None:
    quiet = Agent("quiet")
    loud = Agent("loud", description="Says things")
    root = Agent(
        "root", handoffs=[quiet, loud, Handoff(loud, tool_name="shout", description="Shouts instead")]
    )
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt("hi").agent(root).call().content()
    definitions = {c.definition.name: c.definition for c in model.prompts[0].options.tool_callbacks}  # type: ignore[union-attr]
    assert definitions["transfer_to_quiet"].description == "Hand the conversation over to quiet"
    assert definitions["transfer_to_loud"].description == "Hand the conversation over to loud: Says things"
    assert definitions["shout"].description == "Hand the conversation over to loud: Shouts instead"
    assert definitions["shout"].input_schema == {"type": "object", "properties": {}}


@pytest.mark.parametrize("mode", MODES)
def test_only_the_first_handoff_call_of_a_round_hands_over(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [
            asks(call("transfer_to_refunds", id="r"), call("transfer_to_billing", id="b")),
            AssistantMessage("Refunds here."),
        ]
    )
    ran = run(ChatClient(model).prompt("money back").agent(triage), mode)
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "refunds"
    responses = model.prompts[1].instructions[-1].responses  # type: ignore[union-attr]
    assert [r.response_data for r in responses] == [
        "Transferred to refunds.",
        "Error: only one handoff per round; the conversation went to refunds",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_other_calls_of_the_handoff_round_run(mode: Mode) -> None:
    from tests.agents.agents_support import invoices_seen

    billing = Agent("billing", instructions="Billing.")
    triage = Agent("triage", tools=[lookup_invoice], handoffs=[billing])
    model = ScriptedChatModel(
        [
            asks(call("lookup_invoice", '{"invoice": "9"}'), call("transfer_to_billing")),
            AssistantMessage("Done."),
        ]
    )
    invoices_seen.clear()
    ran = run(ChatClient(model).prompt("9?").agent(triage), mode)
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"
    assert invoices_seen == ["9"]
    responses = model.prompts[1].instructions[-1].responses  # type: ignore[union-attr]
    assert [r.response_data for r in responses] == ["invoice 9: 42 EUR, paid", "Transferred to billing."]


@pytest.mark.parametrize("mode", MODES)
def test_after_max_handoffs_a_handoff_answers_the_limit_text_and_the_agent_goes_on(mode: Mode) -> None:
    b = Agent("b", handoffs=["a"])
    a = Agent("a", handoffs=[b])
    model = ScriptedChatModel(
        [
            asks(call("transfer_to_b")),
            asks(call("transfer_to_a")),
            AssistantMessage("b answers"),
        ]
    )
    client = ChatClient(model, default_advisors=[HandoffAdvisor(a, max_handoffs=1)])
    ran = run(client.prompt("go"), mode)
    assert ran.text == "b answers"
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "b"
    assert ran.response.context[AdvisorParams.HANDOFFS] == (("a", "b"),)
    assert model.prompts[2].instructions[-1].responses[0].response_data == "Error: handoff limit (1) reached"  # type: ignore[union-attr]


def test_agents_hand_back_and_forth_by_name() -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(
        [
            asks(call("transfer_to_billing")),
            asks(call("transfer_to_triage")),
            AssistantMessage("triage again"),
        ]
    )
    response = ChatClient(model).prompt("hi").agent(triage).call().chat_client_response()
    assert response.context[AdvisorParams.HANDOFFS] == (("triage", "billing"), ("billing", "triage"))
    assert response.context[AdvisorParams.ACTIVE_AGENT] == "triage"
    assert model.prompts[2].instructions[0] == SystemMessage("You are triage.")


# -- what the model is sent -------------------------------------------------------------------------


def test_instructions_replace_every_system_message() -> None:
    agent = Agent("a", instructions="Agent text.")
    model = ScriptedChatModel(["x"])
    client = ChatClient(model, default_system="Client text.")
    client.prompt().messages(SystemMessage("History text."), UserMessage("q")).agent(agent).call().content()
    systems = [m for m in model.prompts[0].instructions if isinstance(m, SystemMessage)]
    assert systems == [SystemMessage("Agent text.")]


def test_without_instructions_the_system_text_stays() -> None:
    target = Agent("t")
    root = Agent("root", instructions="Root.", handoffs=[target])
    model = ScriptedChatModel([asks(call("transfer_to_t")), "done"])
    ChatClient(model).prompt("q").system("Request text.").agent(root).call().content()
    assert model.prompts[0].instructions[0] == SystemMessage("Root.")
    assert [m for m in model.prompts[1].instructions if isinstance(m, SystemMessage)] == [
        SystemMessage("Request text.")
    ]


def test_options_are_laid_over_field_by_field() -> None:
    agent = Agent("a", options=ChatOptions(temperature=0.1, tool_context={"tier": "gold"}))
    model = ScriptedChatModel(["x"])
    client = ChatClient(model, default_options=ChatOptions(model="base", temperature=0.9, max_tokens=50))
    client.prompt("q").tool_context({"user": "ada"}).agent(agent).call().content()
    options = model.prompts[0].options
    assert options is not None
    assert (options.model, options.temperature, options.max_tokens) == ("base", 0.1, 50)
    assert options.tool_context["tier"] == "gold" and options.tool_context["user"] == "ada"


@pytest.mark.parametrize("mode", MODES)
def test_an_agents_model_replaces_the_clients_while_it_is_active(mode: Mode) -> None:
    own = ScriptedChatModel([AssistantMessage("from billing's own model")])
    billing = Agent("billing", model=own)
    triage = Agent("triage", handoffs=[billing])
    shared = ScriptedChatModel([asks(call("transfer_to_billing"))])
    ran = run(ChatClient(shared).prompt("q").agent(triage), mode)
    assert ran.text == "from billing's own model"
    assert len(shared.prompts) == 1 and len(own.prompts) == 1


# -- input_filter -----------------------------------------------------------------------------------


def _keep_last_two(messages: tuple[object, ...]) -> list[object]:
    return list(messages[-2:])


async def _async_keep_last_two(messages: tuple[object, ...]) -> list[object]:
    await asyncio.sleep(0)
    return list(messages[-2:])


@pytest.mark.parametrize("filter_", [_keep_last_two, _async_keep_last_two])
@pytest.mark.parametrize("mode", MODES)
def test_input_filter_shapes_the_history_the_target_is_sent(filter_: object, mode: Mode) -> None:
    seen: list[tuple[object, ...]] = []

    def spy(messages: tuple[object, ...]) -> object:
        seen.append(messages)
        return filter_(messages)  # type: ignore[operator]

    billing = Agent("billing", instructions="Billing.")
    triage = Agent("triage", instructions="Triage.", handoffs=[Handoff(billing, input_filter=spy)])
    model = ScriptedChatModel([asks(call("transfer_to_billing")), "ok"])
    run(ChatClient(model).prompt("secret question").agent(triage), mode)
    assert not any(isinstance(m, SystemMessage) for m in seen[0])
    assert seen[0][0] == UserMessage("secret question")
    sent = model.prompts[1].instructions
    assert sent[0] == SystemMessage("Billing.")
    assert len(sent) == 3 and UserMessage("secret question") not in sent


def test_an_input_filter_that_drops_the_handoff_round_names_the_handoff() -> None:
    billing = Agent("billing")
    triage = Agent("triage", handoffs=[Handoff(billing, input_filter=lambda m: m[:1])])
    model = ScriptedChatModel([asks(call("transfer_to_billing"))])
    with pytest.raises(ChainConfigurationError, match="transfer_to_billing"):
        ChatClient(model).prompt("q").agent(triage).call().content()


def test_an_input_filter_that_raises_names_the_handoff() -> None:
    def broken(messages: object) -> list[object]:
        raise RuntimeError("boom")

    billing = Agent("billing")
    triage = Agent("triage", handoffs=[Handoff(billing, input_filter=broken)])
    model = ScriptedChatModel([asks(call("transfer_to_billing"))])
    with pytest.raises(ChainConfigurationError, match=r"transfer_to_billing.*boom") as info:
        ChatClient(model).prompt("q").agent(triage).call().content()
    assert isinstance(info.value.__cause__, RuntimeError)


# -- resume -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_conversation_resumes_with_the_agent_its_newest_answer_names(mode: Mode) -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(["billing again"])
    history = [
        UserMessage("q"),
        AssistantMessage("old", metadata={"agent": "billing"}),
        AssistantMessage("x"),
    ]
    ran = run(ChatClient(model).prompt("next").messages(history).agent(triage), mode)
    assert model.prompts[0].instructions[0] == SystemMessage("You are billing.")
    assert ran.response.context[AdvisorParams.ACTIVE_AGENT] == "billing"
    assert ran.response.context[AdvisorParams.HANDOFFS] == ()


def test_an_unknown_agent_name_in_the_history_starts_at_the_root() -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(["hi"])
    history = [UserMessage("q"), AssistantMessage("old", metadata={"agent": "gone"})]
    response = ChatClient(model).prompt("next").messages(history).agent(triage).call().chat_client_response()
    assert response.context[AdvisorParams.ACTIVE_AGENT] == "triage"


def test_resume_false_starts_at_the_given_agent() -> None:
    triage, _, _ = graph()
    model = ScriptedChatModel(["hi"])
    history = [UserMessage("q"), AssistantMessage("old", metadata={"agent": "billing"})]
    response = (
        ChatClient(model)
        .prompt("next")
        .messages(history)
        .agent(triage, resume=False)
        .call()
        .chat_client_response()
    )
    assert response.context[AdvisorParams.ACTIVE_AGENT] == "triage"


def test_the_starting_agent_request_then_client_then_advisor() -> None:
    triage, _, refunds = graph()
    model = ScriptedChatModel(["1", "2", "3"])
    client = ChatClient(model, default_advisors=[HandoffAdvisor(refunds)])
    assert client.prompt("q").call().chat_client_response().context[AdvisorParams.ACTIVE_AGENT] == "refunds"
    with_default = client.mutate(default_agent=triage)
    assert (
        with_default.prompt("q").call().chat_client_response().context[AdvisorParams.ACTIVE_AGENT] == "triage"
    )
    chosen = with_default.prompt("q").agent(refunds).call().chat_client_response()
    assert chosen.context[AdvisorParams.ACTIVE_AGENT] == "refunds"
    assert client.default_agent is None


def test_a_client_with_a_handoff_advisor_gets_no_second_one() -> None:
    triage, _, _ = graph()
    advisor = HandoffAdvisor(triage)
    model = ScriptedChatModel(["x"])
    client = ChatClient(model, default_advisors=[advisor], default_agent=triage)
    _, built = client.prompt("q")._build()
    assert [a for a in built.advisors if isinstance(a, HandoffAdvisor)] == [advisor]
    _, plain = ChatClient(model, default_agent=triage).prompt("q")._build()
    assert [type(a) for a in plain.advisors if isinstance(a, HandoffAdvisor)] == [HandoffAdvisor]
    assert HandoffAdvisor.DEFAULT_ORDER == HandoffAdvisor.DEFAULT_ORDER
    from advisorchain import ToolCallingAdvisor

    assert HandoffAdvisor.DEFAULT_ORDER == ToolCallingAdvisor.DEFAULT_ORDER - 50


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_handoffs_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_handoffs"):
        HandoffAdvisor(Agent("a"), max_handoffs=bad)  # type: ignore[arg-type]
