from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisorchain.cli import main


def test_demo_runs_the_whole_chain_offline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo", "--db", str(tmp_path / "d.sqlite3")]) == 0
    out = capsys.readouterr().out
    assert "asks for get_weather" in out and "asks for find_places" in out
    assert "get_weather -> sunny, 24°C" in out
    assert "retry: Output JSON validation failed because of: afternoon: Field required" in out
    assert "structured: DayPlan(city='Lisbon'" in out
    assert "(2/3 completed)" in out
    assert "4 messages stored: user, assistant, user, assistant" in out
    assert (tmp_path / "d.sqlite3").exists()


def test_demo_streams(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo", "--stream", "--db", str(tmp_path / "d.sqlite3")]) == 0
    out = capsys.readouterr().out
    assert "Let me plan this." in out
    assert "MAAT by the river in the afternoon." in out


def test_the_console_script_is_wired() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "advisorchain.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in done.stdout
