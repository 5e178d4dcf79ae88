"""LLM judges on scripted judge models: the score judge (JSON read with schema validation) and the
YES/NO judges; a judge that fails raises, a failed judgement is never a pass."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AdvisorParams,
    ChatClient,
    EvaluationFailedError,
    EvaluationRequest,
    EvaluationResult,
    FactCheckingEvaluator,
    LLMJudgeEvaluator,
    ModelError,
    RelevancyEvaluator,
    ScriptedChatModel,
    SelfRefineEvaluationAdvisor,
)
from advisorchain.evaluation.judges import parse_yes_no
from tests.evaluation.eval_helpers import GOOD, QUESTION

REQUEST = EvaluationRequest(QUESTION, GOOD)


def _verdict(score: int, feedback: str = "fine") -> str:
    return json.dumps({"score": score, "feedback": feedback})


def _judge_text(model: ScriptedChatModel, index: int = 0) -> str:
    user = model.prompts[index].last_user_message
    assert user is not None
    return user.text


# -- LLMJudgeEvaluator -----------------------------------------------------------------------------------


async def test_the_score_judge_passes_at_the_threshold_and_fails_below() -> None:
    judge = ScriptedChatModel([_verdict(3, "Good enough."), _verdict(2, "Too vague.")])
    evaluator = LLMJudgeEvaluator(judge)
    assert await evaluator.evaluate(REQUEST) == EvaluationResult(
        True, 3.0, "Good enough.", {"scale": 4, "threshold": 3}
    )
    second = await evaluator.evaluate(REQUEST)
    assert (second.passed, second.score, second.feedback) == (False, 2.0, "Too vague.")


async def test_the_judge_is_asked_about_the_question_and_the_answer_on_its_scale_and_criteria() -> None:
    judge = ScriptedChatModel([_verdict(5)])
    await LLMJudgeEvaluator(judge, criteria="brevity", scale=5, threshold=5).evaluate(REQUEST)
    text = _judge_text(judge)
    assert QUESTION in text and GOOD in text and "1 to 5" in text and "brevity" in text
    assert '"score"' in text and '"feedback"' in text  # the JSON schema of the verdict
    assert "relevance, completeness, accuracy, clarity" not in text


async def test_the_default_criteria_are_relevance_completeness_accuracy_clarity() -> None:
    judge = ScriptedChatModel([_verdict(4)])
    await LLMJudgeEvaluator(judge).evaluate(REQUEST)
    assert "relevance, completeness, accuracy, clarity" in _judge_text(judge) and "1 to 4" in _judge_text(
        judge
    )


async def test_passages_and_the_expected_answer_are_shown_to_the_judge() -> None:
    judge = ScriptedChatModel([_verdict(4)])
    request = EvaluationRequest(QUESTION, GOOD, context=["Paris is the capital of France."], expected="Paris")
    await LLMJudgeEvaluator(judge).evaluate(request)
    text = _judge_text(judge)
    assert "Paris is the capital of France." in text and "<reference>\nParis\n</reference>" in text


async def test_an_invalid_verdict_is_asked_for_again_with_the_validation_errors() -> None:
    judge = ScriptedChatModel(["I'd say it is good", _verdict(9), _verdict(4, "ok")])
    result = await LLMJudgeEvaluator(judge).evaluate(REQUEST)
    assert result.score == 4.0 and len(judge.prompts) == 3
    assert "Output JSON validation failed because of: score: Input should be less than or equal to 4" in (
        _judge_text(judge, 2)
    )


async def test_a_verdict_that_never_validates_raises_evaluation_failed_error() -> None:
    judge = ScriptedChatModel(["good"] * 4)
    with pytest.raises(EvaluationFailedError, match="no valid verdict") as caught:
        await LLMJudgeEvaluator(judge).evaluate(REQUEST)
    assert caught.value.results == () and caught.value.answer == GOOD and len(judge.prompts) == 4


async def test_a_judge_model_error_is_raised_as_is() -> None:
    error = ModelError("rate limited", status_code=429)
    with pytest.raises(ModelError) as caught:
        await LLMJudgeEvaluator(ScriptedChatModel([error])).evaluate(REQUEST)
    assert caught.value is error


async def test_a_judge_client_is_used_as_given() -> None:
    model = ScriptedChatModel([_verdict(4)])
    client = ChatClient(model, default_system="You judge answers about geography.")
    evaluator = LLMJudgeEvaluator(client)
    assert evaluator.client is client
    await evaluator.evaluate(REQUEST)
    assert model.prompts[0].system_message is not None


def test_the_judge_never_runs_through_the_chain_being_judged() -> None:
    agent = ScriptedChatModel(["Lyon.", GOOD])
    judge = ScriptedChatModel([_verdict(1, "Wrong city."), _verdict(4)])
    client = ChatClient(agent, default_advisors=[SelfRefineEvaluationAdvisor(LLMJudgeEvaluator(judge))])
    response = client.prompt(QUESTION).call().chat_client_response()
    assert response.chat_response is not None and response.chat_response.text == GOOD
    assert len(agent.prompts) == 2 and len(judge.prompts) == 2
    assert all("Rate the answer" not in (m.text or "") for p in agent.prompts for m in p.instructions)  # type: ignore[union-attr]
    assert "Wrong city." in _judge_text(agent, 1)
    assert [r.score for r in response.context[AdvisorParams.EVALUATIONS]] == [1.0, 4.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scale": 1}, "scale"),
        ({"threshold": 0}, "threshold"),
        ({"scale": 4, "threshold": 5}, "threshold"),
        ({"criteria": "  "}, "criteria"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_score_judge_arguments_are_value_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LLMJudgeEvaluator(ScriptedChatModel([]), **kwargs)


def test_a_judge_that_is_not_a_model_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="ChatModel or a ChatClient"):
        LLMJudgeEvaluator("gpt-4o")  # type: ignore[arg-type]


def test_a_judge_is_named_after_its_class_unless_named() -> None:
    assert LLMJudgeEvaluator(ScriptedChatModel([])).name == "LLMJudgeEvaluator"
    assert RelevancyEvaluator(ScriptedChatModel([]), name="relevant").name == "relevant"


# -- YES / NO judges -------------------------------------------------------------------------------------


async def test_relevancy_passes_on_yes_and_gives_the_reason_as_feedback() -> None:
    judge = ScriptedChatModel(["YES. It names the capital.", "No - it talks about Lyon."])
    evaluator = RelevancyEvaluator(judge)
    assert await evaluator.evaluate(REQUEST) == EvaluationResult(
        True, 1.0, "It names the capital.", {"verdict": "YES"}
    )
    second = await evaluator.evaluate(REQUEST)
    assert (second.passed, second.score, second.feedback) == (False, 0.0, "it talks about Lyon.")
    text = _judge_text(judge)
    assert "YES or NO first" in text and QUESTION in text and GOOD in text and "<context>" not in text


async def test_relevancy_shows_the_passages_when_the_request_has_them() -> None:
    judge = ScriptedChatModel(["yes"])
    await RelevancyEvaluator(judge).evaluate(EvaluationRequest(QUESTION, GOOD, context=["Paris facts."]))
    assert "Paris facts." in _judge_text(judge) and "context passages" in _judge_text(judge)


async def test_a_reply_that_starts_with_neither_is_asked_again_twice_then_raises() -> None:
    judge = ScriptedChatModel(["Maybe.", "I think so.", "Perhaps."])
    with pytest.raises(EvaluationFailedError, match="did not reply YES or NO") as caught:
        await RelevancyEvaluator(judge).evaluate(REQUEST)
    assert len(judge.prompts) == 3 and "'Perhaps.'" in str(caught.value)
    assert "did not start with YES or NO" in _judge_text(judge, 1)


async def test_a_second_ask_that_answers_is_the_verdict() -> None:
    judge = ScriptedChatModel(["Hmm.", "**NO**: the answer is off topic."])
    result = await RelevancyEvaluator(judge).evaluate(REQUEST)
    assert (result.passed, result.feedback) == (False, "the answer is off topic.")


async def test_fact_checking_asks_whether_every_claim_is_supported_by_the_passages() -> None:
    judge = ScriptedChatModel(["NO. The passages do not say Paris has 3 million people."])
    request = EvaluationRequest(QUESTION, "Paris, with 3 million people.", context=["Paris is the capital."])
    result = await FactCheckingEvaluator(judge).evaluate(request)
    assert not result.passed and "3 million" in result.feedback
    text = _judge_text(judge)
    assert "every claim" in text and "Paris is the capital." in text and "3 million people" in text


async def test_fact_checking_without_passages_raises_without_asking_the_judge() -> None:
    judge = ScriptedChatModel([])
    with pytest.raises(EvaluationFailedError, match="EVALUATION_CONTEXT"):
        await FactCheckingEvaluator(judge).evaluate(REQUEST)
    assert judge.prompts == []


async def test_a_yes_no_judge_model_error_is_raised_as_is() -> None:
    with pytest.raises(ModelError, match="down"):
        await FactCheckingEvaluator(ScriptedChatModel([ModelError("down")])).evaluate(
            EvaluationRequest(QUESTION, GOOD, context=["x"])
        )


@given(
    verdict=st.sampled_from(["yes", "YES", "Yes", "no", "NO", "No"]),
    before=st.sampled_from(["", " ", "**", '"', "\n", "- "]),
    after=st.sampled_from(["", ".", ",", ":", "**", " -", "!"]),
    reason=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40).map(str.strip),
)
def test_a_reply_that_starts_with_yes_or_no_is_read_whatever_its_dressing(
    verdict: str, before: str, after: str, reason: str
) -> None:
    parsed = parse_yes_no(f"{before}{verdict}{after} {reason}")
    assert parsed is not None
    assert parsed[0] is (verdict.lower() == "yes")


@given(st.text(max_size=40))
def test_a_reply_whose_first_word_is_not_yes_or_no_is_never_read_as_a_verdict(text: str) -> None:
    words = "".join(c if c.isalnum() else " " for c in text).split()
    parsed = parse_yes_no(text)
    if not words or words[0].lower() not in {"yes", "no"}:
        assert parsed is None
