"""A scripted OpenAI- and Anthropic-compatible server on 127.0.0.1 (stdlib only), for checks that run
the adapters over real HTTP: Chat Completions, Responses and Messages, blocking and streamed.

Every endpoint plays one tiny tool loop: a request without a tool result is answered with a call of
``get_weather`` for Paris; a request whose newest input is the tool result ``WEATHER`` is answered
with the final text ``FINAL``; any other tool result is a 400 naming what arrived, so a loop that
skipped or garbled its tool fails loudly. ``server.requests`` keeps every (path, body).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WEATHER = "Sunny and 21C in Paris"
FINAL = "It is sunny in Paris."
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


# -- Chat Completions --------------------------------------------------------------------------------


def _chat(final: bool, stream: bool) -> tuple[str, Any]:
    base = {"id": "chatcmpl-loop", "object": "chat.completion", "created": 0, "model": "loop-model"}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    call = {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}
    if not stream:
        message = (
            {"role": "assistant", "content": FINAL}
            if final
            else {"role": "assistant", "content": None, "tool_calls": [call]}
        )
        finish = "stop" if final else "tool_calls"
        return "json", {
            **base,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    chunk = {**base, "object": "chat.completion.chunk"}
    if final:
        deltas = [{"role": "assistant", "content": "It is sunny"}, {"content": " in Paris."}]
    else:
        deltas = [
            {
                "role": "assistant",
                "tool_calls": [{"index": 0, **call, "function": {"name": "get_weather", "arguments": ""}}],
            },
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        ]
    events = [{**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append(
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop" if final else "tool_calls"}]}
    )
    events.append({**chunk, "choices": [], "usage": usage})
    return "sse", "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


# -- Responses ---------------------------------------------------------------------------------------


def _responses(final: bool, stream: bool) -> tuple[str, Any]:
    if final:
        item: dict[str, Any] = {
            "type": "message",
            "id": "msg_loop",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": FINAL, "annotations": []}],
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


# -- Anthropic Messages ------------------------------------------------------------------------------


def _messages(final: bool, stream: bool) -> tuple[str, Any]:
    block: dict[str, Any] = (
        {"type": "text", "text": FINAL}
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


def scripted_answer(endpoint: str, *, final: bool, stream: bool) -> dict[str, Any]:
    """The scripted answer of ``endpoint`` ("/chat/completions", "/responses", "/messages") as a
    cassette response: the tool call (``final=False``) or the final text, as JSON or as SSE."""
    kind, payload = _ROUTES[endpoint](final, stream)
    if kind == "json":
        return {"status": 200, "content_type": "application/json", "json": payload}
    return {"status": 200, "content_type": "text/event-stream", "sse": payload}


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reports what matters."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        path = self.path.split("?")[0]
        self.server.requests.append((path, body))
        route = next((fn for suffix, fn in _ROUTES.items() if path.endswith(suffix)), None)
        if route is None:
            return self._send(404, "application/json", json.dumps({"error": {"message": f"no route {path}"}}))
        result = _tool_result(path, body)
        if result is not None and result != WEATHER:
            message = f"expected the tool result {WEATHER!r}, got {result!r}"
            return self._send(
                400,
                "application/json",
                json.dumps({"error": {"message": message, "type": "invalid_request_error"}}),
            )
        kind, payload = route(result is not None, bool(body.get("stream")))
        if kind == "json":
            return self._send(200, "application/json", json.dumps(payload))
        return self._send(200, "text/event-stream", payload)

    def _send(self, status: int, content_type: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer(ThreadingHTTPServer):
    """The scripted server; ``url`` is its root (``http://127.0.0.1:<port>``)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def loopback_server() -> Iterator[LoopbackServer]:
    """Serve on a free loopback port in a background thread for the ``with`` block."""
    server = LoopbackServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
