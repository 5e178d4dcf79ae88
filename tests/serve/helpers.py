"""Helpers of the serve tests: an app served by uvicorn on a free loopback port (in a thread), the
official AG-UI client driven through node, and scripted models that wait when told to."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from advisorchain import AssistantMessage, ChatClient, ToolCall, tool
from advisorchain.model import ChatResponse, Prompt
from advisorchain.testing import ScriptedChatModel, stream_chunks

ROOT = Path(__file__).resolve().parents[2]
AGUI_CLIENT = ROOT / ".agui-client" / "node_modules" / "@ag-ui" / "client"
DRIVER = Path(__file__).with_name("agui_driver.mjs")
TOKEN = "test-token-123"


@dataclass(frozen=True)
class Served:
    """An app served on 127.0.0.1."""

    base: str
    port: int


@contextmanager
def serve(app: Any) -> Iterator[Served]:
    """Serve ``app`` on a free loopback port in a thread until the block ends."""
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    port = sock.getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", port)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def run_agui_client(url: str, steps: list[dict[str, Any]], *, thread_id: str = "thread-1", token: str | None = TOKEN) -> dict[str, Any]:
    """What the official AG-UI client (``HttpAgent``) saw running ``steps`` against ``url``."""
    if shutil.which("node") is None:
        pytest.skip("the AG-UI client tests need node (apt-get install nodejs)")
    if not AGUI_CLIENT.exists():
        pytest.skip("the AG-UI client tests need @ag-ui/client in .agui-client/ (scripts/test.sh installs it)")
    plan = {"url": url, "token": token, "threadId": thread_id, "steps": steps}
    done = subprocess.run(
        ["node", str(DRIVER), str(AGUI_CLIENT), json.dumps(plan)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def asks(*calls: tuple[str, str, str], text: str | None = None) -> AssistantMessage:
    """A model answer that calls tools: (id, name, arguments JSON)."""
    return AssistantMessage(text, tuple(ToolCall(*c) for c in calls))


def agent(model: Any, **kwargs: Any) -> ChatClient:
    return ChatClient(model, default_tools=[get_weather, delete_file], **kwargs)


class GatedModel(ScriptedChatModel):
    """A scripted model whose stream waits for ``release`` (set from any thread) before its last
    chunk; ``entered`` counts streams that started, ``closed`` those closed before they ended."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.release = threading.Event()
        self.entered = 0
        self.closed = 0

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.entered += 1
        response = self._take(prompt)
        chunks = stream_chunks(response)
        finished = False
        try:
            for chunk in chunks[:-1]:
                yield chunk
            while not self.release.is_set():  # noqa: ASYNC110 -- a threading.Event, set from the test's thread
                await asyncio.sleep(0.01)
            yield chunks[-1]
            finished = True
        finally:
            if not finished:
                self.closed += 1

    async def call(self, prompt: Prompt) -> ChatResponse:
        self.entered += 1
        response = self._take(prompt)
        try:
            while not self.release.is_set():  # noqa: ASYNC110 -- a threading.Event, set from the test's thread
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.closed += 1
            raise
        return response
