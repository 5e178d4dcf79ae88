"""The soak script's smoke test: a tiny run on SQLite verifies every stored conversation, with
turns sent one at a time and two at a time (no timing is asserted)."""

from __future__ import annotations

import pytest
import soak


@pytest.mark.parametrize("overlap", [1, 2])
def test_a_tiny_soak_run_on_sqlite_verifies_every_conversation(
    overlap: int, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--conversations", "6", "--turns", "3", "--concurrency", "3", "--backends", "sqlite"]

    assert soak.main([*argv, "--overlap", str(overlap)]) == 0

    out = capsys.readouterr().out
    assert out.count("verified 6/6 conversations exactly") == 2  # inside and outside the loop
    assert "soak: all verified" in out


def test_the_verifier_rejects_a_conversation_with_a_crossed_turn(tmp_path: object) -> None:
    from advisorchain import InMemoryChatMemoryRepository

    repository = InMemoryChatMemoryRepository()
    options = soak.Options(conversations=1, turns=2, rounds=1, concurrency=1, overlap=1, max_seconds=10)
    first, second = (soak.expected_turn("c0", t, 1, "inside") for t in range(2))
    repository.save_all("c0", [*first[:2], *second[:2], first[2], *first[3:], second[2], *second[3:]])
    failures: list[str] = []

    assert soak._verify(repository, ["c0"], options, "inside", failures) == (0, 8)
    assert failures
