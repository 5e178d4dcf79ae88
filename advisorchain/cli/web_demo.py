"""The offline agent ``advisorchain web`` serves without ``--model``: the demo's city-day planner
(``advisorchain demo``'s weather and places), played by a scripted model that answers any number
of turns, with a tool that needs approval and one that fails, so every part of the page shows.

No LLM runs: the model picks its tool calls from the words of the question and builds its answers
from the tool results. Its token counts are word counts.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

from ..messages import AssistantMessage, Message, ToolCall, ToolResponseMessage, UserMessage
from ..model import ChatResponse, ChatResponseMetadata, Generation, Prompt, Usage
from ..testing import FunctionChatModel, stream_chunks
from ..tools import tool
from .demo import CITY_WEATHER, PLACES

PLACES_BY_CITY = {
    "lisbon": PLACES,
    "porto": {"museum": ["Serralves", "Museu Nacional Soares dos Reis"], "food": ["Mercado do Bolhão"]},
}

__all__ = ["EXAMPLES", "demo_tools", "web_demo_model"]

EXAMPLES = (
    "Plan a day in Lisbon",
    "Book a table at Time Out Market",
    "Is flight TP123 on time?",
)
HELP = (
    "I am the scripted demo model: no LLM runs here, so I only know a few things. Try "
    + ", ".join(f"“{e}”" for e in EXAMPLES[:-1])
    + f" (it asks for your approval) or “{EXAMPLES[-1]}” (a tool that fails). "
    "Start advisorchain web --model openai:gpt-4o-mini to talk to a real model."
)
_DELAY = 0.03  # seconds between streamed words, so the answer is seen arriving


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return CITY_WEATHER.get(city.lower(), "unknown")


@tool
def find_places(city: str, kind: str) -> list[str]:
    """Places of a kind (museum, food) in a city."""
    return PLACES_BY_CITY.get(city.lower(), {}).get(kind, [])


@tool(requires_approval=True)
def book_table(place: str, time: str) -> str:
    """Book a table at a place (asks for approval first)."""
    number = sum(map(ord, place + time)) % 9000 + 1000
    return f"Table for two at {place}, {time}: confirmed (demo booking #{number})"


@tool
def flight_status(number: str) -> str:
    """The status of a flight."""
    raise ConnectionError(f"the demo has no flight service to ask about {number}")


def demo_tools() -> list[object]:
    """The demo agent's tools."""
    return [get_weather, find_places, book_table, flight_status]


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _words_of(message: Message) -> int:
    if isinstance(message, ToolResponseMessage):
        return sum(_words(r.response_data) for r in message.responses)
    return _words(getattr(message, "text", None))


def _turn(prompt: Prompt) -> tuple[str, list[ToolResponseMessage]]:
    """The question of the current turn and the tool responses it got so far."""
    question = ""
    responses: list[ToolResponseMessage] = []
    for message in reversed(prompt.instructions):
        if isinstance(message, ToolResponseMessage):
            responses.insert(0, message)
        elif isinstance(message, UserMessage):
            question = message.text
            break
    return question, responses


_BOOKING = ("book", "reserve", "table", "approv")


def _first_call(question: str) -> AssistantMessage:
    """What the model asks for first: a booking (needs approval), a flight (fails), the weather
    (and museums, to plan a day), or nothing it knows (it says what it can do)."""
    q = question.lower()
    if any(word in q for word in _BOOKING):
        place = "Time Out Market"
        for kinds in PLACES_BY_CITY.values():
            for places in kinds.values():
                place = next((p for p in places if p.lower() in q), place)
        call = ToolCall("book-1", "book_table", json.dumps({"place": place, "time": "19:30"}))
        return AssistantMessage(
            f"I'll book {place} for 19:30 — that tool asks for your approval first.", [call]
        )
    if "flight" in q:
        number = re.search(r"\b([a-z]{2}\s?\d{2,4})\b", q)
        code = number.group(1).upper().replace(" ", "") if number else "TP123"
        return AssistantMessage(None, [ToolCall("flight-1", "flight_status", json.dumps({"number": code}))])
    city = _city(question)
    if city is None:
        return AssistantMessage(HELP)
    calls = [ToolCall("weather-1", "get_weather", json.dumps({"city": city}))]
    if city.lower() in PLACES_BY_CITY and (
        "weather" not in q or re.search(r"\b(plan|museums?|visit|day)\b", q)
    ):
        calls.append(ToolCall("places-1", "find_places", json.dumps({"city": city, "kind": "museum"})))
    what = "the weather" if len(calls) == 1 else "the weather and find a museum"
    return AssistantMessage(f"Let me check {what} in {city}.", calls)


def _city(question: str) -> str | None:
    """A city the question names: one the demo knows, else a capitalised word after "in" or "for"
    when it asks about the weather or a day's plan."""
    q = question.lower()
    known = next((c for c in CITY_WEATHER if c in q), None)
    if known is not None:
        return known.title()
    if not any(word in q for word in ("weather", "plan", "visit")):
        return None
    named = re.search(r"\b(?:in|for|to)\s+([A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)", question)
    return named.group(1) if named else None


def _answer(prompt: Prompt, responses: list[ToolResponseMessage]) -> str:
    results = {r.name: r.response_data for m in responses for r in m.responses}
    if "book_table" in results:
        text = results["book_table"]
        if text.startswith("Error: the user denied"):
            reason = text.partition("denied this tool call")[2].lstrip(": ").strip()
            return "All right, I did not book it." + (f" (You said: {reason}.)" if reason else "")
        return f"Done. {text}."
    if "flight_status" in results:
        return f"I could not check the flight: {results['flight_status'].removeprefix('Error: ')}"
    weather = results.get("get_weather", "unknown")
    if weather == "unknown":
        city = _asked_city(prompt)
        return (
            f"I don't know the weather in {city}: the demo's weather tool knows only Lisbon and Porto. "
            "Try “Plan a day in Lisbon”."
        )
    if "find_places" not in results:
        return f"The weather is {weather}."
    places = json.loads(results["find_places"] or "[]")
    museums = " or ".join(places) if places else "no museum I know of"
    return f"The weather is {weather}. For the afternoon: {museums}. Enjoy the day!"


def _asked_city(prompt: Prompt) -> str:
    """The city of the turn's ``get_weather`` call."""
    for message in reversed(prompt.instructions):
        for call in getattr(message, "tool_calls", ()):
            if call.name == "get_weather":
                return str(json.loads(call.arguments).get("city", "that city"))
    return "that city"


def _reply(prompt: Prompt) -> ChatResponse:
    question, responses = _turn(prompt)
    message = _first_call(question) if not responses else AssistantMessage(_answer(prompt, responses))
    used = Usage(
        sum(_words_of(m) for m in prompt.instructions),
        _words(message.text) + sum(_words(c.arguments) for c in message.tool_calls),
    )
    finish = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse(
        (Generation(message, finish),),
        ChatResponseMetadata(model="scripted-demo", usage=used, finish_reason=finish),
    )


async def _stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
    for chunk in stream_chunks(_reply(prompt)):
        await asyncio.sleep(_DELAY)
        yield chunk


class WebDemoModel(FunctionChatModel):
    """The scripted model of the web demo (see the module docstring)."""

    model_name = "scripted-demo"
    examples = EXAMPLES
    """Questions it answers with its tools (the page offers them)."""

    def __init__(self) -> None:
        super().__init__(_reply, _stream)


def web_demo_model() -> WebDemoModel:
    """A new scripted model for the web demo."""
    return WebDemoModel()
