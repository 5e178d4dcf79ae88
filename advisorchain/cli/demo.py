"""``advisorchain demo``: an agent run through the whole chain.

Offline by default (a scripted model plays the LLM, so it needs no key); ``--model provider:name``
runs the same agent on a real model (key from the environment).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pydantic import BaseModel
from rich.console import Console

from .._tokens import estimate_tokens
from ..advisors.api import AdvisorParams, BaseAdvisor, ChatClientRequest, ChatClientResponse, Ordered
from ..client import ChatClient
from ..memory.api import ChatMemory
from ..messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from ..model import ChatModel, ChatResponse, Prompt
from ..usage import ModelPrice, PriceFunction, RunUsage, Usage, UsageLimits
from ._display import Display, usage_line

if TYPE_CHECKING:
    from ..tools.todo import TodoTools

__all__ = ["DEFAULT_MODELS", "DEMO_PRICES", "DayPlan", "Narrator", "run_demo", "scripted_model"]

CITY_WEATHER = {"lisbon": "sunny, 24°C", "porto": "cloudy, 19°C"}
PLACES = {"museum": ["Museu Calouste Gulbenkian", "MAAT"], "food": ["Time Out Market"]}


class DayPlan(BaseModel):
    """The structured answer of the demo's second turn."""

    city: str
    weather: str
    morning: str
    afternoon: str


def _todos(*statuses: str) -> str:
    texts = ["Check the weather", "Find a museum", "Write the plan"]
    items = [
        {"id": str(i + 1), "text": t, "status": s}
        for i, (t, s) in enumerate(zip(texts, statuses, strict=True))
    ]
    return json.dumps({"items": items})


DEMO_PRICES = {"scripted": ModelPrice(Decimal("0.15"), Decimal("0.60"))}
"""What the offline demo charges its scripted model (gpt-4o-mini's list price), to show costs."""


def scripted_model() -> ChatModel:
    """The LLM's part of the demo, scripted: a todo list, two parallel tools, an update, an answer;
    then one invalid and one valid structured answer (the validation advisor retries). Each answer
    reports its tokens as estimated (4 characters a token), as a provider would report them."""
    from ..testing import ScriptedChatModel

    class Scripted(ScriptedChatModel):
        def _take(self, prompt: Prompt) -> ChatResponse:
            response = super()._take(prompt)
            answer = [g.output for g in response.generations]
            return response.with_usage(Usage(estimate_tokens(prompt.instructions), estimate_tokens(answer)))

    call = ToolCall
    return Scripted(
        [
            AssistantMessage(
                "Let me plan this.", [call("t1", "todo_write", _todos("in_progress", "pending", "pending"))]
            ),
            AssistantMessage(
                None,
                [
                    call("w1", "get_weather", '{"city": "Lisbon"}'),
                    call("p1", "find_places", '{"city": "Lisbon", "kind": "museum"}'),
                ],
            ),
            AssistantMessage(
                None, [call("t2", "todo_write", _todos("completed", "completed", "in_progress"))]
            ),
            "Lisbon is sunny (24°C): Gulbenkian in the morning, MAAT by the river in the afternoon.",
            '{"city": "Lisbon", "weather": "sunny, 24°C", "morning": "Museu Calouste Gulbenkian"}',
            '{"city": "Lisbon", "weather": "sunny, 24°C", "morning": "Museu Calouste Gulbenkian",'
            ' "afternoon": "MAAT"}',
        ]
    )


DEFAULT_MODELS = {"openai": "gpt-4o-mini", "openai-responses": "gpt-5-mini", "anthropic": "claude-haiku-4-5"}


class Narrator(BaseAdvisor):
    """An observing advisor inside the tool loop: it sees, and prints, every iteration (each on a
    line of its own, never on the line of an answer being streamed)."""

    def __init__(self, display: Display, order: int) -> None:
        self.display = display
        self.order = order
        self.iteration = 0

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        self.iteration += 1
        last = request.prompt.instructions[-1]
        if isinstance(last, ToolResponseMessage):
            for r in last.responses:
                shown = r.response_data.replace("\n", " | ")
                self.display.line(f"      {r.name} -> {shown}")
        elif isinstance(last, UserMessage) and "Output JSON validation failed" in last.text:
            self.display.line(f"      retry: {last.text.splitlines()[-1]}")
        self.display.line(
            f"  [{self.iteration}] model call with {len(request.prompt.instructions)} message(s)"
        )
        return request

    def after(self, response: ChatClientResponse, chain: object) -> ChatClientResponse:
        chat = response.chat_response
        if chat is not None and chat.result is not None:
            out = chat.result.output
            for c in out.tool_calls:
                self.display.line(f"      asks for {c.name}({c.arguments})")
            if out.text and not out.tool_calls:
                self.display.line(f"      answers: {out.text}")
        return response


def run_demo(
    out: TextIO,
    model: ChatModel,
    db_path: Path,
    stream: bool,
    limits: UsageLimits | None = None,
    prices: Mapping[str, ModelPrice] | PriceFunction | None = None,
) -> None:
    """The demo agent: memory (SQLite) outside the loop, a narrator and a todo reminder inside it,
    three tools (two of them the todo list), then a validated structured answer; each answer's
    tokens and cost under it, each within ``limits`` (``--max-cost``, ``--max-requests``)."""
    from ..advisors.memory import MessageChatMemoryAdvisor
    from ..advisors.todo import TodoReminderAdvisor
    from ..memory import MessageWindowChatMemory, SQLiteChatMemoryRepository
    from ..tools import tool
    from ..tools.todo import TodoTools

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return CITY_WEATHER.get(city.lower(), "unknown")

    @tool
    def find_places(city: str, kind: str) -> list[str]:
        """Places of a kind (museum, food) in a city."""
        return PLACES.get(kind, [])

    display = Display(out, Console(file=out, soft_wrap=True, highlight=False, markup=False, emoji=False))
    memory = MessageWindowChatMemory(SQLiteChatMemoryRepository(db_path), max_messages=50)
    todos = TodoTools()
    client = ChatClient(
        model,
        default_system="You plan city days. Keep a todo list with todo_write.",
        default_advisors=[
            MessageChatMemoryAdvisor(memory),
            # Innermost: it sees every model call, tool rounds and validation retries alike.
            Narrator(display, Ordered.LOWEST_PRECEDENCE - 1000),
            TodoReminderAdvisor(),
        ],
        default_tools=[get_weather, find_places, todos],
        usage_limits=limits,
        prices=prices,
    )
    question = "Plan a day in Lisbon: check the weather and find a museum."
    display.line(f"user: {question}")
    spec = client.prompt(question).param(ChatMemory.CONVERSATION_ID, "demo")
    run: RunUsage | None = None
    if stream:  # streamed text opens a line of its own; the narrator's lines close it
        for chunk in spec.stream().chat_client_responses():
            run = chunk.context.get(AdvisorParams.RUN_USAGE, run)
            text = chunk.chat_response.text if chunk.chat_response is not None else None
            display.text(text or "", opening="assistant (streamed): ")
        display.end_answer()
    else:
        answer = spec.call().chat_client_response()
        run = answer.context.get(AdvisorParams.RUN_USAGE)
        display.line(f"assistant: {answer.chat_response.text if answer.chat_response else None}")
    if run is not None:
        display.line(f"  ({usage_line(run)})")
    display.line(f"todo list:\n  {_render(todos)}")

    display.line("\nuser: Now as a structured plan.")
    plan = (
        client.prompt("Now as a structured plan.")
        .param(ChatMemory.CONVERSATION_ID, "demo")
        .call()
        .response_entity(DayPlan, schema_validation=True)
    )
    display.line(f"structured: {plan.entity!r}")
    if plan.response.metadata.usage is not None:
        display.line(f"  ({usage_line(plan.response.metadata.usage)})")
    stored = memory.get("demo")
    kinds = ", ".join(m.type.value for m in stored)
    display.line(f"\nmemory ({db_path.name}): {len(stored)} messages stored: {kinds}")


def _render(todos: TodoTools) -> str:
    from ..tools.todo import render

    return render(todos.todos("demo")).replace("\n", "\n  ")
