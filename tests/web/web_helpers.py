"""Helpers of the web page's tests: scripted agents with tools, the app served on loopback, and
reading a turn's event stream."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ToolCall,
    tool,
)
from advisorchain.model import ChatModel

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "test-token-0123456789abcdef"
AUTH = {"x-advisorchain-token": TOKEN}

ran: list[str] = []
"""The tool calls that ran, in order (the tests clear it)."""


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    ran.append(f"get_weather {city}")
    return f"{city}: sunny, 21C"


@tool(requires_approval=True)
def book(place: str) -> str:
    """Book a table (needs approval)."""
    ran.append(f"book {place}")
    return f"booked {place}"


@tool
def broken(x: int) -> str:
    """A tool that always fails."""
    raise ValueError(f"boom on {x}")


TOOLS = [get_weather, book, broken]


def asks(*calls: tuple[str, str, str], text: str | None = None) -> AssistantMessage:
    """An assistant message asking for ``(id, name, arguments)`` tool calls."""
    return AssistantMessage(text, [ToolCall(i, n, a) for i, n, a in calls])


def agent(model: ChatModel, memory: ChatMemory | None = None) -> tuple[ChatClient, ChatMemory]:
    """The agent ``chat`` builds: memory outside the tool loop, the test tools."""
    memory = memory if memory is not None else MessageWindowChatMemory(max_messages=200)
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)], default_tools=TOOLS)
    return client, memory


def events(body: str) -> list[tuple[str, Any]]:
    """The ``(name, data)`` events of a ``text/event-stream`` body."""
    found = []
    for frame in body.split("\n\n"):
        lines = frame.strip().splitlines()
        if not lines:
            continue
        name = next(line[len("event: ") :] for line in lines if line.startswith("event: "))
        data = next(line[len("data: ") :] for line in lines if line.startswith("data: "))
        found.append((name, json.loads(data)))
    return found


def named(found: list[tuple[str, Any]], name: str) -> list[Any]:
    """The data of the events called ``name``."""
    return [data for n, data in found if n == name]


@dataclass(frozen=True)
class Served:
    """An app served by uvicorn on 127.0.0.1."""

    base: str
    app: Any

    @property
    def token(self) -> str:
        return str(self.app.state.token)

    def page_url(self, conversation: str | None = None) -> str:
        anchor = f"#c={conversation}" if conversation else ""
        return f"{self.base}/?token={self.token}{anchor}"


@contextmanager
def serve(app: Any) -> Iterator[Served]:
    """Serve ``app`` on a free loopback port in a thread until the block ends."""
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as advisorchain web does
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    try:
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}", app)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def wait_for(check: Any, timeout: float = 10.0) -> None:
    """Wait until ``check()`` is true (a test fails when it never is)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


COMMAND = [sys.executable, "-m", "advisorchain.cli"]


@dataclass
class Running:
    """A running ``advisorchain web``: its process, the printed URL, its base and token."""

    process: subprocess.Popen[str]
    url: str
    base: str
    token: str


def web_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a command under test: its own data directory, no keys, no colours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "ADVISORCHAIN"))}
    return {**env, "ADVISORCHAIN_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1", "COLUMNS": "200"}


@contextmanager
def web(tmp_path: Path, *args: str) -> Iterator[Running]:
    """``advisorchain web --port 0 *args`` until the block ends (then Ctrl-C)."""
    process = subprocess.Popen(
        [*COMMAND, "web", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=web_env(tmp_path),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"(http://[^/\s]+)/\?token=([\w-]+)(\S*)", line)
        assert found, f"no URL in {line!r}; stderr: {process.stderr.read() if process.stderr else ''}"
        yield Running(process, found.group(0), found.group(1), found.group(2))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
