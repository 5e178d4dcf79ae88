"""Run inside a fresh virtual environment that has only one extra installed (see
test_installed_extras.py): a tool loop, blocking and streamed, through each adapter of that extra
against the loopback server at argv[2] — over the HTTP path the extra gives (aiohttp), checking that
every private attribute it reads is there (models/_http/internals.py); then an import of the other
extra's adapter, which must fail naming the extra to install; then a price from the bundled price
data. Prints one JSON object with what happened."""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import sys
from typing import Any

from advisorchain import ChatClient, tool
from tests.support.scripts import WEATHER


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER if city == "Paris" else f"no weather for {city!r}"


def _models(extra: str, url: str) -> dict[str, Any]:
    if extra == "openai":
        from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel

        return {
            "chat": OpenAIChatModel("loop-model", base_url=f"{url}/v1"),
            "responses": OpenAIResponsesChatModel("loop-model", base_url=f"{url}/v1"),
        }
    from advisorchain.models.anthropic import AnthropicChatModel

    return {"messages": AnthropicChatModel("loop-model", base_url=url)}


def _path_of(model: Any) -> str:
    """The class of the HTTP path the model's requests took on the sync bridge's loop."""
    from advisorchain import _sync

    return type(_sync.run(model._clients.current_companion(), "path", "path")).__name__


def _internals(extra: str, model: Any) -> list[str]:
    """What the fast path reads that this SDK version lacks (see models/_http/internals.py)."""
    from advisorchain.models._http import internals

    missing = internals.missing(model.client, extra)

    async def aiohttp_missing() -> list[str]:
        import aiohttp

        session = aiohttp.ClientSession()
        try:
            return internals.missing_in_aiohttp(session)
        finally:
            await session.close()

    return missing + asyncio.run(aiohttp_missing())


def main() -> None:
    extra, url = sys.argv[1], sys.argv[2]
    other = {"openai": "anthropic", "anthropic": "openai"}[extra]
    answers: dict[str, Any] = {}
    paths: dict[str, str] = {}
    internals_missing: list[str] = []
    for name, model in _models(extra, url).items():
        client = ChatClient(model)
        answers[f"{name}/call"] = client.prompt("Weather in Paris?").tools(get_weather).call().content()
        answers[f"{name}/stream"] = "".join(
            client.prompt("Weather in Paris?").tools(get_weather).stream().content()
        )
        paths[name] = _path_of(model)
        internals_missing += _internals(extra, model)
    try:
        importlib.import_module(f"advisorchain.models.{other}")
        missing = None
    except ImportError as exc:
        missing = f"{type(exc).__name__}: {exc}"
    from advisorchain.usage import Usage, price_of

    # The bundled prices at genai-prices' lower bound: the adapters price answers from them (§17).
    prices = {
        provider: str(price_of(Usage(1000, 100, cache_read_tokens=400), provider, model).cost)
        for provider, model in (("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-5"))
    }
    versions = {}
    for package in ("openai", "anthropic", "httpx2", "genai-prices", "aiohttp", "orjson"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    report = {
        "answers": answers,
        "missing_other": missing,
        "versions": versions,
        "prices": prices,
        "paths": paths,
        "internals_missing": internals_missing,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
