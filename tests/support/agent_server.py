"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1 that counts what it serves.

A conversation is named by the request's ``model``; its round is the number of ``tool`` messages it
already holds plus one. Rounds 1 and 2 ask for the tool ``record`` (``{"n": round}``), round 3
answers ``FINAL``. A model name starting with ``hang2-`` makes the first round-2 request of that
conversation hang until the client goes away (so a test can kill the worker mid-round).
A model name starting with ``approve-`` asks in round 1 for two calls of the tool ``guarded``
(``call_a`` with ``{"n": 1}``, ``call_b`` with ``{"n": 2}``) and answers ``FINAL`` in round 2; one
starting with ``pay-`` asks in round 1 for the tool ``pay`` (``call_pay``, ``{"n": 5}``) and
answers ``FINAL`` in round 2.
Streamed requests get text deltas (or whole tool calls), a finish reason and ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

FINAL = "Recorded both numbers."
ROUNDS = 3


class ScriptedServer:
    """Runs in a daemon thread with its own loop; ``counts[(model, round)]`` is requests served."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int]] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.round_started = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()  # open connections, closed by close()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        assert self._server is not None
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):  # keep-alive connections of in-process clients
                writer.close()
                await writer.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def wait_for(self, model: str, round_: int, timeout: float = 600.0) -> None:
        """Block until a request for ``round_`` of ``model`` arrived."""
        with self.round_started:
            if not self.round_started.wait_for(lambda: self.counts[(model, round_)] > 0, timeout):
                raise TimeoutError(f"no request for round {round_} of {model!r} within {timeout} s")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = json.loads(body)
                model, round_ = request["model"], 1 + sum(m["role"] == "tool" for m in request["messages"])
                if model.startswith(("approve-", "pay-")):
                    round_ = min(round_, 2)
                with self.round_started:
                    self.counts[(model, round_)] += 1
                    self.bodies.append(request)
                    first = self.counts[(model, round_)] == 1
                    self.round_started.notify_all()
                if model.startswith("hang2-") and round_ == 2 and first:
                    await reader.read()  # until the client (the killed worker) goes away
                    return
                writer.write(_reply(model, round_, bool(request.get("stream"))))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


def _call(call_id: str, name: str, n: int) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps({"n": n})}}


def _reply(model: str, round_: int, stream: bool) -> bytes:
    calls = [_call(f"call_{round_}", "record", round_)]
    rounds = ROUNDS
    if model.startswith("approve-"):
        calls, rounds = [_call("call_a", "guarded", 1), _call("call_b", "guarded", 2)], 2
    elif model.startswith("pay-"):
        calls, rounds = [_call("call_pay", "pay", 5)], 2
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    base = {"id": f"resp-{round_}", "created": 0, "model": model}
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if round_ < rounds:
            message["tool_calls"] = calls
        else:
            message["content"] = FINAL
        finish = "tool_calls" if round_ < rounds else "stop"
        body = {
            **base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        data = json.dumps(body).encode()
        return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
            len(data),
            data,
        )
    events: list[dict[str, Any]] = []
    chunk = {**base, "object": "chat.completion.chunk"}
    if round_ < rounds:
        deltas = [{"index": i, **call} for i, call in enumerate(calls)]
        events.append(
            {
                **chunk,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "tool_calls": deltas},
                        "finish_reason": None,
                    }
                ],
            }
        )
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    else:
        for i, word in enumerate(FINAL.split(" ")):
            text = word if i == 0 else " " + word
            events.append(
                {**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            )
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (
        len(out),
        out,
    )
