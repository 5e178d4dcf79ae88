"""``advisorchain eval`` in a real terminal (tmux): the progress bar while cases run, then the table
and the exit code; the demo notice offline."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import running_server
from tests.support.panes import Pane, exited, find_tmux
from tests.support.scripts import judge

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def evaluate(_cli_env: Path) -> Iterator[Callable[[str], Pane]]:
    tmux = find_tmux()
    panes: list[Pane] = []

    def start(args: str) -> Pane:
        # the pane's own size, not the COLUMNS/LINES the test process may carry
        env = f"-u COLUMNS -u LINES PYTHONPATH={shlex.quote(str(HERE))} ADVISORCHAIN_DATA_DIR={shlex.quote(str(_cli_env))}"
        command = f"cd {shlex.quote(str(HERE))} && env {env} {shlex.quote(sys.executable)} -m advisorchain.cli eval {args}"
        panes.append(Pane(tmux, command))
        return panes[-1]

    yield start
    for pane in panes:
        pane.close()


def test_a_slow_agent_shows_progress_then_the_table_and_exit_code(
    evaluate: Callable[[str], Pane], server_url: str, tmp_path: Path
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "".join(
            f"- name: case-{i}\n  question: Weather {i}?\n  expected: {word}\n"
            for i, word in enumerate(["sunny", "sunny", "rainy"])
        ),
        encoding="utf-8",
    )
    with running_server(judge) as judge_server:
        pane = evaluate(
            f"{shlex.quote(str(cases))} --model openai:weather+lat400 --base-url {server_url} "
            f"--tools cli_tools:get_weather --concurrency 1 --judge openai:judge --judge-base-url {judge_server.base_url}"
        )
        frames = pane.wait_for(exited)  # panes.WAIT: a bound for a hang on a busy machine
    progress = [line for frame in frames for line in frame if line.startswith("evaluating")]
    assert progress, "the progress bar never showed"
    assert any("1/3" in line or "2/3" in line for line in progress), progress
    final = frames[-1]
    assert "EXIT=1" in final
    assert not any(line.startswith("evaluating") for line in final)  # the bar is gone before the table
    rows = {
        name: next(line for line in final if f" {name} " in line) for name in ("case-0", "case-1", "case-2")
    }
    assert "✓ 4" in rows["case-0"] and "✓ 4" in rows["case-1"] and "✗" in rows["case-2"]
    assert "does not contain 'rainy'" in rows["case-2"]
    assert "2 of 3 cases passed" in final


def test_offline_it_says_the_demo_model_answers(evaluate: Callable[[str], Pane]) -> None:
    pane = evaluate(shlex.quote(str(ROOT / "examples" / "eval_cases.yaml")))
    final = pane.wait_for(exited)[-1]
    assert "EXIT=1" in final
    screen = " ".join(" ".join(final).split())
    assert "A scripted demo model answers here" in screen
    assert "4 of 5 cases passed" in final
    assert final.index(next(line for line in final if "scripted demo model" in line)) < final.index(
        "4 of 5 cases passed"
    )
