"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1 (raw asyncio HTTP/1.1, stdlib).

Run it in its own process so its CPU never counts against the client under test::

    python benchmarks/harness/server.py

It prints ``PORT <n>`` once listening. Routes:

* ``POST .../chat/completions`` — the scenario named by the request's ``model`` (see scenarios.py,
  e.g. ``weather+k200+lat50``), streamed when ``stream`` is true, answered after its latency. A
  tool message with a wrong result is answered 400 and counted as bad, so a run that skipped its
  tools fails loudly.
* ``GET /stats`` — ``{"requests", "bad", "messages", "cpu_s"}`` (requests served, bad ones, messages
  received in all completion requests, server CPU seconds).

Bodies are built once per (model, round, stream, usage) and cached, so the server costs the
same for every client under test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios import Scenario, check_tool_messages, completion_body, stream_events, tool_rounds_done

_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


def _response(status: int, body: bytes, content_type: bytes = b"application/json") -> bytes:
    head = b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n"
    return head % (status, _REASONS[status], content_type, len(body)) + body


def _chunked_sse(events: list[bytes]) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    framed = [b"%x\r\n%s\r\n" % (len(e), e) for e in events]
    return head + b"".join(framed) + b"0\r\n\r\n"


class ScriptedServer:
    """Serves the scenarios; counts requests; answers after a fixed latency."""

    def __init__(self) -> None:
        self.requests = 0
        self.bad = 0
        self.messages = 0
        self._cache: dict[tuple[str, int, bool, bool], bytes] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one keep-alive connection until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, headers = _parse_head(head)
                body = await _read_body(reader, headers)
                reply = await self._route(method, path, body)
                writer.write(reply)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str, body: bytes) -> bytes:
        if method == "GET" and path.startswith("/stats"):
            stats = {
                "requests": self.requests,
                "bad": self.bad,
                "messages": self.messages,
                "cpu_s": time.process_time(),
            }
            return _response(200, json.dumps(stats).encode())
        if method == "POST" and path.endswith("/chat/completions"):
            self.requests += 1
            reply, latency_ms = self._completion(json.loads(body))
            if latency_ms:
                await asyncio.sleep(latency_ms / 1000.0)
            return reply
        return _response(404, b'{"error": {"message": "not found"}}')

    def _completion(self, request: dict[str, Any]) -> tuple[bytes, float]:
        model = str(request.get("model"))
        try:
            scenario = Scenario.parse(model)
        except ValueError as exc:
            return self._bad(str(exc)), 0.0
        messages = request.get("messages") or []
        self.messages += len(messages)
        problem = check_tool_messages(scenario, messages)
        if problem is not None:
            return self._bad(problem), 0.0
        done = tool_rounds_done(scenario, messages)
        stream = bool(request.get("stream"))
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        key = (model, done, stream, usage)
        reply = self._cache.get(key)
        if reply is None:
            reply = self._cache[key] = self._build(scenario, done, stream, usage)
        return reply, scenario.latency_ms

    def _build(self, scenario: Scenario, done: int, stream: bool, usage: bool) -> bytes:
        calls = scenario.calls_for_round(done) if done < scenario.rounds else []
        if stream:
            return _chunked_sse(
                stream_events(scenario.model, calls, scenario.chunks, usage, scenario.sentence_every)
            )
        return _response(200, completion_body(scenario.model, calls))

    def _bad(self, message: str) -> bytes:
        self.bad += 1
        print(f"bad request: {message}", file=sys.stderr, flush=True)
        return _response(400, json.dumps({"error": {"message": message, "type": "invalid_request"}}).encode())


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0"))
    return await reader.readexactly(length) if length else b""


async def serve(port: int) -> None:
    """Listen on 127.0.0.1:``port`` (0 picks one), print ``PORT <n>``, serve until killed."""
    app = ScriptedServer()
    # The scale probes open thousands of connections at once: as many open files as allowed, and
    # the longest accept queue the kernel grants (it caps the backlog at net.core.somaxconn).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 16
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):  # a platform that refuses keeps its limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    server = await asyncio.start_server(app.handle, "127.0.0.1", port, backlog=65535, limit=1 << 24)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Command line: ``--port`` (default 0: any free port)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
