"""agui_app with the official AG-UI client (``@ag-ui/client``'s ``HttpAgent``, through node) and
raw HTTP for what a client library would not send: text runs, approvals as interrupts resumed,
front-end tools, memory with a resending client, a usage limit, and bad input."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from advisorchain import MessageWindowChatMemory, ToolResponseMessage, UsageLimits, UserMessage
from advisorchain.serve import agui_app
from advisorchain.testing import ScriptedChatModel
from tests.serve.helpers import TOKEN, GatedModel, Served, agent, asks, run_agui_client, serve, types

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
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT") == "Hello there"
    assert run["events"][-1]["usage"][0]["totalTokens"] == 0
    assert out["messages"][-1]["content"] == "Hello there"


def test_a_call_needing_approval_ends_the_run_with_an_interrupt_and_a_resume_runs_it(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}'), text="Checking."), "Deleted it."])
    where = served(agent(model))
    out = run_agui_client(where.base + "/", [{"user": "delete /a"}, {"run": {}}, {"run": {"resume": [APPROVE]}}])
    paused, resumed = out["runs"]
    assert types(paused["events"])[-4:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"]
    (interrupt,) = paused["events"][-1]["outcome"]["interrupts"]
    assert interrupt["id"] == "approval:d1" and interrupt["toolCallId"] == "d1" and interrupt["reason"] == "tool_call"
    assert "delete_file" in interrupt["message"]
    assert interrupt["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert paused["pendingInterrupts"] == [interrupt]
    assert "TOOL_CALL_START" not in types(resumed["events"])  # not repeated for the original call
    assert resumed["pendingInterrupts"] == []
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].response_data == "deleted /a"


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
    assert types(first["events"]) == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"]
    assert first["events"][-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["p1"]}
    assert "TOOL_CALL_RESULT" not in types(second["events"])  # the front end ran it: it has the result
    assert out["messages"][-1]["content"] == "Blue it is."
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].response_data == "blue"


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
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
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
