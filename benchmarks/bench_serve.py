"""The served protocols' cost per streamed chunk, beside the web page and ``advisorchain chat -p``,
and 200 concurrent OpenAI-protocol requests. Run on demand:

    .venv/bin/python benchmarks/bench_serve.py            # 2,000-chunk answers, 7 repeats
    .venv/bin/python benchmarks/bench_serve.py --chunks 500 --repeats 3 --concurrent 50

The same agent (memory outside the tool loop) answers on an instant scripted model that streams one
word per chunk (``bench_web.py``'s). Each cell runs in a fresh interpreter, repeats interleaved; µs
per chunk is the median of ``(time of a long answer - time of a 1-chunk answer) / extra chunks``
(the fixed cost of a turn is printed apart), as the client observes it: each HTTP cell's server is
uvicorn in its own process, read over loopback with aiohttp by a client that splits the SSE frames.
"first chunk" is the time from sending the request to reading the first text chunk.

Cells: ``chat -p`` (its streaming loop, in process, answers shown on /dev/null) and ``web, HTTP``
(its page served by ``bench_web.py --serve``, read the same way as the protocols), then ``openai, HTTP``
(``POST /v1/chat/completions`` with ``stream``), ``agui, HTTP`` (a ``RunAgentInput``), ``a2a, HTTP``
(``message/stream``). The concurrency cell sends N requests at once (each a 20-chunk answer, not
streamed, each on its own conversation) and reports the latencies' p50 and p99 and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import bench_web
from bench_web import _words, agent

TOKEN = "bench-token-0123456789abcdef"
CELLS = ("chat", "web-http", "openai-http", "agui-http", "a2a-http")
TITLES = {
    "chat": "chat -p",
    "web-http": "web, HTTP",
    "openai-http": "openai, HTTP",
    "agui-http": "agui, HTTP",
    "a2a-http": "a2a, HTTP",
}
# What marks one text chunk in each protocol's stream.
MARKS = {
    "openai": b'"content":"w',
    "agui": b'"TEXT_MESSAGE_CONTENT"',
    "a2a": b'"artifactUpdate"',
    "web": b"event: text",
}

Turn = Callable[[str, int], Awaitable[float]]
"""One turn of ``chunks`` chunks on a conversation; returns the seconds to the first text chunk."""


def served_app(protocol: str) -> Any:
    """The agent (memory kept by the app, by the conversation each request names) as ``protocol``."""
    from advisorchain import ChatClient, MessageWindowChatMemory, ToolCallingAdvisor
    from advisorchain.memory import InMemoryChatMemoryRepository
    from advisorchain.serve import a2a_app, agui_app, openai_app
    from advisorchain.testing import FunctionChatModel
    from advisorchain.tools import ToolCallingManager

    client = ChatClient(
        FunctionChatModel(lambda prompt: "w0 " * 20, stream_fn=_words),
        default_advisors=[ToolCallingAdvisor(ToolCallingManager())],
    )
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=200)
    makers = {"openai": openai_app, "agui": agui_app, "a2a": a2a_app}
    return makers[protocol](client, token=TOKEN, memory=memory)


def serve(protocol: str) -> None:
    """The app for an HTTP cell, on a free loopback port (printed first)."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        served_app(protocol), log_level="error", lifespan="off", access_log=False, backlog=1024
    )
    uvicorn.Server(config).run(sockets=[sock])


async def _server(protocol: str) -> tuple[Any, int]:
    command = [bench_web.__file__, "--serve"] if protocol == "web" else [__file__, "--serve", protocol]
    server = await asyncio.create_subprocess_exec(
        sys.executable, *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    assert server.stdout is not None
    return server, int((await server.stdout.readline()).split()[1])


def _request(
    protocol: str, conversation: str, chunks: int, *, stream: bool = True
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The path, JSON body and headers of one turn."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    text = f"say {chunks}"
    if protocol == "web":
        return (
            f"/api/conversations/{conversation}/turns",
            {"text": text},
            {"x-advisorchain-token": bench_web.TOKEN},
        )
    if protocol == "openai":
        body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": text}]}
        return "/v1/chat/completions", body, {**auth, "X-Conversation-Id": conversation}
    if protocol == "agui":
        message = {"id": "u", "role": "user", "content": text}
        return "/", {"threadId": conversation, "runId": conversation, "messages": [message]}, auth
    message = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "contextId": conversation,
        "parts": [{"text": text}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    return "/", body, {**auth, "A2A-Version": "1.0"}


async def protocol_turns(protocol: str) -> Turn:
    import aiohttp

    server, port = await _server(protocol)
    http = aiohttp.ClientSession(f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(120))
    mark = MARKS[protocol]

    async def turn(conversation: str, chunks: int) -> float:
        path, body, headers = _request(protocol, conversation, chunks)
        texts = 0
        first = 0.0
        started = time.perf_counter()
        async with http.post(path, json=body, headers=headers) as response:
            assert response.status == 200, await response.text()
            buffer = b""
            async for piece in response.content.iter_any():
                buffer += piece.replace(b"\r", b"")  # sse-starlette ends lines with CRLF
                *frames, buffer = buffer.split(b"\n\n")
                found = sum(mark in frame for frame in frames)
                if found and not texts:
                    first = time.perf_counter() - started
                texts += found
        assert texts == chunks, (texts, chunks)
        return first

    async def stop() -> None:
        await http.close()
        server.terminate()
        await server.wait()

    turn.stop = stop  # type: ignore[attr-defined]
    return turn


async def chat_turns() -> Turn:
    """``chat -p``'s streaming loop (``cli._agent.ask``): each text chunk shown by the command's
    display, written to /dev/null. In process: it has no transport to observe a first chunk
    through, so that time is not measured."""
    import os

    from rich.console import Console

    from advisorchain._streams import closing
    from advisorchain.cli._display import Display
    from advisorchain.memory import ChatMemory

    client, _ = agent()
    sink = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 -- /dev/null, open as long as the worker
    display = Display(sink, Console(file=sink, width=200))

    async def turn(conversation: str, chunks: int) -> float:
        spec = client.prompt(f"say {chunks}").param(ChatMemory.CONVERSATION_ID, conversation)
        async with closing(spec.astream().chat_client_responses()) as source:
            async for chunk in source:
                chat = chunk.chat_response
                if chat is not None and chat.text:
                    display.text(chat.text)
        display.end_answer()
        return float("nan")

    return turn


async def _measure(cell: str, chunks: int, repeats: int) -> dict[str, float]:
    makers: dict[str, Callable[[], Awaitable[Turn]]] = {
        "chat": chat_turns,
        "web-http": lambda: protocol_turns("web"),
        "openai-http": lambda: protocol_turns("openai"),
        "agui-http": lambda: protocol_turns("agui"),
        "a2a-http": lambda: protocol_turns("a2a"),
    }
    turn = await makers[cell]()
    try:
        for i in range(3):
            await turn(f"warm-{i}-{uuid.uuid4().hex}", chunks)
        longs, shorts, firsts = [], [], []
        for i in range(repeats):
            started = time.perf_counter()
            await turn(f"short-{i}-{uuid.uuid4().hex}", 1)
            shorts.append(time.perf_counter() - started)
            started = time.perf_counter()
            firsts.append(await turn(f"long-{i}-{uuid.uuid4().hex}", chunks))
            longs.append(time.perf_counter() - started)
    finally:
        stop = getattr(turn, "stop", None)
        if stop is not None:
            await stop()
    per_chunk = [(long - short) / (chunks - 1) * 1e6 for long, short in zip(longs, shorts, strict=True)]
    return {
        "us_per_chunk": statistics.median(per_chunk),
        "turn_ms": statistics.median(shorts) * 1e3,
        "first_ms": statistics.median(firsts) * 1e3,
    }


async def _concurrent(requests: int) -> dict[str, float]:
    import aiohttp

    server, port = await _server("openai")
    connector = aiohttp.TCPConnector(limit=0)
    http = aiohttp.ClientSession(
        f"http://127.0.0.1:{port}", connector=connector, timeout=aiohttp.ClientTimeout(300)
    )

    async def one(i: int) -> float:
        path, body, headers = _request("openai", f"c-{i}-{uuid.uuid4().hex}", 20, stream=False)
        started = time.perf_counter()
        async with http.post(path, json=body, headers=headers) as response:
            answer = await response.json()
        assert answer["choices"][0]["message"]["content"].count("w") == 20, answer
        return time.perf_counter() - started

    try:
        await asyncio.gather(*(one(i) for i in range(20)))  # warm up
        started = time.perf_counter()
        latencies = sorted(await asyncio.gather(*(one(i) for i in range(requests))))
        wall = time.perf_counter() - started
    finally:
        await http.close()
        server.terminate()
        await server.wait()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return {"p50_ms": statistics.median(latencies) * 1e3, "p99_ms": p99 * 1e3, "wall_ms": wall * 1e3}


def _worker(*args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="fresh workers per cell, interleaved")
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--cell", choices=[*CELLS, "concurrent"], help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=["openai", "agui", "a2a"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.cell == "concurrent":
        print(json.dumps(asyncio.run(_concurrent(args.concurrent))))
        return
    if args.cell:
        print(json.dumps(asyncio.run(_measure(args.cell, args.chunks, args.repeats))))
        return
    found: dict[str, list[dict[str, float]]] = {cell: [] for cell in CELLS}
    for _ in range(args.rounds):
        for cell in CELLS:
            found[cell].append(
                _worker("--cell", cell, "--chunks", str(args.chunks), "--repeats", str(args.repeats))
            )
    floor = statistics.median(r["us_per_chunk"] for r in found["chat"])
    web = statistics.median(r["us_per_chunk"] for r in found["web-http"])
    print(f"answers of {args.chunks} chunks, median of {args.rounds} workers x {args.repeats} repeats")
    head = f"{'cell':<14} {'µs/chunk':>9} {'/ chat -p':>10} {'/ web':>7}"
    print(f"{head} {'first chunk (ms)':>17} {'turn (ms)':>10}")
    for cell in CELLS:
        us = statistics.median(r["us_per_chunk"] for r in found[cell])
        first = statistics.median(r["first_ms"] for r in found[cell])
        turn_ms = statistics.median(r["turn_ms"] for r in found[cell])
        shown_first = "-" if first != first else f"{first:.2f}"  # NaN: the cell does not observe it apart
        ratios = f"{us / floor:>9.2f}x {us / web:>6.2f}x"
        print(f"{TITLES[cell]:<14} {us:>9.1f} {ratios} {shown_first:>17} {turn_ms:>10.2f}")
    crowd = _worker("--cell", "concurrent", "--concurrent", str(args.concurrent))
    print(
        f"\n{args.concurrent} concurrent OpenAI-protocol requests (20-chunk answers, not streamed): "
        f"p50 {crowd['p50_ms']:.1f} ms, p99 {crowd['p99_ms']:.1f} ms, all done in {crowd['wall_ms']:.0f} ms"
    )


if __name__ == "__main__":
    main()
