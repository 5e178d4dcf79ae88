"""UsageLimits on a scripted model, on the call and the stream path: checked before each model
call (with the prompt estimate), after each response and before a round's tool calls; the output
budget lowers max_tokens; UsageLimitExceeded carries the numbers; on_exceeded="finish" ends the run."""

from __future__ import annotations

from decimal import Decimal

import pytest

from advisorchain import (
    Approved,
    ChatClient,
    ChatOptions,
    Denied,
    FinishReason,
    Prompt,
    RunUsage,
    SafeGuardAdvisor,
    ScriptedChatModel,
    ToolCallingManager,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    tool,
)
from tests.usage.usage_support import PATHS, PRICES, Path, asks, ran, run, says, weather

pytestmark = pytest.mark.parametrize("path", PATHS)


def _client(model: ScriptedChatModel, limits: UsageLimits | None, **kwargs: object) -> ChatClient:
    return ChatClient(model, default_tools=[weather], usage_limits=limits, **kwargs)  # type: ignore[arg-type]


# -- requests --------------------------------------------------------------------------------------


async def test_the_request_limit_refuses_the_call_before_it_is_sent(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), asks("Rome"), says("Done.")])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(request_limit=2)).prompt("Weather?"), path)
    error = caught.value
    assert len(model.prompts) == 2  # the third call was never sent
    assert (error.limit_name, error.limit, error.when) == ("request_limit", 2, "before_request")
    assert error.run_usage == RunUsage(2, 2, Usage(200, 20, cost=None))
    assert error.partial_response is not None and error.partial_response.has_tool_calls()
    assert "request_limit=2" in str(error) and "2 requests, 2 tool calls" in str(error)
    assert ran == ["Oslo", "Rome"]  # a round whose tools ran is not undone: the next call is refused


async def test_a_run_within_its_limits_answers_with_its_totals(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), says("Sunny.")])
    outcome = await run(_client(model, UsageLimits(request_limit=2, tool_calls_limit=1)).prompt("W?"), path)
    assert outcome.text == "Sunny."
    assert outcome.run_usage == RunUsage(2, 1, Usage(200, 20))
    assert outcome.usage == Usage(200, 20)


async def test_failed_calls_count_as_requests(path: Path) -> None:
    from advisorchain import ModelError, RequestRetryAdvisor

    model = ScriptedChatModel([ModelError("busy", status_code=503), says("Hi.")])
    retry = RequestRetryAdvisor(lambda request, error, attempt: request)
    client = _client(model, UsageLimits(request_limit=1)).mutate(default_advisors=[retry])
    with pytest.raises(UsageLimitExceeded, match="request_limit=1"):
        await run(client.prompt("hi"), path)
    outcome = await run(
        _client(ScriptedChatModel([ModelError("busy", status_code=503), says("Hi.")]), None)
        .mutate(default_advisors=[RequestRetryAdvisor(lambda request, error, attempt: request)])
        .prompt("hi"),
        path,
    )
    assert outcome.run_usage.requests == 2 and outcome.text == "Hi."


# -- tokens ----------------------------------------------------------------------------------------


async def test_a_total_equal_to_its_limit_stops_the_next_call(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo", usage=Usage(90, 10)), says("x")])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(total_tokens_limit=100)).prompt("W?"), path)
    assert (caught.value.limit_name, caught.value.when) == ("total_tokens_limit", "before_request")
    assert len(model.prompts) == 1 and ran == ["Oslo"]


async def test_a_total_over_its_limit_raises_after_the_response(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo", usage=Usage(90, 30)), says("x")])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(output_tokens_limit=20)).prompt("W?"), path)
    error = caught.value
    assert (error.limit_name, error.limit, error.when) == ("output_tokens_limit", 20, "after_response")
    assert error.run_usage.usage.completion_tokens == 30 and ran == []  # its tool calls never ran


async def test_the_first_prompt_is_estimated_at_four_characters_a_token(path: Path) -> None:
    model = ScriptedChatModel([says("x")])
    question = "q" * 400  # 100 tokens
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(input_tokens_limit=99)).prompt(question), path)
    assert (caught.value.limit_name, caught.value.when) == ("input_tokens_limit", "before_request")
    assert model.prompts == []
    outcome = await run(
        _client(
            ScriptedChatModel([says("x", usage=Usage(100, 1))]), UsageLimits(input_tokens_limit=100)
        ).prompt(question),
        path,
    )
    assert outcome.text == "x"


async def test_a_later_prompt_is_the_reported_prompt_plus_what_was_added(path: Path) -> None:
    # Round 1 reported 50 prompt tokens; round 2 adds the tool call (weather + {"city": "Oslo"}: 23
    # characters) and its result (weather + Oslo: sunny: 18), 41 characters, 11 tokens: the next
    # prompt is about 61 tokens, and 50 + 61 = 111 passes 110, so round 2 is not sent.
    model = ScriptedChatModel([asks("Oslo", usage=Usage(50, 0)), says("x", usage=Usage(61, 1))])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(input_tokens_limit=110)).prompt("What is the weather?"), path)
    assert caught.value.when == "before_request" and "about 61 tokens" in str(caught.value)
    assert len(model.prompts) == 1
    ok = ScriptedChatModel([asks("Oslo", usage=Usage(50, 0)), says("x", usage=Usage(61, 1))])
    outcome = await run(_client(ok, UsageLimits(input_tokens_limit=111)).prompt("What is the weather?"), path)
    assert outcome.text == "x" and outcome.run_usage.usage.prompt_tokens == 111


async def test_a_response_without_usage_cannot_pass_a_token_limit_silently(path: Path) -> None:
    model = ScriptedChatModel([says("x", usage=None)])
    with pytest.raises(UsageLimitExceeded, match="reported no token usage") as caught:
        await run(_client(model, UsageLimits(total_tokens_limit=1000)).prompt("hi"), path)
    assert (caught.value.limit_name, caught.value.when) == ("total_tokens_limit", "after_response")


# -- the output budget -----------------------------------------------------------------------------


async def test_max_tokens_is_lowered_to_what_is_left_of_the_output_limit(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo", usage=Usage(10, 30)), says("ok", usage=Usage(20, 5))])
    client = _client(model, UsageLimits(output_tokens_limit=100))
    outcome = await run(client.prompt("W?").options(ChatOptions(max_tokens=500)), path)
    assert [p.options.max_tokens for p in model.prompts if p.options] == [100, 70]
    assert outcome.text == "ok"


async def test_the_callers_smaller_max_tokens_is_kept(path: Path) -> None:
    model = ScriptedChatModel([says("ok", usage=Usage(1, 1))])
    await run(
        _client(model, UsageLimits(output_tokens_limit=100)).prompt("W?").options(ChatOptions(max_tokens=7)),
        path,
    )
    assert model.prompts[0].options is not None and model.prompts[0].options.max_tokens == 7


async def test_the_total_limit_leaves_the_output_what_the_prompt_estimate_does_not_take(path: Path) -> None:
    model = ScriptedChatModel([says("ok", usage=Usage(25, 10))])
    await run(_client(model, UsageLimits(total_tokens_limit=50)).prompt("q" * 100), path)  # ~25 tokens
    assert model.prompts[0].options is not None and model.prompts[0].options.max_tokens == 25


async def test_an_answer_cut_short_by_the_lowering_is_never_a_success(path: Path) -> None:
    model = ScriptedChatModel([says("It is sunny and", usage=Usage(10, 40), finish="length")])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(output_tokens_limit=40)).prompt("W?"), path)
    assert (caught.value.limit_name, caught.value.when) == ("output_tokens_limit", "after_response")
    assert caught.value.partial_response is not None


async def test_a_length_finish_under_the_callers_own_max_tokens_is_returned(path: Path) -> None:
    model = ScriptedChatModel([says("It is", usage=Usage(10, 5), finish="length")])
    client = _client(model, UsageLimits(output_tokens_limit=40))
    outcome = await run(client.prompt("W?").options(ChatOptions(max_tokens=5)), path)
    assert outcome.text == "It is" and outcome.finish_reason == "length"


async def test_no_call_is_sent_when_no_output_token_is_left(path: Path) -> None:
    model = ScriptedChatModel([says("x")])
    with pytest.raises(UsageLimitExceeded, match="leaves no output token") as caught:
        await run(_client(model, UsageLimits(total_tokens_limit=25)).prompt("q" * 100), path)
    assert (caught.value.limit_name, caught.value.when) == ("total_tokens_limit", "before_request")
    assert model.prompts == []


# -- tool calls ------------------------------------------------------------------------------------


async def test_a_round_that_would_pass_the_tool_call_limit_runs_none_of_its_calls(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", "Paris", round_id="b"), says("x")])
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(_client(model, UsageLimits(tool_calls_limit=2)).prompt("W?"), path)
    error = caught.value
    assert (error.limit_name, error.limit, error.when) == ("tool_calls_limit", 2, "before_tool_calls")
    assert ran == ["Oslo"] and error.run_usage.tool_calls == 1


async def test_denied_calls_do_not_count(path: Path) -> None:
    from advisorchain import ToolCallingAdvisor

    model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("x")])

    def approver(call: object, context: object) -> object:
        return Denied("no") if getattr(call, "id", None) == "b-0" else Approved()

    client = ChatClient(
        model,
        default_tools=[_gated_weather],
        default_advisors=[ToolCallingAdvisor(ToolCallingManager(approver=approver))],
        usage_limits=UsageLimits(tool_calls_limit=1),
    )
    outcome = await run(client.prompt("W?"), path)
    assert outcome.text == "x" and outcome.run_usage.tool_calls == 1 and ran == ["Oslo"]


@tool(name="weather", requires_approval=True)
def _gated_weather(city: str) -> str:
    """The weather in a city (needs approval)."""
    ran.append(city)
    return f"{city}: sunny"


# -- cost ------------------------------------------------------------------------------------------


async def test_a_cost_limit_on_an_unpriced_model_is_an_error(path: Path) -> None:
    model = ScriptedChatModel([says("x")])
    with pytest.raises(UsageLimitExceeded, match="'scripted' has no price") as caught:
        await run(_client(model, UsageLimits(cost_limit=1)).prompt("hi"), path)
    assert (caught.value.limit_name, caught.value.when) == ("cost_limit", "after_response")


async def test_an_unpriced_model_goes_on_when_the_user_says_so(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), says("x")])
    outcome = await run(_client(model, UsageLimits(cost_limit=1, on_unpriced="ignore")).prompt("hi"), path)
    assert outcome.text == "x" and outcome.run_usage.usage.cost is None


async def test_the_cost_limit_stops_the_run_once_reached(path: Path) -> None:
    # Each round costs 100 * $2 + 10 * $10 per million = $0.0003.
    model = ScriptedChatModel([asks("A"), asks("B", round_id="b"), asks("C", round_id="c"), says("x")])
    client = _client(model, UsageLimits(cost_limit=Decimal("0.0006")), prices=PRICES)
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(client.prompt("W?"), path)
    assert (caught.value.limit_name, caught.value.when) == ("cost_limit", "before_request")
    assert caught.value.run_usage.usage.cost == Decimal("0.0006") and len(model.prompts) == 2


async def test_the_cost_estimate_uses_the_previous_responses_price(path: Path) -> None:
    # $0.0003 spent; the next prompt (~100 + a few tokens at $2/M, about $0.0002) would pass $0.00045.
    model = ScriptedChatModel([asks("Oslo"), says("x")])
    client = _client(model, UsageLimits(cost_limit=Decimal("0.00045")), prices=PRICES)
    with pytest.raises(UsageLimitExceeded, match="next prompt") as caught:
        await run(client.prompt("W?"), path)
    assert caught.value.when == "before_request" and len(model.prompts) == 1


async def test_a_prices_function_is_never_called_for_an_estimate(path: Path) -> None:
    seen: list[Usage] = []

    def price(model: str, provider: str | None, usage: Usage) -> Decimal:
        seen.append(usage)
        return Decimal("0.001")

    model = ScriptedChatModel([asks("Oslo"), says("x")])
    client = _client(model, UsageLimits(cost_limit=1), prices=price)
    outcome = await run(client.prompt("W?"), path)
    assert seen == [Usage(100, 10), Usage(100, 10)]  # the two responses, nothing else
    assert outcome.run_usage.usage.cost == Decimal("0.002")


# -- finishing instead of raising ------------------------------------------------------------------


async def test_on_exceeded_finish_ends_the_run_with_an_answer_saying_which_limit(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("never")])
    client = _client(model, UsageLimits(request_limit=2, on_exceeded="finish"), prices=PRICES)
    outcome = await run(client.prompt("W?"), path)
    assert outcome.finish_reason == FinishReason.USAGE_LIMIT_EXCEEDED == "usageLimitExceeded"
    assert outcome.text is not None and "request_limit=2" in outcome.text
    assert outcome.usage == Usage(200, 20, cost=Decimal("0.0006"))
    assert outcome.run_usage == RunUsage(2, 2, Usage(200, 20, cost=Decimal("0.0006")))


async def test_on_exceeded_finish_without_a_tool_loop(path: Path) -> None:
    model = ScriptedChatModel([says("Long answer", usage=Usage(10, 50))])
    client = ChatClient(
        model,
        tool_calling_auto_register=False,
        usage_limits=UsageLimits(output_tokens_limit=20, on_exceeded="finish"),
    )
    outcome = await run(client.prompt("hi"), path)
    assert outcome.finish_reason == "usageLimitExceeded" and "output_tokens_limit=20" in (outcome.text or "")
    if path == "stream":  # the answer's text had reached the caller already; the ending follows it
        texts = [c.chat_response.text for c in outcome.chunks if c.chat_response and c.chat_response.text]
        assert texts[:2] == ["Long", " answer"] and "output_tokens_limit" in texts[-1]
        assert texts[-1].startswith("\n\nI stopped: the usage limit output_tokens_limit=20 was passed")
    else:
        assert (outcome.text or "").startswith("I stopped: the usage limit output_tokens_limit=20 was passed")


async def test_on_exceeded_finish_says_why_a_cost_limit_could_not_be_enforced(path: Path) -> None:
    model = ScriptedChatModel([says("Hello", usage=Usage(10, 5))])
    client = ChatClient(
        model,
        tool_calling_auto_register=False,
        usage_limits=UsageLimits(cost_limit=Decimal(1), on_exceeded="finish"),
    )
    outcome = await run(client.prompt("hi"), path)
    assert outcome.finish_reason == "usageLimitExceeded"
    texts = [c.chat_response.text for c in outcome.chunks if c.chat_response and c.chat_response.text]
    ending = texts[-1] if path == "stream" else outcome.text or ""
    assert "the usage limit cost_limit=1 cannot be enforced: model" in ending
    assert "was reached" not in ending


async def test_on_exceeded_finish_before_tool_calls(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo", "Rome")])
    outcome = await run(
        _client(model, UsageLimits(tool_calls_limit=1, on_exceeded="finish")).prompt("W?"), path
    )
    assert outcome.finish_reason == "usageLimitExceeded" and "tool_calls_limit=1" in (outcome.text or "")
    assert ran == []


# -- the totals on every response ------------------------------------------------------------------


async def test_every_response_holds_the_run_usage(path: Path) -> None:
    model = ScriptedChatModel([asks("Oslo"), says("Sunny.")])
    outcome = await run(ChatClient(model, default_tools=[weather], prices=PRICES).prompt("W?"), path)
    assert outcome.run_usage == RunUsage(2, 1, Usage(200, 20, cost=Decimal("0.0006")))
    assert outcome.usage == Usage(200, 20, cost=Decimal("0.0006"))
    if path == "stream":
        chat = outcome.chunks[-1].chat_response
        assert chat is not None and chat.finish_reason == "stop"  # on the last chunk, no extra chunk
        assert all(c.chat_response is not None for c in outcome.chunks)


async def test_a_run_that_made_no_call_cost_nothing(path: Path) -> None:
    client = ChatClient(ScriptedChatModel([]), default_advisors=[SafeGuardAdvisor(["secret"])])
    outcome = await run(client.prompt("the secret"), path)
    assert outcome.run_usage == RunUsage(0, 0, Usage(0, 0, cost=Decimal(0)))


async def test_a_request_replaces_or_lifts_the_clients_limits(path: Path) -> None:
    client = _client(ScriptedChatModel([asks("Oslo"), says("x")] * 2), UsageLimits(request_limit=1))
    assert (await run(client.prompt("W?").usage_limits(None), path)).text == "x"
    with pytest.raises(UsageLimitExceeded, match="request_limit=1"):
        await run(client.prompt("W?"), path)
    lifted = _client(ScriptedChatModel([asks("Oslo"), says("x")]), None)
    with pytest.raises(UsageLimitExceeded, match="tool_calls_limit=0"):
        await run(lifted.prompt("W?").usage_limits(UsageLimits(tool_calls_limit=0)), path)


async def test_each_request_is_a_run_of_its_own(path: Path) -> None:
    client = _client(ScriptedChatModel([says("a"), says("b")]), UsageLimits(request_limit=1))
    assert (await run(client.prompt("1"), path)).run_usage.requests == 1
    assert (await run(client.prompt("2"), path)).run_usage.requests == 1


async def test_a_bad_prices_function_is_an_error_naming_the_model_never_a_wrong_cost(path: Path) -> None:
    def broken(model: str, provider: str | None, usage: Usage) -> Decimal:
        raise KeyError(model)

    with pytest.raises(ValueError, match="prices function raised KeyError for model 'scripted'"):
        await run(ChatClient(ScriptedChatModel([says("x")]), prices=broken).prompt("hi"), path)

    def wrong(model: str, provider: str | None, usage: Usage) -> object:
        return "cheap"

    with pytest.raises(ValueError, match="returned for model 'scripted'"):
        await run(ChatClient(ScriptedChatModel([says("x")]), prices=wrong).prompt("hi"), path)  # type: ignore[arg-type]


async def test_the_prompt_the_model_gets_is_unchanged_without_output_limits(path: Path) -> None:
    model = ScriptedChatModel([says("x")])
    options = ChatOptions(temperature=0.5)
    await run(
        _client(model, UsageLimits(request_limit=5, cost_limit=None)).prompt("hi").options(options), path
    )
    sent = model.prompts[0]
    assert isinstance(sent, Prompt) and sent.options is not None and sent.options.max_tokens is None
