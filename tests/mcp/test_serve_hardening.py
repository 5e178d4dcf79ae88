"""serve() made safe to expose: a served agent that stops for approval answers an error result naming
the waiting call (never an empty success), ``auth_token`` guards every HTTP request, Host/Origin
checks hold on a non-loopback bind, and the server says which advisorchain version it is."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx2
import mcp
import pytest

import advisorchain
from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ScriptedChatModel,
    ToolCall,
    tool,
)
from advisorchain.mcp import McpServerHttp, aserve, mcp_server
from advisorchain.mcp.serve import _host_checks
from tests.support.mcp_helpers import serving

TOKEN = "s3cret-token"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _agent(*advisors: Any) -> ChatClient:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("call_7", "delete_file", '{"path": "a.txt"}')])]
    )
    return ChatClient(model, default_tools=[delete_file], default_advisors=list(advisors))


async def _call_agent(client: ChatClient) -> Any:
    async with mcp.Client(mcp_server(client), mode="legacy") as session:
        return await session.call_tool("ask_agent", {"question": "tidy up"})


async def test_a_served_agent_waiting_for_approval_answers_an_error_naming_the_call() -> None:
    result = await _call_agent(_agent())

    assert result.is_error
    (text,) = [block.text for block in result.content]
    assert "tool call 'call_7' (tool 'delete_file') waits for a person's approval" in text
    assert "nothing of that call ran" in text


async def test_with_memory_the_error_says_how_to_resume() -> None:
    memory = MessageWindowChatMemory()
    result = await _call_agent(_agent(MessageChatMemoryAdvisor(memory)))

    assert result.is_error
    text = result.content[0].text
    assert "The conversation 'default' keeps the pending call" in text
    assert ".tool_approvals({'call_7': Approved()})" in text
    assert [m.tool_calls[0].id for m in memory.get("default") if isinstance(m, AssistantMessage)] == [
        "call_7"
    ]


async def test_the_server_reports_the_package_version() -> None:
    async with mcp.Client(mcp_server(_agent(), name="agent"), mode="legacy") as session:
        info = session.server_info
    assert info is not None and (info.name, info.version) == ("agent", advisorchain.__version__)


# -- over HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def served_url() -> Iterator[str]:
    """``ask_agent`` served over streamable HTTP on 0.0.0.0 with an auth token and one allowed name."""
    agent = ChatClient(ScriptedChatModel(["pong"] * 10))

    def serve(port: int) -> Coroutine[Any, Any, None]:
        return aserve(
            agent,
            transport="streamable-http",
            host="0.0.0.0",
            port=port,
            auth_token=TOKEN,
            allowed_hosts=["mcp.example.test"],
        )

    with serving(serve) as url:
        yield url


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def _post(url: str, **headers: str) -> httpx2.Response:
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    return httpx2.post(url, content=json.dumps(_INITIALIZE), headers={**base, **headers}, timeout=10)


def test_every_request_without_the_token_is_refused_and_with_it_served(served_url: str) -> None:
    assert _post(served_url).status_code == 401
    assert _post(served_url, authorization="Bearer wrong").status_code == 401
    assert _post(served_url, authorization=f"Bearer {TOKEN}").status_code == 200

    with (
        pytest.raises(ChainConfigurationError, match="could not start"),
        McpServerHttp(served_url, timeout=10),
    ):
        pass
    with McpServerHttp(served_url, headers={"Authorization": f"Bearer {TOKEN}"}) as server:
        (agent,) = advisorchain.tool_callbacks(server)
        assert asyncio.run(agent.call('{"question": "ping"}', None)) == "pong"


def test_on_a_non_loopback_bind_the_host_and_origin_checks_stay_on(served_url: str) -> None:
    auth = {"authorization": f"Bearer {TOKEN}"}
    port = served_url.split(":")[2].split("/")[0]

    assert _post(served_url, host="attacker.example", **auth).status_code == 421
    assert _post(served_url, origin="http://attacker.example", **auth).status_code == 403
    assert (
        _post(
            served_url, host=f"mcp.example.test:{port}", origin="https://mcp.example.test", **auth
        ).status_code
        == 200
    )


def test_the_checks_name_the_bound_address_and_the_allowed_hosts() -> None:
    settings = _host_checks("192.0.2.10", ["mcp.example.test"])

    assert {"192.0.2.10:*", "mcp.example.test:*", "127.0.0.1:*", "[::1]:*"} <= set(settings.allowed_hosts)
    assert {"http://192.0.2.10:*", "https://mcp.example.test"} <= set(settings.allowed_origins)
    assert "attacker.example:*" not in settings.allowed_hosts


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"auth_token": ""}, "auth_token must be a non-empty str"),
        ({"auth_token": "t", "transport": "stdio"}, "auth_token applies to transport='streamable-http'"),
    ],
)
async def test_a_bad_auth_token_is_refused_naming_it(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        await aserve(_agent(), **kwargs)
