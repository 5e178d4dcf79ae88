"""Agents as tools (API.md §18): ``client.as_tool(...)`` runs a nested request whose usage counts in
the calling run and whose pauses and failures reach the model as ``Error: `` texts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolExecutionError,
    UsageLimitExceeded,
    UsageLimits,
    tool,
)
from advisorchain.agents import Agent
from advisorchain.testing import FunctionChatModel, ScriptedChatModel
from tests.agents.agents_support import MODES, Mode, asks, call, run, with_usage


def _research(reply: Any, **client: Any) -> tuple[ScriptedChatModel, Any]:
    inner = ScriptedChatModel(reply if isinstance(reply, list) else [reply])
    return inner, ChatClient(inner, **client).as_tool(name="research", description="Finds things out")


def _outer(tool_: Any, *replies: Any, **client: Any) -> tuple[ScriptedChatModel, ChatClient]:
    model = ScriptedChatModel(
        [with_usage(asks(call("research", '{"input": "why is the sky blue"}', id="t1"))), *replies]
    )
    return model, ChatClient(model, default_tools=[tool_], **client)


def test_the_tool_definition() -> None:
    _, research = _research("x")
    assert research.definition.name == "research"
    assert research.definition.description == "Finds things out"
    assert research.definition.input_schema == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    }


@pytest.mark.parametrize("bad", ["", "has space", 3])
def test_a_bad_tool_name_is_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="as_tool name"):
        ChatClient(ScriptedChatModel([])).as_tool(name=bad, description="d")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_a_call_is_one_request_on_a_fresh_conversation_and_answers_its_text(mode: Mode) -> None:
    inner, research = _research(with_usage("Rayleigh scattering.", 50, 5))
    model, outer = _outer(research, with_usage("Because of Rayleigh scattering."))
    ran = run(outer.prompt("Why?").messages(), mode)
    assert ran.text == "Because of Rayleigh scattering."
    assert [m.text for m in inner.prompts[0].instructions] == ["why is the sky blue"]  # type: ignore[union-attr]
    assert model.prompts[1].instructions[-1].responses[0].response_data == "Rayleigh scattering."  # type: ignore[union-attr]
    totals = ran.response.context[AdvisorParams.RUN_USAGE]
    assert (totals.requests, totals.tool_calls) == (3, 1)  # the nested request counts in the calling run
    assert (totals.usage.prompt_tokens, totals.usage.completion_tokens) == (250, 25)


def test_the_agent_is_active_in_the_nested_run() -> None:
    expert = Agent("expert", instructions="You are the expert.")
    inner = ScriptedChatModel(["Deep answer."])
    research = ChatClient(inner).as_tool(name="research", description="d", agent=expert)
    _, outer = _outer(research, "ok")
    outer.prompt("q").call().content()
    assert inner.prompts[0].instructions[0].text == "You are the expert."  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_the_calling_runs_limits_hold_inside_the_nested_run(mode: Mode) -> None:
    inner, research = _research(with_usage("never"))
    _, outer = _outer(research, with_usage("never"), usage_limits=UsageLimits(request_limit=1))
    with pytest.raises(UsageLimitExceeded) as info:
        run(outer.prompt("q"), mode)
    assert info.value.limit_name == "request_limit"
    assert inner.prompts == []  # the nested call was refused by the calling run's budget


@pytest.mark.parametrize("mode", MODES)
def test_the_calling_runs_limits_finish_the_calling_run(mode: Mode) -> None:
    inner, research = _research(with_usage("never"))
    model, outer = _outer(research, usage_limits=UsageLimits(request_limit=1, on_exceeded="finish"))
    ran = run(outer.prompt("q"), mode)
    assert ran.response.chat_response.finish_reason == "usageLimitExceeded"  # type: ignore[union-attr]
    assert inner.prompts == [] and len(model.prompts) == 1


def test_the_nested_clients_own_limits_are_a_nested_error() -> None:
    inner = ScriptedChatModel([with_usage(asks(call("research", '{"input": "x"}'))), with_usage("never")])
    research = ChatClient(inner, usage_limits=UsageLimits(request_limit=1)).as_tool(
        name="deep", description="d"
    )
    model = ScriptedChatModel([asks(call("deep", '{"input": "q"}')), "fine"])
    outer = ChatClient(model, default_tools=[research])
    assert outer.prompt("q").call().content() == "fine"
    text = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[union-attr]
    assert text.startswith("Error: ") and "request_limit" in text


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return "deleted"


def test_a_nested_pause_answers_which_calls_wait() -> None:
    inner = ScriptedChatModel(
        [asks(call("delete_file", '{"path": "a"}', id="d1"), call("delete_file", '{"path": "b"}', id="d2"))]
    )
    research = ChatClient(inner, default_tools=[delete_file]).as_tool(name="cleaner", description="d")
    model = ScriptedChatModel([asks(call("cleaner", '{"input": "clean"}')), "ok"])
    ChatClient(model, default_tools=[research]).prompt("q").call().content()
    assert model.prompts[1].instructions[-1].responses[0].response_data == (  # type: ignore[union-attr]
        'Error: the agent cleaner is waiting for approval of delete_file({"path": "a"}), '
        'delete_file({"path": "b"})'
    )


def _failing() -> Any:
    def fail(prompt: Any) -> AssistantMessage:
        raise RuntimeError("the nested model broke")

    return ChatClient(FunctionChatModel(fail)).as_tool(name="broken", description="d")


def test_a_nested_error_answers_its_message() -> None:
    model = ScriptedChatModel([asks(call("broken", '{"input": "x"}')), "recovered"])
    assert ChatClient(model, default_tools=[_failing()]).prompt("q").call().content() == "recovered"
    assert model.prompts[1].instructions[-1].responses[0].response_data == "Error: the nested model broke"  # type: ignore[union-attr]


def test_a_nested_error_raises_with_raise_on_error() -> None:
    model = ScriptedChatModel([asks(call("broken", '{"input": "x"}'))])
    loop = ToolCallingAdvisor(ToolCallingManager(raise_on_error=True))
    client = ChatClient(model, default_tools=[_failing()], default_advisors=[loop])
    with pytest.raises(ToolExecutionError) as info:
        client.prompt("q").call().content()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value.__cause__) == "the nested model broke"


def test_bad_input_answers_an_error_text() -> None:
    _, research = _research("never")
    model = ScriptedChatModel([asks(call("research", '{"input": 3}')), "ok"])
    ChatClient(model, default_tools=[research]).prompt("q").call().content()
    assert model.prompts[1].instructions[-1].responses[0].response_data.startswith("Error: ")  # type: ignore[union-attr]


def test_cancelling_the_caller_cancels_the_nested_run() -> None:
    started, cancelled = asyncio.Event(), []

    async def slow(prompt: Any) -> AssistantMessage:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return AssistantMessage("never")

    research = ChatClient(FunctionChatModel(slow)).as_tool(name="slow", description="d")
    outer = ChatClient(ScriptedChatModel([asks(call("slow", '{"input": "x"}'))]), default_tools=[research])

    async def main() -> None:
        task = asyncio.ensure_future(outer.prompt("q").acall().content())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled == [True]


def test_nested_spans_sit_under_execute_tool(spans: Any) -> None:
    _, research = _research("inner answer")
    _, outer = _outer(research, "outer answer")
    outer.prompt("q").call().content()
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    requests = [s for s in finished if s.name == "advisorchain request"]
    nested = [s for s in requests if s.parent is not None]
    assert len(requests) == 2 and len(nested) == 1
    parent = by_id[nested[0].parent.span_id]
    assert parent.name == "execute_tool research"


def test_a_nested_client_with_memory_starts_a_fresh_conversation_each_call() -> None:
    from advisorchain import MessageChatMemoryAdvisor, MessageWindowChatMemory, UserMessage

    memory = MessageWindowChatMemory()
    memory.add("default", [UserMessage("an old question"), AssistantMessage("an old answer")])
    inner = ScriptedChatModel(["first", "second"])
    research = ChatClient(inner, default_advisors=[MessageChatMemoryAdvisor(memory)]).as_tool(
        name="research", description="d"
    )
    model = ScriptedChatModel(
        [
            asks(call("research", '{"input": "one"}', id="a"), call("research", '{"input": "two"}', id="b")),
            "ok",
        ]
    )
    ChatClient(model, default_tools=[research]).prompt("q").call().content()
    assert sorted(tuple(m.text for m in p.instructions) for p in inner.prompts) == [("one",), ("two",)]  # type: ignore[attr-defined]
