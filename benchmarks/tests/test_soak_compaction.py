"""The compaction soak's smoke test: a short run on SQLite passes every check, and the checks catch
what they are for (no timing is asserted)."""

from __future__ import annotations

import pytest
import soak_compaction as soak

from advisorchain import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage


def test_a_short_soak_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.main(["--turns", "40", "--max-tokens", "400", "--repeat", "1"]) == 0

    out = capsys.readouterr().out
    assert "compaction soak: all checks passed" in out
    assert out.count("| sqlite ") == 8  # outside and inside, call and stream, each beside its window run


def test_the_round_check_catches_an_orphan_and_an_unanswered_call() -> None:
    call = AssistantMessage(None, [ToolCall("T1.0", "lookup", "{}")])
    response = ToolResponseMessage([ToolResponse("T1.0", "lookup", "x")])

    assert soak.whole_rounds([UserMessage("Q1: q"), call, response]) is None
    assert "does not follow its call" in (soak.whole_rounds([UserMessage("Q1: q"), response]) or "")
    assert "is not answered" in (soak.whole_rounds([UserMessage("Q1: q"), call]) or "")


def test_the_coverage_check_catches_a_part_summarized_twice_and_a_lost_one() -> None:
    turns = soak.script(2, seed=1)
    provider = soak.Provider(turns)
    provider.transcripts = ["User: Q0: question", "User: Q0: question\nAssistant: A0: answer"]
    whole = [UserMessage(turns[1].question), AssistantMessage(turns[1].answer)]

    assert soak._coverage_failures(provider, turns, whole, "outside") == ["Q0 summarized 2 times"]
    assert soak._coverage_failures(provider, turns, whole[:1], "outside") == [
        "Q0 summarized 2 times",
        "A1 is lost",
    ]


def test_the_budget_check_reports_a_prompt_over_max_tokens() -> None:
    from advisorchain import Prompt

    provider = soak.Provider(soak.script(1, seed=1))
    provider.prompts = [Prompt([UserMessage("Q0: " + "x" * 400)])]

    assert soak._prompt_failures(provider, 50, check_budget=True) == ["prompt 0: 101 tokens > max_tokens 50"]
