"""Docs that cannot drift from the code unnoticed: the command count docs/cli.md gives, and no
placeholder text left in any page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisorchain.cli import app

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_NUMBERS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_PLACEHOLDERS = re.compile(
    r"\(filled in below\)|to be filled|\bTBD\b|\bTODO\b|\bFIXME\b|\bXXX\b|lorem ipsum", re.I
)


def test_docs_cli_counts_and_names_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    match = re.search(r"`advisorchain` has (\w+) commands:(.*?)\n\n", text, re.S)
    assert match is not None, "docs/cli.md no longer says how many commands there are"
    commands = sorted(app.commands)
    assert _NUMBERS[match.group(1)] == len(commands), (match.group(1), commands)
    named = set(re.findall(r"`(\w+)`", match.group(2)))
    assert set(commands) <= named, set(commands) - named


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_holds_placeholder_text(page: Path) -> None:
    found = [
        f"{page.name}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if _PLACEHOLDERS.search(line) and not re.search(r"\btodo list|TodoTools|todo_", line, re.I)
    ]
    assert found == []


def test_the_eval_table_in_docs_evaluation_has_the_columns_the_command_prints() -> None:
    import os
    import subprocess
    import sys

    text = (ROOT / "docs" / "evaluation.md").read_text()
    after = text.index("$ advisorchain eval examples/eval_cases.yaml")
    documented = next(line for line in text[after:].splitlines() if line.startswith("┃ case"))
    result = subprocess.run(
        [sys.executable, "-m", "advisorchain.cli", "eval", str(ROOT / "examples" / "eval_cases.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "120"},
        timeout=300,
    )
    printed = next(line for line in result.stdout.splitlines() if line.startswith("┃ case"))
    assert [c.strip() for c in documented.split("┃")] == [c.strip() for c in printed.split("┃")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_example_leaves_a_temp_dir_behind(page: Path) -> None:
    """mkdtemp() makes a directory nobody removes: one more per test run of the docs examples."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert [b for b in blocks if "mkdtemp(" in b] == []
