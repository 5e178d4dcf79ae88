"""The tests' one scripted OpenAI-compatible (and Anthropic-compatible) HTTP/1.1 server on loopback.

It runs on its own event loop in a thread of its own, so a test may reach it from any loop
(``asyncio.run`` twice, the sync bridge, a worker thread) and from other processes (the CLI in tmux,
durable workers). Every request is recorded (``requests``: method, path, headers, JSON body) and
answered by the next queued reply or, when none is queued, by the server's ``script`` (a function of
the request; without one, a 500 saying that nothing was queued). A reply is a list of byte-level
steps: send these bytes, pause, hold until the test sets an event, stall until the client gives up,
reset the connection (RST) or close it; a queued reply may also be a function of the request.
Helpers build the usual replies (a JSON body, a chunked SSE stream split at any byte) and the
faults on top of them; ``tests.support.payloads`` builds the providers' bodies and
``tests.support.scripts`` the scripted conversations::

    server.queue(sse_reply(openai_text_events("Hello"), done=False))   # ends without [DONE]
    server.queue(json_reply(429, {"error": {...}}, headers={"retry-after": "0"}))
    server.queue([Reset()])                                              # reset before any byte
    server.queue(chat_answer("Hi", hold=released))                       # answers once released
    ScriptedServer(script=AgentRounds())                                 # every request scripted

Connections are kept alive between requests unless a step closes them, as real servers do.
Nothing here depends on time: a held or stalled reply waits for the test (or the client) to act.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Close",
    "Hold",
    "Pause",
    "Received",
    "Reply",
    "Reset",
    "Script",
    "ScriptedServer",
    "Send",
    "Stall",
    "Step",
    "chunk_frames",
    "json_reply",
    "raw_reply",
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
class Hold:
    """Send nothing more until the test sets ``event`` (or the server closes)."""

    event: threading.Event


@dataclass(frozen=True)
class Stall:
    """Send nothing more until the client gives up (a server that hangs)."""


@dataclass(frozen=True)
class Reset:
    """Abort the connection with a TCP reset."""


@dataclass(frozen=True)
class Close:
    """Close the connection cleanly (FIN) without finishing the reply."""


Step = Send | Pause | Hold | Stall | Reset | Close


@dataclass(frozen=True)
class Received:
    """A request the server read: method, path, headers (lower-case names) and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


Script = Callable[[Received], Sequence[Step]]
"""What answers a request: a function of it (a stateful script is an object with ``__call__``)."""

Reply = Sequence[Step] | Script
"""A queued answer: its steps, or a script for the one request that takes it."""


@dataclass
class ScriptedServer:
    """The server: ``start()`` it (or use ``running_server()``), ``queue()`` replies, read
    ``requests``; ``close()`` at the end. ``script`` answers when nothing is queued."""

    script: Script | None = None
    requests: list[Received] = field(default_factory=list)
    connections: int = 0
    _replies: deque[Reply] = field(default_factory=deque)
    _arrived: threading.Condition = field(default_factory=threading.Condition)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None
    _port: int = 0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        """The server's root URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        """The root URL with ``/v1``: the ``base_url`` of an OpenAI client."""
        return f"{self.url}/v1"

    def start(self) -> ScriptedServer:
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

        self._thread = threading.Thread(target=run, name="scripted-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the scripted server did not start within 10 s")
        return self

    def close(self) -> None:
        """Stop serving: open connections are aborted, held and stalled replies end unsent."""
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

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        with self._arrived:
            self._replies.extend(r if callable(r) else list(r) for r in replies)

    def reset(self) -> None:
        """Forget queued replies and received requests (between tests)."""
        with self._arrived:
            self._replies.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        """How many queued replies were not used."""
        with self._arrived:
            return len(self._replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON body of each request received, in order."""
        with self._arrived:
            return [r.body for r in self.requests]

    def user_texts(self) -> list[str]:
        """The last user message of each chat request received."""
        return [[m for m in b["messages"] if m["role"] == "user"][-1]["content"] for b in self.bodies]

    def wait_until(self, check: Callable[[list[Received]], bool], timeout: float = 600.0) -> list[Received]:
        """Block until ``check(requests)`` holds; the requests then. ``timeout`` bounds a hang (it is
        not a timing): a test that waits for longer fails, naming what arrived."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: check(self.requests), timeout):
                raise TimeoutError(f"the awaited requests did not arrive in {timeout} s: {self.requests}")
            return list(self.requests)

    def wait_for_requests(self, count: int, timeout: float = 600.0) -> list[Received]:
        """Block until ``count`` requests have arrived; the requests then."""
        return self.wait_until(lambda requests: len(requests) >= count, timeout)

    def _take(self, request: Received) -> list[Step]:
        """Record ``request`` and choose its reply (the next queued one, else the script)."""
        with self._arrived:
            self.requests.append(request)
            reply = self._replies.popleft() if self._replies else self.script or _nothing_queued
            steps = list(reply(request) if callable(reply) else reply)
            self._arrived.notify_all()
        return steps

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
        method, path, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        raw = await _read_body(reader, headers)
        body = json.loads(raw) if raw else None
        for step in self._take(Received(method, path, headers, body)):
            if isinstance(step, Send):
                writer.write(step.data)
                await writer.drain()
            elif isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Hold):
                # A threading.Event (the test sets it from its own thread); the wait is cancelled
                # when the server closes.
                while not step.event.is_set():  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
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


def _nothing_queued(request: Received) -> list[Step]:
    return json_reply(500, {"error": {"message": "the scripted server has no reply queued"}})


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return await reader.readexactly(int(headers.get("content-length", "0")))
    parts = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")
    return b"".join(parts)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# -- replies ---------------------------------------------------------------------------------------

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
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
    when ``done``; ``event_names`` adds ``event: <type>`` lines (Anthropic's and Responses' format)."""
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


@contextlib.contextmanager
def running_server(script: Script | None = None) -> Iterator[ScriptedServer]:
    """A started ScriptedServer (answering with ``script`` when nothing is queued), closed on exit."""
    server = ScriptedServer(script).start()
    try:
        yield server
    finally:
        server.close()

