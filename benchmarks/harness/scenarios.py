"""What the scripted server answers, and what a correct agent run returns (stdlib only).

A scenario is named by the ``model`` field of the request, so one server serves every scenario and
stays stateless: the round of a conversation is the number of ``tool`` messages it already holds.

* ``weather``: two parallel ``get_weather`` calls (Paris, London), then a final answer.
* ``loop-N``: N sequential rounds of one ``get_weather`` call each, then a final answer.

Options follow as ``+`` suffixes: ``+kK`` streams the final answer as K content deltas (default 20),
``+latMS`` answers each request after MS milliseconds (default 0) and ``+sN`` ends a sentence every N
deltas (``w9. `` instead of ``w9 ``; default none): ``weather+k200+lat50``, ``loop-0+k2000+s10``.
Streamed tool calls split their arguments over several deltas. Every implementation under test must
return exactly ``expected_text``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

TOOL_NAME = "get_weather"
TOOL_DESCRIPTION = "Get the current weather for a city."
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city name."}},
    "required": ["city"],
    "additionalProperties": False,
}
PROMPT = "What is the weather like in the cities I care about?"
FINAL_TEXT = "It is sunny everywhere you asked about."
WEATHER_CITIES = ("Paris", "London")
ARGUMENT_PIECE = 6  # characters per streamed tool-call argument delta


def tool_result(city: str) -> str:
    """What ``get_weather(city)`` returns in every implementation."""
    return f"{city}: sunny, 21C"


def stream_chunk_text(index: int, sentence_every: int = 0) -> str:
    """The text of the ``index``-th content delta of a streamed final answer (every
    ``sentence_every``-th one ends a sentence)."""
    if sentence_every and (index + 1) % sentence_every == 0:
        return f"w{index}. "
    return f"w{index} "


@dataclass(frozen=True, slots=True)
class Scenario:
    """A parsed scenario (the request's ``model``): ``rounds`` tool rounds of ``calls_per_round``."""

    model: str
    name: str
    rounds: int
    calls_per_round: int
    chunks: int = 20
    latency_ms: float = 0.0
    sentence_every: int = 0

    @classmethod
    def parse(cls, model: str) -> Scenario:
        """``weather`` or ``loop-N``, then options; anything else is a ValueError naming it."""
        name, *options = model.split("+")
        prefix, _, count = name.partition("-")
        if name == "weather":
            scenario = cls(model, name, 1, len(WEATHER_CITIES))
        elif prefix == "loop" and count.isdigit():
            scenario = cls(model, name, int(count), 1)
        else:
            raise ValueError(f"unknown scenario {model!r}; use 'weather' or 'loop-N' (N a number)")
        for option in options:
            if option.startswith("k") and option[1:].isdigit():
                scenario = replace(scenario, chunks=int(option[1:]))
            elif option.startswith("lat") and option[3:].replace(".", "", 1).isdigit():
                scenario = replace(scenario, latency_ms=float(option[3:]))
            elif option.startswith("s") and option[1:].isdigit():
                scenario = replace(scenario, sentence_every=int(option[1:]))
            else:
                raise ValueError(f"unknown option {option!r} in scenario {model!r}; use +kK, +latMS or +sN")
        return scenario

    @staticmethod
    def name_for(name: str, chunks: int | None = None, latency_ms: float = 0.0) -> str:
        """The model string for ``name`` with the given options."""
        return (
            name
            + (f"+k{chunks}" if chunks is not None else "")
            + (f"+lat{latency_ms:g}" if latency_ms else "")
        )

    @property
    def requests_per_run(self) -> int:
        """Model requests one agent run makes: one per tool round plus the final answer."""
        return self.rounds + 1

    def calls_for_round(self, round_index: int) -> list[tuple[str, str]]:
        """The (call id, city) pairs the model asks for in round ``round_index``."""
        if self.name == "weather":
            return [(f"call_w{i}", city) for i, city in enumerate(WEATHER_CITIES)]
        return [(f"call_{round_index}", f"City{round_index}")]

    def expected_city(self, call_id: str) -> str | None:
        """The city a tool call id stands for (None for an id this scenario never issues)."""
        for index in range(self.rounds):
            for cid, city in self.calls_for_round(index):
                if cid == call_id:
                    return city
        return None

    def expected_text(self, stream: bool) -> str:
        """The final answer an agent run returns (streamed: the joined content deltas)."""
        if not stream:
            return FINAL_TEXT
        return "".join(stream_chunk_text(i, self.sentence_every) for i in range(self.chunks))


def check_tool_messages(scenario: Scenario, messages: list[dict[str, Any]]) -> str | None:
    """None when every tool message answers a known call with the right result, else the problem."""
    for m in messages:
        if m.get("role") != "tool":
            continue
        city = scenario.expected_city(str(m.get("tool_call_id")))
        content = m.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if city is None or content != tool_result(city):
            return f"unexpected tool message {m!r}"
    return None


def tool_rounds_done(scenario: Scenario, messages: list[dict[str, Any]]) -> int:
    """How many tool rounds the conversation has completed."""
    tools = sum(1 for m in messages if m.get("role") == "tool")
    return tools // scenario.calls_per_round


# -- wire bodies ------------------------------------------------------------------------------------

_BASE = {"id": "chatcmpl-bench", "created": 1_700_000_000}
_USAGE = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}


def _tool_call(call_id: str, city: str) -> dict[str, Any]:
    arguments = json.dumps({"city": city})
    return {"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}


def completion_body(model: str, calls: list[tuple[str, str]]) -> bytes:
    """A non-streamed completion: tool calls when ``calls`` is non-empty, else the final answer."""
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else FINAL_TEXT}
    if calls:
        message["tool_calls"] = [_tool_call(cid, city) for cid, city in calls]
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if calls else "stop",
        "logprobs": None,
    }
    body = {**_BASE, "object": "chat.completion", "model": model, "choices": [choice], "usage": _USAGE}
    return json.dumps(body).encode()


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {**_BASE, "object": "chat.completion.chunk", "model": model, "choices": [choice]}


def _tool_call_chunks(model: str, calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    events = [_chunk(model, {"role": "assistant", "content": None})]
    for index, (cid, city) in enumerate(calls):
        head = {
            "index": index,
            "id": cid,
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": ""},
        }
        events.append(_chunk(model, {"tool_calls": [head]}))
        arguments = json.dumps({"city": city})
        for start in range(0, len(arguments), ARGUMENT_PIECE):
            piece = {"index": index, "function": {"arguments": arguments[start : start + ARGUMENT_PIECE]}}
            events.append(_chunk(model, {"tool_calls": [piece]}))
    events.append(_chunk(model, {}, "tool_calls"))
    return events


def _text_chunks(model: str, chunks: int, sentence_every: int = 0) -> list[dict[str, Any]]:
    events = [_chunk(model, {"role": "assistant", "content": ""})]
    events.extend(_chunk(model, {"content": stream_chunk_text(i, sentence_every)}) for i in range(chunks))
    events.append(_chunk(model, {}, "stop"))
    return events


def stream_events(
    model: str, calls: list[tuple[str, str]], chunks: int, usage: bool, sentence_every: int = 0
) -> list[bytes]:
    """The server-sent events of a streamed completion, ``data: [DONE]`` included."""
    events = _tool_call_chunks(model, calls) if calls else _text_chunks(model, chunks, sentence_every)
    if usage:
        events.append(
            {**_BASE, "object": "chat.completion.chunk", "model": model, "choices": [], "usage": _USAGE}
        )
    out = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    out.append(b"data: [DONE]\n\n")
    return out
