"""``advisorchain serve --protocol agui|a2a|openai|mcp``: the agent ``chat`` builds, served to other
software (API.md §20): AG-UI front ends, A2A agents, OpenAI clients, or MCP clients.

Conversations live in the sessions store (``--memory``); calls that need approval go to the caller
over the protocol (``--yes`` approves them all). A random token is printed at start unless
``--token-env NAME`` names a variable holding it; ``--no-token`` only on loopback. The server
listens on loopback unless ``--host`` says otherwise (with a warning); its access log is off, so
no URL is ever logged.
"""

from __future__ import annotations

import os
import secrets
import sys
from contextlib import AsyncExitStack
from typing import Any

import click
from rich.console import Console

from ..client import ChatClient
from ._agent import (
    MAX_MESSAGES,
    ModelChoice,
    agent_client,
    close_model,
    guard_kit,
    open_knowledge_advisor,
)
from ._options import AgentOptions, ModelOptions
from ._sessions import open_store
from ._setup import CliError, load_tools, mcp_servers
from .web import _listen, is_loopback, serve_until_stopped, served_agent_options, served_model

__all__ = ["serve_command"]

_PROTOCOLS = ("agui", "a2a", "openai", "mcp")


@click.command("serve")
@click.option(
    "--protocol", type=click.Choice(_PROTOCOLS), required=True, help="What the agent speaks to its callers."
)
@served_agent_options
@click.option("--token-env", metavar="NAME", default=None, help="Read the bearer token from this variable.")
@click.option("--no-token", is_flag=True, help="Serve without a token (loopback only).")
@click.option("--debug", is_flag=True, help="Show the server's log.")
def serve_command(
    protocol: str,
    agent: AgentOptions,
    host: str,
    port: int,
    token_env: str | None,
    no_token: bool,
    debug: bool,
) -> int:
    """Serve the agent over AG-UI, A2A, OpenAI's Chat Completions API or MCP."""
    token = _token(token_env, no_token, host)
    _check_extra(protocol)
    if agent.session is not None:
        raise click.UsageError(
            "--session does not apply to serve: each request names its conversation (threadId, "
            "contextId, X-Conversation-Id or user)"
        )
    llm, label, extra_tools = served_model(agent, "the scripted demo model (offline)")
    tools = [*extra_tools, *load_tools(agent.tools)]
    servers = mcp_servers(agent.mcp, agent.mcp_url)
    store = open_store(agent.memory)
    sock = _listen(host, port)
    main = _serve(protocol, agent, llm, label, tools, servers, store, sock, host, token, debug)
    return serve_until_stopped(main, sock, store)


def _token(token_env: str | None, no_token: bool, host: str) -> str | None:
    if no_token and token_env is not None:
        raise click.UsageError("--no-token and --token-env exclude each other")
    if no_token:
        if not is_loopback(host):
            raise click.UsageError("--no-token is only allowed on a loopback --host")
        return None
    if token_env is None:
        return secrets.token_urlsafe(24)
    value = os.environ.get(token_env)
    if not value or not value.strip() or value.split() != [value]:
        raise click.BadParameter(
            f"the variable {token_env} is unset or not a token (printable, no spaces)",
            param_hint="'--token-env'",
        )
    return value


def _check_extra(protocol: str) -> None:
    try:
        if protocol == "mcp":
            import mcp  # noqa: F401
        else:
            import advisorchain.serve  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        extra = "mcp" if protocol == "mcp" else "serve"
        raise CliError(
            f"advisorchain serve needs the {extra!r} extra ({exc}): pip install 'advisorchain[{extra}]'"
        ) from exc


def _client(
    agent: AgentOptions, llm: Any, tools: list[object], knowledge: Any, store: Any
) -> tuple[ChatClient, Any]:
    """The agent ``chat`` builds, without its own memory advisor: the app keeps the conversations
    (by the id each request names) in the sessions store."""
    from ..advisors import MessageChatMemoryAdvisor
    from ..memory import MessageWindowChatMemory
    from ..tools import ToolCallingManager

    manager = ToolCallingManager(approver=(lambda call, context: True) if agent.approve_all else None)
    memory = MessageWindowChatMemory(store.repository, max_messages=MAX_MESSAGES)
    client = agent_client(
        llm,
        agent.system,
        tools,
        memory,
        manager,
        knowledge,
        agent.budget.limits(),
        _starting_agent(agent),
        cache=agent.cache,
        guards=guard_kit(agent),
    )
    advisors = [a for a in client.default_advisors if not isinstance(a, MessageChatMemoryAdvisor)]
    return client.mutate(default_advisors=advisors), memory


def _starting_agent(agent: AgentOptions) -> Any:
    """``--agents FILE``: the agent that starts (its graph checked), or None without the flag."""
    if agent.agents is None:
        return None
    from ._agents_file import load_agents

    timeout = agent.model.timeout
    return load_agents(
        agent.agents, build_model=lambda label: ModelChoice.build(ModelOptions(label, None, timeout)).model
    )


async def _serve(
    protocol: str,
    agent: AgentOptions,
    llm: Any,
    label: str,
    tools: list[object],
    servers: list[Any],
    store: Any,
    sock: Any,
    host: str,
    token: str | None,
    debug: bool,
) -> None:
    import uvicorn

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(close_model, llm)
        entered = [await stack.enter_async_context(server) for server in servers]
        client, memory = _client(
            agent, llm, [*tools, *entered], open_knowledge_advisor(agent.knowledge, stack), store
        )
        app = _app(protocol, client, memory, token, host)
        port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        path = {"agui": "/", "a2a": "/", "openai": "/v1", "mcp": "/mcp"}[protocol]
        if not is_loopback(host):
            err.print(
                f"[bold yellow]warning:[/] listening on {host}, not on loopback: anyone who can reach this "
                "machine and has the token can use the agent and its tools, over unencrypted http"
            )
        out.print(f"advisorchain serve ({protocol}): [bold]http://{shown}:{port}{path}[/]")
        out.print(f"  token: {token}" if token is not None else "  no token (loopback only)", markup=False)
        out.print(f"  agent: {label}, {len(client.default_tool_callbacks())} tool(s)", markup=False)
        out.print("Ctrl-C stops it.", style="dim")
        sys.stdout.flush()
        config = uvicorn.Config(
            app,
            log_level="info" if debug else "warning",
            access_log=False,  # a URL is never logged (a token put in one included)
            lifespan="on" if protocol == "mcp" else "off",
            timeout_graceful_shutdown=2,
        )
        await uvicorn.Server(config).serve(sockets=[sock])


def _app(protocol: str, client: ChatClient, memory: Any, token: str | None, host: str) -> Any:
    if protocol == "mcp":
        from ..mcp.serve import _BearerAuth, _host_checks, mcp_server

        app: Any = mcp_server(client).streamable_http_app(
            streamable_http_path="/mcp", host=host, transport_security=_host_checks(host, ())
        )
        if token is not None:
            app = _BearerAuth(app, token.encode())
        return app
    from .. import serve

    if protocol == "agui":
        return serve.agui_app(client, token=token, memory=memory)
    if protocol == "a2a":
        return serve.a2a_app(client, token=token, memory=memory)
    return serve.openai_app(client, token=token, memory=memory)
