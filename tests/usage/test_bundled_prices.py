"""The bundled prices (``genai-prices``): the same cost genai-prices computes, for every OpenAI and
Anthropic model it knows, looked up once per model, and never a network access."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import usage as usage_module
from advisorchain.usage import Usage, bundled_rates, price_of

genai_prices = pytest.importorskip(
    "genai_prices", reason="genai-prices comes with the openai/anthropic extras"
)


def _models(provider: str) -> list[str]:
    from genai_prices import data

    found = next(p for p in data.providers if p.id == provider)
    return [m.id for m in found.models]


MODELS = [("openai", m) for m in _models("openai")] + [("anthropic", m) for m in _models("anthropic")]


def _genai_cost(provider: str, model: str, usage: Usage) -> Decimal:
    genai_usage = genai_prices.Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    return genai_prices.calc_price(genai_usage, model, provider_id=provider).total_price


@st.composite
def token_usage(draw: st.DrawFn) -> Usage:
    prompt = draw(st.integers(0, 400_000))
    read = draw(st.integers(0, prompt))
    write = draw(st.integers(0, prompt - read))
    return Usage(prompt, draw(st.integers(0, 100_000)), read, write)


@settings(max_examples=300)
@given(st.sampled_from(MODELS), token_usage())
def test_the_cost_is_what_genai_prices_computes(model: tuple[str, str], usage: Usage) -> None:
    provider, name = model
    rates = bundled_rates(provider, name)
    if rates is None:  # a model priced per second or per request: unpriced, never a made-up cost
        return
    assert rates.cost(usage) == _genai_cost(provider, name, usage)


def test_the_issue_example_charges_cached_tokens_at_the_cache_rate() -> None:
    usage = Usage(10_000, 2_000, cache_read_tokens=8_000)
    assert price_of(usage, "anthropic", "claude-sonnet-4-5").cost == Decimal("0.0384")
    assert price_of(Usage(10_000, 2_000), "anthropic", "claude-sonnet-4-5").cost == Decimal("0.06")


def test_a_long_prompt_pays_the_long_context_rate() -> None:
    long = Usage(300_000, 1_000)
    assert price_of(long, "anthropic", "claude-sonnet-4-5").cost == _genai_cost(
        "anthropic", "claude-sonnet-4-5", long
    )
    assert price_of(long, "anthropic", "claude-sonnet-4-5").cost == Decimal("1.8225")  # $6 and $22.50


def test_a_dated_model_name_finds_its_model() -> None:
    assert bundled_rates("openai", "gpt-4o-2024-08-06") == bundled_rates("openai", "gpt-4o")


def test_an_unknown_model_or_provider_is_unpriced() -> None:
    assert bundled_rates("openai", "llama3.2:latest") is None
    assert bundled_rates("ollama", "llama3.2") is None
    assert price_of(Usage(10, 10), None, "gpt-4o").cost is None
    assert price_of(Usage(10, 10), "openai", "no-such-model").cost is None


def test_a_model_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[tuple[str, str]] = []
    real = usage_module._look_up

    def counting(provider: str, model: str) -> object:
        looked_up.append((provider, model))
        return real(provider, model)

    monkeypatch.setattr(usage_module, "_look_up", counting)
    monkeypatch.setattr(usage_module, "_BUNDLED", {})
    for _ in range(5):
        price_of(Usage(100, 10), "openai", "gpt-4o-mini")
        price_of(Usage(100, 10), "openai", "not-a-model")
    assert looked_up == [("openai", "gpt-4o-mini"), ("openai", "not-a-model")]


_NO_NETWORK = """
import socket, sys, threading
def refuse(*args, **kwargs):
    raise AssertionError(f"network access: {args!r}")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
before = threading.active_count()
from advisorchain.usage import Usage, price_of
cost = price_of(Usage(1000, 100), "openai", "gpt-4o").cost
assert cost is not None and cost > 0, cost
assert price_of(Usage(1000, 100), "anthropic", "claude-haiku-4-5").cost is not None
from genai_prices import data_snapshot
assert data_snapshot._custom_snapshot is None  # no updater installed prices from the network
assert threading.active_count() == before, "a background thread was started"
print("ok", cost)
"""


def test_prices_are_read_without_any_network_access_or_updater_thread() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_NETWORK], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
