"""``--cache`` (API.md §21): ``chat`` adds a PromptCacheAdvisor and shows the run's cached share
beside the tokens of each answer; a run that used no cache shows none. Against a loopback
Anthropic server that emulates prefix caching, with the real adapter; call and stream."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from advisorchain.cli import app
from tests.support.anthropic_cache import CacheEmulator
from tests.support.openai_server import ScriptedServer, running_server

pytest.importorskip("anthropic", reason="the anthropic extra is not installed")

SYSTEM = "You are the release assistant of a large project; answer from the runbook. " * 60


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return {"tool": "get_weather", "input": {"city": f"c{done}"}} if done < 3 else {"text": "Sunny."}


@pytest.fixture
def emulator() -> Iterator[tuple[CacheEmulator, ScriptedServer]]:
    script = CacheEmulator(_reply)
    with running_server(script) as server:
        yield script, server


def _chat(url: str, *args: str) -> Any:
    command = ["chat", "--model", "anthropic:claude-x", "--base-url", url, "--system", SYSTEM]
    command += ["--tools", "cli_tools:get_weather", *args, "-p", "weather?"]
    return CliRunner().invoke(app, command, catch_exceptions=False)


@pytest.mark.parametrize("stream", [[], ["--no-stream"]])
def test_cache_marks_the_requests_and_chat_shows_the_cached_share(
    emulator: tuple[CacheEmulator, ScriptedServer], monkeypatch: pytest.MonkeyPatch, stream: list[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    script, server = emulator
    result = _chat(server.url, "--cache", *stream)
    assert result.exit_code == 0, result.stderr
    assert all(isinstance(b["system"], list) and b["system"][-1]["cache_control"] for b in script.bodies)
    read = sum(u["cache_read_input_tokens"] for u in script.usages)
    prompt = sum(
        sum(u[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
        for u in script.usages
    )
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"tokens [\d,]+ in / \d+ out · {read * 100 // prompt}% cached · cost n/a · 4 model calls", last
    ), last


def test_without_cache_no_request_is_marked_and_no_share_is_shown(
    emulator: tuple[CacheEmulator, ScriptedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    script, server = emulator
    result = _chat(server.url)
    assert result.exit_code == 0, result.stderr
    assert "cache_control" not in str(script.bodies)
    assert "cached" not in result.stderr


@pytest.mark.parametrize("cache", [True, False])
def test_web_builds_its_agent_with_the_advisor_only_with_cache(cache: bool) -> None:
    from advisorchain import FunctionChatModel, InMemoryChatMemoryRepository, PromptCacheAdvisor
    from advisorchain.cli.web import WebSettings, _agent

    settings = WebSettings(
        FunctionChatModel(lambda prompt: "ok"),
        "test:model",
        None,
        [],
        [],
        InMemoryChatMemoryRepository(),
        "memory",
        None,
        False,
        cache=cache,
    )
    found = [a for a in _agent(settings, []).default_advisors if isinstance(a, PromptCacheAdvisor)]
    assert len(found) == (1 if cache else 0)


@pytest.mark.parametrize("command", ["chat", "web"])
def test_the_agent_commands_document_cache(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], catch_exceptions=False)
    assert result.exit_code == 0 and "--cache" in result.stdout
