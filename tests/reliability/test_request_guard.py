"""advisorchain.testing.forbid_model_requests / the no_model_requests fixture: every provider
adapter refuses a request that would leave this machine, before anything is sent; loopback servers
and replay clients still work. (The suite's conftest runs everything under the guard already, so
these tests nest it.)"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import httpx2
import openai
import pytest

from advisorchain import ModelError, Prompt, UserMessage
from advisorchain.models._common import check_request_allowed, requests_forbidden
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.testing import forbid_model_requests
from advisorchain.testing import no_model_requests as no_model_requests  # the fixture, used below
from tests.support.openai_server import ScriptedServer, json_reply, running_server
from tests.support.payloads import openai_completion

PROMPT = Prompt([UserMessage("hi")])


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with running_server() as server:
        yield server


async def test_an_openai_request_to_a_remote_host_is_refused_naming_the_url() -> None:
    model = OpenAIChatModel("gpt-4o", api_key="k", base_url="https://api.openai.com/v1")

    with (
        forbid_model_requests(),
        pytest.raises(ModelError, match=re.escape("'https://api.openai.com/v1/' refused")) as caught,
    ):
        await model.call(PROMPT)

    assert caught.value.error_type == "requests_forbidden"


async def test_an_anthropic_stream_to_a_remote_host_is_refused() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="k")

    with forbid_model_requests(), pytest.raises(ModelError, match="real model requests are forbidden"):
        async for _ in model.stream(PROMPT):
            pass


async def test_the_fixture_refuses_remote_requests(no_model_requests: None) -> None:
    model = OpenAIChatModel("gpt-4o", api_key="k", base_url="https://api.example.com/v1")

    with pytest.raises(ModelError, match="forbidden"):
        await model.call(PROMPT)


async def test_a_loopback_server_stays_allowed(server: ScriptedServer) -> None:
    server.queue(json_reply(200, openai_completion("local")))
    model = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="k", max_retries=0)

    with forbid_model_requests():
        assert (await model.call(PROMPT)).text == "local"


async def test_a_mock_transport_to_a_remote_host_stays_allowed() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=openai_completion("replayed"))

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="https://api.openai.com/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )

    with forbid_model_requests():
        assert (await OpenAIChatModel("gpt-4o", client=client).call(PROMPT)).text == "replayed"


def test_the_guard_nests_and_restores_the_state_it_found() -> None:
    before = requests_forbidden()

    with forbid_model_requests():
        with forbid_model_requests():
            assert requests_forbidden()
        assert requests_forbidden()

    assert requests_forbidden() == before


def test_check_request_allowed_passes_a_loopback_client() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:8000/v1")

    with forbid_model_requests():
        check_request_allowed("openai", client)  # no error: loopback


def test_sockets_mode_refuses_a_connection_outside_loopback_naming_it() -> None:
    with (
        forbid_model_requests(sockets=True),
        socket.socket() as sock,
        pytest.raises(ConnectionRefusedError, match=re.escape("'203.0.113.9', 443")),
    ):
        sock.connect(("203.0.113.9", 443))
