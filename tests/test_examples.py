"""Every example in examples/ runs, offline, and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = {
    "tool_loop.py": "Paris is sunny (21°C); Rome is cloudy (18°C).",
    "observing_advisor.py": "Done. [['lookup'], []]",
    "structured_output.py": "name='Paris' population=2100000",
    "memory_sqlite.py": "['user', 'assistant', 'user']",
    "streaming.py": "Let me check the clock. It is 14:05.",
    "mcp_tools.py": "Noon UTC is 21:00 in Asia/Tokyo.",
    "rag_markdown.py": "recreate it [1].\n[1] errors.md",
    "customer_service.py": "ada: [billing] Invoice 1043: 12.50 EUR, due on 1 April.\n"
    "bob: [refunds] Invoice 1043: refund of invoice 1043 started. (triage -> refunds)",
}


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert EXPECTED[name] in done.stdout
