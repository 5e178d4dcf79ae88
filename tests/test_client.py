from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from advisorchain import (
    AdvisorChainError,
    AdvisorParams,
    AssistantMessage,
    BaseAdvisor,
    ChainConfigurationError,
    ChatClient,
    ChatClientRequest,
    ChatMemory,
    ChatOptions,
    ChatResponse,
    FunctionChatModel,
    Ordered,
    Prompt,
    ScriptedChatModel,
    StructuredOutputValidationError,
    SyncInAsyncContextError,
    SystemMessage,
    ToolAdvisor,
    UserMessage,
)
from tests.support.advisors import CallOnly, Recorder


def _client(model: Any, **kwargs: Any) -> ChatClient:
    return ChatClient(model, tool_calling_auto_register=False, **kwargs)


def test_content_returns_the_first_generation_text() -> None:
    assert _client(ScriptedChatModel(["Paris."])).prompt("Capital of France?").call().content() == "Paris."


def test_prompt_is_system_then_messages_then_user() -> None:
    model = ScriptedChatModel(["ok"])
    history = [UserMessage("earlier"), AssistantMessage("answer")]
    _client(model).prompt().system("Be brief.").messages(history).user("now?").call().content()
    assert model.prompts[0].instructions == (
        SystemMessage("Be brief."),
        UserMessage("earlier"),
        AssistantMessage("answer"),
        UserMessage("now?"),
    )


def test_default_system_is_used_and_a_request_system_replaces_it() -> None:
    model = ScriptedChatModel(["a", "b"])
    client = _client(model, default_system="default")
    client.prompt("q").call().content()
    client.prompt("q").system("mine").call().content()
    assert [p.instructions[0] for p in model.prompts] == [SystemMessage("default"), SystemMessage("mine")]


def test_a_whole_prompt_can_be_given() -> None:
    model = ScriptedChatModel(["ok"])
    prompt = Prompt([SystemMessage("s"), UserMessage("u")], ChatOptions(temperature=0.5))
    _client(model).prompt(prompt).call().content()
    assert model.prompts[0].instructions == prompt.instructions
    assert model.prompts[0].options is not None and model.prompts[0].options.temperature == 0.5


def test_one_call_result_runs_the_request_once() -> None:
    model = ScriptedChatModel(["only one"])
    result = _client(model).prompt("q").call()
    assert result.content() == "only one"
    assert result.chat_response().text == "only one"
    assert result.chat_client_response().chat_response is not None
    assert len(model.prompts) == 1


async def test_async_forms_run_the_same_request_once() -> None:
    model = ScriptedChatModel(["hello"])
    result = _client(model).prompt("q").acall()
    assert await result.content() == "hello"
    assert isinstance(await result.chat_response(), ChatResponse)
    assert len(model.prompts) == 1


async def test_sync_call_inside_a_running_loop_names_the_async_form() -> None:
    spec = _client(ScriptedChatModel(["x"])).prompt("q")
    with pytest.raises(SyncInAsyncContextError, match=r"use `await acall\(\).content\(\)`"):
        spec.call().content()


async def test_sync_stream_inside_a_running_loop_fails_at_once() -> None:
    spec = _client(ScriptedChatModel(["x"])).prompt("q")
    with pytest.raises(SyncInAsyncContextError, match="astream"):
        for _ in spec.stream().content():
            pass


def test_sync_stream_yields_text_deltas() -> None:
    chunks = list(_client(ScriptedChatModel(["The sky is blue."])).prompt("q").stream().content())
    assert chunks == ["The", " sky", " is", " blue."]


def test_sync_stream_closed_early_closes_the_model_stream() -> None:
    closed: list[bool] = []

    async def stream(prompt: Prompt) -> Any:
        try:
            for word in ["a", "b", "c"]:
                yield ChatResponse.of(AssistantMessage(word))
        finally:
            closed.append(True)

    model = FunctionChatModel(lambda p: "unused", stream_fn=stream)
    it = _client(model).prompt("q").stream().content()
    assert next(it) == "a"
    it.close()  # type: ignore[attr-defined]
    assert closed == [True]


async def test_async_stream_chunks_carry_the_context() -> None:
    model = ScriptedChatModel(["a b"])
    spec = _client(model).prompt("q").param("k", "v")
    chunks = [c async for c in spec.astream().chat_client_responses()]
    assert all(c.context["k"] == "v" for c in chunks)
    assert [t async for t in _client(ScriptedChatModel(["a b"])).prompt("q").astream().content()] == [
        "a",
        " b",
    ]


def test_params_reach_the_request_context() -> None:
    seen: list[Any] = []

    class Peek(BaseAdvisor):
        def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
            seen.append(dict(request.context))
            return request

    _client(ScriptedChatModel(["x"])).prompt("q").advisors(Peek()).param("k", 1).call().content()
    assert seen == [{"k": 1}]


def test_conversation_id_reaches_the_tool_context() -> None:
    model = ScriptedChatModel(["x"])
    _client(model).prompt("q").tool_context({"user": "ann"}).param(
        ChatMemory.CONVERSATION_ID, "c-7"
    ).call().content()
    options = model.prompts[0].options
    assert options is not None and dict(options.tool_context) == {"user": "ann", "conversation_id": "c-7"}


def test_request_options_override_client_defaults_field_by_field() -> None:
    model = ScriptedChatModel(["x"])
    client = _client(model, default_options=ChatOptions(model="m1", temperature=0.1, max_tokens=5))
    client.prompt("q").options(ChatOptions(temperature=0.9)).call().content()
    options = model.prompts[0].options
    assert options is not None
    assert (options.model, options.temperature, options.max_tokens) == ("m1", 0.9, 5)


def test_equal_orders_keep_registration_order_with_defaults_first() -> None:
    log: list[str] = []
    client = _client(ScriptedChatModel(["x"]), default_advisors=[Recorder("d", 5, log)])
    client.prompt("q").advisors(Recorder("r1", 5, log), Recorder("r0", 0, log)).call().content()
    assert log[:3] == ["before r0", "before d", "before r1"]


@given(st.lists(st.integers(min_value=-3, max_value=3), min_size=1, max_size=7))
def test_the_chain_is_sorted_stably_and_the_model_is_always_innermost(orders: list[int]) -> None:
    log: list[str] = []

    def model_fn(prompt: Prompt) -> str:
        log.append("model")
        return "x"

    advisors = [Recorder(f"a{i}", o, log) for i, o in enumerate(orders)]
    _client(FunctionChatModel(model_fn)).prompt("q").advisors(*advisors).call().content()
    expected = [a.name for a in sorted(advisors, key=lambda a: a.order)]
    assert log == [f"before {n}" for n in expected] + ["model"] + [f"after {n}" for n in reversed(expected)]


def test_an_advisor_with_the_lowest_precedence_still_runs_before_the_model() -> None:
    log: list[str] = []
    model = FunctionChatModel(lambda p: log.append("model") or "x")  # type: ignore[func-returns-value]
    _client(model).prompt("q").advisors(Recorder("last", Ordered.LOWEST_PRECEDENCE, log)).call().content()
    assert log == ["before last", "model", "after last"]


def test_call_only_advisors_are_skipped_on_the_stream_path() -> None:
    model = ScriptedChatModel(["a", "b"])
    client = _client(model, default_advisors=[CallOnly()])
    assert client.prompt("q").call().content() == "a"
    assert list(client.prompt("q").stream().content()) == ["b"]


def test_entity_runs_its_own_request_with_format_instructions() -> None:
    class City(BaseModel):
        name: str
        population: int

    model = ScriptedChatModel(["plain", '{"name": "Paris", "population": 2100000}'])
    result = _client(model).prompt("Tell me about Paris").call()
    assert result.content() == "plain"
    assert result.entity(City) == City(name="Paris", population=2100000)
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, UserMessage)
    assert sent.text.startswith("Tell me about Paris\n") and '"population"' in sent.text
    assert model.prompts[0].instructions == (UserMessage("Tell me about Paris"),)


def test_entity_with_invalid_output_raises_with_the_text_and_errors() -> None:
    class City(BaseModel):
        name: str

    with pytest.raises(StructuredOutputValidationError) as info:
        _client(ScriptedChatModel(["not json"])).prompt("q").call().entity(City)
    assert info.value.text == "not json"
    assert info.value.errors


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_blank_user_text_is_a_clear_error(text: str) -> None:
    with pytest.raises(ChainConfigurationError, match="user text is blank"):
        _client(ScriptedChatModel([])).prompt(text)


def test_an_empty_prompt_is_a_clear_error() -> None:
    with pytest.raises(ChainConfigurationError, match="the prompt is empty"):
        _client(ScriptedChatModel([])).prompt().call().content()


def test_non_messages_in_messages_are_rejected() -> None:
    with pytest.raises(ChainConfigurationError, match="takes Message objects, got 'hello'"):
        _client(ScriptedChatModel([])).prompt("q").messages(["hello"])  # type: ignore[list-item]


def test_a_non_chat_model_is_rejected_at_construction() -> None:
    with pytest.raises(ChainConfigurationError, match="is not a ChatModel"):
        ChatClient(object())  # type: ignore[arg-type]


def test_the_same_advisor_object_twice_is_rejected() -> None:
    advisor = Recorder("dup", 0, [])
    with pytest.raises(ChainConfigurationError, match="'dup' was registered twice"):
        _client(ScriptedChatModel(["x"]), default_advisors=[advisor]).prompt("q").advisors(
            advisor
        ).call().content()


@pytest.mark.parametrize(
    ("advisor", "fragment"),
    [
        (type("NoOrder", (), {"name": "n", "advise_call": lambda s, r, c: None})(), "'n' has no 'order'"),
        (type("NoName", (), {"order": 1, "advise_call": lambda s, r, c: None})(), "NoName has no 'name'"),
        (
            type("BadOrder", (), {"name": "b", "order": "1", "advise_call": lambda s, r, c: None})(),
            "the order of advisor 'b' must be an int, got '1'",
        ),
        (type("NoMethods", (), {"name": "m", "order": 1})(), "neither advise_call nor advise_stream"),
    ],
)
def test_malformed_advisors_are_rejected_by_name(advisor: object, fragment: str) -> None:
    with pytest.raises(ChainConfigurationError, match=fragment):
        _client(ScriptedChatModel([])).prompt("q").advisors(advisor)
    with pytest.raises(ChainConfigurationError, match=fragment):
        _client(ScriptedChatModel([]), default_advisors=[advisor])


def test_two_tool_advisors_are_rejected_naming_both_before_any_model_call() -> None:
    class LoopA(Recorder, ToolAdvisor):
        pass

    class LoopB(Recorder, ToolAdvisor):
        pass

    model = ScriptedChatModel(["x"])
    spec = ChatClient(model).prompt("q").advisors(LoopA("loop-a", 0, []), LoopB("loop-b", 1, []))
    with pytest.raises(ValueError, match="'loop-a' and 'loop-b'"):
        spec.call().content()
    assert model.prompts == []


def test_a_present_tool_advisor_prevents_auto_registration() -> None:
    class MyLoop(Recorder, ToolAdvisor):
        pass

    log: list[str] = []
    model = ScriptedChatModel(["x"])
    ChatClient(model).prompt("q").advisors(MyLoop("mine", 0, log)).call().content()
    assert log == ["before mine", "after mine"]


def test_options_must_be_chat_options() -> None:
    with pytest.raises(ChainConfigurationError, match="takes ChatOptions"):
        _client(ScriptedChatModel([])).prompt("q").options({"temperature": 1})  # type: ignore[arg-type]


def test_provider_errors_propagate_unchanged() -> None:
    boom = AdvisorChainError("provider down")
    with pytest.raises(AdvisorChainError, match="provider down"):
        _client(ScriptedChatModel([boom])).prompt("q").call().content()


def test_a_script_that_runs_out_says_so() -> None:
    client = _client(ScriptedChatModel(["one"]))
    client.prompt("q").call().content()
    with pytest.raises(AdvisorChainError, match="ran out of replies: all 1 were used"):
        client.prompt("q").call().content()


def test_sync_calls_work_from_many_threads() -> None:
    model = FunctionChatModel(lambda p: p.instructions[-1].text)  # type: ignore[union-attr, return-value]
    client = _client(model)

    async def gather() -> list[str | None]:
        loop = asyncio.get_running_loop()
        jobs = [
            loop.run_in_executor(None, lambda i=i: client.prompt(f"m{i}").call().content()) for i in range(8)
        ]
        return list(await asyncio.gather(*jobs))

    assert asyncio.run(gather()) == [f"m{i}" for i in range(8)]


def test_auto_register_param_key_is_stable() -> None:
    assert AdvisorParams.TOOL_CALLING_ADVISOR_AUTO_REGISTER == "tool_calling_advisor_auto_register"


def test_constructor_and_entity_accept_the_contracts_positional_forms() -> None:
    class City(BaseModel):
        name: str

    log: list[str] = []
    client = ChatClient(ScriptedChatModel(['{"name": "Oslo"}']), [Recorder("r", 0, log)], "sys")
    assert client.prompt("q").call().entity(City, False) == City(name="Oslo")
    assert log == ["before r", "after r"]


async def test_accessors_awaited_together_still_make_one_request() -> None:
    import asyncio as aio

    async def slow(prompt: Prompt) -> str:
        await aio.sleep(0)
        return "once"

    model = FunctionChatModel(slow)
    result = _client(model).prompt("q").acall()
    text, response = await aio.gather(result.content(), result.chat_response())
    assert (text, response.text) == ("once", "once")
    assert len(model.prompts) == 1


class _PlainIterator:
    """An async iterator without aclose, as the StreamAdvisor protocol allows."""

    def __init__(self, source: Any) -> None:
        self._source = source

    def __aiter__(self) -> _PlainIterator:
        return self

    async def __anext__(self) -> Any:
        return await anext(self._source)


class PlainStreamAdvisor:
    name = "plain"
    order = 0

    def advise_stream(self, request: Any, chain: Any) -> Any:
        return _PlainIterator(chain.next_stream(request))


def test_a_stream_advisor_returning_a_plain_async_iterator_streams() -> None:
    from advisorchain import SimpleLoggerAdvisor

    client = _client(
        ScriptedChatModel(["hello world"]),
        default_advisors=[PlainStreamAdvisor(), SimpleLoggerAdvisor(order=-1)],
    )
    assert list(client.prompt("q").stream().content()) == ["hello", " world"]


_INTERRUPT_SCRIPT = """
import asyncio, os, signal
from advisorchain import AssistantMessage, ChatClient, ToolCall, ToolResponseMessage, tool
from advisorchain.testing import FunctionChatModel

events = []

@tool
async def slow() -> str:
    \"\"\"A tool that takes its time.\"\"\"
    try:
        while "checking" not in events:  # the caller took the text streamed before the tool
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the tool runs, whatever the machine's speed
        await asyncio.sleep(600)
        events.append("tool finished")
    except asyncio.CancelledError:
        events.append("tool cancelled")
        raise
    return "x"

def answer(prompt):
    if isinstance(prompt.instructions[-1], ToolResponseMessage):
        return "done"
    return AssistantMessage("checking", [ToolCall("s", "slow", "{}")])

client = ChatClient(FunctionChatModel(answer), default_tools=[slow])
try:
    for text in client.prompt("go").stream().content():
        events.append(text)
except KeyboardInterrupt as exc:
    events.append(f"interrupted, context={exc.__context__!r}")
print(events)
"""


def test_ctrl_c_during_a_sync_stream_cancels_the_running_tool() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['checking', 'tool cancelled', 'interrupted, context=None']"


# -- one request per acall(), whatever its accessors do ---------------------------------------------


async def test_accessors_awaited_together_make_one_request() -> None:
    release = asyncio.Event()

    async def answer(prompt: Prompt) -> str:
        await release.wait()
        return "Paris."

    model = FunctionChatModel(answer)
    spec = _client(model).prompt("Capital of France?").acall()
    waiting = asyncio.gather(spec.content(), spec.chat_response(), spec.chat_client_response())
    await asyncio.sleep(0)
    release.set()
    text, chat, client_response = await waiting
    assert (text, chat.text, client_response.chat_response) == ("Paris.", "Paris.", chat)
    assert len(model.prompts) == 1


async def test_after_a_failed_request_the_next_accessor_makes_it_again() -> None:
    answers: list[str | BaseException] = [RuntimeError("provider down"), "Paris."]

    async def answer(prompt: Prompt) -> str:
        await asyncio.sleep(0)
        reply = answers.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    model = FunctionChatModel(answer)
    spec = _client(model).prompt("Capital of France?").acall()
    first, second = await asyncio.gather(spec.content(), spec.content(), return_exceptions=True)
    assert isinstance(first, RuntimeError)
    assert second == "Paris."
    assert await spec.content() == "Paris."
    assert len(model.prompts) == 2


async def test_a_cancelled_accessor_leaves_the_request_to_the_others() -> None:
    release = asyncio.Event()

    async def answer(prompt: Prompt) -> str:
        await release.wait()
        return "Paris."

    model = FunctionChatModel(answer)
    spec = _client(model).prompt("Capital of France?").acall()
    running = asyncio.ensure_future(spec.content())
    waiter = asyncio.ensure_future(spec.content())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await running == "Paris."
    assert waiter.cancelled()
    assert len(model.prompts) == 1
