"""The README's Python examples run as written (those that need a provider's network are skipped)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
NEEDS_NETWORK = ("OpenAIChatModel", "OpenAIResponsesChatModel", "AnthropicChatModel", "OTLPSpanExporter")


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples may create files (a SQLite database, say)
    block = BLOCKS[index]
    if any(name in block for name in NEEDS_NETWORK):
        pytest.skip("talks to a real provider")
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, f"README block {index}", "exec"), {"__name__": "readme"})
