"""agui_app with the official AG-UI client (``@ag-ui/client``'s ``HttpAgent``, through node) and
raw HTTP for what a client library would not send: text runs, approvals as interrupts resumed,
front-end tools, memory with a resending client, a usage limit, and bad input."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from advisorchain import (
    ChatClient,
    MessageWindowChatMemory,
    ToolCall,
    ToolResponseMessage,
    UsageLimits,
    UserMessage,
    tool,
)
from advisorchain.advisors import ToolCallingAdvisor
from advisorchain.chain import current_run
from advisorchain.chain.events import (
    HandoffEvent,
    RoundFinished,
    RoundStarted,
    SubRunFinished,
    SubRunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from advisorchain.serve import agui_app
from advisorchain.testing import ScriptedChatModel
from tests.serve.helpers import (
    TOKEN,
    GatedModel,
    Served,
    agent,
    asks,
    get_weather,
    run_agui_client,
    serve,
    types,
)

PICK = {"name": "pick", "description": "Pick a color.", "parameters": {"type": "object", "properties": {}}}
APPROVE = {"interruptId": "approval:d1", "status": "resolved", "payload": {"approved": True}}


@pytest.fixture
def served() -> Iterator[Any]:
    stack: list[Any] = []

    def start(client: Any, **kwargs: Any) -> Served:
        context = serve(agui_app(client, token=TOKEN, **kwargs))
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def test_a_run_streams_its_text_between_run_started_and_run_finished_with_usage(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["Hello there"])))
    out = run_agui_client(where.base + "/", [{"user": "hi"}, {"run": {}}])
    (run,) = out["runs"]
    assert types(run["events"]) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert [e["stepName"] for e in run["events"] if e["type"].startswith("STEP")] == ["round 1", "round 1"]
    assert "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT") == "Hello there"
    assert run["events"][-1]["usage"][0]["totalTokens"] == 0
    assert out["messages"][-1]["content"] == "Hello there"


def test_a_call_needing_approval_ends_the_run_with_an_interrupt_and_a_resume_runs_it(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}'), text="Checking."), "Deleted it."])
    where = served(agent(model))
    out = run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [APPROVE]}}])
    paused, resumed = out["runs"]
    assert types(paused["events"])[-5:] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    (interrupt,) = paused["events"][-1]["outcome"]["interrupts"]
    assert interrupt["id"] == "approval:d1" and interrupt["toolCallId"] == "d1" and interrupt["reason"] == "tool_call"
    assert "delete_file" in interrupt["message"]
    assert interrupt["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert paused["pendingInterrupts"] == [interrupt]
    assert "TOOL_CALL_START" not in types(resumed["events"])  # not repeated for the original call
    results = [e for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [(r["toolCallId"], r["content"]) for r in results] == [("d1", "deleted /a")]
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert resumed["pendingInterrupts"] == []
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].response_data == "deleted /a"


def test_each_round_is_a_step_closed_before_its_tool_results(served: Any) -> None:
    model = ScriptedChatModel(
        [asks(("w1", "get_weather", '{"city": "Oslo"}'), ("w2", "get_weather", '{"city": "Rome"}'), text="Looking."), "Sunny."]
    )
    where = served(agent(model))
    out = run_agui_client(where.base + "/", [{"user": "weather?"}, {"run": {}}])
    events = out["runs"][0]["events"]
    shown = [(e["type"], e.get("stepName") or e.get("toolCallId") or "") for e in events if "CONTENT" not in e["type"]]
    assert shown == [
        ("RUN_STARTED", ""),
        ("STEP_STARTED", "round 1"),
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_END", ""),
        ("TOOL_CALL_START", "w1"),
        ("TOOL_CALL_ARGS", "w1"),
        ("TOOL_CALL_END", "w1"),
        ("TOOL_CALL_START", "w2"),
        ("TOOL_CALL_ARGS", "w2"),
        ("TOOL_CALL_END", "w2"),
        ("STEP_FINISHED", "round 1"),
        ("TOOL_CALL_RESULT", "w1"),
        ("TOOL_CALL_RESULT", "w2"),
        ("STEP_STARTED", "round 2"),
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_END", ""),
        ("STEP_FINISHED", "round 2"),
        ("RUN_FINISHED", ""),
    ]
    results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert results == {"w1": "sunny in Oslo", "w2": "sunny in Rome"}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]


def test_a_round_paused_for_approval_shows_all_its_calls_and_the_others_results_come_on_resume(served: Any) -> None:
    model = ScriptedChatModel(
        [asks(("d1", "delete_file", '{"path": "/a"}'), ("w1", "get_weather", '{"city": "Bern"}')), "Done."]
    )
    where = served(agent(model))
    out = run_agui_client(where.base + "/", [{"user": "go"}, {"run": {}}, {"run": {"resume": [APPROVE]}}])
    paused, resumed = out["runs"]
    assert [e["toolCallId"] for e in paused["events"] if e["type"] == "TOOL_CALL_START"] == ["d1", "w1"]
    assert [i["toolCallId"] for i in paused["events"][-1]["outcome"]["interrupts"]] == ["d1"]
    assert "TOOL_CALL_START" not in types(resumed["events"])
    assert sorted(e["toolCallId"] for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT") == ["d1", "w1"]


def test_a_cancelled_interrupt_denies_the_call_and_its_result_says_so(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "Kept it."])
    where = served(agent(model))
    cancel = {"interruptId": "approval:d1", "status": "cancelled"}
    out = run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [cancel]}}])
    results = [e for e in out["runs"][1]["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [(r["toolCallId"], r["content"]) for r in results] == [("d1", "Error: the user denied this tool call")]


def test_a_front_end_tool_ends_the_run_after_its_call_and_its_result_starts_the_next(served: Any) -> None:
    model = ScriptedChatModel([asks(("p1", "pick", "{}")), "Blue it is."])
    where = served(agent(model))
    out = run_agui_client(
        where.base + "/",
        [
            {"user": "pick a color"},
            {"run": {"tools": [PICK]}},
            {"tool": {"toolCallId": "p1", "content": "blue"}},
            {"run": {"tools": [PICK]}},
        ],
    )
    first, second = out["runs"]
    assert types(first["events"]) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert first["events"][-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["p1"]}
    assert "TOOL_CALL_RESULT" not in types(second["events"])  # the front end ran it: it has the result
    assert out["messages"][-1]["content"] == "Blue it is."
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].response_data == "blue"


def test_a_round_without_text_puts_its_calls_in_a_message_of_their_own_so_the_resent_thread_resumes(served: Any) -> None:
    model = ScriptedChatModel([asks(("w1", "get_weather", '{"city": "Oslo"}'), text="Looking."), asks(("p1", "pick", "{}")), "Blue."])
    where = served(agent(model))
    out = run_agui_client(
        where.base + "/",
        [{"user": "go"}, {"run": {"tools": [PICK]}}, {"tool": {"toolCallId": "p1", "content": "blue"}}, {"run": {"tools": [PICK]}}],
    )
    assert all("error" not in r for r in out["runs"]), out["runs"][-1].get("error")
    calls = [[c["id"] for c in m.get("toolCalls") or ()] for m in out["messages"] if m["role"] == "assistant"]
    assert calls == [["w1"], ["p1"], []]
    assert out["messages"][-1]["content"] == "Blue."


def test_with_memory_the_stored_thread_wins_and_only_what_follows_the_last_answer_is_new(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Hi Ada.", "You are Ada."])
    where = served(agent(model), memory=memory)
    run_agui_client(where.base + "/", [{"user": "I am Ada"}, {"run": {}}], thread_id="t-mem")
    # A second client on the same thread resends a different past: the stored one wins.
    body = {
        "threadId": "t-mem",
        "runId": "r2",
        "messages": [
            {"id": "u1", "role": "user", "content": "I am Mallory"},
            {"id": "a1", "role": "assistant", "content": "Hi Mallory."},
            {"id": "u2", "role": "user", "content": "Who am I?"},
        ],
    }
    events = _post(where, body)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert model.prompts[1].instructions[0] == UserMessage("I am Ada")
    assert [m.text for m in memory.get("t-mem")] == ["I am Ada", "Hi Ada.", "Who am I?", "You are Ada."]


def test_with_memory_an_interrupt_is_resumed_from_the_stored_thread(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "Deleted."])
    where = served(agent(model), memory=memory)
    out = run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [APPROVE]}}], thread_id="t2")
    assert out["messages"][-1]["content"] == "Deleted."
    stored = memory.get("t2")
    assert isinstance(stored[2], ToolResponseMessage) and stored[2].responses[0].response_data == "deleted /a"


def test_a_usage_limit_ends_the_run_with_run_error(served: Any) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model, usage_limits=UsageLimits(request_limit=0)))
    out = run_agui_client(where.base + "/", [{"user": "q"}, {"run": {}}])
    events = out["runs"][0]["events"]
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "usage_limit_exceeded" and "request_limit" in events[-1]["message"]
    assert model.prompts == []


def test_a_resume_naming_an_interrupt_never_raised_is_refused_and_runs_nothing(served: Any) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model))
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "q"}],
        "resume": [{"interruptId": "approval:forged", "status": "resolved", "payload": {"approved": True}}],
    }
    response = httpx.post(where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 400 and "'forged'" in response.json()["error"]["message"]
    out = run_agui_client(
        where.base + "/", [{"user": "q"}, {"run": {"resume": [{"interruptId": "other", "status": "cancelled"}]}}]
    )
    assert out["runs"][0]["error"]
    assert model.prompts == []


def test_a_resume_answered_twice_is_refused_the_second_time(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "Deleted."])
    where = served(agent(model))
    run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [APPROVE]}}])
    body = {"threadId": "thread-1", "runId": "again", "messages": [], "resume": [APPROVE]}
    response = httpx.post(where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 400 and "answered already" in response.json()["error"]["message"]


def test_a_tool_result_for_an_unknown_call_id_is_refused(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["never"])))
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [
            {"id": "u", "role": "user", "content": "q"},
            {"id": "a", "role": "assistant", "toolCalls": [{"id": "zz", "type": "function", "function": {"name": "pick", "arguments": "{}"}}]},
            {"id": "t", "role": "tool", "toolCallId": "zz", "content": "x"},
        ],
        "tools": [PICK],
    }
    response = httpx.post(where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 400 and "'zz'" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"not json", 400, None),
        (json.dumps({"runId": "r", "messages": []}).encode(), 422, "threadId"),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user"}]}).encode(), 422, "messages.0.user.content"),
    ],
)
def test_a_body_that_is_not_a_run_agent_input_is_refused_naming_the_field(served: Any, body: bytes, status: int, field: str | None) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model))
    response = httpx.post(
        where.base + "/", content=body, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    )
    assert response.status_code == status and response.json()["error"]["field"] == field
    assert model.prompts == []


def test_a_wrong_token_is_401_and_a_foreign_origin_403(served: Any) -> None:
    where = served(agent(ScriptedChatModel([])))
    out = run_agui_client(where.base + "/", [{"user": "q"}, {"run": {}}], token="wrong")
    assert out["runs"][0]["error"]
    forbidden = httpx.post(
        where.base + "/", json={}, headers={"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
    )
    assert forbidden.status_code == 403


def test_a_client_that_disconnects_mid_run_cancels_it_and_nothing_is_stored(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = GatedModel(["partial answer that never ends"])
    where = served(agent(model), memory=memory)
    body = {"threadId": "gone", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "q"}]}
    with httpx.stream("POST", where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        for line in response.iter_lines():
            if "TEXT_MESSAGE_CONTENT" in line:
                break
    _wait(lambda: model.closed == 1)
    assert memory.get("gone") == []


def test_two_clients_on_one_thread_take_turns(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = GatedModel(["first answer", "second answer"])
    where = served(agent(model), memory=memory)
    finished: list[str] = []

    def run(text: str) -> None:
        body = {"threadId": "shared", "runId": text, "messages": [{"id": text, "role": "user", "content": text}]}
        events = _post(where, body)
        finished.append(events[-1]["type"])

    first = threading.Thread(target=run, args=("one",))
    first.start()
    _wait(lambda: model.entered == 1)
    second = threading.Thread(target=run, args=("two",))
    second.start()
    time.sleep(0.3)
    assert model.entered == 1  # the second run waits for the first
    model.release.set()
    first.join(10)
    second.join(10)
    assert finished == ["RUN_FINISHED", "RUN_FINISHED"]
    assert [m.text for m in memory.get("shared")] == ["one", "first answer", "two", "second answer"]


def _post(where: Served, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as r:
        assert r.status_code == 200
        return [json.loads(line[len("data: ") :]) for line in r.iter_lines() if line.startswith("data: ")]


def _wait(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


class _Handoff:
    """Stands in for the agents' HandoffAdvisor (outside the tool loop): the first agent answers,
    the run emits the handoff, the rest of the chain runs again for the second agent."""

    name = "test handoff"
    order = ToolCallingAdvisor.DEFAULT_ORDER - 50  # as the HandoffAdvisor: outside the tool loop

    async def advise_call(self, request: Any, chain: Any) -> Any:
        await chain.next_call(request)
        chain.run.emit(HandoffEvent(chain.run.id, "triage", "billing"))
        return await chain.next_call(request)

    async def advise_stream(self, request: Any, chain: Any) -> AsyncIterator[Any]:
        async for chunk in chain.next_stream(request):
            yield chunk
        chain.run.emit(HandoffEvent(chain.run.id, "triage", "billing"))
        async for chunk in chain.next_stream(request):
            yield chunk


def test_a_handoff_is_a_step_pair_before_the_new_agents_first_round(served: Any) -> None:
    model = ScriptedChatModel(["Passing you on.", "Billing here."])
    client = agent(model).mutate(default_advisors=[_Handoff()])
    where = served(client)
    events = run_agui_client(where.base + "/", [{"user": "refund?"}, {"run": {}}])["runs"][0]["events"]
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP")]
    assert steps == [
        ("STEP_STARTED", "round 1"),
        ("STEP_FINISHED", "round 1"),
        ("STEP_STARTED", "handoff triage -> billing"),
        ("STEP_FINISHED", "handoff triage -> billing"),
        ("STEP_STARTED", "round 1"),
        ("STEP_FINISHED", "round 1"),
    ]


@tool
def ask_expert(input: str) -> str:
    """Stands in for an agent tool (client.as_tool): its nested run's events, emitted in the caller's run."""
    run = current_run()
    assert run is not None
    call_id = "e1"
    child = "child-run-1"
    run.emit(SubRunStarted(run.id, call_id, "ask_expert", child))
    run.emit(RoundStarted(child, 1, None))
    run.emit(RoundFinished(child, 1, None))
    inner = ToolCall("n1", "get_weather", '{"city": "Oslo"}')
    run.emit(ToolCallStarted(child, inner, None))
    run.emit(ToolCallFinished(child, inner, "sunny in Oslo", None))
    run.emit(RoundStarted(child, 2, None))
    run.emit(RoundFinished(child, 2, None))
    run.emit(SubRunFinished(run.id, call_id, "ask_expert", child))
    return "The expert says: sunny."


def test_a_nested_agent_tool_runs_inside_subagent_events_before_its_calls_result(served: Any) -> None:
    model = ScriptedChatModel([asks(("e1", "ask_expert", '{"input": "weather?"}')), "Sunny."])
    where = served(ChatClient(model, default_tools=[ask_expert, get_weather]))
    events = run_agui_client(where.base + "/", [{"user": "weather?"}, {"run": {}}])["runs"][0]["events"]
    shown = [
        (e["type"], e.get("stepName") or e.get("toolCallId") or e.get("name") or "", e.get("subagentRunId"))
        for e in events
        if "TEXT" not in e["type"]
    ]
    start = shown.index(("TOOL_CALL_END", "e1", None))
    assert shown[start + 1 : start + 12] == [
        ("SUBAGENT_STARTED", "ask_expert", "child-run-1"),
        ("STEP_STARTED", "round 1", "child-run-1"),
        ("TOOL_CALL_START", "n1", "child-run-1"),
        ("TOOL_CALL_ARGS", "n1", "child-run-1"),
        ("TOOL_CALL_END", "n1", "child-run-1"),
        ("STEP_FINISHED", "round 1", "child-run-1"),
        ("TOOL_CALL_RESULT", "n1", "child-run-1"),
        ("STEP_STARTED", "round 2", "child-run-1"),
        ("STEP_FINISHED", "round 2", "child-run-1"),
        ("SUBAGENT_FINISHED", "", "child-run-1"),
        ("STEP_FINISHED", "round 1", None),
    ]
    assert shown[start + 12] == ("TOOL_CALL_RESULT", "e1", None)
    started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
    assert started["parentToolCallId"] == "e1"
