"""Tool guards and tool-result guards in the tool loop: before approvals, with a user's own manager,
on calls and streams, through the ChatClient, with memory inside and outside the loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    Approved,
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatMemory,
    ChatResponse,
    GuardContext,
    GuardrailError,
    GuardResult,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ScriptedChatModel,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolExecutionResult,
    ToolResponseMessage,
    ToolSearchToolCallingAdvisor,
    keyword_guard,
    pii_guard,
    tool,
)
from advisorchain.tools.guarded import ACTIVE_AGENT_KEY, CONVERSATION_ID_KEY
from tests.guardrails.support import PATHS, Path, Recorder, run

RAN: list[str] = []
INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 100


@tool
def send_mail(to: str) -> str:
    """Send a mail."""
    RAN.append(f"send_mail {to}")
    return f"sent to {to}"


@tool(requires_approval=True)
def wire_money(to: str) -> str:
    """Wire money."""
    RAN.append(f"wire_money {to}")
    return f"wired to {to}"


@tool
def lookup(name: str) -> str:
    """Look a person up."""
    RAN.append(f"lookup {name}")
    return f"{name}: ada@example.com, +44 20 7946 0958"


@tool(return_direct=True)
def card(name: str) -> str:
    """A person's card number."""
    RAN.append(f"card {name}")
    return f"{name} pays with 4111 1111 1111 1111"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def asks(*calls: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(None, [ToolCall(i, n, json.dumps(a)) for i, n, a in calls])


def evil_only(arguments: str, context: GuardContext) -> GuardResult:
    return GuardResult(False, "not to evil") if "evil" in arguments else GuardResult(True)


def tool_responses(model: ScriptedChatModel, index: int = 1) -> list[str]:
    last = model.prompts[index].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    return [r.response_data for r in last.responses]


@pytest.mark.parametrize("path", PATHS)
async def test_a_blocked_call_answers_the_block_text_and_the_others_run(path: Path) -> None:
    model = ScriptedChatModel(
        [asks(("c1", "send_mail", {"to": "evil"}), ("c2", "send_mail", {"to": "ada"})), "ok"]
    )
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(tool_guards=[evil_only])])
    assert (await run(client.prompt("mail").tools(send_mail), path)).text == "ok"
    assert RAN == ["send_mail ada"]
    assert tool_responses(model) == ["Error: blocked by guardrail evil_only: not to evil", "sent to ada"]
    # the assistant message keeps the model's calls
    assert model.prompts[1].instructions[-2] == asks(
        ("c1", "send_mail", {"to": "evil"}), ("c2", "send_mail", {"to": "ada"})
    )


async def test_a_block_without_a_message_names_only_the_guard() -> None:
    model = ScriptedChatModel([asks(("c1", "send_mail", {"to": "x"})), "ok"])
    client = ChatClient(model, tool_guards=[lambda text, context: False])
    await client.prompt("mail").tools(send_mail).acall().content()
    assert tool_responses(model) == ["Error: blocked by guardrail <lambda>"]
    assert RAN == []


@pytest.mark.parametrize("path", PATHS)
async def test_a_blocked_call_is_never_asked_of_an_approver(path: Path) -> None:
    asked: list[ToolCall] = []

    def approver(call: ToolCall, context: object) -> bool:
        asked.append(call)
        return True

    model = ScriptedChatModel(
        [asks(("c1", "wire_money", {"to": "evil"}), ("c2", "wire_money", {"to": "ada"})), "ok"]
    )
    advisor = ToolCallingAdvisor(ToolCallingManager(approver=approver), tool_guards=[evil_only])
    client = ChatClient(model, default_advisors=[advisor])
    await run(client.prompt("pay").tools(wire_money), path)
    assert [c.id for c in asked] == ["c2"]
    assert RAN == ["wire_money ada"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_blocked_call_never_waits_for_approval(path: Path) -> None:
    model = ScriptedChatModel(
        [asks(("c1", "wire_money", {"to": "evil"}), ("c2", "send_mail", {"to": "ada"})), "ok"]
    )
    client = ChatClient(model, tool_guards=[evil_only])
    answer = await run(client.prompt("pay").tools(wire_money, send_mail), path)
    assert answer.text == "ok"  # nothing waits: the only call needing approval was blocked
    assert RAN == ["send_mail ada"]


async def test_pending_calls_leave_out_the_blocked_ones_and_a_resume_needs_no_decision_for_them() -> None:
    model = ScriptedChatModel(
        [asks(("c1", "wire_money", {"to": "evil"}), ("c2", "wire_money", {"to": "ada"})), "paid ada"]
    )
    client = ChatClient(model, tool_guards=[evil_only])
    first = await client.prompt("pay").tools(wire_money).acall().chat_client_response()
    assert first.context[AdvisorParams.PENDING_TOOL_CALLS] == (ToolCall("c2", "wire_money", '{"to": "ada"}'),)
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    resumed = client.prompt().messages(history).tools(wire_money).tool_approvals({"c2": True})
    assert await resumed.acall().content() == "paid ada"
    assert RAN == ["wire_money ada"]
    assert tool_responses(model) == ["Error: blocked by guardrail evil_only: not to evil", "wired to ada"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_replacement_is_what_the_tool_and_the_approver_get_and_the_history_keeps_the_models_call(
    path: Path,
) -> None:
    asked: list[str] = []

    def approver(call: ToolCall, context: object) -> Approved:
        asked.append(call.arguments)
        return Approved()

    model = ScriptedChatModel([asks(("c1", "wire_money", {"to": "ada@example.com"})), "ok"])
    advisor = ToolCallingAdvisor(ToolCallingManager(approver=approver), tool_guards=[pii_guard()])
    client = ChatClient(model, default_advisors=[advisor])
    await run(client.prompt("pay").tools(wire_money), path)
    assert asked == ['{"to": "[EMAIL]"}']
    assert RAN == ["wire_money [EMAIL]"]
    assert model.prompts[1].instructions[-2] == asks(("c1", "wire_money", {"to": "ada@example.com"}))


async def test_the_approvers_own_arguments_win_over_a_replacement() -> None:
    def approver(call: ToolCall, context: object) -> Approved:
        return Approved(arguments='{"to": "bob"}')

    model = ScriptedChatModel([asks(("c1", "wire_money", {"to": "ada@example.com"})), "ok"])
    advisor = ToolCallingAdvisor(ToolCallingManager(approver=approver), tool_guards=[pii_guard()])
    await ChatClient(model, default_advisors=[advisor]).prompt("pay").tools(wire_money).acall().content()
    assert RAN == ["wire_money bob"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_result_guard_redacts_or_withholds_before_the_model_sees_it(path: Path) -> None:
    model = ScriptedChatModel(
        [asks(("c1", "lookup", {"name": "Ada"}), ("c2", "lookup", {"name": "secret"})), "ok"]
    )

    def no_secret(text: str, context: GuardContext) -> GuardResult:
        return GuardResult(False) if text.startswith("secret") else GuardResult(True)

    client = ChatClient(model, tool_result_guards=[pii_guard(), no_secret])
    await run(client.prompt("who").tools(lookup), path)
    assert tool_responses(model) == [
        "Ada: [EMAIL], [PHONE]",
        "Error: the result of lookup was withheld by guardrail no_secret",
    ]


@pytest.mark.parametrize("path", PATHS)
async def test_a_return_direct_answer_is_the_checked_result(path: Path) -> None:
    model = ScriptedChatModel([asks(("c1", "card", {"name": "Ada"}))])
    client = ChatClient(model, tool_result_guards=[pii_guard()])
    answer = await run(client.prompt("card").tools(card), path)
    assert answer.text == "Ada pays with [CREDIT_CARD]"
    assert answer.finish_reason == "returnDirect"


async def test_result_guards_never_see_a_block_or_a_denial() -> None:
    results = Recorder()

    def approver(call: ToolCall, context: object) -> bool:
        return False

    model = ScriptedChatModel(
        [
            asks(
                ("c1", "send_mail", {"to": "evil"}),
                ("c2", "wire_money", {"to": "ada"}),
                ("c3", "send_mail", {"to": "bob"}),
            ),
            "ok",
        ]
    )
    advisor = ToolCallingAdvisor(
        ToolCallingManager(approver=approver), tool_guards=[evil_only], tool_result_guards=[results]
    )
    await (
        ChatClient(model, default_advisors=[advisor])
        .prompt("q")
        .tools(send_mail, wire_money)
        .acall()
        .content()
    )
    assert results.texts == ["sent to bob"]
    assert [c["tool_call_id"] for c in results.contexts] == ["c3"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("inside", [False, True])
async def test_memory_stores_the_checked_results_and_arguments_as_the_model_sent_them(
    path: Path, inside: bool
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks(("c1", "lookup", {"name": "Ada"})), "done"])
    advisors = (
        [MessageChatMemoryAdvisor(memory, order=INSIDE)] if inside else [MessageChatMemoryAdvisor(memory)]
    )
    client = ChatClient(model, default_advisors=advisors, tool_result_guards=[pii_guard()])
    await run(client.prompt("who").tools(lookup), path)
    stored = memory.get("default")
    assert "ada@example.com" not in str(stored)
    if inside:
        responses = [m for m in stored if isinstance(m, ToolResponseMessage)]
        assert responses[0].responses[0].response_data == "Ada: [EMAIL], [PHONE]"


class AuditingManager:
    """A user's own manager: the two methods of the protocol, delegating to the library's."""

    def __init__(self) -> None:
        self.inner = ToolCallingManager()
        self.seen: list[list[str]] = []

    def resolve_tool_definitions(self, options: Any) -> Any:
        return self.inner.resolve_tool_definitions(options)

    async def execute_tool_calls(self, prompt: Prompt, chat_response: ChatResponse) -> ToolExecutionResult:
        self.seen.append([c.arguments for g in chat_response.generations for c in g.output.tool_calls])
        return await self.inner.execute_tool_calls(prompt, chat_response)


@pytest.mark.parametrize("path", PATHS)
async def test_guards_work_with_a_users_own_manager(path: Path) -> None:
    manager = AuditingManager()
    model = ScriptedChatModel(
        [asks(("c1", "send_mail", {"to": "evil"}), ("c2", "send_mail", {"to": "ada@example.com"})), "ok"]
    )
    advisor = ToolCallingAdvisor(
        manager, tool_guards=[evil_only, pii_guard()], tool_result_guards=[keyword_guard(["sent"])]
    )
    await run(ChatClient(model, default_advisors=[advisor]).prompt("q").tools(send_mail), path)
    assert manager.seen == [['{"to": "[EMAIL]"}']]  # the blocked call never reaches the manager
    assert tool_responses(model) == [
        "Error: blocked by guardrail evil_only: not to evil",
        "Error: the result of send_mail was withheld by guardrail keyword_guard",
    ]


@pytest.mark.parametrize("path", PATHS)
async def test_a_failing_tool_guard_raises_and_no_call_runs(path: Path) -> None:
    def broken(text: str, context: GuardContext) -> bool:
        raise RuntimeError("boom")

    model = ScriptedChatModel([asks(("c1", "send_mail", {"to": "ada"})), "ok"])
    with pytest.raises(GuardrailError) as info:
        await run(ChatClient(model, tool_guards=[broken]).prompt("q").tools(send_mail), path)
    assert info.value.kind == "tool_call" and info.value.guard == "broken"
    assert RAN == []


async def test_a_tool_guard_is_told_the_tool_the_call_the_conversation_and_the_agent() -> None:
    calls, results = Recorder(), Recorder()
    model = ScriptedChatModel([asks(("c1", "send_mail", {"to": "ada"})), "ok"])
    client = ChatClient(model, tool_guards=[calls], tool_result_guards=[results])
    spec = (
        client.prompt("q")
        .tools(send_mail)
        .param(ChatMemory.CONVERSATION_ID, "u1")
        .param(AdvisorParams.ACTIVE_AGENT, "ops")
    )
    await spec.acall().content()
    expected = {"conversation_id": "u1", "agent": "ops", "tool_name": "send_mail", "tool_call_id": "c1"}
    assert dict(calls.contexts[0]) == {"kind": "tool_call", **expected}
    assert dict(results.contexts[0]) == {"kind": "tool_result", **expected}
    assert calls.texts == ['{"to": "ada"}'] and results.texts == ["sent to ada"]


def test_the_context_keys_the_tools_layer_reads_are_the_public_ones() -> None:
    assert CONVERSATION_ID_KEY == ChatMemory.CONVERSATION_ID
    assert ACTIVE_AGENT_KEY == AdvisorParams.ACTIVE_AGENT


async def test_the_client_passes_its_guards_on_and_mutate_keeps_or_changes_them() -> None:
    client = ChatClient(
        ScriptedChatModel([asks(("c1", "send_mail", {"to": "evil"})), "ok"]), tool_guards=[evil_only]
    )
    await client.prompt("q").tools(send_mail).acall().content()
    assert RAN == []
    same = client.mutate(default_system="x")
    assert same.tool_guards.calls == (evil_only,)
    cleared = client.mutate(
        tool_guards=(), model=ScriptedChatModel([asks(("c1", "send_mail", {"to": "evil"})), "ok"])
    )
    await cleared.prompt("q").tools(send_mail).acall().content()
    assert RAN == ["send_mail evil"]


async def test_client_guards_with_a_tool_loop_of_the_chains_own_are_an_error() -> None:
    client = ChatClient(
        ScriptedChatModel(["x"]), default_advisors=[ToolCallingAdvisor()], tool_guards=[evil_only]
    )
    with pytest.raises(ChainConfigurationError, match="Tool Calling Advisor"):
        await client.prompt("q").acall().content()


async def test_the_tool_search_advisor_takes_the_same_keywords() -> None:
    model = ScriptedChatModel([asks(("c1", "send_mail", {"to": "evil"})), "ok"])
    advisor = ToolSearchToolCallingAdvisor(always_available=["send_mail"], tool_guards=[evil_only])
    await ChatClient(model, default_advisors=[advisor]).prompt("q").tools(send_mail).acall().content()
    assert RAN == [] and tool_responses(model) == ["Error: blocked by guardrail evil_only: not to evil"]


def test_bad_guards_are_named() -> None:
    with pytest.raises(TypeError, match="tool_guards"):
        ToolCallingAdvisor(tool_guards=["nope"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="tool_result_guards"):
        ChatClient(ScriptedChatModel([]), tool_result_guards=evil_only)  # type: ignore[arg-type]
