"""A tool that raises, hangs past ``tool_timeout``, returns 10 MB or returns something JSON cannot
express: the model gets a clear error text (or the whole result), memory stores the round whole on
every repository, and the conversation goes on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import tool
from tests.reliability.memory_support import window
from tests.support.memory_backends import BACKENDS

CID = ChatMemory.CONVERSATION_ID
_release = threading.Event()


@tool
def raises(city: str) -> str:
    """Raises."""
    raise ConnectionError(f"weather service unreachable for {city}")


@tool
def hangs(city: str) -> str:
    """Blocks far longer than the tool timeout."""
    _release.wait(30)
    return "too late"


@tool
def huge(city: str) -> str:
    """Returns 10 MB."""
    return "x" * 10_000_000


@tool
def unserialisable(city: str) -> object:
    """Returns something JSON cannot express."""
    return object()


def _echo_model(tool_name: str) -> FunctionChatModel:
    """Calls ``tool_name`` once, then answers with the length and the start of the tool's response."""

    def reply(prompt: Prompt) -> AssistantMessage:
        last = prompt.instructions[-1]
        if isinstance(last, ToolResponseMessage):
            data = last.responses[0].response_data
            return AssistantMessage(f"{len(data)}:{data[:300]}")
        if isinstance(last, UserMessage) and last.text == "again":
            return AssistantMessage("still here")
        return AssistantMessage(None, [ToolCall("c1", tool_name, '{"city": "Oslo"}')])

    return FunctionChatModel(reply)


def _client(memory: Any, tool_name: str, the_tool: Any) -> ChatClient:
    # only the hanging tool may reach its timeout; the others get one a busy machine never reaches
    manager = ToolCallingManager(tool_timeout=0.3 if tool_name == "hangs" else 60)
    loop = ToolCallingAdvisor(manager, conversation_history_enabled=False)
    memory_advisor = MessageChatMemoryAdvisor(memory, order=ToolCallingAdvisor.DEFAULT_ORDER + 100)
    return ChatClient(
        _echo_model(tool_name), default_advisors=[loop, memory_advisor], default_tools=[the_tool]
    )


CASES = {
    "raises": (
        raises,
        "Error: tool 'raises' failed with ConnectionError: weather service unreachable for Oslo",
    ),
    "hangs": (hangs, "Error: tool 'hangs' did not finish within 0.3 seconds"),
    "unserialisable": (
        unserialisable,
        "Error: tool 'unserialisable' failed with TypeError: tool 'unserialisable' "
        "returned <object object at",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_a_failing_tool_gives_the_model_a_clear_error_and_memory_keeps_the_round(
    make_backend: Any, backend_name: str, case: str
) -> None:
    the_tool, expected = CASES[case]
    memory = window(make_backend(backend_name).repository())
    client = _client(memory, case, the_tool)

    answer = client.prompt("Weather in Oslo?").param(CID, "c").call().content()
    assert answer is not None and expected in answer
    assert client.prompt("again").param(CID, "c").call().content() == "still here"

    stored = memory.get("c")
    assert [type(m).__name__ for m in stored] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert expected in stored[2].responses[0].response_data  # type: ignore[union-attr]


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_a_10_mb_tool_result_reaches_the_model_and_memory_whole(make_backend: Any, backend_name: str) -> None:
    memory = window(make_backend(backend_name).repository())

    answer = _client(memory, "huge", huge).prompt("Weather in Oslo?").param(CID, "c").call().content()

    assert answer is not None and answer.startswith("10000000:xxx")
    stored = memory.get("c")
    assert stored[2].responses[0].response_data == "x" * 10_000_000  # type: ignore[union-attr]


def teardown_module() -> None:
    _release.set()  # let the abandoned sync tool threads end
