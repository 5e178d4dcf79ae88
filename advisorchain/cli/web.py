"""``advisorchain web``: serve a local web page for the agent ``chat`` builds.

Conversations live in the sessions store (``advisorchain sessions``); with no ``--model`` a scripted
demo model answers, offline, and the page says so. The printed URL carries a random token that every
request must present; the page listens on loopback unless ``--host`` says otherwise (with a warning).
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.console import Console

from ..client import ChatClient
from ..memory import ChatMemoryRepository
from ..model import ChatModel
from ..usage import UsageLimits
from ._agent import (
    MAX_MESSAGES,
    GuardKit,
    ModelChoice,
    agent_client,
    close_model,
    guard_kit,
    open_knowledge_advisor,
    refuse_unpriced_cost_limit,
)
from ._options import AgentOptions, ModelOptions, agent_options
from ._sessions import Store, open_store
from ._setup import CliError, load_tools, mcp_servers

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["web_command"]


@dataclass(frozen=True)
class WebSettings:
    """What ``advisorchain web`` was asked to serve, and where."""

    model: ChatModel
    model_label: str
    system: str | None
    tools: list[object]
    mcp: list[Any]
    repository: ChatMemoryRepository
    where: str
    session: str | None
    approve_all: bool
    knowledge: str | None = None
    limits: UsageLimits | None = None
    start: Any = None  # --agents: the agent that starts
    cache: bool = False
    guards: GuardKit | None = None


def _agent(settings: WebSettings, mcp_tools: list[object], knowledge: Any = None) -> ChatClient:
    """The agent ``chat`` builds on the sessions store. Calls that need approval wait for the page
    (``--yes`` approves them all); ``knowledge``: the ``--knowledge`` advisor (the page shows the
    citations)."""
    from ..memory import MessageWindowChatMemory
    from ..tools import ToolCallingManager

    manager = ToolCallingManager(approver=(lambda call, context: True) if settings.approve_all else None)
    memory = MessageWindowChatMemory(settings.repository, max_messages=MAX_MESSAGES)
    tools = [*settings.tools, *mcp_tools]
    return agent_client(
        settings.model,
        settings.system,
        tools,
        memory,
        manager,
        knowledge,
        settings.limits,
        settings.start,
        cache=settings.cache,
        guards=settings.guards,
    )


def served_agent_options(command: _F) -> _F:
    """The flags of a command that serves an agent (``web``, ``serve``): the agent's (the scripted
    demo model without ``--model``), then ``--host`` and ``--port``."""
    for flag in (
        click.option(
            "--port",
            type=click.IntRange(0, 65535),
            default=8000,
            show_default=True,
            help="0 picks a free port.",
        ),
        click.option(
            "--host", default="127.0.0.1", show_default=True, help="Where to listen (loopback unless asked)."
        ),
        agent_options(
            model_default=None,
            model_help="provider:name (openai, openai-responses, anthropic); "
            "default: the scripted demo model, offline.",
        ),
    ):
        command = flag(command)
    return command


def served_model(agent: AgentOptions, demo_label: str) -> tuple[ChatModel, str, list[object]]:
    """The served agent's model, what to call it, and the tools it adds: the scripted demo model
    (``demo_label``) and its tools without ``--model``. A cost limit on an unpriced model is refused."""
    if agent.model.model is None:
        if agent.model.base_url is not None:
            raise click.UsageError("--base-url needs --model, e.g. --model openai:llama3.2")
        from .web_demo import demo_tools, web_demo_model

        llm: ChatModel = web_demo_model()
        label, extra_tools = demo_label, demo_tools()
    else:
        llm = ModelChoice.build(agent.model).model
        label, extra_tools = agent.model.model, []
    refuse_unpriced_cost_limit(agent.budget, llm)
    return llm, label, extra_tools


@click.command("web")
@served_agent_options
@click.option("--debug", is_flag=True, help="Show the traceback of a failure, and the server's log.")
def web_command(agent: AgentOptions, host: str, port: int, debug: bool) -> int:
    """Serve a web page to chat with the agent: streamed answers, tool calls, approvals, a trace tree."""
    _check_extra()
    session, memory = agent.session, agent.memory
    if session is not None and not session.strip():
        raise click.BadParameter("a session needs a name", param_hint="'--session'")
    llm, label, extra_tools = served_model(
        agent, "the scripted demo model (offline; --model provider:name for a real one)"
    )
    loaded = [*extra_tools, *load_tools(agent.tools)]
    start = None
    if agent.agents is not None:
        from ._agents_file import load_agents

        timeout = agent.model.timeout
        start = load_agents(
            agent.agents, build_model=lambda m: ModelChoice.build(ModelOptions(m, None, timeout)).model
        )
    servers = mcp_servers(agent.mcp, agent.mcp_url)
    sock = _listen(host, port)
    store = open_store(memory)
    settings = WebSettings(
        llm,
        label,
        agent.system,
        loaded,
        servers,
        store.repository,
        store.label,
        session,
        agent.approve_all,
        agent.knowledge,
        agent.budget.limits(),
        start,
        agent.cache,
        guard_kit(agent),
    )
    return serve_until_stopped(_serve(settings, sock, host, debug), sock, store)


def serve_until_stopped(main: Coroutine[Any, Any, None], sock: socket.socket, store: Store) -> int:
    """Run the server ``main`` until Ctrl-C, then close its socket and its store and say so."""
    try:
        asyncio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        store.close()
    Console(stderr=True, highlight=False).print("stopped", style="dim")
    return 0


def _check_extra() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"advisorchain web needs the 'web' extra ({exc}): pip install 'advisorchain[web]'"
        ) from exc


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (bound here, so a taken port is one clear line)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.BadParameter(
            f"{host!r} is not a host to listen on ({exc.strerror})", param_hint="'--host'"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Each event of a turn is a small write: without this, Nagle holds it until the reader's
        # delayed ACK (about 40 ms) arrives. Accepted connections inherit the option.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port (0 for any free one)"
        ) from None
    sock.setblocking(False)
    return sock


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int, token: str, session: str | None) -> str:
    shown = host
    if host in ("0.0.0.0", "::", ""):
        shown = socket.gethostname()
    elif ":" in host and not host.startswith("["):
        shown = f"[{host}]"
    from urllib.parse import quote

    anchor = f"#c={quote(session, safe='')}" if session else ""
    return f"http://{shown}:{port}/?token={token}{anchor}"


async def _serve(settings: WebSettings, sock: socket.socket, host: str, debug: bool) -> None:
    import uvicorn

    from ..web import create_app

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(close_model, settings.model)
        entered = [await stack.enter_async_context(server) for server in settings.mcp]
        client = _agent(settings, entered, open_knowledge_advisor(settings.knowledge, stack))
        app = create_app(client, token=secrets.token_urlsafe(24))
        if settings.session is not None:
            app.state.service.open(settings.session)
        config = uvicorn.Config(
            app, log_level="info" if debug else "warning", lifespan="off", timeout_graceful_shutdown=2
        )
        port = sock.getsockname()[1]
        url = _url(host, port, app.state.token, settings.session)
        if not is_loopback(host):
            err.print(
                f"[bold yellow]warning:[/] listening on {host}, not on loopback: anyone who can reach "
                "this machine and has the URL can use the agent and its tools, over unencrypted http",
            )
        out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
        out.print(f"advisorchain web: [bold]{url}[/]")
        out.print(
            f"  agent: {settings.model_label}, {len(client.default_tool_callbacks())} tool(s)", markup=False
        )
        out.print(f"  conversations: {settings.where}", markup=False)
        out.print("Ctrl-C stops it.", style="dim")
        sys.stdout.flush()
        await uvicorn.Server(config).serve(sockets=[sock])
