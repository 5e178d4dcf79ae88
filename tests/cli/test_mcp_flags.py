"""``--mcp "command args"`` and ``--mcp-url URL``: the chat uses an MCP server's tools (these run once
``advisorchain.mcp`` is installed; they skip, saying so, before)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from advisorchain.cli import app
from tests.support.mcp_helpers import http_server, stdio_command

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("advisorchain.mcp") is None or importlib.util.find_spec("mcp") is None,
    reason="advisorchain.mcp (extra 'mcp') is not installed here: the --mcp flags cannot be exercised",
)


def _chat(server_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["chat", "--model", "openai:weather+k5", "--base-url", server_url, "-p", "weather?", *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_mcp_over_stdio_serves_the_tools(server_url: str) -> None:
    code, out, err = _chat(server_url, "--mcp", stdio_command("weather"))
    assert code == 0, err
    assert out == "w0 w1 w2 w3 w4 \n"
    assert '→ get_weather {"city": "Paris"}' in err


@pytest.fixture
def mcp_url() -> Iterator[str]:
    with http_server("weather") as url:
        yield url


def test_mcp_over_http_serves_the_tools(server_url: str, mcp_url: str) -> None:
    code, out, err = _chat(server_url, "--mcp-url", mcp_url)
    assert code == 0, err
    assert out == "w0 w1 w2 w3 w4 \n"


def test_an_mcp_url_that_is_not_http_is_a_usage_error(server_url: str) -> None:
    code, _, err = _chat(server_url, "--mcp-url", "ftp://x")
    assert code == 2
    assert "'ftp://x' is not an http(s) URL" in err
