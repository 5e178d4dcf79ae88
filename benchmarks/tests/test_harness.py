"""The benchmark harness does the same, checked work for everyone: run with
``.venv/bin/python -m pytest benchmarks/tests`` (no timing is asserted anywhere)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from harness import report
from harness.cells import FLOOR, FULL_CELLS, quick
from harness.runner import Outcome, Server, run_worker
from harness.scenarios import FINAL_TEXT, PROMPT, Scenario, tool_result
from harness.server import ScriptedServer
from harness.venvs import main_environment
from impls.floor import Impl as FloorImpl


@pytest.fixture
async def server() -> AsyncIterator[tuple[ScriptedServer, str]]:
    app = ScriptedServer()
    listener = await asyncio.start_server(app.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    yield app, f"http://127.0.0.1:{port}/v1"
    listener.close()
    await listener.wait_closed()


def test_scenario_names_carry_rounds_chunks_and_latency() -> None:
    scenario = Scenario.parse("loop-3+k5+lat10")
    assert (scenario.rounds, scenario.calls_per_round, scenario.chunks, scenario.latency_ms) == (
        3,
        1,
        5,
        10.0,
    )
    assert Scenario.parse("weather").requests_per_run == 2
    assert Scenario.name_for("weather", 200, 50) == "weather+k200+lat50"


def test_the_sentence_option_ends_every_nth_delta_with_a_full_stop() -> None:
    scenario = Scenario.parse("loop-0+k4+s2")
    assert scenario.sentence_every == 2 and scenario.rounds == 0
    assert scenario.expected_text(stream=True) == "w0 w1. w2 w3. "
    assert Scenario.parse("loop-0+k3").expected_text(stream=True) == "w0 w1 w2 "


def test_unknown_scenario_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="'chess'"):
        Scenario.parse("chess")


async def test_weather_run_makes_two_requests_and_returns_the_answer(
    server: tuple[ScriptedServer, str],
) -> None:
    app, url = server
    impl = FloorImpl(url, "weather", {})
    try:
        assert await impl.run(PROMPT) == FINAL_TEXT
    finally:
        await impl.aclose()
    assert (app.requests, app.bad) == (2, 0)


async def test_loop_n_makes_n_plus_one_requests(server: tuple[ScriptedServer, str]) -> None:
    app, url = server
    impl = FloorImpl(url, "loop-4", {})
    try:
        await impl.run(PROMPT)
    finally:
        await impl.aclose()
    assert app.requests == 5


async def test_stream_delivers_k_chunks_after_split_tool_call_arguments(
    server: tuple[ScriptedServer, str],
) -> None:
    _, url = server
    impl = FloorImpl(url, "weather+k7", {})
    try:
        text = await impl.stream(PROMPT)
    finally:
        await impl.aclose()
    assert text == Scenario.parse("weather+k7").expected_text(stream=True)
    assert text.count(" ") == 7


async def test_a_wrong_tool_result_is_rejected_and_counted(server: tuple[ScriptedServer, str]) -> None:
    app, url = server
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    messages: list[Any] = [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "tool_calls": [_call("call_w0", "Paris"), _call("call_w1", "London")]},
        {"role": "tool", "tool_call_id": "call_w0", "content": tool_result("Paris")},
        {"role": "tool", "tool_call_id": "call_w1", "content": "not what the tool says"},
    ]
    try:
        with pytest.raises(openai.BadRequestError, match="unexpected tool message"):
            await client.chat.completions.create(model="weather", messages=messages)
    finally:
        await client.close()
    assert app.bad == 1


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
    }


def test_worker_reports_checked_measurements_for_every_cell() -> None:
    python = main_environment().python
    assert python is not None
    cells = [c for c in quick(FULL_CELLS) if c.key in ("seq", "stream")]
    srv = Server()
    try:
        result = run_worker(python, FLOOR, cells, srv)
    finally:
        srv.close()
    assert result["ok"], result
    assert set(result["cells"]) == {"seq", "stream"}
    assert all(result["cells"][c.key]["ok"] and result["cells"][c.key]["runs"] == c.runs for c in cells)


def test_report_shows_ratios_to_the_floor_and_why_a_peer_is_missing() -> None:
    cells = tuple(c for c in FULL_CELLS if c.key == "seq")
    floor = Outcome([_measured(0.002)])
    mine = Outcome([_measured(0.003)])
    peer = Outcome(error="no venv (pip failed)")
    outcomes = {"seq": {"floor": floor, "advisorchain": mine, "langchain": peer}}
    text = report.render(cells, outcomes, reps=1, quick=False, seconds=1.0, peers={})
    assert "| sequential, 0 ms | 2.00 ms | 1.50x | failed |" in text
    assert "- langchain, sequential, 0 ms: no venv (pip failed)" in text
    assert "**not met** in sequential, 0 ms (1.50x)" in text


def test_report_shows_cpu_ratios_to_the_aiohttp_floor_and_its_target() -> None:
    cells = tuple(c for c in FULL_CELLS if c.key == "seq")
    outcomes = {
        "seq": {
            "floor": Outcome([_measured(0.004)]),
            "aiohttp floor": Outcome([_measured(0.001)]),
            "advisorchain": Outcome([_measured(0.002)]),
        }
    }
    text = report.render(cells, outcomes, reps=1, quick=False, seconds=1.0, peers={})
    assert "| cell | aiohttp floor | floor | advisorchain |" in text
    assert "| sequential, 0 ms | 1.00 ms | 4.00x | 2.00x |" in text
    assert "aiohttp floor's client CPU per run in every cell: **not met** in sequential, 0 ms (2.00x)" in text


def _measured(per_run: float) -> dict[str, Any]:
    return {
        "runs": 10,
        "wall_per_run_s": per_run,
        "cpu_per_run_s": per_run,
        "server_cpu_per_run_s": 0.0,
        "runs_per_s": 1 / per_run,
        "p50_ms": 1000 * per_run,
        "p99_ms": 1000 * per_run,
        "peak_rss_mb": 50.0,
        "import_s": 0.1,
        "versions": {},
    }


def test_report_judges_the_default_install_and_shows_the_sdk_path_apart_from_the_peers() -> None:
    cells = tuple(c for c in FULL_CELLS if c.key == "seq")
    outcomes = {
        "seq": {
            "floor": Outcome([_measured(0.010)]),
            "aiohttp floor": Outcome([_measured(0.001)]),
            "advisorchain": Outcome([_measured(0.0012)]),
            "advisorchain (sdk)": Outcome([_measured(0.006)]),
            "langchain": Outcome([_measured(0.020)]),
        }
    }
    text = report.render(cells, outcomes, reps=1, quick=False, seconds=1.0, peers={})
    assert "| cell | aiohttp floor | floor | advisorchain | advisorchain (sdk) | langchain |" in text
    assert "| sequential, 0 ms | 1.00 ms | 10.00x | 1.20x | 6.00x | 20.00x |" in text
    assert "aiohttp floor's client CPU per run in every cell: **met**" in text
    assert "- advisorchain ahead of every peer in every cell: **met**" in text
    assert "- advisorchain on the SDK path ahead of every peer in every cell: **met**" in text
    assert "vs advisorchain (sdk)" not in text  # the SDK path is no peer

