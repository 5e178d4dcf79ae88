"""No secret of a URL in anything advisorchain prints: ``redact_url`` hides userinfo and query values,
and the errors of the model adapters and of MCP servers, and their reprs, go through it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import ModelConnectionError, Prompt, UserMessage
from advisorchain._urls import redact_url, split_userinfo

SECRET = "s3cret-Pa55"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://me:s3cret@llm.example.com/v1?token=abc&v=2", "https://***@llm.example.com/v1?token=***&v=***"),
        ("http://token@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
        ("postgresql://app:pw@db:5432/chat", "postgresql://***@db:5432/chat"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://127.0.0.1:8000/mcp?flag", "http://127.0.0.1:8000/mcp?flag"),
        ("not a url", "not a url"),
    ],
)
def test_a_url_keeps_where_it_points_and_hides_what_lets_someone_in(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@given(
    user=st.text(st.characters(blacklist_characters="@/?#[]", blacklist_categories=("Cs",)), min_size=1),
    password=st.text(st.characters(blacklist_characters="@/?#[]", blacklist_categories=("Cs",)), min_size=4),
    token=st.text(st.characters(blacklist_characters="&#=", blacklist_categories=("Cs",)), min_size=4),
)
def test_no_password_or_query_value_survives_redaction(user: str, password: str, token: str) -> None:
    url = f"https://{user}:{password}@host.example:8443/v1?api_key={token}"

    assert redact_url(url) == "https://***@host.example:8443/v1?api_key=***"


def test_userinfo_is_split_off_percent_decoded() -> None:
    assert split_userinfo("http://al%40ice:p%3Ass@h:1/v1") == ("http://h:1/v1", "al@ice", "p:ss")
    assert split_userinfo("http://h:1/v1") == ("http://h:1/v1", None, None)


@pytest.mark.parametrize("path", ["aiohttp", "sdk"])
async def test_a_model_error_never_shows_the_urls_password_or_token(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisorchain.models.anthropic import AnthropicChatModel
    from advisorchain.models.openai import OpenAIChatModel

    monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if path == "aiohttp" else "sdk")
    url = f"http://user:{SECRET}@127.0.0.1:9/v1?token={SECRET}"
    for model in (
        OpenAIChatModel("m", base_url=url, api_key="k", max_retries=0),
        AnthropicChatModel("m", base_url=url, api_key="k", max_retries=0),
    ):
        with pytest.raises(ModelConnectionError) as caught:
            await model.call(Prompt([UserMessage("hi")]))
        assert SECRET not in str(caught.value)
        assert "http://***@127.0.0.1:9/v1" in str(caught.value)


def test_an_mcp_http_servers_repr_and_start_error_never_show_its_secrets() -> None:
    mcp = pytest.importorskip("advisorchain.mcp", reason="advisorchain.mcp (extra 'mcp') is not installed")
    from advisorchain import ChainConfigurationError

    server = mcp.McpServerHttp(f"http://user:{SECRET}@127.0.0.1:9/mcp?token={SECRET}", timeout=5)

    assert SECRET not in repr(server) and SECRET not in server.name
    with pytest.raises(ChainConfigurationError) as caught, server:
        pass
    assert SECRET not in str(caught.value)
    assert "http://***@127.0.0.1:9/mcp?token=***" in str(caught.value)
