"""ToolCallingAdvisor on the call path: rounds, messages sent, return direct, limits, hooks, context."""

from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    MaxIterationsExceeded,
    Message,
    Ordered,
    SystemMessage,
    ToolAdvisor,
    ToolExecutionError,
    ToolResponse,
    ToolResponseMessage,
    Usage,
)
from advisorchain.advisors.api import CallAdvisorChain, StreamAdvisorChain
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import ScriptedChatModel
from advisorchain.tools.function import tool
from advisorchain.tools.manager import ToolCallingManager, ToolExecutionResult
from tests.tools.toolloop_helpers import (
    INSIDE,
    OUTSIDE,
    TIME,
    WEATHER,
    Observer,
    asks,
    call_chain,
    get_time,
    get_weather,
    lookup,
    lookup_more,
    request_of,
    with_usage,
)


async def loop(
    model: ScriptedChatModel, advisor: ToolCallingAdvisor, *others: Any, request: Any = None
) -> Any:
    chain = call_chain(model, advisor, *others)
    return await chain.next_call(request or request_of(get_weather, get_time))


# -- the advisor itself --------------------------------------------------------------------------------


def test_the_advisor_is_a_tool_advisor_named_and_ordered_as_in_spring() -> None:
    advisor = ToolCallingAdvisor()
    assert isinstance(advisor, ToolAdvisor)
    assert advisor.name == "Tool Calling Advisor"
    assert advisor.order == ToolCallingAdvisor.DEFAULT_ORDER == Ordered.HIGHEST_PRECEDENCE + 300


@pytest.mark.parametrize(
    "order", [Ordered.HIGHEST_PRECEDENCE, Ordered.LOWEST_PRECEDENCE, Ordered.LOWEST_PRECEDENCE + 1]
)
def test_an_order_outside_the_open_interval_is_rejected(order: int) -> None:
    with pytest.raises(ValueError, match=f"order {order} must lie strictly between"):
        ToolCallingAdvisor(order=order)


def test_max_iterations_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_iterations must be an int >= 1 or None, got 0"):
        ToolCallingAdvisor(max_iterations=0)


# -- rounds and messages -------------------------------------------------------------------------------


def test_the_loop_calls_the_model_until_no_tool_is_requested() -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(TIME), "Sunny, noon."])
    answer = ChatClient(model).prompt("weather?").tools(get_weather, get_time).call().content()
    assert answer == "Sunny, noon."
    assert len(model.prompts) == 3


async def test_without_history_and_without_system_message_only_the_tool_responses_are_sent() -> None:
    model = ScriptedChatModel([asks(WEATHER), "done"])
    await loop(model, ToolCallingAdvisor(conversation_history_enabled=False))
    assert list(model.prompts[1].instructions) == [
        ToolResponseMessage([ToolResponse("w1", "get_weather", "sunny in Oslo")])
    ]


async def test_without_history_the_manager_still_counts_the_whole_turn() -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(("w2", "get_weather", '{"city": "Rome"}'))])
    advisor = ToolCallingAdvisor(ToolCallingManager(max_calls_per_tool=1), conversation_history_enabled=False)
    response = await loop(model, advisor)
    assert response.chat_response.finish_reason == "toolCallLimitExceeded"


async def test_advisors_inside_the_loop_run_every_round_and_outside_ones_once() -> None:
    inside, outside = Observer(INSIDE, "inside"), Observer(OUTSIDE, "outside")
    model = ScriptedChatModel([asks(WEATHER), asks(TIME), "done"])
    await loop(model, ToolCallingAdvisor(), inside, outside)
    assert (len(inside.requests), len(outside.requests)) == (3, 1)
    assert [r.chat_response.has_tool_calls() for r in inside.responses] == [True, True, False]


async def test_the_caller_gets_the_last_response_with_usage_summed_over_rounds() -> None:
    model = ScriptedChatModel(
        [
            with_usage(asks(WEATHER), 10, 1),
            with_usage(asks(TIME), 20, 2),
            with_usage(AssistantMessage("done"), 30, 3),
        ]
    )
    response = await loop(model, ToolCallingAdvisor())
    assert response.chat_response.text == "done"
    assert response.chat_response.metadata.usage == Usage(60, 6)


# -- return direct -------------------------------------------------------------------------------------


async def test_return_direct_ends_the_loop_with_the_tool_outputs() -> None:
    model = ScriptedChatModel([asks(("1", "lookup", '{"key": "a"}'), ("2", "lookup_more", '{"key": "b"}'))])
    response = await loop(model, ToolCallingAdvisor(), request=request_of(lookup, lookup_more))
    chat = response.chat_response
    assert [g.output.text for g in chat.generations] == ["value of a", "more of b"]
    assert chat.finish_reason == ToolExecutionResult.FINISH_REASON == "returnDirect"
    assert len(model.prompts) == 1


async def test_mixed_return_direct_goes_back_to_the_model() -> None:
    model = ScriptedChatModel([asks(("1", "lookup", '{"key": "a"}'), WEATHER), "both done"])
    response = await loop(model, ToolCallingAdvisor(), request=request_of(lookup, get_weather))
    assert response.chat_response.text == "both done"
    assert len(model.prompts) == 2


async def test_return_direct_carries_the_summed_usage() -> None:
    model = ScriptedChatModel([with_usage(asks(("1", "lookup", '{"key": "a"}')), 7, 3)])
    response = await loop(model, ToolCallingAdvisor(), request=request_of(lookup))
    assert response.chat_response.metadata.usage == Usage(7, 3)


# -- limits and guards ---------------------------------------------------------------------------------


async def test_a_per_tool_limit_ends_the_loop_with_a_response_naming_the_limit() -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(("w2", "get_weather", '{"city": "Rome"}'))])
    response = await loop(model, ToolCallingAdvisor(ToolCallingManager(max_calls_per_tool=1)))
    chat = response.chat_response
    assert len(chat.generations) == 1
    assert chat.finish_reason == "toolCallLimitExceeded"
    assert "max_calls_per_tool=1 calls of 'get_weather'" in chat.text
    assert len(model.prompts) == 2


async def test_the_total_limit_ends_the_loop_with_a_response_naming_it() -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(TIME)])
    response = await loop(model, ToolCallingAdvisor(ToolCallingManager(max_total_calls=1)))
    assert response.chat_response.finish_reason == "toolCallLimitExceeded"
    assert "more than max_total_calls=1 tool calls in this turn" in response.chat_response.text


async def test_max_iterations_raises_before_executing_the_last_tools() -> None:
    executed: list[str] = []

    @tool
    def record(step: str) -> str:
        executed.append(step)
        return step

    model = ScriptedChatModel(
        [asks(("1", "record", '{"step": "a"}')), asks(("2", "record", '{"step": "b"}')), "x"]
    )
    with pytest.raises(MaxIterationsExceeded, match=r"max_iterations=2.*\['record'\]") as info:
        await loop(model, ToolCallingAdvisor(max_iterations=2), request=request_of(record))
    assert info.value.max_iterations == 2
    assert executed == ["a"]
    assert len(model.prompts) == 2


async def test_max_iterations_allows_a_final_answer_on_the_last_iteration() -> None:
    model = ScriptedChatModel([asks(WEATHER), "done"])
    response = await loop(model, ToolCallingAdvisor(max_iterations=2))
    assert response.chat_response.text == "done"


async def test_a_manager_with_raise_on_error_propagates_the_tool_error() -> None:
    model = ScriptedChatModel([asks(("1", "nope", "{}"))])
    with pytest.raises(ToolExecutionError, match="no tool named 'nope'"):
        await loop(model, ToolCallingAdvisor(ToolCallingManager(raise_on_error=True)))


async def test_a_bad_tool_call_is_reported_to_the_model_which_can_correct_itself() -> None:
    model = ScriptedChatModel([asks(("1", "get_weather", '{"town": "Oslo"}')), asks(WEATHER), "sunny"])
    response = await loop(model, ToolCallingAdvisor())
    assert response.chat_response.text == "sunny"
    error = model.prompts[1].instructions[-1]
    assert isinstance(error, ToolResponseMessage)
    assert error.responses[0].response_data.startswith(
        "Error: invalid arguments for tool 'get_weather': city"
    )


# -- eligibility ---------------------------------------------------------------------------------------


async def test_a_checker_that_says_no_returns_the_tool_calls_unexecuted() -> None:
    model = ScriptedChatModel([asks(WEATHER)])
    response = await loop(model, ToolCallingAdvisor(tool_execution_eligibility_checker=lambda r: False))
    assert response.chat_response.result.output.tool_calls[0].name == "get_weather"
    assert len(model.prompts) == 1


async def test_a_checker_can_demand_the_tool_calls_finish_reason() -> None:
    def strict(response: ChatResponse | None) -> bool:
        return response is not None and response.has_tool_calls() and response.finish_reason == "tool_calls"

    model = ScriptedChatModel([ChatResponse.of(asks(WEATHER), "stop"), "unused"])
    response = await loop(model, ToolCallingAdvisor(tool_execution_eligibility_checker=strict))
    assert response.chat_response.finish_reason == "stop"
    assert len(model.prompts) == 1


async def test_a_checker_forcing_execution_of_a_response_without_tool_calls_fails_clearly() -> None:
    model = ScriptedChatModel(["plain text"])
    with pytest.raises(ValueError, match="the response has no tool calls to execute"):
        await loop(model, ToolCallingAdvisor(tool_execution_eligibility_checker=lambda r: True))


async def test_the_checker_sees_each_round_response() -> None:
    seen: list[str | None] = []

    def record(response: ChatResponse | None) -> bool:
        seen.append(response.finish_reason if response else None)
        return response is not None and response.has_tool_calls()

    await loop(
        ScriptedChatModel([asks(WEATHER), "done"]),
        ToolCallingAdvisor(tool_execution_eligibility_checker=record),
    )
    assert seen == ["tool_calls", "stop"]


# -- hooks and context ---------------------------------------------------------------------------------


async def test_do_before_call_changes_what_the_rest_of_the_chain_receives() -> None:
    class Tagging(ToolCallingAdvisor):
        async def do_before_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
        ) -> ChatClientRequest:
            return request.copy(context={**request.context, "round": request.context.get("round", 0) + 1})

    inside = Observer()
    await loop(ScriptedChatModel([asks(WEATHER), "done"]), Tagging(), inside)
    assert [r.context["round"] for r in inside.requests] == [1, 2]


async def test_do_after_call_can_end_the_loop_by_dropping_the_tool_calls() -> None:
    class Stopping(ToolCallingAdvisor):
        async def do_after_call(
            self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
        ) -> ChatClientResponse:
            return response.copy(chat_response=ChatResponse.of(AssistantMessage("stopped"), "stop"))

    model = ScriptedChatModel([asks(WEATHER)])
    response = await loop(model, Stopping())
    assert response.chat_response.text == "stopped"


async def test_messages_a_hook_adds_are_kept_in_later_rounds() -> None:
    class Reminding(ToolCallingAdvisor):
        async def do_get_next_instructions_for_tool_call(
            self,
            request: ChatClientRequest,
            response: ChatClientResponse,
            tool_execution_result: ToolExecutionResult,
        ) -> list[Message]:
            messages = list(tool_execution_result.conversation_history)
            if SystemMessage("reminder") not in messages:
                messages.append(SystemMessage("reminder"))
            return messages

    model = ScriptedChatModel([asks(WEATHER), asks(TIME), "done"])
    await loop(model, Reminding())
    assert model.prompts[1].instructions[-1] == SystemMessage("reminder")
    assert list(model.prompts[2].instructions).count(SystemMessage("reminder")) == 1
    assert model.prompts[2].instructions[3] == SystemMessage("reminder")


async def test_context_written_inside_the_loop_survives_into_later_rounds_and_the_response() -> None:
    class Counter(BaseAdvisor):
        order = INSIDE

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            response = await chain.next_call(request)
            count = request.context.get("rounds", 0) + 1
            return response.copy(context={**response.context, "rounds": count})

    seen = Observer(INSIDE + 1)
    response = await loop(
        ScriptedChatModel([asks(WEATHER), asks(TIME), "done"]), ToolCallingAdvisor(), Counter(), seen
    )
    assert [r.context.get("rounds") for r in seen.requests] == [None, 1, 2]
    assert response.context["rounds"] == 3


async def test_context_of_the_request_reaches_every_round() -> None:
    inside = Observer()
    request = request_of(get_weather).copy(context={"user": "ada"})
    await loop(ScriptedChatModel([asks(WEATHER), "done"]), ToolCallingAdvisor(), inside, request=request)
    assert [r.context["user"] for r in inside.requests] == ["ada", "ada"]
