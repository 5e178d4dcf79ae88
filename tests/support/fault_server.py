"""A fault-injecting OpenAI- and Anthropic-compatible HTTP/1.1 server on loopback, for tests.

The server runs on its own event loop in a thread of its own, so a test may reach it from any
loop (``asyncio.run`` twice, the sync bridge, a worker thread). Each request is answered by the
next queued reply; a reply is a list of byte-level steps: send these bytes, pause, stall until
the client gives up, reset the connection (RST), or close it. Helpers build the usual replies
(a JSON body, a chunked SSE stream split at any byte) and the faults on top of them::

    server.queue(sse_reply(openai_text_events("Hello"), done=False))   # ends without [DONE]
    server.queue(json_reply(429, {"error": {...}}, headers={"retry-after": "0"}))
    server.queue([Reset()])                                              # reset before any byte

Connections are kept alive between requests unless a step closes them, as real servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Close",
    "FaultServer",
    "Pause",
    "Received",
    "Reset",
    "Send",
    "Stall",
    "anthropic_text_events",
    "anthropic_tool_events",
    "chunk_frames",
    "closed_port",
    "json_reply",
    "openai_completion",
    "raw_reply",
    "responses_body",
    "responses_text_events",
    "responses_tool_events",
    "anthropic_message",
    "openai_text_events",
    "openai_tool_events",
    "running_server",
    "sse_frames",
    "sse_reply",
]


@dataclass(frozen=True)
class Send:
    """Write these bytes as they are."""

    data: bytes


@dataclass(frozen=True)
class Pause:
    """Wait before the next step (so that the client reads what was sent on its own)."""

    seconds: float


@dataclass(frozen=True)
class Stall:
    """Send nothing more until the client gives up (a server that hangs)."""


@dataclass(frozen=True)
class Reset:
    """Abort the connection with a TCP reset."""


@dataclass(frozen=True)
class Close:
    """Close the connection cleanly (FIN) without finishing the reply."""


Step = Send | Pause | Stall | Reset | Close


@dataclass(frozen=True)
class Received:
    """A request the server read: method, path, headers (lower-case names) and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FaultServer:
    """The server: ``start()`` it, ``queue()`` replies, read ``requests``; ``close()`` at the end."""

    requests: list[Received] = field(default_factory=list)
    connections: int = 0
    _replies: deque[list[Step]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None
    _port: int = 0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        """The server's root URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> FaultServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self._port = self._server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            assert self._loop is not None
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fault-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault server did not start within 10 s")
        return self

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

    def queue(self, *replies: Sequence[Step]) -> None:
        """Answer the next requests with ``replies``, in order."""
        with self._lock:
            self._replies.extend(list(r) for r in replies)

    def reset(self) -> None:
        """Forget queued replies and received requests (between tests)."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        """How many queued replies were not used."""
        with self._lock:
            return len(self._replies)

    def _next_reply(self) -> list[Step]:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return list(json_reply(500, {"error": {"message": "the fault server has no reply queued"}}))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while await self._answer_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            if not writer.is_closing():
                writer.close()

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and play its reply; False when the connection is done."""
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append(Received(method, path, headers, body))
        for step in self._next_reply():
            if isinstance(step, Send):
                writer.write(step.data)
                await writer.drain()
            elif isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Stall):
                await reader.read()  # until the client closes its end
                return False
            elif isinstance(step, Reset):
                _reset(writer)
                return False
            else:
                writer.close()
                return False
        return True


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# -- replies ---------------------------------------------------------------------------------------

_REASONS = {
    200: "OK",
    400: "Bad Request",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> list[Step]:
    """A whole JSON response with a Content-Length."""
    data = json.dumps(body).encode()
    all_headers = {"content-type": "application/json", "content-length": str(len(data)), **(headers or {})}
    return [Send(_head(status, all_headers) + data)]


def raw_reply(
    status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
) -> list[Step]:
    """A whole response of any content type (an HTML error page, plain text...)."""
    all_headers = {"content-type": content_type, "content-length": str(len(body)), **(headers or {})}
    return [Send(_head(status, all_headers) + body)]


def sse_frames(events: Iterable[Any], *, done: bool = True, event_names: bool = False) -> bytes:
    """The event-stream text for ``events`` (JSON-encoded unless bytes/str), with ``[DONE]`` last
    when ``done``; ``event_names`` adds ``event: <type>`` lines (Anthropic's format)."""
    out: list[str] = []
    for event in events:
        if isinstance(event, bytes):
            out.append(event.decode())
            continue
        if isinstance(event, str):
            out.append(event)
            continue
        if event_names:
            out.append(f"event: {event['type']}\n")
        out.append(f"data: {json.dumps(event, ensure_ascii=False)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chunk_frames(payload: bytes, sizes: Sequence[int] | None = None, *, pause: float = 0.0) -> list[Step]:
    """``payload`` as HTTP chunks: cut after each size in ``sizes`` (the rest in one last chunk),
    or one chunk per SSE event when ``sizes`` is None; ``pause`` between chunks."""
    pieces: list[bytes] = []
    if sizes is None:
        pieces = [p + b"\n\n" for p in payload.split(b"\n\n") if p]
    else:
        start = 0
        for size in sizes:
            pieces.append(payload[start : start + size])
            start += size
        pieces.append(payload[start:])
    steps: list[Step] = []
    for piece in pieces:
        if piece:
            steps.append(Send(b"%x\r\n%s\r\n" % (len(piece), piece)))
            if pause:
                steps.append(Pause(pause))
    return steps


def sse_reply(
    events: Iterable[Any],
    *,
    done: bool = True,
    event_names: bool = False,
    sizes: Sequence[int] | None = None,
    pause: float = 0.0,
    finished: bool = True,
) -> list[Step]:
    """A chunked ``text/event-stream`` 200 response; ``finished=False`` leaves out the chunked
    terminator (the caller adds the fault that follows)."""
    head = _head(200, {"content-type": "text/event-stream", "transfer-encoding": "chunked"})
    payload = sse_frames(events, done=done, event_names=event_names)
    steps: list[Step] = [Send(head), *chunk_frames(payload, sizes, pause=pause)]
    if finished:
        steps.append(Send(b"0\r\n\r\n"))
    return steps


# -- provider payloads -----------------------------------------------------------------------------


def openai_completion(text: str | None, *, finish_reason: str | None = "stop") -> dict[str, Any]:
    """A Chat Completions response body with one choice."""
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "model": "fault-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _openai_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "model": "fault-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def openai_text_events(*deltas: str, finish_reason: str | None = "stop") -> list[dict[str, Any]]:
    """Chat Completions stream chunks: one per text delta, then the finish chunk (unless None)."""
    events = [_openai_chunk({"role": "assistant", "content": d}) for d in deltas]
    if finish_reason is not None:
        events.append(_openai_chunk({}, finish_reason))
    return events


def openai_tool_events(
    name: str,
    argument_pieces: Sequence[str],
    *,
    call_id: str = "call_1",
    finish_reason: str | None = "tool_calls",
) -> list[dict[str, Any]]:
    """Stream chunks of one tool call whose arguments come in ``argument_pieces``."""
    first = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    events = [_openai_chunk({"role": "assistant", "tool_calls": [first]})]
    events += [
        _openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in argument_pieces
    ]
    if finish_reason is not None:
        events.append(_openai_chunk({}, finish_reason))
    return events


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


@contextlib.contextmanager
def running_server() -> Iterator[FaultServer]:
    """A started FaultServer, closed on exit."""
    server = FaultServer().start()
    try:
        yield server
    finally:
        server.close()


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
