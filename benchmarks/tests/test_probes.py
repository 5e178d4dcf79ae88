"""The scale probes (issue 13) run end to end in a quick form: each implementation's worker does
every probe once against the scripted server, and the answers, request and message counts are
checked by the worker itself. Only sanity is asserted here, never speed."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import report
from harness.cells import ADVISORCHAIN, AIOHTTP_FLOOR, FULL_CELLS, Implementation
from harness.probes import PROBES, history_messages, quick_probes
from harness.runner import Outcome, Server, parse_args, run_worker, select_cells, select_probes
from harness.venvs import VENVS_DIR, main_environment

QUICK = {p.key: p for p in quick_probes(PROBES)}
ROUND_TRIP_MS = 2 * 200  # the weather agent makes two model calls of 200 ms each


def _python_for(impl: Implementation) -> Path:
    """The project venv for advisorchain; for the aiohttp floor its own venv when benchmarks/run
    made one, else the project venv when aiohttp is installed there."""
    main = main_environment().python
    assert main is not None
    if impl.env == "main":
        return main
    peer = VENVS_DIR / impl.env / "bin" / "python"
    if peer.exists():
        return peer
    if importlib.util.find_spec("aiohttp") is None or importlib.util.find_spec("orjson") is None:
        pytest.skip("the aiohttp floor needs aiohttp and orjson (benchmarks/run installs them in its venv)")
    return main


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture(scope="module", params=[AIOHTTP_FLOOR, ADVISORCHAIN], ids=lambda i: i.label)
def probed(request: pytest.FixtureRequest, server: Server) -> tuple[Implementation, dict[str, Any]]:
    """One worker per implementation runs every quick probe it takes part in (20 runs in flight)."""
    impl: Implementation = request.param
    probes = [QUICK[key] for key in ("inflight-1000", "history", "stream-chunks", "import")]
    result = run_worker(_python_for(impl), impl, [p for p in probes if impl in p.impls], server)
    assert result["ok"], result
    return impl, result["cells"]


def _cell(probed: tuple[Implementation, dict[str, Any]], key: str) -> dict[str, Any]:
    got = probed[1][key]
    assert got["ok"], got
    return got


def test_in_flight_probe_completes_every_run_no_faster_than_two_model_calls(
    probed: tuple[Implementation, dict[str, Any]],
) -> None:
    got = _cell(probed, "inflight-1000")
    assert (got["in_flight"], got["runs"]) == (20, 40)
    assert ROUND_TRIP_MS <= got["p50_ms"] <= got["p99_ms"]
    # 40 runs of at least 0.4 s each, at most 20 at a time: at most 50 runs/s
    assert 0 < got["runs_per_s"] <= 20 / (ROUND_TRIP_MS / 1000)


def test_in_flight_probe_samples_event_loop_lag_and_memory(
    probed: tuple[Implementation, dict[str, Any]],
) -> None:
    got = _cell(probed, "inflight-1000")
    # the wave lasts at least 0.8 s, awaiting the network all along: the ticker wakes in it
    assert got["ticks"] >= 1
    assert 0 <= got["lag_p50_ms"] <= got["lag_p99_ms"]
    assert math.isfinite(got["kb_per_run"]) and got["kb_per_run"] >= 0


def test_history_probe_sends_each_history_whole_and_reports_a_slope(
    probed: tuple[Implementation, dict[str, Any]],
) -> None:
    got = _cell(probed, "history")  # the worker checked the server got every history message
    assert got["cpu_low_per_run_s"] > 0 and got["cpu_high_per_run_s"] > 0
    low, high = QUICK["history"].points
    slope = (got["cpu_high_per_run_s"] - got["cpu_low_per_run_s"]) / (high - low)
    assert got["us_per_message"] == pytest.approx(1e6 * slope)


def test_stream_probe_reports_cpu_per_chunk_and_a_first_token_time(
    probed: tuple[Implementation, dict[str, Any]],
) -> None:
    got = _cell(probed, "stream-chunks")  # the worker checked every joined answer
    low, high = QUICK["stream-chunks"].points
    slope = (got["cpu_high_per_run_s"] - got["cpu_low_per_run_s"]) / (high - low)
    assert got["us_per_chunk"] == pytest.approx(1e6 * slope)
    assert got["ttft_ms"] > 0 and got["ttft_high_ms"] > 0


def test_import_probe_times_both_imports_for_advisorchain_only(
    probed: tuple[Implementation, dict[str, Any]],
) -> None:
    impl, cells = probed
    if impl is not ADVISORCHAIN:
        assert "import" not in cells
        return
    got = _cell(probed, "import")
    assert got["import_subject_s"] > 0 and got["import_reference_s"] > 0


def test_history_messages_alternate_user_and_assistant_without_tool_messages() -> None:
    history = history_messages(5)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user"]
    assert len({m["content"] for m in history}) == 5


def test_probe_keys_select_probes_and_cells_together() -> None:
    args = parse_args(["--cells", "seq,history"])
    assert [c.key for c in select_cells(args)] == ["seq"]
    assert [p.key for p in select_probes(args)] == ["history"]


def test_probes_flag_runs_only_the_probes_and_no_probes_none() -> None:
    only = parse_args(["--probes"])
    assert select_cells(only) == ()
    assert [p.key for p in select_probes(only)] == [p.key for p in PROBES]
    none = parse_args(["--no-probes"])
    assert select_probes(none) == ()
    assert [c.key for c in select_cells(none)] == [c.key for c in FULL_CELLS]


def test_a_probe_key_with_no_probes_is_named_as_unknown() -> None:
    with pytest.raises(SystemExit, match="'history'"):
        select_cells(parse_args(["--no-probes", "--cells", "history"]))


def test_quick_probes_keep_a_fiftieth_in_flight_and_say_so_in_the_title() -> None:
    assert [(p.in_flight, p.title) for p in quick_probes(PROBES) if p.kind == "inflight"] == [
        (20, "20 runs in flight, 200 ms"),
        (100, "100 runs in flight, 200 ms"),
    ]


def _probe_outcomes() -> dict[str, dict[str, Outcome]]:
    floor = {"runs_per_s": 1000.0, "p50_ms": 420.0, "p99_ms": 800.0, "lag_p50_ms": 0.2, "kb_per_run": 15.0}
    mine = {"runs_per_s": 100.0, "p50_ms": 900.0, "p99_ms": 1000.0, "lag_p50_ms": 240.0, "kb_per_run": 39.0}
    return {
        "inflight-1000": {"aiohttp floor": Outcome([floor]), "advisorchain": Outcome([mine])},
        "history": {
            "aiohttp floor": Outcome([{"us_per_message": 0.23}]),
            "advisorchain": Outcome(
                [{"us_per_message": 0.25}, {"us_per_message": 0.29}, {"us_per_message": 2.0}]
            ),
        },
        "stream-chunks": {
            "aiohttp floor": Outcome([{"us_per_chunk": 3.7, "ttft_ms": 1.0}]),
            "advisorchain": Outcome([{"us_per_chunk": 47.0, "ttft_ms": 2.8}]),
        },
        "import": {"advisorchain": Outcome([{"import_subject_s": 0.25, "import_reference_s": 0.58}])},
    }


def _probe_report() -> str:
    probes = tuple(p for p in PROBES if p.key != "inflight-5000")
    return report.render((), _probe_outcomes(), reps=3, quick=False, seconds=1.0, peers={}, probes=probes)


def test_report_shows_in_flight_figures_ratios_and_targets() -> None:
    text = _probe_report()
    assert (
        "| 1,000 runs in flight, 200 ms: throughput (runs/s) | 1000 | 100 | 0.10x | ≥ 0.85x | **not met** |"
        in text
    )
    assert (
        "| 1,000 runs in flight, 200 ms: p99 latency per run (ms) | 800 | 1000 | 1.25x | ≤ 1.30x | **met** |"
        in text
    )
    assert "memory per in-flight run (KB) | 15.0 | 39.0 | 2.60x | ≤ 25 KB | **not met** |" in text


def test_report_takes_the_median_over_repetitions_for_a_probe() -> None:
    text = _probe_report()
    assert "per extra history message per round (µs) | 0.230 | 0.290 | 1.26x | ≤ 0.3 µs | **met** |" in text


def test_report_shows_added_time_to_first_token_and_import_against_openai_alone() -> None:
    text = _probe_report()
    assert "client CPU per streamed chunk (µs) | 3.70 | 47.00 | 12.70x | ≤ 10 µs | **not met** |" in text
    assert "time to first token (ms) | 1.00 | 2.80 | +1.80 ms | ≤ +0.5 ms | **not met** |" in text
    assert "`import openai` alone) (s) | 0.580 | 0.250 | 0.43x | ≤ 0.2 s | **not met** |" in text


def test_report_names_a_probe_that_failed() -> None:
    outcomes = _probe_outcomes()
    outcomes["history"]["advisorchain"] = Outcome(error="worker ran past 300 s per cell")
    text = report.render((), outcomes, reps=1, quick=False, seconds=1.0, peers={}, probes=PROBES[2:3])
    assert "| failed | failed | — | ≤ 0.3 µs | not measured |" in text
    assert "- advisorchain, history 10 vs 200 messages: worker ran past 300 s per cell" in text


def test_report_details_list_each_probe_figure_per_implementation() -> None:
    text = _probe_report()
    assert "| advisorchain | 100 | 900 | 1000 | 240.00 | — | 39.0 | — | — |" in text
    assert "| advisorchain | 0.250 | 0.580 |" in text  # the two import times


def test_report_shows_the_sdk_path_beside_the_default_install_without_a_verdict() -> None:
    outcomes = _probe_outcomes()
    outcomes["stream-chunks"]["advisorchain (sdk)"] = Outcome([{"us_per_chunk": 18.5, "ttft_ms": 9.0}])
    probes = tuple(p for p in PROBES if p.key == "stream-chunks")
    text = report.render((), outcomes, reps=1, quick=False, seconds=1.0, peers={}, probes=probes)
    assert "| probe | aiohttp floor | advisorchain | ratio | target | | advisorchain (sdk) | ratio |" in text
    assert "| 12.70x | ≤ 10 µs | **not met** | 18.50 | 5.00x |" in text
    assert "| +1.80 ms | ≤ +0.5 ms | **not met** | 9.00 | +8.00 ms |" in text

