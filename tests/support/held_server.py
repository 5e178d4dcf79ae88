"""An OpenAI-compatible Chat Completions server on loopback whose answers the test holds and lets go.

Each request takes the next ``Reply`` queued (an ``ok`` answer when none is): it waits for the
reply's ``hold`` event before its first byte, streams its ``chunks`` (or sends them joined, for a
request that does not stream) and, with ``stall``, then sends nothing more without ending. So a test
decides what the screen shows and when, whatever the machine's load: nothing here depends on time.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What one request gets."""

    chunks: list[str] = field(default_factory=lambda: ["ok"])
    hold: threading.Event | None = None
    stall: bool = False


class HeldServer:
    """The server: ``url`` for ``--base-url``, ``reply(...)`` to queue answers, ``requests`` (the
    JSON bodies received) and ``arrived`` (set on each request) to follow what the CLI sent."""

    def __init__(self) -> None:
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.requests: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        self.closing = threading.Event()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def reply(self, *chunks: str, hold: threading.Event | None = None, stall: bool = False) -> Reply:
        """Queue the answer of the next request."""
        answer = Reply(list(chunks) or ["ok"], hold, stall)
        self.replies.put(answer)
        return answer

    def wait_for_requests(self, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Until ``count`` requests have arrived (an upper bound for a hang, not a timing)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= count, timeout), self.requests
            return list(self.requests)

    def user_texts(self) -> list[str]:
        """The last user message of each request received."""
        return [[m for m in r["messages"] if m["role"] == "user"][-1]["content"] for r in self.requests]

    def wait(self, event: threading.Event) -> bool:
        """Wait for ``event`` or the server's end; True when the event came."""
        while not self.closing.is_set():
            if event.wait(0.05):
                return True
        return False

    def close(self) -> None:
        self.closing.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def _handler(server: HeldServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            try:
                reply = server.replies.get_nowait()
            except queue.Empty:
                reply = Reply()
            with server.arrived:
                server.requests.append(body)
                server.arrived.notify_all()
            if reply.hold is not None and not server.wait(reply.hold):
                return
            if body.get("stream"):
                self._stream(body, reply)
            else:
                self._whole(body, reply)

        def _whole(self, body: dict[str, Any], reply: Reply) -> None:
            if reply.stall:
                server.wait(threading.Event())
                return
            data = json.dumps(
                {
                    "id": "held",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(reply.chunks)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for text in reply.chunks:
                self._event(body, {"role": "assistant", "content": text}, None)
            if reply.stall:
                server.wait(threading.Event())
                return
            self._event(body, {}, "stop")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, body: dict[str, Any], delta: dict[str, Any], finish: str | None) -> None:
            chunk = {
                "id": "held",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def held_server() -> Iterator[HeldServer]:
    """A running HeldServer, closed at the end (every held request let go)."""
    server = HeldServer()
    server._thread.start()
    try:
        yield server
    finally:
        server.close()
