"""Provider payloads for the scripted server (``tests.support.openai_server``): Chat Completions,
Responses and Anthropic Messages bodies and stream events, as the real APIs send them.

Send a body with ``json_reply(200, body)`` and events with ``sse_reply(events)`` (Responses and
Messages events with ``event_names=True``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MODEL = "fault-model"
"""The model a payload names unless told otherwise (the scripts echo the request's)."""

Usage = tuple[int, int]
"""Prompt and completion tokens."""


def _usage(usage: Usage) -> dict[str, int]:
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One tool call of a Chat Completions assistant message."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_completion(
    text: str | None,
    *,
    tool_calls: Sequence[dict[str, Any]] = (),
    finish_reason: str | None = "stop",
    model: str = MODEL,
    usage: Usage = (3, 2),
) -> dict[str, Any]:
    """A Chat Completions response body with one choice: ``text``, and ``tool_calls`` when given."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": _usage(usage),
    }


def openai_chunk(
    delta: dict[str, Any], finish_reason: str | None = None, *, model: str = MODEL
) -> dict[str, Any]:
    """One Chat Completions stream chunk."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def openai_usage_chunk(usage: Usage, *, model: str = MODEL) -> dict[str, Any]:
    """The last chunk of a stream asked for with ``include_usage``: no choices, the usage."""
    return {**openai_chunk({}, model=model), "choices": [], "usage": _usage(usage)}


def openai_text_events(
    *deltas: str, finish_reason: str | None = "stop", model: str = MODEL
) -> list[dict[str, Any]]:
    """Chat Completions stream chunks: one per text delta, then the finish chunk (unless None)."""
    events = [openai_chunk({"role": "assistant", "content": d}, model=model) for d in deltas]
    if finish_reason is not None:
        events.append(openai_chunk({}, finish_reason, model=model))
    return events


def openai_tool_events(
    name: str,
    argument_pieces: Sequence[str],
    *,
    call_id: str = "call_1",
    finish_reason: str | None = "tool_calls",
    model: str = MODEL,
) -> list[dict[str, Any]]:
    """Stream chunks of one tool call whose arguments come in ``argument_pieces``."""
    first = {"index": 0, **chat_call(call_id, name, "")}
    events = [openai_chunk({"role": "assistant", "tool_calls": [first]}, model=model)]
    events += [
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, model=model)
        for piece in argument_pieces
    ]
    if finish_reason is not None:
        events.append(openai_chunk({}, finish_reason, model=model))
    return events


def openai_calls_events(calls: Sequence[dict[str, Any]], *, model: str = MODEL) -> list[dict[str, Any]]:
    """Stream chunks asking for whole ``calls`` (``chat_call``s) in one delta, then the finish."""
    deltas = [{"index": i, **call} for i, call in enumerate(calls)]
    return [
        openai_chunk({"role": "assistant", "tool_calls": deltas}, model=model),
        openai_chunk({}, "tool_calls", model=model),
    ]


def anthropic_text_events(*deltas: str, stop: bool = True) -> list[dict[str, Any]]:
    """Messages-API stream events for a text answer; ``stop=False`` leaves out the stop reason and
    ``message_stop`` (a truncated stream)."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fault",
                "type": "message",
                "role": "assistant",
                "model": "fault-model",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 3, "output_tokens": 0},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
        for d in deltas
    ]
    if stop:
        events += [
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            {"type": "message_stop"},
        ]
    return events


def anthropic_tool_events(
    name: str, argument_pieces: Sequence[str], *, stop: bool = True
) -> list[dict[str, Any]]:
    """Messages-API stream events for one tool_use block whose input JSON comes in pieces."""
    events = anthropic_text_events(stop=False)[:1]
    events.append(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}},
        }
    )
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
        for p in argument_pieces
    ]
    if stop:
        events += [
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ]
    return events


def anthropic_message(text: str) -> dict[str, Any]:
    """A Messages-API response body with one text block."""
    return {
        "id": "msg_fault",
        "type": "message",
        "role": "assistant",
        "model": "fault-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def _responses_response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_fault",
        "object": "response",
        "model": "fault-model",
        "status": status,
        "output": output,
        "usage": {"input_tokens": 3, "output_tokens": 2} if status == "completed" else None,
    }


def _responses_text_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_body(text: str) -> dict[str, Any]:
    """A Responses API response body with one text message."""
    return _responses_response("completed", [_responses_text_item(text)])


def responses_text_events(*deltas: str, complete: bool = True) -> list[dict[str, Any]]:
    """Responses stream events for a text answer (send with ``event_names=True``); ``complete=False``
    leaves out ``response.completed`` (a truncated stream)."""
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _responses_response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    events += [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": d}
        for d in deltas
    ]
    if complete:
        done = _responses_response("completed", [_responses_text_item("".join(deltas))])
        events.append({"type": "response.completed", "response": done})
    return events


def responses_tool_events(
    name: str, argument_pieces: Sequence[str], *, complete: bool = True
) -> list[dict[str, Any]]:
    """Responses stream events of one function call whose arguments come in pieces."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _responses_response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    events += [
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": piece}
        for piece in argument_pieces
    ]
    if complete:
        whole = {**item, "arguments": "".join(argument_pieces), "status": "completed"}
        events.append({"type": "response.completed", "response": _responses_response("completed", [whole])})
    return events
