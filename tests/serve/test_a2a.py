"""a2a_app and A2AAgentTool with the official ``a2a-sdk`` client: the card, message/send,
message/stream, tasks/get, tasks/cancel, input-required approvals, contextId as the conversation,
a usage limit, bad input, and a remote agent as a tool of ours."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import new_data_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from advisorchain import ChatClient, MessageWindowChatMemory, ToolResponseMessage, UsageLimits, UserMessage
from advisorchain.serve import A2AAgentTool, a2a_app
from advisorchain.testing import ScriptedChatModel
from tests.serve.helpers import TOKEN, GatedModel, Served, agent, asks, serve


@pytest.fixture
def served() -> Iterator[Any]:
    stack: list[Any] = []

    def start(client: Any, **kwargs: Any) -> Served:
        context = serve(a2a_app(client, **{"token": TOKEN, **kwargs}))
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def _message(text: str | None = None, *, context_id: str = "", task_id: str = "", data: Any = None) -> Message:
    parts = [Part(text=text)] if text is not None else [new_data_part(data)]
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts, context_id=context_id, task_id=task_id)


async def _send(where: Served, message: Message, *, streaming: bool = False, token: str = TOKEN) -> list[StreamResponse]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = await create_client(where.base + "/", ClientConfig(streaming=streaming, httpx_client=http))
        try:
            return [r async for r in client.send_message(SendMessageRequest(message=message))]
        finally:
            await client.close()


def _answer(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


def test_the_card_names_the_agent_its_tools_streaming_and_the_bearer_scheme(served: Any) -> None:
    where = served(agent(ScriptedChatModel([])))
    card = httpx.get(where.base + "/.well-known/agent-card.json").json()  # served without the token
    assert card["name"] == "advisorchain" and card["description"] == "An advisorchain agent."
    assert [s["id"] for s in card["skills"]] == ["get_weather", "delete_file"]
    assert card["capabilities"]["streaming"] is True
    assert card["defaultInputModes"] == ["text/plain"] and card["defaultOutputModes"] == ["text/plain"]
    assert card["supportedInterfaces"] == [
        {"url": where.base + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]


def test_a_given_card_is_served_as_given(served: Any) -> None:
    given = AgentCard(name="Custom", description="Mine.", version="9")
    where = served(agent(ScriptedChatModel([])), card=given)
    card = httpx.get(where.base + "/.well-known/agent-card.json").json()
    assert (card["name"], card["description"], card["version"]) == ("Custom", "Mine.", "9")


async def test_message_send_answers_a_completed_task_with_the_answer_as_a_text_artifact(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["Hello there friend"])))
    (response,) = await _send(where, _message("hi"))
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _answer(task) == "Hello there friend" and len(task.artifacts) == 1


async def test_message_stream_sends_the_task_working_one_artifact_update_per_delta_then_completed(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["one two three"])))
    responses = await _send(where, _message("count"), streaming=True)
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task"
    updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert ["".join(p.text for p in u.artifact.parts) for u in updates] == ["one", " two", " three"]
    assert [u.append for u in updates] == [False, True, True]
    assert len({u.artifact.artifact_id for u in updates}) == 1
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]


async def test_the_context_id_is_the_conversation_across_turns(served: Any) -> None:
    model = ScriptedChatModel(["Hi Ada.", "You are Ada."])
    where = served(agent(model))
    (first,) = await _send(where, _message("I am Ada"))
    context_id = first.task.context_id
    (second,) = await _send(where, _message("Who am I?", context_id=context_id))
    assert second.task.context_id == context_id and _answer(second.task) == "You are Ada."
    assert model.prompts[1].instructions[0] == UserMessage("I am Ada")


async def test_a_call_needing_approval_makes_the_task_input_required_and_approvals_resume_it(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "Deleted."])
    where = served(agent(model), memory=memory)
    (paused,) = await _send(where, _message("delete /a"))
    task = paused.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    waiting = "".join(p.text for p in task.status.message.parts)
    assert 'delete_file({"path": "/a"})' in waiting and "d1" in waiting
    approvals = _message(context_id=task.context_id, task_id=task.id, data={"approvals": {"d1": True}})
    responses = await _send(where, approvals, streaming=True)
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    stored = memory.get(task.context_id)
    assert isinstance(stored[2], ToolResponseMessage) and stored[2].responses[0].response_data == "deleted /a"


async def test_a_denial_reason_in_the_approvals_reaches_the_model(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "Kept."])
    where = served(agent(model))
    (paused,) = await _send(where, _message("delete /a"))
    task = paused.task
    await _send(where, _message(context_id=task.context_id, task_id=task.id, data={"approvals": {"d1": "not today"}}))
    sent = model.prompts[1].instructions[-1]
    assert isinstance(sent, ToolResponseMessage)
    assert sent.responses[0].response_data == "Error: the user denied this tool call: not today"


async def test_approvals_naming_a_call_that_does_not_wait_fail_the_task_and_run_nothing(served: Any) -> None:
    model = ScriptedChatModel([asks(("d1", "delete_file", '{"path": "/a"}')), "never"])
    where = served(agent(model))
    (paused,) = await _send(where, _message("delete /a"))
    task = paused.task
    (answer,) = await _send(where, _message(context_id=task.context_id, task_id=task.id, data={"approvals": {"zz": True}}))
    assert answer.task.status.state == TaskState.TASK_STATE_FAILED
    assert "'zz'" in "".join(p.text for p in answer.task.status.message.parts)
    assert len(model.prompts) == 1


async def test_a_usage_limit_fails_the_task_with_a_one_line_message(served: Any) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model, usage_limits=UsageLimits(request_limit=0)))
    (response,) = await _send(where, _message("q"))
    assert response.task.status.state == TaskState.TASK_STATE_FAILED
    text = "".join(p.text for p in response.task.status.message.parts)
    assert "request_limit" in text and "\n" not in text


async def test_tasks_get_shows_the_task_and_an_unknown_task_is_an_error(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["done"])))
    (response,) = await _send(where, _message("q"))
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        client = await create_client(where.base + "/", ClientConfig(streaming=False, httpx_client=http))
        got = await client.get_task(GetTaskRequest(id=response.task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED and _answer(got) == "done"
        with pytest.raises(Exception, match=r"(?i)not found"):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        await client.close()


async def test_tasks_cancel_stops_the_run_and_nothing_of_the_turn_is_stored(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = GatedModel(["a long answer that never ends"])
    where = served(agent(model), memory=memory)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        client = await create_client(where.base + "/", ClientConfig(streaming=True, httpx_client=http))
        stream = client.send_message(SendMessageRequest(message=_message("q", context_id="ctx-cancel")))
        task_id = ""
        async for response in stream:
            if response.HasField("task"):
                task_id = response.task.id
            if response.HasField("artifact_update"):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state in (TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING)
        await _until(lambda: model.closed == 1)
        got = await client.get_task(GetTaskRequest(id=task_id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        await client.close()
    assert memory.get("ctx-cancel") == []


async def test_a_wrong_token_is_refused_and_runs_nothing(served: Any) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model))
    with pytest.raises(Exception, match="401"):
        await _send(where, _message("q"), token="wrong")
    assert model.prompts == []


@pytest.mark.parametrize("body", [b"{nope", b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}'])
def test_a_bad_json_rpc_body_is_a_json_rpc_error_and_runs_nothing(served: Any, body: bytes) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model))
    response = httpx.post(
        where.base + "/", content=body, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    )
    assert "error" in response.json() and response.json()["error"]["code"] < 0
    assert model.prompts == []


async def test_a_remote_agent_is_a_tool_named_by_its_card_keeping_a_context_per_conversation(served: Any) -> None:
    remote_model = ScriptedChatModel(["Sunny in Oslo.", "Still sunny."])
    where = served(ChatClient(remote_model), card=None)
    tool = A2AAgentTool(where.base + "/", token=TOKEN)
    card = await tool.fetch_card()
    assert card.name == "advisorchain" and tool.definition.name == "advisorchain"
    assert tool.definition.input_schema["required"] == ["input"]
    local = ScriptedChatModel(
        [asks(("c1", "advisorchain", '{"input": "weather in Oslo?"}')), "It is sunny.", asks(("c2", "advisorchain", '{"input": "and now?"}')), "Still."]
    )
    client = ChatClient(local, default_tools=[tool])
    from advisorchain.memory import ChatMemory

    assert await client.prompt("weather?").param(ChatMemory.CONVERSATION_ID, "conv").acall().content() == "It is sunny."
    assert local.prompts[1].instructions[-1].responses[0].response_data == "Sunny in Oslo."  # type: ignore[union-attr]
    await client.prompt("again?").param(ChatMemory.CONVERSATION_ID, "conv").acall().content()
    assert remote_model.prompts[1].instructions[0] == UserMessage("weather in Oslo?")  # one remote context


async def test_a_failed_remote_task_answers_error_and_its_message(served: Any) -> None:
    where = served(ChatClient(ScriptedChatModel(["never"]), usage_limits=UsageLimits(request_limit=0)))
    tool = A2AAgentTool(where.base + "/", name="remote", token=TOKEN)
    local = ScriptedChatModel([asks(("c1", "remote", '{"input": "q"}')), "ok"])
    await ChatClient(local, default_tools=[tool]).prompt("go").acall().content()
    result = local.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[union-attr]
    assert result.startswith("Error: ") and "request_limit" in result


async def _until(check: Any, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "the condition never came true"
        await asyncio.sleep(0.01)


def test_a_streaming_client_that_disconnects_cancels_the_run_and_nothing_is_stored(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = GatedModel(["a long answer that never ends"])
    where = served(agent(model), memory=memory)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "contextId": "cx", "parts": [{"text": "q"}]}},
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    with httpx.stream("POST", where.base + "/", json=body, headers=headers) as response:
        for line in response.iter_lines():
            if "artifactUpdate" in line:
                break
    end = time.monotonic() + 10
    while model.closed == 0:
        assert time.monotonic() < end, "the run was not cancelled"
        time.sleep(0.01)
    model.release.set()
    time.sleep(0.2)
    assert memory.get("cx") == []


def test_the_tools_name_and_description_come_from_the_card_when_first_needed(served: Any) -> None:
    remote = agent(ScriptedChatModel(["Sunny."]))
    where = served(remote, card=AgentCard(name="Weather Agent (v2)", description="Knows the weather.", version="1"))
    tool = A2AAgentTool(where.base + "/", token=TOKEN)
    assert tool.definition.name == "Weather_Agent__v2_"
    assert tool.definition.description == "Knows the weather."
    named = A2AAgentTool(where.base + "/", name="weather", token=TOKEN)
    assert named.definition.name == "weather" and named.definition.description == "Knows the weather."


def test_the_v0_3_method_names_are_accepted(served: Any) -> None:
    where = served(agent(ScriptedChatModel(["Hello from 0.3."])))
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {"message": {"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}},
    }
    answer = httpx.post(where.base + "/", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()
    result = answer["result"]
    assert result["status"]["state"] == "completed"
    assert "".join(p["text"] for a in result["artifacts"] for p in a["parts"]) == "Hello from 0.3."


async def test_a_message_on_an_unknown_task_is_an_error_and_runs_nothing(served: Any) -> None:
    model = ScriptedChatModel(["never"])
    where = served(agent(model))
    with pytest.raises(Exception, match=r"(?i)not found"):
        await _send(where, _message("q", task_id="no-such-task"))
    assert model.prompts == []


async def test_tasks_cancel_from_another_client_stops_a_run_whose_stream_is_still_open(served: Any) -> None:
    memory = MessageWindowChatMemory()
    model = GatedModel(["a long answer that never ends"])
    where = served(agent(model), memory=memory)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        streaming = await create_client(where.base + "/", ClientConfig(streaming=True, httpx_client=http))
        other = await create_client(where.base + "/", ClientConfig(streaming=False, httpx_client=http))
        stream = streaming.send_message(SendMessageRequest(message=_message("q", context_id="ctx-open")))
        task_id = ""
        async for response in stream:
            if response.HasField("task"):
                task_id = response.task.id
            if response.HasField("artifact_update"):
                break
        canceled = await other.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state in (TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING)
        await _until(lambda: model.closed == 1)
        got = await other.get_task(GetTaskRequest(id=task_id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        await stream.aclose()  # type: ignore[attr-defined]
        await streaming.close()
        await other.close()
    assert memory.get("ctx-open") == []
