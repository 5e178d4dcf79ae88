"""RequestRetryAdvisor (§14): a failed call is tried again with a request that ``modify`` built
from the request the advisor received, on the call and the stream path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatOptions,
    ChatResponse,
    ContextLengthExceededError,
    Generation,
    ModelError,
    Ordered,
    Prompt,
    RequestRetryAdvisor,
    ToolCall,
    ToolCallingAdvisor,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain.testing import FunctionChatModel, ScriptedChatModel


def smaller(request: ChatClientRequest, error: BaseException, attempt: int) -> ChatClientRequest:
    options = (request.prompt.options or ChatOptions()).copy(max_tokens=100 // (attempt + 1))
    return request.copy(prompt=request.prompt.copy(options=options))


def client_with(model: Any, advisor: RequestRetryAdvisor, *others: Any) -> ChatClient:
    return ChatClient(model, default_advisors=[advisor, *others], tool_calling_auto_register=False)


class Seen(BaseAdvisor):
    """Counts the requests that pass it (placed before or after the retry advisor)."""

    def __init__(self, order: int) -> None:
        self.order, self.requests = order, []  # type: ignore[misc]

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        self.requests.append(request)
        return request


# -- construction --------------------------------------------------------------------------------


def test_default_order_is_inside_the_tool_loop_near_the_model() -> None:
    assert RequestRetryAdvisor.DEFAULT_ORDER == Ordered.LOWEST_PRECEDENCE - 1000
    advisor = RequestRetryAdvisor(smaller)
    assert advisor.order == RequestRetryAdvisor.DEFAULT_ORDER > ToolCallingAdvisor.DEFAULT_ORDER
    assert advisor.max_attempts == 3


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        RequestRetryAdvisor(smaller, ModelError)  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"retry_on": ()},
        {"retry_on": (ModelError, str)},
        {"retry_on": int},
        {"retry_on": "ModelError"},
        {"order": Ordered.LOWEST_PRECEDENCE},
    ],
)
def test_bad_options_are_value_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RequestRetryAdvisor(smaller, **kwargs)


def test_modify_must_be_callable() -> None:
    with pytest.raises(ValueError, match="modify"):
        RequestRetryAdvisor("smaller")  # type: ignore[arg-type]


# -- the call path -------------------------------------------------------------------------------


def test_a_matching_error_is_retried_with_the_modified_request() -> None:
    model = ScriptedChatModel([ModelError("too long", status_code=400), "short answer"])

    answer = client_with(model, RequestRetryAdvisor(smaller)).prompt("q").call().content()

    assert answer == "short answer"
    assert [p.options.max_tokens if p.options else None for p in model.prompts] == [None, 50]


def test_modify_gets_the_received_request_the_error_and_the_attempt_number() -> None:
    first, second = ModelError("one"), ModelError("two")
    model = ScriptedChatModel([first, second, "ok"])
    calls: list[tuple[ChatClientRequest, BaseException, int]] = []

    def modify(request: ChatClientRequest, error: BaseException, attempt: int) -> ChatClientRequest:
        calls.append((request, error, attempt))
        return smaller(request, error, attempt)

    seen = Seen(Ordered.LOWEST_PRECEDENCE - 1500)  # before the retry advisor: sees the received request
    client_with(model, RequestRetryAdvisor(modify), seen).prompt("q").call().content()

    assert [(e, a) for _, e, a in calls] == [(first, 1), (second, 2)]
    assert all(r is seen.requests[0] for r, _, _ in calls)  # every retry is built from the received one
    assert [p.options.max_tokens if p.options else None for p in model.prompts] == [None, 50, 33]


async def test_an_async_modify_is_awaited() -> None:
    model = ScriptedChatModel([ModelError("no"), "ok"])

    async def modify(request: ChatClientRequest, error: BaseException, attempt: int) -> ChatClientRequest:
        return request.copy(prompt=request.prompt.with_last_user_text("shorter"))

    answer = await client_with(model, RequestRetryAdvisor(modify)).prompt("long").acall().content()

    assert answer == "ok"
    assert model.prompts[1].instructions == (UserMessage("shorter"),)


def test_modify_returning_none_re_raises_the_error() -> None:
    error = ModelError("refused")
    model = ScriptedChatModel([error, "never"])

    with pytest.raises(ModelError) as raised:
        client_with(model, RequestRetryAdvisor(lambda r, e, a: None)).prompt("q").call().content()

    assert raised.value is error
    assert len(model.prompts) == 1


def test_when_attempts_run_out_the_last_error_is_raised_with_the_earlier_ones_chained() -> None:
    errors = [ModelError("1"), ModelError("2"), ModelError("3")]
    model = ScriptedChatModel([*errors, "never"])

    with pytest.raises(ModelError) as raised:
        client_with(model, RequestRetryAdvisor(smaller, max_attempts=3)).prompt("q").call().content()

    assert raised.value is errors[2]
    assert raised.value.__context__ is errors[1]
    assert errors[1].__context__ is errors[0]
    assert len(model.prompts) == 3


def test_max_attempts_one_never_retries() -> None:
    error = ModelError("once")
    model = ScriptedChatModel([error, "never"])
    modified: list[int] = []

    with pytest.raises(ModelError) as raised:
        client_with(
            model, RequestRetryAdvisor(lambda r, e, a: modified.append(a) or r, max_attempts=1)
        ).prompt("q").call().content()

    assert raised.value is error and modified == []


def test_an_error_it_does_not_match_passes_through_untouched() -> None:
    error = ValueError("a bug")
    model = ScriptedChatModel([error, "never"])
    modified: list[int] = []

    with pytest.raises(ValueError) as raised:
        client_with(model, RequestRetryAdvisor(lambda r, e, a: modified.append(a) or r)).prompt(
            "q"
        ).call().content()

    assert raised.value is error and raised.value.__context__ is None
    assert modified == [] and len(model.prompts) == 1


def test_retry_on_takes_a_tuple_of_classes() -> None:
    model = ScriptedChatModel([TimeoutError("slow"), ContextLengthExceededError("long"), "ok"])
    advisor = RequestRetryAdvisor(smaller, retry_on=(TimeoutError, ContextLengthExceededError))

    assert client_with(model, advisor).prompt("q").call().content() == "ok"


def test_retry_on_takes_a_predicate() -> None:
    model = ScriptedChatModel([ModelError("busy", status_code=529), ModelError("bad", status_code=400), "x"])
    advisor = RequestRetryAdvisor(smaller, retry_on=lambda e: getattr(e, "status_code", None) == 529)

    with pytest.raises(ModelError, match="bad"):
        client_with(model, advisor).prompt("q").call().content()
    assert len(model.prompts) == 2


def test_modify_returning_something_else_names_the_advisor() -> None:
    model = ScriptedChatModel([ModelError("no"), "never"])

    with pytest.raises(ValueError, match=r"Request Retry Advisor.*modify returned 'oops'"):
        client_with(model, RequestRetryAdvisor(lambda r, e, a: "oops")).prompt("q").call().content()  # type: ignore[arg-type,return-value]


def test_the_advisors_after_it_run_again_and_those_before_it_once() -> None:
    model = ScriptedChatModel([ModelError("no"), "ok"])
    outer, inner = Seen(Ordered.LOWEST_PRECEDENCE - 1500), Seen(Ordered.LOWEST_PRECEDENCE - 500)

    client_with(model, RequestRetryAdvisor(smaller), outer, inner).prompt("q").call().content()

    assert len(outer.requests) == 1 and len(inner.requests) == 2


def test_inside_the_tool_loop_each_model_call_is_retried_on_its_own() -> None:
    runs: list[str] = []

    @tool
    def counted(key: str) -> str:
        """Look a key up, counting the calls."""
        runs.append(key)
        return f"value of {key}"

    asks = AssistantMessage(None, [ToolCall("c1", "counted", '{"key": "a"}')])
    model = ScriptedChatModel([asks, ModelError("flaky"), "done"])
    client = ChatClient(model, default_advisors=[RequestRetryAdvisor(smaller)], default_tools=[counted])

    assert client.prompt("q").call().content() == "done"

    # the second round alone was sent again, with its tool round; the tool ran once
    assert len(model.prompts) == 3 and runs == ["a"]
    assert model.prompts[1].instructions == model.prompts[2].instructions
    assert model.prompts[2].instructions[-1] == ToolResponseMessage(
        [ToolResponse("c1", "counted", "value of a")]
    )


# -- the stream path -----------------------------------------------------------------------------


def test_a_stream_that_failed_before_its_first_chunk_is_retried() -> None:
    model = ScriptedChatModel([ModelError("overloaded"), "two words"])

    chunks = list(client_with(model, RequestRetryAdvisor(smaller)).prompt("q").stream().content())

    assert "".join(chunks) == "two words"
    assert len(model.prompts) == 2


def test_a_stream_that_failed_after_a_chunk_reached_the_caller_is_not_retried() -> None:
    async def breaks(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield ChatResponse([Generation(AssistantMessage("partial "))])
        raise ModelError("cut")

    model = FunctionChatModel(lambda p: "unused", stream_fn=breaks)
    modified: list[int] = []
    advisor = RequestRetryAdvisor(lambda r, e, a: modified.append(a) or r)

    got: list[str] = []
    with pytest.raises(ModelError, match="cut"):
        for chunk in client_with(model, advisor).prompt("q").stream().content():
            got.append(chunk)

    assert got == ["partial "] and modified == [] and len(model.prompts) == 1


def test_a_stream_retry_chains_its_errors() -> None:
    errors = [ModelError("1"), ModelError("2")]
    model = ScriptedChatModel([*errors, "never"])

    with pytest.raises(ModelError) as raised:
        list(client_with(model, RequestRetryAdvisor(smaller, max_attempts=2)).prompt("q").stream().content())

    assert raised.value is errors[1] and raised.value.__context__ is errors[0]


# -- observability -------------------------------------------------------------------------------


def _retry_events(spans: InMemorySpanExporter) -> list[dict[str, Any]]:
    span = next(s for s in spans.get_finished_spans() if s.name == "advisor Request Retry Advisor")
    return [dict(e.attributes or {}) for e in span.events if e.name == "retry"]


def test_each_retry_is_a_span_event_naming_the_error_type(spans: InMemorySpanExporter) -> None:
    model = ScriptedChatModel([TimeoutError("slow"), ContextLengthExceededError("long"), "ok"])
    advisor = RequestRetryAdvisor(smaller, retry_on=(TimeoutError, ModelError))

    client_with(model, advisor).prompt("q").call().content()

    assert _retry_events(spans) == [
        {"error.type": "TimeoutError"},
        {"error.type": "ContextLengthExceededError"},
    ]


def test_stream_retries_are_span_events_too(spans: InMemorySpanExporter) -> None:
    model = ScriptedChatModel([ModelError("busy"), "ok"])

    list(client_with(model, RequestRetryAdvisor(smaller)).prompt("q").stream().content())

    assert _retry_events(spans) == [{"error.type": "ModelError"}]


def test_no_event_when_nothing_was_retried(spans: InMemorySpanExporter) -> None:
    client_with(ScriptedChatModel(["ok"]), RequestRetryAdvisor(smaller)).prompt("q").call().content()

    assert _retry_events(spans) == []
