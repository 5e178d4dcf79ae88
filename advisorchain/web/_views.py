"""What the page shows, as JSON-ready values: a stored conversation as turns (the question, then
its steps — text and tool calls with their results), the tool calls a conversation waits on, usage,
and whatever else the chain left in a response's context (evaluations, retrieved documents,
citations), rendered generically."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from ..chain.vocabulary import AdvisorParams
from ..errors import AdvisorChainError
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolResponseMessage, UserMessage
from ..model import Usage
from ..tools import ToolCallback
from ..tools.approvals import requires_approval

__all__ = [
    "CONTEXT_KEYS",
    "arranged",
    "TURN_KEY",
    "error_line",
    "jsonable",
    "pending_calls",
    "title_of",
    "turns_of",
    "usage_view",
]

TURN_KEY = "advisorchain.web.turn"
"""The user message's metadata key holding the id of the page's turn (it pairs a stored question
with the runs the page recorded for it: tool calls, trace, usage)."""

CONTEXT_KEYS = {
    "evaluations": AdvisorParams.EVALUATIONS,
    "documents": AdvisorParams.RETRIEVED_DOCUMENTS,
    "citations": AdvisorParams.CITATIONS,
    "run_usage": AdvisorParams.RUN_USAGE,
}
"""What the page shows of a response's context, when the chain put it there."""

_TEXT_LIMIT = 20_000
_ITEMS_LIMIT = 200
_DEPTH_LIMIT = 6


def error_line(exc: BaseException) -> str:
    """``exc`` as one readable line (the library's errors say what to do; others get their type)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, AdvisorChainError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON values: dataclasses and pydantic models as objects, sequences as lists,
    decimals as text, anything else as its text; long texts and collections are cut."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= _TEXT_LIMIT else value[: _TEXT_LIMIT - 1] + "…"
    if isinstance(value, Decimal):
        return str(value)
    if depth >= _DEPTH_LIMIT:
        return jsonable(repr(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(), depth + 1)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in list(value.items())[:_ITEMS_LIMIT]}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, depth + 1) for v in list(value)[:_ITEMS_LIMIT]]
    return jsonable(str(value))


def usage_view(usage: Usage | None) -> dict[str, Any] | None:
    """Tokens of an answer, and its cost in USD when it is known."""
    if usage is None:
        return None
    view: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cost is not None:  # left out when the model could not be priced (the page says n/a)
        view["cost"] = str(usage.cost)
    return view


def context_view(context: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a response's context the page shows (see ``CONTEXT_KEYS``), when present."""
    return {name: jsonable(context[key]) for name, key in CONTEXT_KEYS.items() if context.get(key)}


def call_view(call: ToolCall) -> dict[str, Any]:
    """A tool call the page shows."""
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def pending_calls(messages: Sequence[Message], tools: Mapping[str, ToolCallback]) -> list[ToolCall]:
    """The tool calls a stored conversation waits on: those of its last message, when that is an
    unanswered tool-call message, whose tools need approval."""
    last = messages[-1] if messages else None
    if not isinstance(last, AssistantMessage) or not last.tool_calls:
        return []
    return [c for c in last.tool_calls if requires_approval(tools.get(c.name))]


def title_of(messages: Sequence[Message]) -> str | None:
    """The first question of a conversation, on one line and short."""
    for m in messages:
        if isinstance(m, UserMessage) and m.text:
            text = " ".join(m.text.split())
            return text if len(text) <= 60 else text[:59] + "…"
    return None


def turns_of(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The stored conversation as turns: each question with its steps (the answer's text and the
    tool calls, each with its result or error when one was stored)."""
    turns: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, UserMessage):
            turn_id = m.metadata.get(TURN_KEY)
            turns.append(
                {"id": turn_id if isinstance(turn_id, str) else None, "question": m.text, "steps": []}
            )
            continue
        if not turns:  # messages before the first question
            turns.append({"id": None, "question": None, "steps": []})
        turn = turns[-1]
        steps: list[dict[str, Any]] = turn["steps"]
        if isinstance(m, AssistantMessage):
            turn["answers"] = part = turn.get("answers", 0) + 1
            if m.text:
                step = {"type": "text", "text": m.text, "part": part}
                if isinstance(m.metadata.get("agent"), str):  # several agents: who answered
                    step["agent"] = m.metadata["agent"]
                steps.append(step)
            for call in m.tool_calls:
                step = {"type": "tool", **call_view(call), "state": "waiting", "part": part}
                steps.append(step)
                calls[call.id] = step
        elif isinstance(m, ToolResponseMessage):
            for r in m.responses:
                answered = calls.get(r.id)
                if answered is None:
                    answered = {"type": "tool", "id": r.id, "name": r.name, "arguments": None}
                    answered["part"] = turn.get("answers", 0)
                    steps.append(answered)
                answered.update(tool_outcome(r.response_data))
    for turn in turns:
        turn.pop("answers", None)
    return turns


def arranged(steps: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A turn's steps with what the page recorded of its runs: the tool calls the page saw run that
    memory did not keep (memory outside the tool loop keeps questions and answers only), and after
    each run a ``{"type": "run", "index": n}`` step (its usage, trace...).

    When the turn stored one answer per run (memory outside the loop: a run ends with an answer or
    with the tool calls it waits on), the n-th run's calls go before the n-th answer and its step
    after it; otherwise the recorded calls go before the last answer and the run steps at the end.
    """
    merged = [dict(s) for s in steps]
    by_id = {s["id"]: s for s in merged if s["type"] == "tool"}
    answers = max((s.get("part", 0) for s in merged), default=0)
    paired = answers == len(runs)
    for n, run in enumerate(runs, 1):
        extra = []
        for tool in run.get("tools", ()):
            step = by_id.get(tool["id"])
            if step is None:
                step = by_id[tool["id"]] = {"type": "tool", **tool, "recorded": True}
                extra.append(step)
            elif "ms" in tool:
                step.setdefault("ms", tool["ms"])
        if paired:
            at = _first(merged, lambda s, n=n: not s.get("recorded") and s.get("part", 0) >= n)
            merged[at:at] = extra
            end = _first(merged, lambda s, n=n: s["type"] != "run" and s.get("part", 0) > n)
            merged.insert(end, {"type": "run", "index": n - 1})
        else:
            last_text = max((i for i, s in enumerate(merged) if s["type"] == "text"), default=len(merged))
            merged[last_text:last_text] = extra
    if not paired:
        merged.extend({"type": "run", "index": n} for n in range(len(runs)))
    return merged


def _first(steps: Sequence[Mapping[str, Any]], wanted: Any) -> int:
    return next((i for i, s in enumerate(steps) if wanted(s)), len(steps))


def tool_outcome(text: str) -> dict[str, Any]:
    """A tool response's text as the page shows it: a result, or an error (``Error: ...``)."""
    if text.startswith("Error:"):
        return {"state": "error", "error": jsonable(text[len("Error:") :].strip())}
    return {"state": "done", "result": jsonable(text)}
