"""A user's own ToolCallingManager implements exactly two methods (API.md §5): the whole tool loop
works with it — call and stream, limits, return direct, history on and off, memory inside the
loop, inline and deferred approval — and the loop calls nothing else on it."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    Approved,
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatClientMessageAggregator,
    ChatClientResponse,
    ChatMemory,
    ChatOptions,
    ChatResponse,
    Denied,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolContext,
    ToolDefinition,
    ToolExecutionResult,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain.testing import ScriptedChatModel

RAN: list[str] = []


@tool
def weather(city: str, context: ToolContext) -> str:
    """The weather in a city."""
    RAN.append(f"weather {city} {context['tool_call_id']}")
    return f"sunny in {city}"


@tool(return_direct=True)
def final_report(topic: str) -> str:
    """A report that goes straight to the user."""
    RAN.append(f"report {topic}")
    return f"report on {topic}"


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money."""
    RAN.append(f"transfer {amount}")
    return f"moved {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


class AuditingManager:
    """The two documented methods and nothing else: audits, then delegates to the library's manager."""

    def __init__(self, inner: ToolCallingManager | None = None) -> None:
        self._inner = inner or ToolCallingManager()
        self.audit: list[list[tuple[str, str, str]]] = []

    def resolve_tool_definitions(self, options: ChatOptions | None) -> list[ToolDefinition]:
        return self._inner.resolve_tool_definitions(options)

    async def execute_tool_calls(self, prompt: Prompt, chat_response: ChatResponse) -> ToolExecutionResult:
        calls = [c for g in chat_response.generations for c in g.output.tool_calls]
        self.audit.append([(c.id, c.name, c.arguments) for c in calls])
        return await self._inner.execute_tool_calls(prompt, chat_response)


class Watched:
    """Wraps a manager and fails the test when the loop touches any attribute but the two methods."""

    ALLOWED = frozenset({"resolve_tool_definitions", "execute_tool_calls"})

    def __init__(self, manager: object) -> None:
        object.__setattr__(self, "_manager", manager)
        object.__setattr__(self, "touched", [])

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_manager", "touched"):
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "touched").append(name)
        if name not in Watched.ALLOWED:
            raise AssertionError(f"the tool loop used {name!r} of the manager")
        return getattr(object.__getattribute__(self, "_manager"), name)


async def _run(client: ChatClient, spec_of: Any, stream: bool) -> ChatClientResponse:
    """The request's response: on the stream path, its chunks aggregated."""
    spec = spec_of(client)
    if not stream:
        return await spec.acall().chat_client_response()
    chunks = [c async for c in spec.astream().chat_client_responses()]
    return ChatClientMessageAggregator.aggregate_responses(chunks)


def _calls(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(None, [ToolCall(i, n, a) for i, n, a in calls])


PATHS = ["call", "stream"]
HISTORY = [True, False]


def _client(model: ScriptedChatModel, manager: object, *, history: bool, memory_inside: bool) -> ChatClient:
    advisors: list[object] = [ToolCallingAdvisor(manager, conversation_history_enabled=history)]  # type: ignore[arg-type]
    if memory_inside:
        advisors.append(
            MessageChatMemoryAdvisor(MessageWindowChatMemory(), order=ToolCallingAdvisor.DEFAULT_ORDER + 100)
        )
    return ChatClient(model, default_advisors=advisors)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("history", HISTORY)
@pytest.mark.parametrize("memory_inside", [False, True])
async def test_a_protocol_only_manager_runs_rounds_until_the_answer(
    path: str, history: bool, memory_inside: bool
) -> None:
    model = ScriptedChatModel(
        [
            _calls(("c1", "weather", '{"city": "Oslo"}'), ("c2", "weather", '{"city": "Rome"}')),
            _calls(("c3", "weather", '{"city": "Paris"}')),
            "Sunny everywhere.",
        ]
    )
    manager = AuditingManager()
    watched = Watched(manager)
    client = _client(model, watched, history=history and not memory_inside, memory_inside=memory_inside)
    response = await _run(client, lambda c: c.prompt("Weather?").tools(weather), path == "stream")

    assert response.chat_response is not None and response.chat_response.text == "Sunny everywhere."
    assert manager.audit == [
        [("c1", "weather", '{"city": "Oslo"}'), ("c2", "weather", '{"city": "Rome"}')],
        [("c3", "weather", '{"city": "Paris"}')],
    ]
    assert sorted(RAN) == ["weather Oslo c1", "weather Paris c3", "weather Rome c2"]  # c1, c2 run at once
    assert set(watched.touched) == {"execute_tool_calls"}
    last_prompt = model.prompts[-1].instructions
    tool_messages = [m for m in last_prompt if isinstance(m, ToolResponseMessage)]
    assert [r.response_data for m in tool_messages for r in m.responses][-1] == "sunny in Paris"


@pytest.mark.parametrize("path", PATHS)
async def test_a_protocol_only_manager_keeps_the_limits_of_the_manager_it_wraps(path: str) -> None:
    model = ScriptedChatModel(
        [
            _calls(("c1", "weather", '{"city": "Oslo"}')),
            _calls(("c2", "weather", '{"city": "Rome"}')),
            "never reached",
        ]
    )
    manager = AuditingManager(ToolCallingManager(max_total_calls=1))
    client = _client(model, Watched(manager), history=True, memory_inside=False)
    response = await _run(client, lambda c: c.prompt("Weather?").tools(weather), path == "stream")

    assert response.chat_response is not None
    assert response.chat_response.finish_reason == "toolCallLimitExceeded"
    assert "max_total_calls=1" in (response.chat_response.text or "")
    assert RAN == ["weather Oslo c1"]
    assert len(model.prompts) == 2


@pytest.mark.parametrize("path", PATHS)
async def test_a_protocol_only_manager_returns_direct(path: str) -> None:
    model = ScriptedChatModel([_calls(("c1", "final_report", '{"topic": "sales"}'))])
    manager = AuditingManager()
    client = _client(model, Watched(manager), history=True, memory_inside=False)
    response = await _run(client, lambda c: c.prompt("Report").tools(final_report), path == "stream")

    assert response.chat_response is not None
    assert response.chat_response.finish_reason == ToolExecutionResult.FINISH_REASON == "returnDirect"
    assert response.chat_response.text == "report on sales"
    assert len(model.prompts) == 1


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("memory_inside", [False, True])
async def test_deferred_approval_with_a_protocol_only_manager(path: str, memory_inside: bool) -> None:
    asks = _calls(
        ("c1", "weather", '{"city": "Oslo"}'),
        ("c2", "transfer", '{"amount": 100}'),
        ("c3", "transfer", '{"amount": 999}'),
    )
    model = ScriptedChatModel([asks, "Done."])
    manager = AuditingManager()
    watched = Watched(manager)
    client = _client(model, watched, history=not memory_inside, memory_inside=memory_inside)
    conversation = "acct-1"

    def first(c: ChatClient) -> Any:
        return (
            c.prompt("Pay the bills").tools(weather, transfer).param(ChatMemory.CONVERSATION_ID, conversation)
        )

    waiting = await _run(client, first, path == "stream")
    assert waiting.chat_response is not None
    assert waiting.chat_response.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED
    assert [c.id for c in waiting.context[AdvisorParams.PENDING_TOOL_CALLS]] == ["c2", "c3"]
    assert manager.audit == [] and RAN == []

    history = waiting.context[AdvisorParams.CONVERSATION_HISTORY]
    decisions = {"c2": Approved(arguments='{"amount": 50}'), "c3": Denied("too much")}

    def resume(c: ChatClient) -> Any:
        spec = c.prompt().tools(weather, transfer).param(ChatMemory.CONVERSATION_ID, conversation)
        if not memory_inside:
            spec = spec.messages(history)
        return spec.tool_approvals(decisions)

    done = await _run(client, resume, path == "stream")
    assert done.chat_response is not None and done.chat_response.text == "Done."
    # Denied calls never reach the manager; the approved one reaches it with its new arguments.
    assert manager.audit == [[("c1", "weather", '{"city": "Oslo"}'), ("c2", "transfer", '{"amount": 50}')]]
    assert sorted(RAN) == ["transfer 50", "weather Oslo c1"]
    sent = model.prompts[-1].instructions
    assistant = next(m for m in sent if isinstance(m, AssistantMessage) and m.tool_calls)
    assert assistant == asks  # the model's message, unchanged
    responses = next(m for m in sent if isinstance(m, ToolResponseMessage)).responses
    assert [(r.id, r.response_data) for r in responses] == [
        ("c1", "sunny in Oslo"),
        ("c2", "moved 50"),
        ("c3", "Error: the user denied this tool call: too much"),
    ]
    assert set(watched.touched) == {"execute_tool_calls"}


class InlineManager(ToolCallingManager):
    """A subclass that overrides only execute_tool_calls (auditing, then the library's code)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.audit: list[list[str]] = []

    async def execute_tool_calls(self, prompt: Prompt, chat_response: ChatResponse) -> ToolExecutionResult:
        self.audit.append([c.arguments for g in chat_response.generations for c in g.output.tool_calls])
        return await super().execute_tool_calls(prompt, chat_response)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("history", HISTORY)
async def test_inline_approval_with_a_subclassed_manager(path: str, history: bool) -> None:
    asked: list[str] = []

    def approver(call: ToolCall, context: ToolContext) -> object:
        asked.append(f"{call.id} {context.tool_call_id}")
        return Approved('{"amount": 5}') if call.id == "c1" else False

    model = ScriptedChatModel(
        [_calls(("c1", "transfer", '{"amount": 500}'), ("c2", "transfer", '{"amount": 7}')), "Paid 5."]
    )
    manager = InlineManager(approver=approver)
    client = _client(model, manager, history=history, memory_inside=False)
    response = await _run(client, lambda c: c.prompt("Pay").tools(transfer), path == "stream")

    assert response.chat_response is not None and response.chat_response.text == "Paid 5."
    assert asked == ["c1 c1", "c2 c2"]
    assert manager.audit == [['{"amount": 5}']]
    assert RAN == ["transfer 5"]
    responses = next(
        m for m in model.prompts[-1].instructions if isinstance(m, ToolResponseMessage)
    ).responses
    assert [r.response_data for r in responses] == ["moved 5", "Error: the user denied this tool call"]


async def test_a_manager_without_an_approver_defers_even_when_it_could_run_the_tool() -> None:
    model = ScriptedChatModel([_calls(("c1", "transfer", '{"amount": 1}'))])
    client = _client(model, AuditingManager(), history=True, memory_inside=False)
    response = await client.prompt("Pay").tools(transfer).acall().chat_client_response()
    assert response.chat_response is not None
    assert response.chat_response.finish_reason == "approvalRequired"
    assert RAN == []


async def test_an_eligibility_checker_that_forces_execution_still_calls_the_manager() -> None:
    """Spring's behaviour: the checker decides; a response without tool calls reaches the manager,
    and what it returns drives the loop."""
    calls: list[ChatResponse] = []

    class Scripted:
        def resolve_tool_definitions(self, options: ChatOptions | None) -> list[ToolDefinition]:
            return []

        async def execute_tool_calls(
            self, prompt: Prompt, chat_response: ChatResponse
        ) -> ToolExecutionResult:
            calls.append(chat_response)
            history = (*prompt.instructions, AssistantMessage(""), ToolResponseMessage([]))
            return ToolExecutionResult(history, return_direct=False)

    rounds = iter([True, False])
    model = ScriptedChatModel(["response", "final"])
    advisor = ToolCallingAdvisor(Scripted(), tool_execution_eligibility_checker=lambda r: next(rounds))
    result = await ChatClient(model, default_advisors=[advisor]).prompt("test").acall().content()

    assert result == "final"
    assert [c.text for c in calls] == ["response"]
    assert model.prompts[1].instructions[-2:] == (AssistantMessage(""), ToolResponseMessage([]))


async def test_a_manager_returning_return_direct_ends_the_loop_with_its_tool_responses() -> None:
    class Direct:
        def resolve_tool_definitions(self, options: ChatOptions | None) -> list[ToolDefinition]:
            return []

        async def execute_tool_calls(
            self, prompt: Prompt, chat_response: ChatResponse
        ) -> ToolExecutionResult:
            responses = ToolResponseMessage([ToolResponse("tool-1", "testTool", "Tool result data")])
            return ToolExecutionResult(
                (UserMessage("test"), AssistantMessage(""), responses), return_direct=True
            )

    model = ScriptedChatModel([_calls(("tool-1", "testTool", "{}"))])
    advisor = ToolCallingAdvisor(Direct())
    response = await ChatClient(model, default_advisors=[advisor]).prompt("test").acall().chat_response()
    assert len(response.generations) == 1
    assert response.generations[0].output.text == "Tool result data"
    assert response.generations[0].finish_reason == ToolExecutionResult.FINISH_REASON


def test_a_manager_without_execute_tool_calls_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="execute_tool_calls"):
        ToolCallingAdvisor(object())  # type: ignore[arg-type]


async def test_a_decided_round_whose_manager_breaks_the_contract_is_a_clear_error() -> None:
    class Lossy(AuditingManager):
        async def execute_tool_calls(
            self, prompt: Prompt, chat_response: ChatResponse
        ) -> ToolExecutionResult:
            result = await super().execute_tool_calls(prompt, chat_response)
            return ToolExecutionResult(result.conversation_history[:-1])

    model = ScriptedChatModel([_calls(("c1", "transfer", '{"amount": 1}'), ("c2", "transfer", "{}"))])
    client = _client(model, Lossy(), history=True, memory_inside=False)
    waiting = await client.prompt("Pay").tools(transfer).acall().chat_client_response()
    history = waiting.context[AdvisorParams.CONVERSATION_HISTORY]
    with pytest.raises(ChainConfigurationError, match="one ToolResponseMessage holding a response per call"):
        await (
            client.prompt()
            .messages(history)
            .tools(transfer)
            .tool_approvals({"c1": True, "c2": False})
            .acall()
            .content()
        )
