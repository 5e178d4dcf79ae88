"""The tool loop's contract for a rewritten history (``AdvisorParams.HISTORY_REPLACEMENTS``): any
advisor inside the loop may hand the loop a new history; the loop continues from it, hands every
replacement on in its final response, and memory stores the rewrite in place of what it replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatMemory,
    HistoryReplacement,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Ordered,
    StreamAdvisorChain,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.advisors.api import CallAdvisorChain
from advisorchain.advisors.history import replace_history, replacements_in
from advisorchain.testing import ScriptedChatModel
from tests.compaction.compaction_support import answered, ask, lookup


class Redactor:
    """An advisor inside the loop that sends the model each tool response with 'secret' blacked out
    and tells the loop (and memory) so, through the response context."""

    name = "redactor"
    order = Ordered.HIGHEST_PRECEDENCE + 500

    def _rewrite(self, request: ChatClientRequest) -> tuple[ChatClientRequest, list[HistoryReplacement]]:
        made = []
        for m in request.prompt.instructions:
            if isinstance(m, ToolResponseMessage) and any("secret" in r.response_data for r in m.responses):
                clean = ToolResponseMessage(
                    [ToolResponse(r.id, r.name, r.response_data.replace("secret", "██")) for r in m.responses]
                )
                made.append(HistoryReplacement((m,), (clean,)))
        new = replace_history(request.prompt.instructions, made)
        return request.copy(prompt=request.prompt.copy(instructions=new)), made

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        request, made = self._rewrite(request)
        response = await chain.next_call(request)
        if not made:
            return response
        return response.copy(context={**response.context, AdvisorParams.HISTORY_REPLACEMENTS: tuple(made)})

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request, made = self._rewrite(request)
        extra = {AdvisorParams.HISTORY_REPLACEMENTS: tuple(made)} if made else {}
        async for chunk in chain.next_stream(request):
            yield chunk.copy(context={**chunk.context, **extra}) if extra else chunk


@pytest.fixture
def secret_tool() -> Any:
    from advisorchain import tool

    @tool
    def vault(key: str) -> str:
        """Open the vault."""
        return f"the secret of {key}"

    return vault


def _script() -> list[Any]:
    from advisorchain import ToolCall

    return [
        AssistantMessage(None, [ToolCall("v1", "vault", '{"key": "a"}')]),
        AssistantMessage(None, [ToolCall("v2", "vault", '{"key": "b"}')]),
        "done",
    ]


REDACTED_1 = ToolResponseMessage([ToolResponse("v1", "vault", "the ██ of a")])
REDACTED_2 = ToolResponseMessage([ToolResponse("v2", "vault", "the ██ of b")])


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
def test_the_loop_continues_from_the_history_an_inner_advisor_handed_it(
    secret_tool: Any, stream: bool
) -> None:
    model = ScriptedChatModel(_script())
    spec = ChatClient(model, default_advisors=[Redactor()], default_tools=[secret_tool]).prompt("open")

    if stream:
        chunks = list(spec.stream().chat_client_responses())
        context = chunks[-1].context
    else:
        context = spec.call().chat_client_response().context

    # round 3 builds on round 2's rewritten history: the first response is redacted once, not again
    assert model.prompts[2].instructions[2] == REDACTED_1
    assert model.prompts[2].instructions[4] == REDACTED_2
    replaced = context[AdvisorParams.HISTORY_REPLACEMENTS]
    assert [r.replacement for r in replaced] == [(REDACTED_1,), (REDACTED_2,)]


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("order", [MessageChatMemoryAdvisor.DEFAULT_ORDER, Ordered.HIGHEST_PRECEDENCE + 400])
def test_memory_stores_the_rewritten_history(secret_tool: Any, order: int, stream: bool) -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        ScriptedChatModel(_script()),
        default_advisors=[MessageChatMemoryAdvisor(memory, order=order), Redactor()],
        default_tools=[secret_tool],
    )
    spec = client.prompt("open").param(ChatMemory.CONVERSATION_ID, "c")

    if stream:
        list(spec.stream().content())
    else:
        spec.call().content()

    stored = memory.get("c")
    assert not any("secret" in str(m) for m in stored)
    if order == MessageChatMemoryAdvisor.DEFAULT_ORDER:  # outside the loop: only the exchange
        assert stored == [UserMessage("open"), AssistantMessage("done")]
    else:
        assert stored[2] == REDACTED_1 and stored[4] == REDACTED_2 and len(stored) == 6


def test_the_key_is_not_carried_into_the_next_round() -> None:
    seen: list[Any] = []

    class Probe:
        name, order = "probe", Ordered.HIGHEST_PRECEDENCE + 400

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            seen.append(request.context.get(AdvisorParams.HISTORY_REPLACEMENTS))
            response = await chain.next_call(request)
            if len(seen) == 1:
                made = (HistoryReplacement((request.prompt.instructions[0],), (UserMessage("rewritten"),)),)
                return response.copy(context={**response.context, AdvisorParams.HISTORY_REPLACEMENTS: made})
            return response

    model = ScriptedChatModel([ask("c1", "a"), "done"])
    ChatClient(model, default_advisors=[Probe()], default_tools=[lookup]).prompt("original").call().content()

    assert seen == [None, None]
    assert model.prompts[1].instructions == (UserMessage("rewritten"), ask("c1", "a"), answered("c1", "a"))


# -- replace_history -----------------------------------------------------------------------------


def test_a_replacement_stands_where_the_first_replaced_message_stood() -> None:
    a, b, c, d = (UserMessage(x) for x in "abcd")
    s = UserMessage("s")

    assert replace_history([a, b, c, d], [HistoryReplacement((b, d), (s,))]) == [a, s, c]


def test_messages_are_found_by_identity_first_then_by_equality() -> None:
    first, second = UserMessage("same"), UserMessage("same")
    s = UserMessage("s")

    assert replace_history([first, second], [HistoryReplacement((second,), (s,))])[0] is first
    assert replace_history([first, second], [HistoryReplacement((UserMessage("same"),), (s,))]) == [s, second]


def test_a_replacement_of_messages_the_history_lacks_changes_nothing() -> None:
    history = [UserMessage("a")]

    assert replace_history(history, [HistoryReplacement((UserMessage("z"),), (UserMessage("s"),))]) == history


def test_replacements_apply_in_turn() -> None:
    a, b, c = (UserMessage(x) for x in "abc")
    s1, s2 = UserMessage("s1"), UserMessage("s2")

    result = replace_history([a, b, c], [HistoryReplacement((a,), (s1,)), HistoryReplacement((s1, b), (s2,))])

    assert result == [s2, c]


def test_the_key_must_hold_history_replacements() -> None:
    with pytest.raises(TypeError, match="HistoryReplacement"):
        replacements_in({AdvisorParams.HISTORY_REPLACEMENTS: ["not one"]})
    assert replacements_in({}) == ()


def test_a_history_replacement_is_a_frozen_value_of_tuples() -> None:
    r = HistoryReplacement([UserMessage("a")], [UserMessage("s")])  # type: ignore[arg-type]

    assert r.replaced == (UserMessage("a"),) and r == HistoryReplacement(
        (UserMessage("a"),), (UserMessage("s"),)
    )
    with pytest.raises(AttributeError):
        r.replaced = ()  # type: ignore[misc]
