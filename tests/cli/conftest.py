"""Fixtures of the CLI tests: the benchmarks' scripted OpenAI-compatible server on loopback (one per
test session), a private data directory, and ``cli_tools`` importable for ``--tools``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "benchmarks" / "harness" / "server.py"


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The base URL of a running scripted server (scenario named by the model: ``weather``...)."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the scripted server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(autouse=True)
def _cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("ADVISORCHAIN_DATA_DIR", str(data))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ADVISORCHAIN_MODEL", raising=False)
    monkeypatch.delenv("ADVISORCHAIN_DEBUG", raising=False)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    return data
