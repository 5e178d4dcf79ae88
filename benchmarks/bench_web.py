"""The web page's cost per streamed chunk, against ``advisorchain chat -p``, in one run: µs of
wall time per chunk and the ratio to ``chat -p``. Run on demand:

    .venv/bin/python benchmarks/bench_web.py            # 2,000-chunk answers, 7 repeats
    .venv/bin/python benchmarks/bench_web.py --chunks 500 --repeats 3

The same agent (memory outside the tool loop, as ``chat`` builds it) answers on an instant scripted
model that streams one word per chunk. Each cell runs in a fresh interpreter (once the OpenTelemetry
SDK is installed it stays, and the page installs it), repeats interleaved; the figure is the median
of ``(time of a long answer - time of a 1-chunk answer) / extra chunks``, so the fixed cost of a turn
is left out (it is printed apart).

Cells:
- ``chat -p``: the command's own streaming loop (``_turn``), answers written to /dev/null (the floor);
- ``chat -p --trace``: the same, with the spans collected and the tree drawn after each answer;
- ``web, events``: the page's turn without HTTP: the events of ``WebService.turn_events``;
- ``web, ASGI``: the app called in process: token check, routing, body, each event framed as
  ``text/event-stream`` and sent;
- ``web, HTTP``: the app under uvicorn in its own process, read over loopback with aiohttp by a
  client that splits the frames (what the browser does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ToolCallingAdvisor,
)
from advisorchain.memory import InMemoryChatMemoryRepository
from advisorchain.model import Generation
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import ToolCallingManager

TOKEN = "bench-token-0123456789abcdef"
CELLS = ("chat", "chat-trace", "web-events", "web-asgi", "web-http")
TITLES = {
    "chat": "chat -p",
    "chat-trace": "chat -p --trace",
    "web-events": "web, events",
    "web-asgi": "web, ASGI",
    "web-http": "web, HTTP",
}


# -- the agent -------------------------------------------------------------------------------------


async def _words(prompt: Prompt) -> AsyncIterator[ChatResponse]:
    """As many one-word chunks as the question's number says, then the end."""
    question = prompt.last_user_message.text if prompt.last_user_message else "1"
    for i in range(int(question.split()[-1])):
        yield ChatResponse((Generation(AssistantMessage(f"w{i} ")),))
    yield ChatResponse((Generation(AssistantMessage(None), "stop"),))


def agent() -> tuple[ChatClient, Any]:
    """The agent ``chat`` builds, on the instant model, and its repository."""
    repository = InMemoryChatMemoryRepository()
    client = ChatClient(
        FunctionChatModel(lambda prompt: "unused", stream_fn=_words),
        default_advisors=[
            MessageChatMemoryAdvisor(MessageWindowChatMemory(repository, max_messages=200)),
            ToolCallingAdvisor(ToolCallingManager()),
        ],
    )
    return client, repository


# -- one turn, per cell ------------------------------------------------------------------------------

Turn = Callable[[str, int], Awaitable[None]]


async def chat_turns(trace: bool) -> Turn:
    from rich.console import Console

    from advisorchain.cli._display import Display
    from advisorchain.cli.app import ChatSettings, _turn

    client, repository = agent()
    sink = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 — /dev/null, open as long as the worker
    display = Display(sink, Console(file=sink, width=200))
    collector = None
    if trace:
        from advisorchain._span_tree import SpanCollector

        collector = SpanCollector.install()

    async def turn(conversation: str, chunks: int) -> None:
        settings = ChatSettings(
            client.model, "bench", None, [], [], repository, conversation, None, True, trace, False
        )
        await _turn(client, settings, display, f"say {chunks}", collector)

    return turn


async def web_event_turns() -> Turn:
    from advisorchain.web._service import TurnRequest, WebService

    client, _ = agent()
    service = WebService(client, None)

    async def turn(conversation: str, chunks: int) -> None:
        service.open(conversation)
        texts = 0
        async for batch in service.turn_events(conversation, TurnRequest(text=f"say {chunks}")):
            texts += sum(name == "text" for name, _ in batch)
        assert texts == chunks, texts

    return turn


async def web_asgi_turns() -> Turn:
    from advisorchain.web import create_app

    client, _ = agent()
    app = create_app(client, token=TOKEN)

    async def turn(conversation: str, chunks: int) -> None:
        app.state.service.open(conversation)
        body = json.dumps({"text": f"say {chunks}"}).encode()
        finished = asyncio.Event()
        sent = [False]
        frames = 0

        async def receive() -> dict[str, Any]:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal frames
            if message["type"] == "http.response.body":
                frames += message["body"].count(b"event: text\n")
                if not message.get("more_body"):
                    finished.set()

        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": f"/api/conversations/{conversation}/turns",
            "raw_path": f"/api/conversations/{conversation}/turns".encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"x-advisorchain-token", TOKEN.encode()), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, receive, send)
        assert frames == chunks, frames

    return turn


async def web_http_turns() -> Turn:
    import aiohttp

    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    assert server.stdout is not None
    port = int((await server.stdout.readline()).split()[1])
    http = aiohttp.ClientSession(
        f"http://127.0.0.1:{port}", headers={"x-advisorchain-token": TOKEN}, timeout=aiohttp.ClientTimeout(60)
    )

    async def turn(conversation: str, chunks: int) -> None:
        texts = 0
        body = {"text": f"say {chunks}"}
        async with http.post(f"/api/conversations/{conversation}/turns", json=body) as response:
            buffer = b""
            async for piece in response.content.iter_any():
                buffer += piece
                *frames, buffer = buffer.split(b"\n\n")
                texts += sum(frame.startswith(b"event: text") for frame in frames)
        assert texts == chunks, texts

    async def stop() -> None:
        await http.close()
        server.terminate()
        await server.wait()

    turn.stop = stop  # type: ignore[attr-defined]  # called by the worker
    return turn


def serve() -> None:
    """The page for the HTTP cell, on a free loopback port (printed first)."""
    import socket

    import uvicorn

    from advisorchain.web import create_app

    client, _ = agent()
    app = create_app(client, token=TOKEN)
    original = app.state.service.check_turn

    async def opening(conversation: str, turn: Any) -> Any:  # every conversation of the run is new
        app.state.service.open(conversation)
        return await original(conversation, turn)

    app.state.service.check_turn = opening
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as advisorchain web does
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off")).run(sockets=[sock])


# -- measuring ---------------------------------------------------------------------------------------


async def _measure(cell: str, chunks: int, repeats: int) -> dict[str, float]:
    makers: dict[str, Callable[[], Awaitable[Turn]]] = {
        "chat": lambda: chat_turns(False),
        "chat-trace": lambda: chat_turns(True),
        "web-events": web_event_turns,
        "web-asgi": web_asgi_turns,
        "web-http": web_http_turns,
    }
    turn = await makers[cell]()
    try:
        for i in range(3):  # warm up
            await turn(f"warm-{i}", chunks)
        longs, shorts = [], []
        for i in range(repeats):
            started = time.perf_counter()
            await turn(f"short-{i}", 1)
            shorts.append(time.perf_counter() - started)
            started = time.perf_counter()
            await turn(f"long-{i}", chunks)
            longs.append(time.perf_counter() - started)
    finally:
        stop = getattr(turn, "stop", None)
        if stop is not None:
            await stop()
    per_chunk = [(long - short) / (chunks - 1) * 1e6 for long, short in zip(longs, shorts, strict=True)]
    return {"us_per_chunk": statistics.median(per_chunk), "turn_ms": statistics.median(shorts) * 1e3}


def _worker(cell: str, chunks: int, repeats: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--cell", cell, "--chunks", str(chunks), "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="fresh workers per cell, interleaved")
    parser.add_argument("--cell", choices=CELLS, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.cell:
        print(json.dumps(asyncio.run(_measure(args.cell, args.chunks, args.repeats))))
        return
    found: dict[str, list[dict[str, float]]] = {cell: [] for cell in CELLS}
    for _ in range(args.rounds):
        for cell in CELLS:
            found[cell].append(_worker(cell, args.chunks, args.repeats))
    floor = statistics.median(r["us_per_chunk"] for r in found["chat"])
    print(f"answers of {args.chunks} chunks, median of {args.rounds} workers x {args.repeats} repeats")
    print(f"{'cell':<18} {'µs/chunk':>9} {'/ chat -p':>10} {'turn (ms)':>10}")
    for cell in CELLS:
        us = statistics.median(r["us_per_chunk"] for r in found[cell])
        turn_ms = statistics.median(r["turn_ms"] for r in found[cell])
        print(f"{TITLES[cell]:<18} {us:>9.1f} {us / floor:>9.2f}x {turn_ms:>10.2f}")


if __name__ == "__main__":
    main()
