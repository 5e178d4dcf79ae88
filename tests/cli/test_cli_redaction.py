"""The command line never prints a secret of a URL it was given (``--base-url``, ``--memory``,
``--mcp-url``): userinfo and query values are shown as ``***``."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from advisorchain.cli import app

SECRET = "s3cret-Pa55"


def _error_lines(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code != 0
    return result.stderr


def test_an_unreachable_base_url_is_reported_without_its_password_or_token() -> None:
    err = _error_lines(
        "chat", "-p", "hi", "--model", "openai:m", "--base-url", f"http://u:{SECRET}@127.0.0.1:9/v1?key={SECRET}"
    )
    assert SECRET not in err
    assert "http://***@127.0.0.1:9/v1" in err


def test_a_memory_store_that_cannot_open_is_reported_without_its_password() -> None:
    err = _error_lines("sessions", "list", "--memory", f"mysql://app:{SECRET}@db/chat")
    assert SECRET not in err
    assert "mysql://***@db/chat" in err


@pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the --mcp-url flag needs advisorchain.mcp (extra 'mcp')"
)
def test_an_mcp_url_that_cannot_start_is_reported_without_its_secrets(server_url: str) -> None:
    err = _error_lines(
        "chat",
        "-p",
        "hi",
        "--model",
        "openai:weather+k5",
        "--base-url",
        server_url,
        "--mcp-url",
        f"http://u:{SECRET}@127.0.0.1:9/mcp?token={SECRET}",
    )
    assert SECRET not in err
    assert "http://***@127.0.0.1:9/mcp?token=***" in err
