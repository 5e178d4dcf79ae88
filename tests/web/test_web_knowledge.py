"""``advisorchain web --knowledge URL``: the page's agent answers from the knowledge base, and the
documents it retrieved and the ones the answer cites reach the page with the turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from web_helpers import COMMAND, events, named, web, web_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from held_server import held_server

pytest.importorskip("apsw")  # the rag extra


def test_the_page_shows_the_documents_retrieved_and_the_ones_cited(tmp_path: Path) -> None:
    (tmp_path / "slots.md").write_text("# Replication slots\n\nSlot E1054 holds back old WAL files.\n")
    kb = f"sqlite:///{tmp_path / 'kb.db'}"
    indexed = subprocess.run([*COMMAND, "index", str(tmp_path / "slots.md"), "--store", kb], env=web_env(tmp_path), capture_output=True, text=True)
    assert indexed.returncode == 0, indexed.stderr
    with held_server() as held:
        held.reply("Slot E1054 [1].")
        with web(tmp_path, "--model", "openai:m", "--base-url", held.url, "--knowledge", kb) as running:
            http = httpx.Client(base_url=running.base, headers={"x-advisorchain-token": running.token}, timeout=60)
            conversation = http.post("/api/conversations").json()["id"]
            found = events(http.post(f"/api/conversations/{conversation}/turns", json={"text": "Which slot?"}).text)
            http.close()
        [question] = held.user_texts()
    context = named(found, "done")[0]["context"]
    [document] = context["documents"]
    assert "Slot E1054 holds back old WAL files." in document["text"]
    assert [c["number"] for c in context["citations"]] == [1]
    assert context["citations"][0]["document"]["id"] == document["id"]
    assert "[1] # Replication slots" in question


def test_a_knowledge_base_that_is_not_there_stops_the_command_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*COMMAND, "web", "--port", "0", "--knowledge", f"sqlite:///{tmp_path / 'missing.db'}"],
        env=web_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "no knowledge base at" in done.stderr and "advisorchain index" in done.stderr
