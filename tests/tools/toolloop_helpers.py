"""Builders and observing advisors shared by the tool-loop tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from advisorchain import (
    AssistantMessage,
    CallAdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    ChatOptions,
    ChatResponse,
    Message,
    Prompt,
    StreamAdvisorChain,
    SystemMessage,
    ToolCall,
    Usage,
    UserMessage,
)
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import ScriptedChatModel
from advisorchain.tools.function import tool
from advisorchain.tools.manager import ToolExecutionResult

INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 100
OUTSIDE = ToolCallingAdvisor.DEFAULT_ORDER - 100


def asks(*calls: tuple[str, str, str], text: str | None = None) -> AssistantMessage:
    """An assistant message asking for tool calls given as (id, name, arguments)."""
    return AssistantMessage(text, [ToolCall(i, n, a) for i, n, a in calls])


def with_usage(message: AssistantMessage, prompt_tokens: int, completion_tokens: int) -> ChatResponse:
    finish = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse.of(message, finish, Usage(prompt_tokens, completion_tokens))


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"noon in {city}"


@tool(return_direct=True)
def lookup(key: str) -> str:
    """Look a key up; the answer goes straight to the user."""
    return f"value of {key}"


@tool(return_direct=True)
def lookup_more(key: str) -> str:
    """Look another key up; the answer goes straight to the user."""
    return f"more of {key}"


def prompt_with(*tools: Any, messages: Sequence[Any] = (UserMessage("question"),)) -> Prompt:
    return Prompt(messages, ChatOptions(tool_callbacks=tools))


class Observer:
    """An advisor that records each request it sees and each response or chunk that passes."""

    def __init__(self, order: int = INSIDE, name: str = "observer") -> None:
        self.order = order
        self._name = name
        self.requests: list[ChatClientRequest] = []
        self.responses: list[ChatClientResponse] = []

    @property
    def name(self) -> str:
        return self._name

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        self.requests.append(request)
        response = await chain.next_call(request)
        self.responses.append(response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self.requests.append(request)
        async for chunk in chain.next_stream(request):
            self.responses.append(chunk)
            yield chunk


def call_chain(model: ScriptedChatModel, *advisors: Any) -> CallAdvisorChain:
    return CallAdvisorChain(sorted(advisors, key=lambda a: a.order), model)


def stream_chain(model: ScriptedChatModel, *advisors: Any) -> StreamAdvisorChain:
    return StreamAdvisorChain(sorted(advisors, key=lambda a: a.order), model)


async def collect(stream: AsyncIterator[ChatClientResponse]) -> list[ChatClientResponse]:
    return [chunk async for chunk in stream]


WEATHER = ("w1", "get_weather", '{"city": "Oslo"}')
TIME = ("t1", "get_time", '{"city": "Oslo"}')

Path = Literal["call", "stream"]
PATHS: list[Path] = ["call", "stream"]
"""Both ways through the chain, for the tests of what the loop does the same on each."""


def request_of(*tools: Any, system: str | None = None) -> ChatClientRequest:
    """A request asking ``weather?`` with ``tools`` (after ``system``, when given)."""
    messages: list[Message] = [SystemMessage(system)] if system else []
    return ChatClientRequest(prompt_with(*tools, messages=[*messages, UserMessage("weather?")]))


async def run_loop(
    path: Path, model: ScriptedChatModel, *advisors: Any, request: ChatClientRequest | None = None
) -> list[ChatClientResponse]:
    """The chain of ``advisors`` on ``model`` run on ``path`` for ``request`` (``weather?`` with
    get_weather and get_time by default): the one response, or every streamed chunk."""
    request = request or request_of(get_weather, get_time)
    if path == "call":
        return [await call_chain(model, *advisors).next_call(request)]
    return await collect(stream_chain(model, *advisors).next_stream(request))


class Auditing(ToolCallingAdvisor):
    """Records each hook call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log: list[str] = []

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        self.log.append("initialize")
        return request

    async def do_before_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        self.log.append("before")
        return request

    async def do_after_call(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        calls = response.chat_response.result.output.tool_calls if response.chat_response else ()
        self.log.append(f"after {[c.name for c in calls]}")
        return response

    async def do_get_next_instructions_for_tool_call(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse,
        tool_execution_result: ToolExecutionResult,
    ) -> list[Message]:
        self.log.append("next")
        return await super().do_get_next_instructions_for_tool_call(request, response, tool_execution_result)

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        self.log.append(f"finalize {response.chat_response.text if response.chat_response else None}")
        return response


HOOKS = ["initialize", "before", "after ['get_weather']", "next", "before", "after []", "finalize done"]
