"""The engine-neutral half: what crosses a seam survives the trip, and workflow code never blocks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    Approved,
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatOptions,
    ContextLengthExceededError,
    Media,
    MessageChatMemoryAdvisor,
    ModelError,
    ModelTimeoutError,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain._tool_types import ToolText
from advisorchain.durable._agent import DurableParts, _ModelSeam, check_decisions
from advisorchain.durable._codec import (
    prompt_from_dict,
    prompt_to_dict,
    response_from_dict,
    response_to_dict,
    tool_result_from_dict,
)
from advisorchain.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from advisorchain.model import ChatResponse, Prompt, Usage
from advisorchain.testing import FunctionChatModel, ScriptedChatModel


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return city


text = st.text(max_size=40)


@given(system=text, user=text, args=text, answer=st.one_of(st.none(), text))
def test_a_prompt_survives_the_trip_with_its_tools_as_definitions(
    system: str, user: str, args: str, answer: str | None
) -> None:
    history = (
        SystemMessage(system),
        UserMessage(user, {"k": "v", "cache_point": "1h"}),
        AssistantMessage(answer, [ToolCall("c1", "lookup", args)]),
        ToolResponseMessage([ToolResponse("c1", "lookup", args)]),
    )
    options = ChatOptions(
        model="m", temperature=0.5, stop=["x"], tool_callbacks=[lookup], tool_context={"t": 1}, cache_key="k"
    )
    back = prompt_from_dict(prompt_to_dict(Prompt(history, options)))

    assert back.instructions == history
    assert back.options is not None
    assert [cb.definition for cb in back.options.tool_callbacks] == [lookup.definition]
    assert (back.options.model, back.options.temperature, back.options.stop) == ("m", 0.5, ("x",))
    assert back.options.tool_context == {"t": 1}
    assert back.options.cache_key == "k"  # a durable model call keeps its cache key and marks (§21)


@given(answer=st.one_of(st.none(), text), tokens=st.integers(0, 10**6))
def test_a_response_survives_the_trip(answer: str | None, tokens: int) -> None:
    response = ChatResponse.of(AssistantMessage(answer), "stop", Usage(tokens, 1), id="r1", model="m")
    assert response_from_dict(response_to_dict(response)) == response


async def test_a_tool_in_a_model_activity_cannot_run() -> None:
    options = prompt_from_dict(
        prompt_to_dict(Prompt([UserMessage("hi")], ChatOptions(tool_callbacks=[lookup])))
    ).options
    assert options is not None
    with pytest.raises(ChainConfigurationError, match="'lookup' was called inside a model activity"):
        await options.tool_callbacks[0].call("{}", None)


async def test_memory_in_workflow_code_refuses_to_block_and_names_its_async_form() -> None:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[MessageChatMemoryAdvisor(memory)])
    parts = DurableParts(client, "a", tools=(), workflow_tools=())

    async def dispatch(seam: str, payload: object) -> object:
        raise AssertionError(seam)

    client, _ = parts.workflow_client(dispatch, stream=False)
    seam = client.default_advisors[0].chat_memory  # type: ignore[attr-defined]
    with pytest.raises(ChainConfigurationError, match=r"await memory.aget\(...\)"):
        seam.get("c1")


def test_two_tools_of_one_name_are_refused_naming_it() -> None:
    with pytest.raises(ChainConfigurationError, match="'lookup'"):
        client = ChatClient(ScriptedChatModel(["hi"]), default_tools=[lookup])
        DurableParts(client, "a", tools=[lookup], workflow_tools=())


def test_decisions_are_encoded_for_the_wire_with_true_and_false_as_approved_and_denied() -> None:
    pending = (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"), ToolCall("c", "t", "{}"))
    encoded = check_decisions("run-1", pending, {"a": True, "b": False, "c": Approved('{"x": 1}')})

    assert encoded == {
        "a": {"approved": True, "arguments": None},
        "b": {"approved": False, "reason": None},
        "c": {"approved": True, "arguments": '{"x": 1}'},
    }


def test_deciding_a_run_that_waits_for_nothing_is_refused_naming_the_run() -> None:
    with pytest.raises(ChainConfigurationError, match="run 'run-1' is not waiting for approval"):
        check_decisions("run-1", (), {"a": True})


def test_a_decision_that_is_not_one_is_refused_naming_the_call() -> None:
    with pytest.raises(ChainConfigurationError, match=r"'a'.*'yes'"):
        check_decisions("run-1", (ToolCall("a", "t", "{}"),), {"a": "yes"})


# -- what the hardening added to the trip ------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        ContextLengthExceededError(
            "openai error 400 (invalid_request_error): too long",
            status_code=400,
            error_type="x",
            provider="openai",
        ),
        ModelTimeoutError("timed out", error_type="timeout", provider="openai"),
        ModelError("plain", status_code=500, provider="p", retry_after=2.0),
    ],
)
async def test_a_model_error_comes_back_of_its_own_class_from_the_model_seam(error: ModelError) -> None:
    def fail(prompt: Prompt) -> AssistantMessage:
        raise error

    parts = DurableParts(ChatClient(FunctionChatModel(fail)), "errs", tools=(), workflow_tools=())

    async def dispatch(seam: str, payload: object) -> object:
        return await parts.call_model(payload, None)  # type: ignore[arg-type]

    seam = _ModelSeam(parts.model_seam, dispatch, False, parts.client.model)
    with pytest.raises(type(error)) as caught:
        await seam.call(Prompt([UserMessage("hi")]))
    assert type(caught.value) is type(error)
    assert (str(caught.value), caught.value.status_code, caught.value.retry_after) == (
        str(error),
        error.status_code,
        error.retry_after,
    )


async def test_a_tool_results_media_survive_the_tool_seam() -> None:
    @tool
    async def chart() -> str:
        """A chart."""
        return ToolText("the chart", [Media("image/png", data=b"\x89PNG")])

    client = ChatClient(ScriptedChatModel([]), default_tools=[chart])
    parts = DurableParts(client, "media", tools=(), workflow_tools=())
    recorded = await parts.seams()[parts.tool_seam("chart")]({"arguments": "{}", "context": None})

    back = tool_result_from_dict(recorded)
    assert (back, getattr(back, "media", None)) == ("the chart", (Media("image/png", data=b"\x89PNG"),))
