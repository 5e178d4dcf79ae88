"""The Python examples of the README and of every page under docs/ run as written (those that need
a provider's network are skipped)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [
    (page.relative_to(ROOT).as_posix(), index, block)
    for page in PAGES
    for index, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL))
]
NEEDS_NETWORK = ("OpenAIChatModel", "OpenAIResponsesChatModel", "AnthropicChatModel", "OTLPSpanExporter")
PGVECTOR_EXAMPLE = "postgresql://app@localhost/app"


def test_the_readme_and_the_docs_have_examples() -> None:
    assert sum(1 for page, _, _ in BLOCKS if page == "README.md") >= 1
    assert sum(1 for page, _, _ in BLOCKS if page.startswith("docs/")) >= 40


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository() -> None:
    """The README is read on the repository's page, where mkdocs does not check its links."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://|#)([^)#]+)", readme)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


@pytest.mark.parametrize(("page", "index", "block"), BLOCKS, ids=[f"{p}:{i}" for p, i, _ in BLOCKS])
def test_doc_example_runs(page: str, index: int, block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples may create files (a SQLite database, say)
    if any(name in block for name in NEEDS_NETWORK):
        pytest.skip("talks to a real provider")
    if PGVECTOR_EXAMPLE in block:  # a PostgreSQL example runs on the test server with pgvector
        dsn = os.environ.get("ADVISORCHAIN_TEST_PGVECTOR_DSN")
        if not dsn:
            pytest.skip("needs PostgreSQL with pgvector: ADVISORCHAIN_TEST_PGVECTOR_DSN (scripts/test.sh)")
        block = block.replace(PGVECTOR_EXAMPLE, dsn)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, f"{page} block {index}", "exec"), {"__name__": "doc_example"})
