"""The Python examples of the README and of every page under docs/ run as written. Those that name a
real provider run against a scripted server on loopback that speaks its API (the provider SDKs find
it through ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``); a placeholder an example leaves to the
reader (``my_two_hundred_tools``) is given; an example that sets the process's global OpenTelemetry
providers runs in a process of its own; a test function an example defines is run."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_server import ScriptedServer, running_server
from tests.support.scripts import docs_provider

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [
    (page.relative_to(ROOT).as_posix(), index, block)
    for page in PAGES
    for index, block in enumerate(
        re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    )
]
PROVIDERS = ("OpenAIChatModel", "OpenAIResponsesChatModel", "AnthropicChatModel")
GLOBAL_PROVIDERS = "set_tracer_provider("
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


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedServer]:
    with running_server(docs_provider) as server:
        yield server


def _placeholders() -> dict[str, Any]:
    """What an example leaves to the reader to have."""
    from advisorchain.tools.function import FunctionTool

    def lookup(record: str) -> str:
        return f"record {record}"

    tools = [
        FunctionTool(lookup, name=f"lookup_{i}", description=f"Looks up a record of kind {i}.")
        for i in range(200)
    ]
    return {"my_two_hundred_tools": tools}


def _cassette(block: str, here: Path) -> None:
    """The cassette an example loads by its bare name, beside it (from the recorded cassettes)."""
    from tests.providers.cassette_support import cassette_dir

    for name in re.findall(r'load_cassette\("([\w.-]+\.json)"\)', block):
        source = cassette_dir() / name
        if not source.exists():
            pytest.skip(f"the recorded cassettes are not here ({cassette_dir()}): {name}")
        shutil.copy(source, here / name)


@pytest.mark.parametrize(("page", "index", "block"), BLOCKS, ids=[f"{p}:{i}" for p, i, _ in BLOCKS])
def test_doc_example_runs(
    page: str,
    index: int,
    block: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptedServer,
) -> None:
    monkeypatch.chdir(tmp_path)  # examples may create files (a SQLite database, say)
    if any(name in block for name in PROVIDERS):  # the provider's API, on loopback
        monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", provider.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-example")
    if PGVECTOR_EXAMPLE in block:  # a PostgreSQL example runs on the test server with pgvector
        dsn = os.environ.get("ADVISORCHAIN_TEST_PGVECTOR_DSN")
        if not dsn:
            pytest.skip("needs PostgreSQL with pgvector: ADVISORCHAIN_TEST_PGVECTOR_DSN (scripts/test.sh)")
        block = block.replace(PGVECTOR_EXAMPLE, dsn)
    if GLOBAL_PROVIDERS in block:  # a process of its own: the providers can be set once per process
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
        done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return
    _cassette(block, tmp_path)
    namespace: dict[str, Any] = {"__name__": "doc_example", **_placeholders()}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, f"{page} block {index}", "exec"), namespace)
        for name, value in list(namespace.items()):  # a test the example defines runs too
            if name.startswith("test_") and inspect.iscoroutinefunction(value):
                asyncio.run(value())
            elif name.startswith("test_") and inspect.isfunction(value):
                value()


def test_every_example_that_names_a_provider_reached_the_scripted_server(provider: ScriptedServer) -> None:
    """The examples above that name a provider did call it (the ones that only build a model, or
    load a cassette, send nothing)."""
    calling = [
        b for _, _, b in BLOCKS if any(n in b for n in PROVIDERS) and ".call()" in b and "replay_" not in b
    ]
    assert calling, "no documented example calls a provider"
    if not provider.requests:
        pytest.skip("run with the examples above")
    paths = {r.path.split("?")[0] for r in provider.requests}
    assert {"/v1/chat/completions", "/v1/responses", "/v1/messages"} <= paths, paths


def test_every_test_the_guarantees_page_names_exists() -> None:
    """Each row of docs/guarantees.md names the tests that prove it: a file (under tests/reliability/
    unless a path is given) and, after ``::``, test functions of the file named last."""
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    missing = []
    for row in (line for line in page.splitlines() if line.startswith("| ") and ".py" in line):
        current: Path | None = None
        for ref in re.findall(r"`([^`]*(?:\.py|::)[^`]*)`", row.rsplit("|", 2)[-2]):
            path, _, name = ref.partition("::")
            if path:
                current = ROOT / path if "/" in path else ROOT / "tests" / "reliability" / path
                if not current.exists():
                    missing.append(path)
                    continue
            if name and (current is None or f"def {name}(" not in current.read_text(encoding="utf-8")):
                missing.append(ref)
    assert missing == []
