"""Human approval of tool calls (API.md §10), on the call and the stream path."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    Approved,
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatClientResponse,
    ChatMemory,
    Denied,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SystemMessage,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolContext,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain.testing import ScriptedChatModel

RAN: list[str] = []


@tool(requires_approval=True)
def send_mail(to: str) -> str:
    """Send a mail."""
    RAN.append(f"send_mail {to}")
    return f"sent to {to}"


@tool
def lookup(name: str) -> str:
    """Look up an address."""
    RAN.append(f"lookup {name}")
    return f"{name}@example.com"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def _asks() -> AssistantMessage:
    return AssistantMessage(
        "On it.",
        [
            ToolCall("c1", "lookup", '{"name": "ada"}'),
            ToolCall("c2", "send_mail", '{"to": "ada"}'),
            ToolCall("c3", "send_mail", '{"to": "bob"}'),
        ],
    )


async def _run(client: ChatClient, path: str, spec: Any) -> ChatClientResponse:
    if path == "call":
        return await spec.acall().chat_client_response()
    chunks = [c async for c in spec.astream().chat_client_responses()]
    last = chunks[-1]
    text = "".join(c.chat_response.text or "" for c in chunks if c.chat_response is not None)
    assert last.chat_response is not None
    # The stream ends with one chunk carrying the finish reason and the loop's context.
    generation = last.chat_response.generations[0]
    message = AssistantMessage(text or None, generation.output.tool_calls)
    chat = last.chat_response.__class__(
        (generation.__class__(message, generation.finish_reason),), last.chat_response.metadata
    )
    return ChatClientResponse(chat, last.context)


PATHS = ["call", "stream"]


@pytest.mark.parametrize("path", PATHS)
async def test_without_an_approver_the_loop_ends_with_approval_required_and_runs_nothing(path: str) -> None:
    model = ScriptedChatModel([_asks()])
    client = ChatClient(model, default_system="Be careful.")
    response = await _run(client, path, client.prompt("mail ada and bob").tools(send_mail, lookup))
    chat = response.chat_response
    assert chat is not None
    assert chat.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED == "approvalRequired"
    assert chat.metadata.finish_reason == "approvalRequired"
    assert chat.generations[0].finish_reason == "approvalRequired"
    assert chat.generations[0].output == _asks()
    assert response.context[AdvisorParams.PENDING_TOOL_CALLS] == _asks().tool_calls[1:]
    assert response.context[AdvisorParams.CONVERSATION_HISTORY] == (
        SystemMessage("Be careful."),
        UserMessage("mail ada and bob"),
        _asks(),
    )
    assert RAN == []
    assert len(model.prompts) == 1


@pytest.mark.parametrize("path", PATHS)
async def test_resuming_with_decisions_runs_the_round_and_continues_the_loop(path: str) -> None:
    model = ScriptedChatModel([_asks(), "Mailed ada; bob was refused."])
    client = ChatClient(model)
    first = await client.prompt("mail ada and bob").tools(send_mail, lookup).acall().chat_client_response()
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    spec = (
        client.prompt()
        .messages(history)
        .tools(send_mail, lookup)
        .tool_approvals({"c2": Approved(), "c3": Denied("not bob")})
    )
    response = await _run(client, path, spec)
    assert (
        response.chat_response is not None and response.chat_response.text == "Mailed ada; bob was refused."
    )
    assert sorted(RAN) == ["lookup ada", "send_mail ada"]
    results = model.prompts[1].instructions[-1]
    assert isinstance(results, ToolResponseMessage)
    assert [r.response_data for r in results.responses] == [
        "ada@example.com",
        "sent to ada",
        "Error: the user denied this tool call: not bob",
    ]
    assert model.prompts[1].instructions[:-1] == tuple(history)


async def _ask_then_decide(model: ScriptedChatModel, decisions: dict[str, Any]) -> None:
    """Ask once (the loop stops for approval), then resume the returned history with ``decisions``."""
    client = ChatClient(model)
    first = await client.prompt("q").tools(send_mail, lookup).acall().chat_client_response()
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    await (
        client.prompt().messages(history).tools(send_mail, lookup).tool_approvals(decisions).acall().content()
    )


async def test_a_denial_without_a_reason_is_the_exact_text_and_true_false_are_decisions() -> None:
    model = ScriptedChatModel([_asks(), "ok"])
    await _ask_then_decide(model, {"c2": True, "c3": False})
    results = model.prompts[1].instructions[-1]
    assert isinstance(results, ToolResponseMessage)
    assert results.responses[2].response_data == "Error: the user denied this tool call"
    assert sorted(RAN) == ["lookup ada", "send_mail ada"]


async def test_approved_arguments_replace_what_the_tool_receives_but_not_the_history() -> None:
    model = ScriptedChatModel([_asks(), "ok"])
    await _ask_then_decide(model, {"c2": Approved(arguments='{"to": "ada.lovelace"}'), "c3": Denied()})
    assert sorted(RAN) == ["lookup ada", "send_mail ada.lovelace"]
    assert model.prompts[1].instructions[-2] == _asks()


@pytest.mark.parametrize("path", PATHS)
async def test_a_pending_call_without_a_decision_is_refused_before_anything_runs(path: str) -> None:
    model = ScriptedChatModel([_asks()])
    client = ChatClient(model)
    first = await client.prompt("q").tools(send_mail, lookup).acall().chat_client_response()
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    spec = client.prompt().messages(history).tools(send_mail, lookup).tool_approvals({"c2": Approved()})
    with pytest.raises(ChainConfigurationError, match=r"'c3' \('send_mail'\) needs approval"):
        await _run(client, path, spec)
    assert RAN == []
    assert len(model.prompts) == 1


@pytest.mark.parametrize("path", PATHS)
async def test_a_waiting_round_without_any_decisions_ends_again_with_approval_required(path: str) -> None:
    model = ScriptedChatModel([_asks()])
    client = ChatClient(model)
    first = await client.prompt("q").tools(send_mail, lookup).acall().chat_client_response()
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    again = await _run(client, path, client.prompt().messages(history).tools(send_mail, lookup))
    assert again.chat_response is not None and again.chat_response.finish_reason == "approvalRequired"
    assert again.context[AdvisorParams.PENDING_TOOL_CALLS] == _asks().tool_calls[1:]
    assert len(model.prompts) == 1 and RAN == []


async def test_decisions_for_a_conversation_with_nothing_waiting_are_refused() -> None:
    client = ChatClient(ScriptedChatModel(["hi"]))
    with pytest.raises(ChainConfigurationError, match="no round waits for approval"):
        await client.prompt("q").tool_approvals({"c1": Approved()}).acall().content()


def test_a_decision_must_be_approved_denied_or_a_bool() -> None:
    client = ChatClient(ScriptedChatModel([]))
    with pytest.raises(ChainConfigurationError, match="must be Approved"):
        client.prompt().tool_approvals({"c1": "yes"})


@pytest.mark.parametrize("path", PATHS)
async def test_an_inline_approver_is_asked_once_per_call_that_needs_it(path: str) -> None:
    asked: list[tuple[str, str | None]] = []

    async def approver(call: ToolCall, context: ToolContext) -> Approved | Denied | bool:
        asked.append((call.id, context.conversation_id))
        return True if call.id == "c2" else Denied("no")

    model = ScriptedChatModel([_asks(), "done"])
    manager = ToolCallingManager(approver=approver)
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(manager)])
    spec = client.prompt("q").tools(send_mail, lookup).param(ChatMemory.CONVERSATION_ID, "conv-1")
    response = await _run(client, path, spec)
    # a stream also carries round 1's preamble, streamed live
    expected = "done" if path == "call" else "On it.done"
    assert response.chat_response is not None and response.chat_response.text == expected
    assert asked == [("c2", "conv-1"), ("c3", "conv-1")]
    assert sorted(RAN) == ["lookup ada", "send_mail ada"]
    results = model.prompts[1].instructions[-1]
    assert isinstance(results, ToolResponseMessage)
    assert results.responses[2].response_data == "Error: the user denied this tool call: no"


def test_a_sync_approver_works_from_a_blocking_call() -> None:
    model = ScriptedChatModel([_asks(), "done"])
    manager = ToolCallingManager(approver=lambda call, context: Approved())
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(manager)])
    assert client.prompt("q").tools(send_mail, lookup).call().content() == "done"
    assert sorted(RAN) == ["lookup ada", "send_mail ada", "send_mail bob"]


def test_tool_metadata_says_whether_a_tool_needs_approval() -> None:
    assert send_mail.metadata.requires_approval is True
    assert lookup.metadata.requires_approval is False


MEMORY_ORDERS = {
    "memory outside the loop": MessageChatMemoryAdvisor.DEFAULT_ORDER,
    "memory inside the loop": ToolCallingAdvisor.DEFAULT_ORDER + 100,
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("order", MEMORY_ORDERS.values(), ids=MEMORY_ORDERS.keys())
async def test_with_memory_the_waiting_round_is_stored_and_resumed_by_conversation_id(
    order: int, path: str
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([_asks(), "Mailed ada."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory, order=order)])
    first = await _run(
        client,
        path,
        client.prompt("mail ada and bob").tools(send_mail, lookup).param(ChatMemory.CONVERSATION_ID, "c"),
    )
    assert first.chat_response is not None and first.chat_response.finish_reason == "approvalRequired"
    assert memory.get("c") == [UserMessage("mail ada and bob"), _asks()]

    spec = (
        client.prompt()
        .tools(send_mail, lookup)
        .param(ChatMemory.CONVERSATION_ID, "c")
        .tool_approvals({"c2": Approved(), "c3": Denied()})
    )
    second = await _run(client, path, spec)
    assert second.chat_response is not None and second.chat_response.text == "Mailed ada."
    stored = memory.get("c")
    assert stored[:2] == [UserMessage("mail ada and bob"), _asks()]
    assert isinstance(stored[2], ToolResponseMessage)
    assert [r.id for r in stored[2].responses] == ["c1", "c2", "c3"]
    assert stored[3] == AssistantMessage("Mailed ada.")
    assert len(stored) == 4
    assert sorted(RAN) == ["lookup ada", "send_mail ada"]
    # The model saw the whole conversation, the waiting round answered.
    assert [type(m).__name__ for m in model.prompts[1].instructions] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]


@pytest.mark.parametrize("path", PATHS)
async def test_a_resumed_history_keeps_one_system_message_and_gets_no_default_user_text(path: str) -> None:
    """The returned history, given to messages(...), reproduces the prompt (§10) even when the
    client has a default system text (the history holds it already) and a default user text (the
    decisions resume a round; they are not a new user turn)."""
    model = ScriptedChatModel([_asks(), "Mailed ada.", "Hi."])
    client = ChatClient(model, default_system="Be careful.", default_user="Hello")
    first = await client.prompt("mail ada and bob").tools(send_mail, lookup).acall().chat_client_response()
    history = first.context[AdvisorParams.CONVERSATION_HISTORY]
    spec = client.prompt().messages(history).tools(send_mail, lookup).tool_approvals({"c2": True, "c3": True})
    response = await _run(client, path, spec)
    assert response.chat_response is not None and response.chat_response.text == "Mailed ada."
    assert model.prompts[1].instructions[:-1] == tuple(history)
    assert [type(m).__name__ for m in model.prompts[1].instructions].count("SystemMessage") == 1
    # Without a system message in the messages, the default system text is still sent first.
    await client.prompt().messages([UserMessage("hi")]).acall().content()
    assert model.prompts[-1].instructions == (
        SystemMessage("Be careful."),
        UserMessage("hi"),
        UserMessage("Hello"),
    )


@pytest.mark.parametrize("path", PATHS)
async def test_with_memory_inside_the_loop_the_returned_history_holds_what_the_model_saw(path: str) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Hello Ada.", _asks()])
    memory_inside = MessageChatMemoryAdvisor(memory, order=ToolCallingAdvisor.DEFAULT_ORDER + 100)
    client = ChatClient(model, default_system="Be careful.", default_advisors=[memory_inside])
    await client.prompt("I am Ada.").acall().content()
    response = await _run(client, path, client.prompt("mail ada and bob").tools(send_mail, lookup))
    history = response.context[AdvisorParams.CONVERSATION_HISTORY]
    assert history[:-1] == model.prompts[-1].instructions  # the model's prompt, then the waiting message
    assert history == (
        SystemMessage("Be careful."),
        UserMessage("I am Ada."),
        AssistantMessage("Hello Ada."),
        UserMessage("mail ada and bob"),
        _asks(),
    )
    assert RAN == []
