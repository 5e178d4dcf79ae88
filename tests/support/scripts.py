"""Scripted conversations for the tests' server (``tests.support.openai_server``): each is a
``Script``, a function of the request that returns the reply's steps, for the server to play when
nothing is queued (or queued itself for one request).

* ``chat_answer``: a Chat Completions answer (whole or streamed, as asked), optionally held until
  the test releases it, or stalled after its text.
* ``AgentRounds``: the durable runs' agent; a conversation (named by the model) asks for tools for
  some rounds, then answers ``AGENT_FINAL``.
* ``tool_loop``: one tiny tool loop on each provider's endpoint (Chat Completions, Responses and
  Anthropic Messages): ``get_weather`` for Paris, then ``LOOP_FINAL``.
* ``judge``: an LLM judge's JSON verdict.
* ``scenarios``: the benchmarks' scenarios (``weather+k5``...), from ``benchmarks/harness``.
* ``failing``: the same error for every request.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tests.support.openai_server import (
    Hold,
    Pause,
    Received,
    Script,
    ScriptedServer,
    Stall,
    Step,
    json_reply,
    raw_reply,
    sse_reply,
)
from tests.support.payloads import (
    Usage,
    chat_call,
    openai_calls_events,
    openai_completion,
    openai_text_events,
    openai_tool_events,
    openai_usage_chunk,
)

# -- an answer a test holds and lets go ------------------------------------------------------------


def chat_answer(
    *chunks: str, hold: threading.Event | None = None, stall: bool = False, usage: Usage = (1, 1)
) -> Script:
    """A Chat Completions answer made of ``chunks`` (``ok`` without any): streamed chunk by chunk
    when the request streams, else joined. With ``hold``, nothing is sent before the test sets it;
    with ``stall``, nothing more is sent after the text (a whole answer: nothing at all)."""
    texts = list(chunks) or ["ok"]

    def answer(request: Received) -> list[Step]:
        model = request.body["model"]
        steps: list[Step] = [Hold(hold)] if hold is not None else []
        if not request.body.get("stream"):
            if stall:
                return [*steps, Stall()]
            return [*steps, *json_reply(200, openai_completion("".join(texts), model=model, usage=usage))]
        if stall:
            return [
                *steps,
                *sse_reply(
                    openai_text_events(*texts, finish_reason=None, model=model), done=False, finished=False
                ),
                Stall(),
            ]
        return [*steps, *sse_reply(openai_text_events(*texts, model=model))]

    return answer


# -- the durable runs' agent -----------------------------------------------------------------------

AGENT_FINAL = "Recorded both numbers."
ROUNDS = 3


def agent_round(body: dict[str, Any]) -> tuple[str, int]:
    """A request's conversation (its model) and round: the tool messages it holds, plus one (at most
    2 for the ``approve-`` and ``pay-`` conversations)."""
    model, round_ = body["model"], 1 + sum(m["role"] == "tool" for m in body["messages"])
    return model, min(round_, 2) if model.startswith(("approve-", "pay-")) else round_


def round_counts(server: ScriptedServer) -> Counter[tuple[str, int]]:
    """How many requests ``server`` received for each ``(model, round)``."""
    return Counter(agent_round(body) for body in server.bodies)


def wait_for_round(server: ScriptedServer, model: str, round_: int) -> None:
    """Block until a request for ``round_`` of ``model`` arrived."""
    server.wait_until(lambda requests: any(agent_round(r.body) == (model, round_) for r in requests))


class AgentRounds:
    """The agent of the durable tests. Rounds 1 and 2 ask for the tool ``record`` (``{"n": round}``),
    round 3 answers ``AGENT_FINAL``. A model name starting with ``hang2-`` makes the first round-2
    request of that conversation hang until the client goes away (so a test can kill the worker
    mid-round). One starting with ``approve-`` asks in round 1 for two calls of the tool ``guarded``
    (``call_a`` with ``{"n": 1}``, ``call_b`` with ``{"n": 2}``) and answers in round 2; one starting
    with ``pay-`` asks in round 1 for the tool ``pay`` (``call_pay``, ``{"n": 5}``) and answers in
    round 2. One starting with ``handoff-`` asks in round 1 for ``transfer_to_billing`` (a handoff),
    then goes on as ``hang2-`` (round 2 hangs once, records 2, round 3 answers). Streamed requests get text deltas (or whole tool calls), a finish reason and ``[DONE]``."""

    def __init__(self) -> None:
        self._seen: Counter[tuple[str, int]] = Counter()

    def __call__(self, request: Received) -> list[Step]:
        model, round_ = agent_round(request.body)
        self._seen[(model, round_)] += 1  # the server calls scripts one request at a time
        if model.startswith(("hang2-", "handoff-")) and round_ == 2 and self._seen[(model, round_)] == 1:
            return [Stall()]
        calls, rounds = [_record(f"call_{round_}", "record", round_)], ROUNDS
        if model.startswith("handoff-") and round_ == 1:  # triage hands over; billing records 2
            calls = [chat_call("call_h", "transfer_to_billing", "{}")]
        if model.startswith("approve-"):
            calls, rounds = [_record("call_a", "guarded", 1), _record("call_b", "guarded", 2)], 2
        elif model.startswith("pay-"):
            calls, rounds = [_record("call_pay", "pay", 5)], 2
        final = round_ >= rounds
        if request.body.get("stream"):
            words = AGENT_FINAL.split(" ")
            deltas = [words[0], *(" " + word for word in words[1:])]
            events = (
                openai_text_events(*deltas, model=model) if final else openai_calls_events(calls, model=model)
            )
            return sse_reply(events)
        body = openai_completion(
            AGENT_FINAL if final else None,
            tool_calls=() if final else calls,
            finish_reason="stop" if final else "tool_calls",
            model=model,
            usage=(10, 5),
        )
        return json_reply(200, body)


def _record(call_id: str, name: str, n: int) -> dict[str, Any]:
    return chat_call(call_id, name, json.dumps({"n": n}))


# -- one tool loop on every provider's endpoint ----------------------------------------------------

WEATHER = "Sunny and 21C in Paris"
LOOP_FINAL = "It is sunny in Paris."
CALL_ID = "call_loop_1"
ARGUMENTS = '{"city": "Paris"}'


def _tool_result(path: str, body: dict[str, Any]) -> str | None:
    """The newest tool result in the request, or None when the newest input is not one."""
    if path.endswith("/chat/completions"):
        last = body["messages"][-1]
        return last["content"] if last.get("role") == "tool" else None
    if path.endswith("/responses"):
        last = body["input"][-1]
        return last["output"] if last.get("type") == "function_call_output" else None
    content = body["messages"][-1]["content"]
    blocks = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )
    if not blocks:
        return None
    result = blocks[-1]["content"]
    return result if isinstance(result, str) else "".join(part.get("text", "") for part in result)


def _chat(final: bool, stream: bool) -> tuple[str, Any]:
    model, usage = "loop-model", (10, 5)
    if not stream:
        if final:
            return "json", openai_completion(LOOP_FINAL, model=model, usage=usage)
        call = chat_call(CALL_ID, "get_weather", ARGUMENTS)
        return "json", openai_completion(
            None, tool_calls=[call], finish_reason="tool_calls", model=model, usage=usage
        )
    events = (
        openai_text_events("It is sunny", " in Paris.", model=model)
        if final
        else openai_tool_events("get_weather", ['{"city": ', '"Paris"}'], call_id=CALL_ID, model=model)
    )
    return "sse", [*events, openai_usage_chunk(usage, model=model)]


def _responses(final: bool, stream: bool) -> tuple[str, Any]:
    if final:
        item: dict[str, Any] = {
            "type": "message",
            "id": "msg_loop",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": LOOP_FINAL, "annotations": []}],
        }
    else:
        item = {
            "type": "function_call",
            "id": "fc_loop",
            "call_id": CALL_ID,
            "name": "get_weather",
            "arguments": ARGUMENTS,
            "status": "completed",
        }
    response = {
        "id": "resp_loop",
        "object": "response",
        "created_at": 0,
        "model": "loop-model",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "output": [item],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }
    if not stream:
        return "json", response
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    if final:
        events.append(
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}}
        )
        events += [
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "item_id": "msg_loop",
                "delta": d,
            }
            for d in ("It is sunny", " in Paris.")
        ]
    else:
        events.append(
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}}
        )
        events += [
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_loop",
                "delta": d,
            }
            for d in ('{"city": ', '"Paris"}')
        ]
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": response})
    return "sse", "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _messages(final: bool, stream: bool) -> tuple[str, Any]:
    block: dict[str, Any] = (
        {"type": "text", "text": LOOP_FINAL}
        if final
        else {"type": "tool_use", "id": CALL_ID, "name": "get_weather", "input": json.loads(ARGUMENTS)}
    )
    stop = "end_turn" if final else "tool_use"
    message = {
        "id": "msg_loop",
        "type": "message",
        "role": "assistant",
        "model": "loop-model",
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    if not stream:
        return "json", message
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        }
    ]
    if final:
        events.append(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        )
        events += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
            for d in ("It is sunny", " in Paris.")
        ]
    else:
        events.append({"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}})
        events += [
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": d},
            }
            for d in ('{"city": ', '"Paris"}')
        ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return "sse", "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


_ROUTES = {"/chat/completions": _chat, "/responses": _responses, "/messages": _messages}


def _sse_text(events: Any) -> str:
    if isinstance(events, str):
        return events
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def scripted_answer(endpoint: str, *, final: bool, stream: bool) -> dict[str, Any]:
    """The tool loop's answer on ``endpoint`` ("/chat/completions", "/responses", "/messages") as a
    cassette response: the tool call (``final=False``) or the final text, as JSON or as SSE."""
    kind, payload = _ROUTES[endpoint](final, stream)
    if kind == "json":
        return {"status": 200, "content_type": "application/json", "json": payload}
    return {"status": 200, "content_type": "text/event-stream", "sse": _sse_text(payload)}


def tool_loop(request: Received) -> list[Step]:
    """Every endpoint plays one tiny tool loop: a request without a tool result is answered with a
    call of ``get_weather`` for Paris; a request whose newest input is the tool result ``WEATHER``
    with the final text ``LOOP_FINAL``; any other tool result is a 400 naming what arrived, so a
    loop that skipped or garbled its tool fails loudly; an unknown path is a 404."""
    path = request.path.split("?")[0]
    route = next((fn for suffix, fn in _ROUTES.items() if path.endswith(suffix)), None)
    if route is None:
        return json_reply(404, {"error": {"message": f"no route {path}"}})
    result = _tool_result(path, request.body)
    if result is not None and result != WEATHER:
        message = f"expected the tool result {WEATHER!r}, got {result!r}"
        return json_reply(400, {"error": {"message": message, "type": "invalid_request_error"}})
    kind, payload = route(result is not None, bool(request.body.get("stream")))
    if kind == "json":
        return json_reply(200, payload)
    return raw_reply(200, "text/event-stream", _sse_text(payload).encode())


# -- a judge ---------------------------------------------------------------------------------------

_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.DOTALL)


def verdict_for(prompt: str) -> dict[str, object]:
    """The judge's verdict: 4 when the answer (between ``<answer>`` tags) says "sunny", else 1."""
    found = _ANSWER.search(prompt)
    sunny = found is not None and "sunny" in found.group(1)
    return (
        {"score": 4, "feedback": "Says the weather."}
        if sunny
        else {"score": 1, "feedback": "No weather in it."}
    )


def judge(request: Received) -> list[Step]:
    """A loopback OpenAI-compatible judge for ``advisorchain eval --judge``: the JSON verdict
    ``LLMJudgeEvaluator`` asks for, rating the answer in the last message."""
    verdict = verdict_for(str(request.body["messages"][-1]["content"]))
    body = openai_completion(json.dumps(verdict), model=request.body.get("model", "judge"), usage=(50, 10))
    return json_reply(200, body)


# -- the provider behind the docs' examples ----------------------------------------------------------


def docs_provider(request: Received) -> list[Step]:
    """Every provider API the documented examples call (OpenAI Chat Completions and Responses,
    Anthropic Messages), on loopback: the final text of the tool loop above (``LOOP_FINAL``, which
    says "sunny"), streamed when asked; a judge's request (its answer between ``<answer>`` tags) is
    answered with ``judge``'s verdict."""
    path = request.path.split("?")[0]
    route = next((fn for suffix, fn in _ROUTES.items() if path.endswith(suffix)), None)
    if route is None:
        return json_reply(404, {"error": {"message": f"no route {path}"}})
    messages = request.body.get("messages") or []
    if route is _chat and messages and "<answer>" in str(messages[-1].get("content")):
        return judge(request)
    kind, payload = route(True, bool(request.body.get("stream")))
    if kind == "json":
        return json_reply(200, payload)
    return raw_reply(200, "text/event-stream", _sse_text(payload).encode())


# -- the benchmarks' scenarios ---------------------------------------------------------------------


def scenarios(request: Received) -> list[Step]:
    """The benchmark harness's scenario named by the request's model (``weather``, ``loop-N``, with
    ``+kK`` and ``+latMS``), as ``benchmarks/harness/server.py`` plays it (the scenarios' rules
    have their one home in ``benchmarks/harness/scenarios.py``); a wrong tool result is a 400."""
    from benchmarks.harness.scenarios import (
        Scenario,
        check_tool_messages,
        completion_body,
        stream_events,
        tool_rounds_done,
    )

    try:
        scenario = Scenario.parse(str(request.body.get("model")))
    except ValueError as exc:
        return _bad(str(exc))
    messages = request.body.get("messages") or []
    problem = check_tool_messages(scenario, messages)
    if problem is not None:
        return _bad(problem)
    done = tool_rounds_done(scenario, messages)
    calls = scenario.calls_for_round(done) if done < scenario.rounds else []
    latency: list[Step] = [Pause(scenario.latency_ms / 1000)] if scenario.latency_ms else []
    if request.body.get("stream"):
        usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
        events = stream_events(scenario.model, calls, scenario.chunks, usage)
        return [*latency, *sse_reply(events, done=False)]
    return [*latency, *raw_reply(200, "application/json", completion_body(scenario.model, calls))]


def _bad(message: str) -> list[Step]:
    return json_reply(400, {"error": {"message": message, "type": "invalid_request"}})


# -- failures --------------------------------------------------------------------------------------


def failing(status: int, message: str, error_type: str, headers: dict[str, str] | None = None) -> Script:
    """Every request answered ``status`` with an OpenAI-style error body (and ``headers``)."""

    def fail(request: Received) -> Sequence[Step]:
        return json_reply(status, {"error": {"message": message, "type": error_type}}, headers)

    return fail
