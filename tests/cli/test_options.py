"""The flags that describe an agent are one shared set: a command applies ``agent_options`` (or
``model_options``) and receives one frozen object, so a new command gets every flag in one line."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from advisorchain.cli._options import (
    DEFAULT_TIMEOUT,
    AgentOptions,
    ModelOptions,
    agent_options,
    model_options,
)
from advisorchain.cli.app import app


def test_a_new_command_gets_every_agent_flag_as_one_object() -> None:
    seen: list[AgentOptions] = []

    @click.command()
    @agent_options()
    @click.option("--port", type=int, default=8000)
    def web(agent: AgentOptions, port: int) -> None:
        seen.append(agent)
        click.echo(port)

    args = ["--model", "anthropic:claude-haiku-4-5", "--base-url", "http://h/v1", "--timeout", "7"]
    args += ["--system", "S", "--tools", "a:b", "--tools", "c:d", "--mcp", "x y", "--mcp-url", "http://m"]
    args += ["--session", "s", "--memory", "sqlite:///f.db", "--yes", "--port", "9"]
    result = CliRunner().invoke(web, args, catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == "9\n"
    assert seen == [
        AgentOptions(
            model=ModelOptions("anthropic:claude-haiku-4-5", "http://h/v1", 7.0),
            system="S",
            tools=("a:b", "c:d"),
            mcp=("x y",),
            mcp_url=("http://m",),
            session="s",
            memory="sqlite:///f.db",
            approve_all=True,
        )
    ]


def test_model_options_alone_give_the_model_flags() -> None:
    seen: list[ModelOptions] = []

    @click.command()
    @model_options(default=None)
    def evaluate(model: ModelOptions) -> None:
        seen.append(model)

    assert CliRunner().invoke(evaluate, [], catch_exceptions=False).exit_code == 0
    assert seen == [ModelOptions(None, None, DEFAULT_TIMEOUT)]


@pytest.mark.parametrize("command", ["chat", "demo"])
def test_chat_and_demo_document_the_shared_model_flags(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    for flag in ("--model", "--base-url", "--timeout"):
        assert flag in result.stdout


def test_a_timeout_must_be_positive() -> None:
    result = CliRunner().invoke(app, ["chat", "-p", "hi", "--timeout", "0"])
    assert result.exit_code == 2
    assert "--timeout" in result.stderr
