"""How the adapters fail before and at their first request: a missing extra names the extra to install,
a missing key is a ModelError naming the environment variable at construction (OpenAI, Responses and
Anthropic alike), an unreachable server is a ModelError naming the URL."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from advisorchain.errors import ModelError
from advisorchain.messages import UserMessage
from advisorchain.model import Prompt
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel
from tests.support.processes import free_port

_KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _no_real_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No provider keys; unlike the package-wide fixture, real transports stay, for loopback only
    (the suite-wide socket guard still refuses anything beyond loopback)."""
    for name in _KEYS:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.mark.parametrize(
    ("module", "sdk", "extra"),
    [
        ("advisorchain.models.openai", "openai", "openai"),
        ("advisorchain.models.openai_responses", "openai", "openai"),
        ("advisorchain.models.openai", "httpx2", "openai"),
        ("advisorchain.models.anthropic", "anthropic", "anthropic"),
    ],
)
def test_importing_an_adapter_without_its_sdk_names_the_extra_to_install(
    module: str, sdk: str, extra: str
) -> None:
    code = (
        f"import sys; sys.modules[{sdk!r}] = None\n"
        f"try:\n    import {module}\n"
        "except ModuleNotFoundError as exc:\n    print(exc)\nelse:\n    print('imported')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )

    assert f"pip install 'advisorchain[{extra}]'" in done.stdout
    assert repr(sdk) in done.stdout


@pytest.mark.parametrize(
    ("build", "variable"),
    [
        (lambda: OpenAIChatModel("gpt-4o"), "OPENAI_API_KEY"),
        (lambda: OpenAIResponsesChatModel("gpt-5-mini"), "OPENAI_API_KEY"),
        (lambda: AnthropicChatModel("claude-sonnet-4-5"), "ANTHROPIC_API_KEY"),
    ],
)
def test_a_missing_key_is_a_model_error_naming_the_variable_at_construction(
    build: object, variable: str
) -> None:
    with pytest.raises(ModelError, match=variable):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("build", "variable"),
    [
        (OpenAIChatModel, "OPENAI_API_KEY"),
        (OpenAIResponsesChatModel, "OPENAI_API_KEY"),
        (AnthropicChatModel, "ANTHROPIC_API_KEY"),
    ],
)
def test_an_empty_key_in_the_environment_counts_as_none(
    build: type, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "")

    with pytest.raises(ModelError, match=variable):
        build("m")
    assert build("m", base_url="http://127.0.0.1:9/v1").client.api_key == "unused"


def test_anthropic_accepts_an_auth_token_instead_of_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")

    assert AnthropicChatModel("claude-sonnet-4-5").client.auth_token == "token"


def test_anthropic_with_a_base_url_needs_no_key_for_local_servers() -> None:
    model = AnthropicChatModel("local", base_url="http://127.0.0.1:9")

    assert str(model.client.base_url) == "http://127.0.0.1:9"



async def test_an_unreachable_responses_server_is_a_model_error_naming_the_url_on_call() -> None:
    port = free_port()
    model = OpenAIResponsesChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)

    url = re.escape(f"http://127.0.0.1:{port}/v1/responses")
    with pytest.raises(ModelError, match=rf"connection failed \({url}\): connection refused") as caught:
        await model.call(Prompt([UserMessage("hi")]))

    assert caught.value.error_type == "connection_error"


async def test_an_unreachable_responses_server_is_a_model_error_naming_the_url_on_stream() -> None:
    port = free_port()
    model = OpenAIResponsesChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)

    with pytest.raises(ModelError, match=re.escape(f"http://127.0.0.1:{port}/v1/responses")) as caught:
        _ = [chunk async for chunk in model.stream(Prompt([UserMessage("hi")]))]

    assert caught.value.error_type == "connection_error"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("openai", "OPENAI_API_KEY"), ("openai-responses", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")],
)
def test_the_demo_on_a_real_provider_without_a_key_names_the_variable(
    provider: str, variable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from advisorchain.cli import main

    assert main(["demo", "--provider", provider]) == 1
    assert f"error: {variable} is not set" in capsys.readouterr().err
