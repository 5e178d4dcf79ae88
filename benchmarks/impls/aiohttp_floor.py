"""The limit of a Python client: a hand-written tool loop on ``aiohttp`` + ``orjson``, no SDK.

The least CPU a Python process can spend on this agent run: one pooled ``aiohttp`` session, request
bodies serialized with ``orjson``, answers parsed straight into dicts, server-sent events split by
hand out of whole reads. It checks what a real client must (HTTP status, JSON, the stream's end) and
nothing more. Runs in its own venv (``benchmarks/.venvs/aiohttp``), like the peers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
from harness.scenarios import TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, tool_result

PACKAGES = ("aiohttp", "orjson")

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": TOOL_PARAMETERS},
    }
]
HEADERS = {"Authorization": "Bearer bench", "Content-Type": "application/json"}


async def get_weather(city: str) -> str:
    """The tool: an async function, as in every implementation (no thread hop anywhere)."""
    return tool_result(city)


async def _execute(calls: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    if len(calls) == 1:  # one call: no gather, no extra task
        results = [await get_weather(**orjson.loads(calls[0][2]))]
    else:
        results = await asyncio.gather(*(get_weather(**orjson.loads(args)) for _, _, args in calls))
    pairs = zip(calls, results, strict=True)
    return [{"role": "tool", "tool_call_id": cid, "content": r} for (cid, _, _), r in pairs]


def _assistant(content: str | None, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    tool_calls = [{"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in calls]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


class Impl:
    """The hand-written loop; one aiohttp session (unlimited pool) shared by every run."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # made on the running loop
            connector = aiohttp.TCPConnector(limit=0, force_close=False)
            self._session = aiohttp.ClientSession(connector=connector, headers=HEADERS)
        return self._session

    async def _post(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        response = await self._client().post(self.url, data=orjson.dumps(body))
        if response.status != 200:
            text = await response.text()
            response.release()
            raise RuntimeError(f"HTTP {response.status}: {text[:200]}")
        return response

    async def run(self, prompt: str) -> str:
        """One agent run with blocking model calls; returns the final answer."""
        return await self._loop([{"role": "user", "content": prompt}])

    def prepare_history(self, history: list[dict[str, str]]) -> list[dict[str, str]]:
        """The history as this loop holds it: the wire dicts themselves."""
        return history

    async def run_with_history(self, prompt: str, history: list[dict[str, str]]) -> str:
        """One agent run after ``history`` (the history probe); the final answer."""
        return await self._loop([*history, {"role": "user", "content": prompt}])

    async def _loop(self, messages: list[Any]) -> str:
        while True:
            response = await self._post({"model": self.model, "messages": messages, "tools": TOOLS})
            message = orjson.loads(await response.read())["choices"][0]["message"]
            tool_calls = message.get("tool_calls")
            if not tool_calls:
                return message.get("content") or ""
            calls = [(tc["id"], tc["function"]["name"], tc["function"]["arguments"]) for tc in tool_calls]
            messages.append(_assistant(message.get("content"), calls))
            messages.extend(await _execute(calls))

    async def stream(self, prompt: str) -> str:
        """One streamed agent run; returns the joined text deltas."""
        return "".join([piece async for piece in self.deltas(prompt)])

    async def deltas(self, prompt: str) -> AsyncIterator[str]:
        """One streamed agent run; each text delta handed on as soon as it is parsed."""
        messages: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            body = {
                "model": self.model,
                "messages": messages,
                "tools": TOOLS,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            response = await self._post(body)
            content: list[str] = []
            pending: dict[int, list[str]] = {}
            done = False
            buffer = b""
            # Whole reads split into events by hand: no per-line awaits (the server ends each
            # event with a blank line, b"\n\n").
            async for data in response.content.iter_any():
                buffer += data
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    if not event.startswith(b"data:"):
                        continue
                    payload = event[5:].strip()
                    if payload == b"[DONE]":
                        done = True
                        break
                    choices = orjson.loads(payload).get("choices")
                    if not choices:
                        continue
                    delta = choices[0].get("delta") or {}
                    piece = delta.get("content")
                    if piece:
                        content.append(piece)
                        yield piece
                    for tc in delta.get("tool_calls") or ():
                        slot = pending.setdefault(tc.get("index", 0), ["", "", ""])
                        if tc.get("id"):
                            slot[0] = tc["id"]
                        function = tc.get("function") or {}
                        slot[1] += function.get("name") or ""
                        slot[2] += function.get("arguments") or ""
            response.release()
            if not done:
                raise RuntimeError("the stream ended without [DONE]")
            if not pending:
                return
            calls = [(c, n, a) for c, n, a in (pending[i] for i in sorted(pending))]
            messages.append(_assistant("".join(content) or None, calls))
            messages.extend(await _execute(calls))

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None
