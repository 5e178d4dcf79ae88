"""``advisorchain index`` and ``--knowledge`` as a user runs them: text and Markdown files indexed into
SQLite or PostgreSQL (a changed file's chunks replaced, an unchanged one skipped, bad paths refused
before anything is written), then ``chat``/``eval``/``web`` answering from the knowledge base with
the cited sources under the answer; and in a real terminal, the progress bar and the citations."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.openai_server import ScriptedServer
from tests.support.panes import Pane, exited, find_tmux
from tests.support.scripts import chat_answer

pytest.importorskip("apsw")  # the rag extra

SLOTS = """# Replication slots

A replication slot keeps the WAL files a replica still needs. Slot E1054 holds back old WAL files
when its replica is gone.
"""
CHECKPOINTS = "Checkpoints are written every five minutes, or sooner when max_wal_size is reached.\n"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisorchain.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "ops").mkdir(parents=True)
    (folder / "slots.md").write_text(SLOTS, encoding="utf-8")
    (folder / "ops" / "checkpoints.txt").write_text(CHECKPOINTS, encoding="utf-8")
    (folder / ".hidden.md").write_text("never indexed", encoding="utf-8")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")  # not text: a folder leaves it out
    return folder


def stored(db: Path) -> list[tuple[str, str]]:
    """``(file name, text)`` of every chunk in a SQLite knowledge base."""
    from advisorchain.rag import SearchRequest, SQLiteVectorStore

    with SQLiteVectorStore(db) as store:
        found = store.similarity_search(SearchRequest("slot checkpoint wal", top_k=100))
    return sorted((Path(d.metadata["source"]).name, d.text) for d in found)


def test_index_adds_the_text_and_markdown_files_of_a_folder(docs: Path) -> None:
    done = cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Indexed 2 files (2 chunks) into kb.db in ")
    assert "+ docs/slots.md: 1 chunk" in done.stderr and "+ docs/ops/checkpoints.txt: 1 chunk" in done.stderr
    chunks = stored(docs.parent / "kb.db")
    assert [name for name, _ in chunks] == ["checkpoints.txt", "slots.md"]
    assert chunks[1][1] == SLOTS.strip()
    from advisorchain.rag import SearchRequest, SQLiteVectorStore

    with SQLiteVectorStore(docs.parent / "kb.db") as store:
        [slot] = store.similarity_search(SearchRequest("E1054", top_k=1, filter="title == 'Replication slots'"))
    assert slot.metadata["source"] == (docs / "slots.md").resolve().as_posix() and slot.metadata["chunk_index"] == 0


def test_reindexing_replaces_a_changed_files_chunks_and_skips_an_unchanged_one(docs: Path) -> None:
    assert cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent).returncode == 0
    (docs / "slots.md").write_text(SLOTS.replace("E1054", "E2077"), encoding="utf-8")
    again = cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent)
    assert again.returncode == 0, again.stderr
    assert "+ docs/slots.md: 1 chunk (replaced 1)" in again.stderr
    assert "= docs/ops/checkpoints.txt: unchanged" in again.stderr
    assert again.stdout.startswith("Indexed 1 file (1 chunk, 1 unchanged)")
    texts = " ".join(text for _, text in stored(docs.parent / "kb.db"))
    assert "E2077" in texts and "E1054" not in texts
    assert len(stored(docs.parent / "kb.db")) == 2


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "nope.md", "Path 'docs/nope.md' does not exist"),
        (lambda d: d / "logo.png", "docs/logo.png is a binary file"),
        (lambda d: (d / "latin.txt").write_bytes("café".encode("latin-1")) and d / "latin.txt", "not UTF-8 text"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "holds no text or Markdown files"),
    ],
    ids=["missing", "binary", "not-utf8", "no-text-files"],
)
def test_a_path_that_does_not_exist_or_is_not_text_stops_before_anything_is_written(
    docs: Path, make: Callable[[Path], Path], says: str
) -> None:
    bad = make(docs)
    done = cli("index", "docs/slots.md", str(bad.relative_to(docs.parent)), "--store", "sqlite:///kb.db", cwd=docs.parent)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error:") and says in line
    assert not (docs.parent / "kb.db").exists()  # nothing written, not even the good file


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.md")
    return folder / "pipe.md"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_fifo, "docs/pipe.md is a named pipe (FIFO), not a regular file"),
        (lambda d: Path("/dev/zero"), "/dev/zero is a device, not a regular file"),
        (lambda d: Path("/dev/null"), "/dev/null is a device, not a regular file"),
    ],
    ids=["fifo", "dev-zero", "dev-null"],
)
def test_only_regular_files_are_read_a_pipe_or_device_is_one_line(
    docs: Path, make: Callable[[Path], Path], says: str
) -> None:
    """Issue 37: a FIFO named on the command line hung index forever, /dev/zero filled the memory."""
    bad = make(docs)
    shown = str(bad.relative_to(docs.parent)) if bad.is_relative_to(docs.parent) else str(bad)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisorchain.cli",
            "index",
            "docs/slots.md",
            shown,
            "--store",
            "sqlite:///kb.db",
        ],
        cwd=docs.parent,
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails here, not after the suite's own limit
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error:") and says in line
    assert not (docs.parent / "kb.db").exists()


def test_a_file_over_the_size_bound_is_refused_before_anything_is_written(docs: Path) -> None:
    (docs / "big.txt").write_text("word " * 300_000, encoding="utf-8")  # 1.5 MB

    done = cli("index", "docs", "--store", "sqlite:///kb.db", "--max-file-size", "1", cwd=docs.parent)

    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "docs/big.txt is over the 1 MB a file may have" in line and "--max-file-size" in line
    assert not (docs.parent / "kb.db").exists()
    bad = cli("index", "docs", "--store", "sqlite:///kb.db", "--max-file-size", "0", cwd=docs.parent)
    assert bad.returncode == 2 and "--max-file-size" in bad.stderr


def test_a_5_mb_file_of_one_word_is_refused_by_the_default_bound(docs: Path) -> None:
    """Issue 37: it was one 5 MB chunk, about 20 minutes of local embedding."""
    (docs / "blob.txt").write_text("QUJD" * 1_250_000, encoding="ascii")

    done = cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent)

    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "docs/blob.txt is over the 4 MB a file may have" in line
    assert not (docs.parent / "kb.db").exists()


@pytest.mark.parametrize("url", ["kb.db", "sqlite:///", "mysql://x/y", "postgresql://h/db?table=x;drop"])
def test_a_store_url_that_names_no_store_is_a_usage_error(docs: Path, url: str) -> None:
    done = cli("index", "docs", "--store", url, cwd=docs.parent)
    assert done.returncode == 2 and "--store" in done.stderr


def test_chat_answers_from_the_knowledge_base_with_the_cited_sources_under_the_answer(
    docs: Path, held: ScriptedServer
) -> None:
    assert cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent).returncode == 0
    held.queue(chat_answer("Slot E1054 ", "holds the WAL back [1]."))
    held.queue(chat_answer("Every five minutes [1]."))
    common = ["--model", "openai:m", "--base-url", held.base_url, "--knowledge", "sqlite:///kb.db"]
    streamed = cli("chat", *common, "-p", "Which slot holds back WAL?", cwd=docs.parent)
    whole = cli("chat", *common, "--no-stream", "-p", "How often are checkpoints written?", cwd=docs.parent)

    assert streamed.returncode == 0, streamed.stderr
    assert streamed.stdout == (
        'Slot E1054 holds the WAL back [1].\n\nSources:\n  [1] docs/slots.md ("Replication slots", chunk 1)\n'
    )
    assert whole.stdout == "Every five minutes [1].\n\nSources:\n  [1] docs/ops/checkpoints.txt (chunk 1)\n"
    first, second = held.user_texts()
    assert first.startswith("Which slot holds back WAL?\n") and "[1] # Replication slots" in first
    assert "[1] Checkpoints are written every five minutes" in second


def test_an_answer_that_cites_nothing_shows_no_sources(docs: Path, held: ScriptedServer) -> None:
    assert cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent).returncode == 0
    held.queue(chat_answer("I cannot tell from the knowledge base [9]."))  # [9] names no retrieved document
    done = cli("chat", "--model", "openai:m", "--base-url", held.base_url, "--knowledge", "sqlite:///kb.db", "-p", "hi", cwd=docs.parent)
    assert done.stdout == "I cannot tell from the knowledge base [9].\n"


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("sqlite:///missing.db", 1, "no knowledge base at missing.db: build one with 'advisorchain index"),
        ("kb.db", 2, "is not a knowledge store URL"),
    ],
)
def test_a_knowledge_base_that_is_not_there_is_one_clear_line(tmp_path: Path, url: str, code: int, says: str) -> None:
    done = cli("chat", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--knowledge", url, "-p", "hi", cwd=tmp_path)
    assert done.returncode == code
    [line] = done.stderr.strip().splitlines()
    assert says in line
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize("command", ["chat", "eval", "web", "serve"])
def test_every_agent_command_takes_knowledge(tmp_path: Path, command: str) -> None:
    done = cli(command, "--help", cwd=tmp_path)
    assert "--knowledge URL" in done.stdout


def test_eval_answers_its_cases_from_the_knowledge_base(docs: Path, held: ScriptedServer) -> None:
    assert cli("index", "docs", "--store", "sqlite:///kb.db", cwd=docs.parent).returncode == 0
    cases = docs.parent / "cases.json"
    cases.write_text(json.dumps([{"name": "slot", "question": "Which slot holds back WAL?", "expected": "E1054"}]))
    held.queue(chat_answer("Slot E1054 [1]."))
    done = cli("eval", "cases.json", "--model", "openai:m", "--base-url", held.base_url, "--knowledge", "sqlite:///kb.db", cwd=docs.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    [question] = held.user_texts()
    assert "[1] # Replication slots" in question


def test_index_and_chat_on_postgresql(docs: Path, held: ScriptedServer) -> None:
    dsn = os.environ.get("ADVISORCHAIN_TEST_PGVECTOR_DSN")
    if not dsn:
        pytest.skip("ADVISORCHAIN_TEST_PGVECTOR_DSN is not set: run the tests with scripts/test.sh")
    import uuid

    url = f"{dsn}{'&' if '?' in dsn else '?'}table=kb_{uuid.uuid4().hex[:12]}"
    done = cli("index", "docs", "--store", url, cwd=docs.parent)
    assert done.returncode == 0, done.stderr
    assert "Indexed 2 files (2 chunks) into postgresql://" in done.stdout and "(table kb_" in done.stdout
    assert "unchanged" in cli("index", "docs", "--store", url, cwd=docs.parent).stderr
    held.queue(chat_answer("Slot E1054 [1]."))
    answer = cli("chat", "--model", "openai:m", "--base-url", held.base_url, "--knowledge", url, "-p", "Which slot?", cwd=docs.parent)
    assert answer.stdout.endswith('Sources:\n  [1] docs/slots.md ("Replication slots", chunk 1)\n'), answer.stderr


# -- in a real terminal ------------------------------------------------------------------------------


def _pane(command: str, cwd: Path) -> Pane:
    env = f"ADVISORCHAIN_DATA_DIR={shlex.quote(str(cwd / 'data'))}"
    return Pane(find_tmux(), f"cd {shlex.quote(str(cwd))} && env {env} {shlex.quote(sys.executable)} -m advisorchain.cli {command}")


def test_in_a_terminal_index_shows_its_progress_and_chat_its_citations(docs: Path, held: ScriptedServer) -> None:
    panes = [_pane("index docs --store sqlite:///kb.db", docs.parent)]
    try:
        final = panes[0].wait_for(exited)[-1]
        assert "EXIT=0" in final
        [bar] = [line for line in final if line.startswith("indexed ")]
        assert bar.split()[-3:-1] == ["2/2", "chunks"] and "━" in bar
        assert "  + docs/slots.md: 1 chunk" in final
        assert final.index("  + docs/slots.md: 1 chunk") < final.index(bar)
        held.queue(chat_answer("Slot E1054 ", "holds the WAL back [1]."))
        panes.append(_pane(f"chat --model openai:m --base-url {held.base_url} --knowledge sqlite:///kb.db", docs.parent))
        panes[1].wait_for(lambda f: any(line.startswith("you>") for line in f))
        panes[1].keys("Which slot holds back WAL?", "Enter")
        screen = panes[1].wait_for(lambda f: any("[1] docs/slots.md" in line for line in f))[-1]
        answer = screen.index("Slot E1054 holds the WAL back [1].")
        assert screen[answer + 1 : answer + 4] == ["", "Sources:", '  [1] docs/slots.md ("Replication slots", chunk 1)']
    finally:
        for pane in panes:
            pane.close()


def test_a_password_in_a_store_url_is_never_shown(tmp_path: Path) -> None:
    secret = "postgresql://app:s3cret@127.0.0.1:1/kb"
    for args in (["index", str(tmp_path), "--store", secret.replace("postgresql", "mysql")], ["chat", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--knowledge", secret, "-p", "hi"]):
        (tmp_path / "a.md").write_text("text")
        done = cli(*args, cwd=tmp_path)
        assert done.returncode in (1, 2) and "s3cret" not in done.stderr + done.stdout, done.stderr
