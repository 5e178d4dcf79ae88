"""InputGuardrailAdvisor on calls and streams: the turn's user text checked with every guard; in
parallel mode the rest of the chain starts beside the guards and nothing of it reaches the caller,
a tool or a store before they passed; trips, the finish ending, replacements, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ChatResponse,
    FunctionChatModel,
    GuardContext,
    GuardrailError,
    GuardrailTripped,
    GuardResult,
    InputGuardrailAdvisor,
    Media,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
    ToolCall,
    ToolCallingAdvisor,
    UserMessage,
    keyword_guard,
    pii_guard,
    tool,
)
from advisorchain.testing import stream_chunks
from tests.guardrails.support import PATHS, Path, Recorder, run, texts_of

INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 100


def no(text: str, context: GuardContext) -> GuardResult:
    return GuardResult(False, "Off topic.")


class Gate:
    """A guard that waits until the test opens it, then answers ``verdict``."""

    def __init__(self, verdict: bool | GuardResult) -> None:
        self.verdict = verdict
        self.open = asyncio.Event()
        self.asked = asyncio.Event()
        self.name = "gate"

    async def __call__(self, text: str, context: GuardContext) -> bool | GuardResult:
        self.asked.set()
        await self.open.wait()
        return self.verdict


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("parallel", [True, False])
async def test_a_trip_raises_and_nothing_of_the_turn_is_stored(path: Path, parallel: bool) -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        ScriptedChatModel(["an answer"]),
        default_advisors=[MessageChatMemoryAdvisor(memory), InputGuardrailAdvisor(no, parallel=parallel)],
    )
    with pytest.raises(GuardrailTripped) as info:
        await run(client.prompt("tell me about cars").param(ChatMemory.CONVERSATION_ID, "u1"), path)
    error = info.value
    assert (error.guard, error.kind, error.message, error.partial_response) == (
        "no",
        "input",
        "Off topic.",
        None,
    )
    assert "Off topic." in str(error) and "cars" not in str(error)
    assert memory.get("u1") == []


@pytest.mark.parametrize("path", PATHS)
async def test_without_parallel_the_model_is_not_called_on_a_trip(path: Path) -> None:
    model = ScriptedChatModel(["never"])
    client = ChatClient(model, default_advisors=[InputGuardrailAdvisor(no, parallel=False)])
    with pytest.raises(GuardrailTripped):
        await run(client.prompt("hi"), path)
    assert model.prompts == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("parallel", [True, False])
async def test_a_passing_guard_lets_the_answer_through(path: Path, parallel: bool) -> None:
    guard = Recorder()
    client = ChatClient(
        ScriptedChatModel(["Hello there."]),
        default_advisors=[InputGuardrailAdvisor(guard, parallel=parallel)],
        default_system="Be brief.",
    )
    answer = await run(client.prompt("hi").param(ChatMemory.CONVERSATION_ID, "c9"), path)
    assert answer.text == "Hello there."
    assert guard.texts == ["hi"]  # never the system message
    assert dict(guard.contexts[0]) == {"kind": "input", "conversation_id": "c9"}


async def test_the_turn_is_every_user_message_after_the_last_assistant_message() -> None:
    guard = Recorder()
    client = ChatClient(ScriptedChatModel(["ok"]), default_advisors=[InputGuardrailAdvisor(guard)])
    history = [UserMessage("old question"), AssistantMessage("old answer"), UserMessage("first")]
    await client.prompt().messages(history).user("second").acall().content()
    assert guard.texts == ["first\nsecond"]


@pytest.mark.parametrize("path", PATHS)
async def test_in_parallel_the_model_is_called_beside_a_slow_guard_and_no_chunk_comes_before_it_passed(
    path: Path,
) -> None:
    model_done = asyncio.Event()

    async def stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(ChatResponse.of(AssistantMessage("All good here."), "stop")):
            model_done.set()  # the first chunk is there
            yield chunk

    def answer(prompt: Prompt) -> AssistantMessage:
        model_done.set()
        return AssistantMessage("All good here.")

    gate = Gate(True)
    client = ChatClient(FunctionChatModel(answer, stream), default_advisors=[InputGuardrailAdvisor(gate)])
    received: list[object] = []

    async def consume() -> None:
        if path == "call":
            received.append(await client.prompt("hi").acall().content())
        else:
            async for text in client.prompt("hi").astream().content():
                received.append(text)

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(model_done.wait(), 30)  # the model answered while the guard still runs
    for _ in range(20):
        await asyncio.sleep(0)
    assert received == [] and not task.done()
    gate.open.set()
    await asyncio.wait_for(task, 30)
    assert "".join(str(t) for t in received) == "All good here."


@pytest.mark.parametrize("path", PATHS)
async def test_a_trip_in_parallel_cancels_the_model_call_in_flight_and_counts_it(
    path: Path, spans: object
) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang(prompt: Prompt) -> AssistantMessage:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return AssistantMessage("never")

    async def hang_stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield ChatResponse.of(await hang(prompt))

    gate = Gate(GuardResult(False, "stop"))
    client = ChatClient(FunctionChatModel(hang, hang_stream), default_advisors=[InputGuardrailAdvisor(gate)])
    task = asyncio.ensure_future(run(client.prompt("hi"), path))
    await asyncio.wait_for(started.wait(), 30)
    gate.open.set()
    with pytest.raises(GuardrailTripped):
        await asyncio.wait_for(task, 30)
    assert cancelled.is_set()
    (request,) = [s for s in spans.get_finished_spans() if s.name == "advisorchain request"]  # type: ignore[attr-defined]
    assert request.attributes["advisorchain.run.requests"] == 1


ran: list[str] = []


@tool
def delete_everything(scope: str) -> str:
    """Delete things."""
    ran.append(scope)
    return "deleted"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("inside", [False, True])
async def test_no_tool_runs_and_nothing_is_stored_before_the_guard_tripped(path: Path, inside: bool) -> None:
    ran.clear()
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(
        [AssistantMessage("Deleting.", [ToolCall("c1", "delete_everything", '{"scope": "all"}')]), "done"]
    )
    gate = Gate(GuardResult(False))
    memory_advisor = (
        MessageChatMemoryAdvisor(memory, order=INSIDE) if inside else MessageChatMemoryAdvisor(memory)
    )
    client = ChatClient(model, default_advisors=[memory_advisor, InputGuardrailAdvisor(gate)])
    task = asyncio.ensure_future(run(client.prompt("delete all").tools(delete_everything), path))
    await asyncio.wait_for(gate.asked.wait(), 30)
    for _ in range(50):  # the model answered with a tool call long ago; the tool waits for the guard
        await asyncio.sleep(0)
    assert ran == []
    gate.open.set()
    with pytest.raises(GuardrailTripped):
        await asyncio.wait_for(task, 30)
    assert ran == [] and memory.get("default") == []


@pytest.mark.parametrize("path", PATHS)
async def test_tools_run_once_the_guard_passed(path: Path) -> None:
    ran.clear()
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "delete_everything", '{"scope": "tmp"}')]), "done"]
    )
    client = ChatClient(model, default_advisors=[InputGuardrailAdvisor(Recorder())])
    answer = await run(client.prompt("clean tmp").tools(delete_everything), path)
    assert answer.text == "done" and ran == ["tmp"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("parallel", [True, False])
async def test_on_trip_finish_ends_with_the_guards_message_and_stores_nothing(
    path: Path, parallel: bool
) -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        ScriptedChatModel(["an answer"]),
        default_advisors=[
            MessageChatMemoryAdvisor(memory),
            InputGuardrailAdvisor(no, keyword_guard(["cars"]), parallel=parallel, on_trip="finish"),
        ],
    )
    answer = await run(client.prompt("hi"), path)
    assert answer.text == "Off topic."
    assert answer.finish_reason == "guardrailTripped"
    silent = ChatClient(
        ScriptedChatModel(["an answer"]),
        default_advisors=[
            MessageChatMemoryAdvisor(memory),
            InputGuardrailAdvisor(keyword_guard(["cars"]), on_trip="finish"),
        ],
    )
    assert (await run(silent.prompt("tell me about cars"), path)).text == "I can't help with that."
    assert memory.get("default") == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("parallel", [True, False])
async def test_a_replacement_rewrites_the_user_text_for_the_model_and_memory(
    path: Path, parallel: bool
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["noted", "noted"])
    client = ChatClient(
        model,
        default_advisors=[
            MessageChatMemoryAdvisor(memory),
            InputGuardrailAdvisor(pii_guard(), parallel=parallel),
        ],
    )
    answer = await run(client.prompt("mail me at ada@example.com"), path)
    assert answer.text == "noted"
    assert model.prompts[-1].last_user_message == UserMessage("mail me at [EMAIL]")
    assert texts_of(memory.get("default")) == ["mail me at [EMAIL]", "noted"]
    assert all("ada@" not in str(p.instructions) for p in model.prompts[-1:])


async def test_a_replacement_becomes_one_user_message_in_place_of_the_last() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[InputGuardrailAdvisor(pii_guard(), parallel=False)])
    image = Media("image/png", data=b"png")
    history = [
        SystemMessage("sys"),
        UserMessage("old"),
        AssistantMessage("answer"),
        UserMessage("call +33 6 12 34 56 78"),
    ]
    await (
        client.prompt()
        .messages(history)
        .user("and mail x@y.org", media=[image], metadata={"k": "v"})
        .acall()
        .content()
    )
    sent = list(model.prompts[0].instructions)
    assert sent[:3] == history[:3]
    assert sent[3:] == [UserMessage("call [PHONE]\nand mail [EMAIL]", {"k": "v"}, [image])]


@pytest.mark.parametrize("path", PATHS)
async def test_a_resume_without_user_text_is_not_checked(path: Path) -> None:
    guard = Recorder()
    model = ScriptedChatModel(["weather is fine"])
    client = ChatClient(model, default_advisors=[InputGuardrailAdvisor(guard)])

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send."""
        return "sent"

    waiting = AssistantMessage(None, [ToolCall("c1", "send", '{"to": "x"}')])
    spec = (
        client.prompt().messages([UserMessage("send it"), waiting]).tools(send).tool_approvals({"c1": True})
    )
    assert (await run(spec, path)).text == "weather is fine"
    assert guard.texts == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("on_trip", ["raise", "finish"])
async def test_a_guard_that_fails_raises_guardrail_error_whatever_on_trip(path: Path, on_trip: str) -> None:
    def broken(text: str, context: GuardContext) -> bool:
        raise RuntimeError("boom")

    memory = MessageWindowChatMemory()
    client = ChatClient(
        ScriptedChatModel(["answer"]),
        default_advisors=[MessageChatMemoryAdvisor(memory), InputGuardrailAdvisor(broken, on_trip=on_trip)],  # type: ignore[arg-type]
    )
    with pytest.raises(GuardrailError) as info:
        await run(client.prompt("hi"), path)
    assert info.value.guard == "broken" and info.value.kind == "input"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert memory.get("default") == []


async def test_a_caller_that_stops_reading_cancels_the_guards_and_the_model() -> None:
    gate = Gate(True)
    client = ChatClient(ScriptedChatModel(["x"]), default_advisors=[InputGuardrailAdvisor(gate)])
    task = asyncio.ensure_future(client.prompt("hi").acall().content())
    await asyncio.wait_for(gate.asked.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="at least one guard"):
        InputGuardrailAdvisor()
    with pytest.raises(TypeError, match="not a guard"):
        InputGuardrailAdvisor("no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_trip"):
        InputGuardrailAdvisor(no, on_trip="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parallel"):
        InputGuardrailAdvisor(no, parallel="yes")  # type: ignore[arg-type]
    assert InputGuardrailAdvisor(no).order == InputGuardrailAdvisor.DEFAULT_ORDER
