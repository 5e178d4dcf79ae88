"""SelfRefineEvaluationAdvisor on the call path: judged attempts, the retry prompt, exhaustion both
ways, usage, the tool loop inside every attempt, memory outside, passages, evaluator forms."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorChainError,
    AdvisorParams,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    EvaluationFailedError,
    EvaluationRequest,
    EvaluationResult,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelError,
    Ordered,
    ScriptedChatModel,
    SelfRefineEvaluationAdvisor,
    ToolCallingAdvisor,
    ToolResponseMessage,
    tool,
)
from advisorchain.memory import ChatMemory
from tests.evaluation.eval_helpers import BAD, GOOD, QUESTION, Judge, answer, tool_round
from tests.support.spans import span_exporter

TEMPLATE = SelfRefineEvaluationAdvisor.DEFAULT_FEEDBACK_TEMPLATE


def _client(model: Any, advisor: SelfRefineEvaluationAdvisor, **kwargs: Any) -> ChatClient:
    return ChatClient(model, default_advisors=[advisor], **kwargs)


def _last_user_text(model: ScriptedChatModel, index: int) -> str:
    user = model.prompts[index].last_user_message
    assert user is not None
    return user.text


def test_an_answer_that_passes_first_time_is_one_model_call() -> None:
    model, judge = ScriptedChatModel([GOOD]), Judge()
    response = (
        _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().chat_client_response()
    )
    assert response.chat_response is not None and response.chat_response.text == GOOD
    assert len(model.prompts) == 1 and len(judge.requests) == 1
    assert response.context[AdvisorParams.EVALUATIONS] == (
        EvaluationResult(True, score=4.0, feedback="feedback 1"),
    )


def test_a_rejected_answer_is_asked_again_with_the_feedback_after_the_original_question() -> None:
    model, judge = ScriptedChatModel([BAD, GOOD]), Judge()
    content = _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().content()
    assert content == GOOD
    assert _last_user_text(model, 1) == QUESTION + "\n" + TEMPLATE.format(feedback="feedback 1", answer=BAD)


def test_the_default_feedback_says_the_answer_was_not_accepted_and_quotes_it_and_the_feedback() -> None:
    text = TEMPLATE.format(feedback="Name the city.", answer=BAD)
    assert "not accepted" in text and BAD in text and "Name the city." in text and "better answer" in text


def test_only_the_newest_judgement_goes_into_the_retry() -> None:
    model, judge = ScriptedChatModel([BAD, "Somewhere.", GOOD]), Judge()
    _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().content()
    third = _last_user_text(model, 2)
    assert third == QUESTION + "\n" + TEMPLATE.format(feedback="feedback 2", answer="Somewhere.")
    assert "feedback 1" not in third and BAD not in third
    assert len(model.prompts[2].instructions) == 1  # the original prompt, not a growing history


def test_the_evaluator_sees_the_original_question_and_the_prompt_sent_for_each_attempt() -> None:
    model, judge = ScriptedChatModel([BAD, GOOD]), Judge()
    _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().content()
    first, second = judge.requests
    assert first.user_text == second.user_text == QUESTION
    assert (first.answer, second.answer) == (BAD, GOOD)
    assert first.messages == model.prompts[0].instructions
    assert second.messages == model.prompts[1].instructions
    assert first.context == () and first.expected is None


def test_exhausted_attempts_return_the_last_answer_with_every_failure() -> None:
    model, judge = ScriptedChatModel(["a", "b", "c"]), Judge()
    response = (
        _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().chat_client_response()
    )
    assert response.chat_response is not None and response.chat_response.text == "c"
    results = response.context[AdvisorParams.EVALUATIONS]
    assert [r.passed for r in results] == [False, False, False]
    assert [r.feedback for r in results] == ["feedback 1", "feedback 2", "feedback 3"]
    assert len(model.prompts) == 3


def test_exhausted_attempts_raise_when_asked_to() -> None:
    model, judge = ScriptedChatModel([answer("a"), answer("b")]), Judge()
    advisor = SelfRefineEvaluationAdvisor(judge, max_attempts=2, on_failure="raise")
    with pytest.raises(EvaluationFailedError) as caught:
        _client(model, advisor).prompt(QUESTION).call().content()
    error = caught.value
    assert isinstance(error, AdvisorChainError)
    assert [r.feedback for r in error.results] == ["feedback 1", "feedback 2"]
    assert error.answer == "b"
    assert error.response is not None and error.response.text == "b"
    assert error.response.metadata.usage is not None and error.response.metadata.usage.prompt_tokens == 20
    assert "'judge'" in str(error) and "max_attempts=2" in str(error) and "feedback 2" in str(error)


def test_max_attempts_one_never_retries() -> None:
    model, judge = ScriptedChatModel([BAD]), Judge()
    response = (
        _client(model, SelfRefineEvaluationAdvisor(judge, max_attempts=1))
        .prompt(QUESTION)
        .call()
        .chat_response()
    )
    assert response.text == BAD and len(model.prompts) == 1


def test_the_usage_is_the_sum_over_the_attempts() -> None:
    model = ScriptedChatModel([answer(BAD, 10, 2), answer("x", 20, 3), answer(GOOD, 30, 4)])
    response = _client(model, SelfRefineEvaluationAdvisor(Judge())).prompt(QUESTION).call().chat_response()
    assert response.metadata.usage is not None
    assert (response.metadata.usage.prompt_tokens, response.metadata.usage.completion_tokens) == (60, 9)


def test_a_custom_feedback_template_is_used() -> None:
    model = ScriptedChatModel([BAD, GOOD])
    advisor = SelfRefineEvaluationAdvisor(
        Judge(), feedback_template="Rejected ({feedback}): {answer} -- {{again}}"
    )
    _client(model, advisor).prompt(QUESTION).call().content()
    assert _last_user_text(model, 1) == f"{QUESTION}\nRejected (feedback 1): {BAD} -- {{again}}"


# -- tools --------------------------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: sunny"


def test_the_tool_loop_runs_inside_every_attempt() -> None:
    model = ScriptedChatModel([tool_round("c1"), BAD, tool_round("c2"), GOOD])
    judge = Judge()
    client = _client(model, SelfRefineEvaluationAdvisor(judge), default_tools=[get_weather])
    assert client.prompt(QUESTION).call().content() == GOOD
    assert [r.answer for r in judge.requests] == [BAD, GOOD]  # only final answers are judged
    second_attempt = model.prompts[2]
    assert not any(isinstance(m, ToolResponseMessage) for m in second_attempt.instructions)
    assert isinstance(model.prompts[3].instructions[-1], ToolResponseMessage)
    assert "feedback 1" in _last_user_text(model, 3)  # the retry prompt stays through the loop


def test_a_response_that_still_asks_for_tools_is_passed_through_unevaluated() -> None:
    model, judge = ScriptedChatModel([tool_round("c1")]), Judge()
    client = _client(model, SelfRefineEvaluationAdvisor(judge), tool_calling_auto_register=False)
    response = client.prompt(QUESTION).tools(get_weather).call().chat_client_response()
    assert response.chat_response is not None and response.chat_response.has_tool_calls()
    assert judge.requests == [] and len(model.prompts) == 1
    assert response.context[AdvisorParams.EVALUATIONS] == ()


def test_the_default_order_is_inside_memory_and_outside_the_tool_loop() -> None:
    order = SelfRefineEvaluationAdvisor.DEFAULT_ORDER
    assert order == Ordered.HIGHEST_PRECEDENCE + 250
    assert (
        MessageChatMemoryAdvisor(MessageWindowChatMemory()).order < order < ToolCallingAdvisor.DEFAULT_ORDER
    )
    assert SelfRefineEvaluationAdvisor(Judge()).name == "Self Refine Evaluation Advisor"


def test_memory_outside_stores_only_the_returned_answer() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([BAD, GOOD, "Lyon is in France too."])
    client = ChatClient(
        model,
        default_advisors=[
            MessageChatMemoryAdvisor(memory),
            SelfRefineEvaluationAdvisor(Judge(("Paris.", "Lyon is in France too."))),
        ],
    )
    client.prompt(QUESTION).param(ChatMemory.CONVERSATION_ID, "c").call().content()
    stored = memory.get("c")
    assert [m.text for m in stored] == [QUESTION, GOOD]  # type: ignore[union-attr]
    client.prompt("And Lyon?").param(ChatMemory.CONVERSATION_ID, "c").call().content()
    assert [m.text for m in model.prompts[2].instructions] == [QUESTION, GOOD, "And Lyon?"]  # type: ignore[union-attr]


def test_a_failed_run_stores_nothing_in_memory() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([BAD, "still bad"])
    advisor = SelfRefineEvaluationAdvisor(Judge(), max_attempts=2, on_failure="raise")
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), advisor])
    with pytest.raises(EvaluationFailedError):
        client.prompt(QUESTION).param(ChatMemory.CONVERSATION_ID, "c").call().content()
    assert memory.get("c") == []


def test_a_judge_failure_stores_nothing_in_memory_and_the_next_turn_starts_clean() -> None:
    memory = MessageWindowChatMemory()

    def judge(request: EvaluationRequest) -> bool:
        if request.user_text == QUESTION:
            raise ModelError("judge unavailable", status_code=503)
        return True

    model = ScriptedChatModel([GOOD, "Hello!"])
    client = ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(memory), SelfRefineEvaluationAdvisor(judge)]
    )
    with pytest.raises(ModelError):
        client.prompt(QUESTION).param(ChatMemory.CONVERSATION_ID, "c").call().content()
    assert memory.get("c") == []
    assert client.prompt("Hi").param(ChatMemory.CONVERSATION_ID, "c").call().content() == "Hello!"
    assert [m.text for m in memory.get("c")] == ["Hi", "Hello!"]  # type: ignore[union-attr]


# -- passages -------------------------------------------------------------------------------------------


def test_passages_in_the_request_context_reach_the_evaluator() -> None:
    judge = Judge()
    client = _client(ScriptedChatModel([GOOD]), SelfRefineEvaluationAdvisor(judge))
    client.prompt(QUESTION).param(
        AdvisorParams.EVALUATION_CONTEXT, ["Paris is the capital."]
    ).call().content()
    assert judge.requests[0].context == ("Paris is the capital.",)


class _Retriever(BaseAdvisor):
    """Puts passages into the request context from inside the advisor (as a retrieval advisor would)."""

    order = SelfRefineEvaluationAdvisor.DEFAULT_ORDER + 10

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        return request.copy(
            context={**request.context, AdvisorParams.EVALUATION_CONTEXT: ("doc one", "doc two")}
        )


def test_passages_put_in_the_context_by_an_inner_advisor_reach_the_evaluator() -> None:
    judge = Judge()
    client = ChatClient(
        ScriptedChatModel([GOOD]), default_advisors=[SelfRefineEvaluationAdvisor(judge), _Retriever()]
    )
    client.prompt(QUESTION).call().content()
    assert judge.requests[0].context == ("doc one", "doc two")


def test_passages_that_are_not_text_are_a_clear_error() -> None:
    client = _client(ScriptedChatModel([GOOD]), SelfRefineEvaluationAdvisor(Judge()))
    with pytest.raises(ValueError, match="evaluation_context"):
        client.prompt(QUESTION).param(AdvisorParams.EVALUATION_CONTEXT, [1, 2]).call().content()


# -- evaluator forms ------------------------------------------------------------------------------------


async def _async_fn(request: EvaluationRequest) -> bool:
    return request.answer == GOOD


class _AsyncEvaluator:
    async def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        return EvaluationResult(request.answer == GOOD, feedback="async says no")


class _AsyncCallable:
    async def __call__(self, request: EvaluationRequest) -> EvaluationResult:
        return EvaluationResult(request.answer == GOOD)


@pytest.mark.parametrize(
    "evaluator",
    [lambda r: r.answer == GOOD, _async_fn, _AsyncEvaluator(), _AsyncCallable(), Judge()],
    ids=["sync-bool-fn", "async-bool-fn", "async-method", "async-callable", "sync-method"],
)
def test_every_evaluator_form_is_accepted(evaluator: Any) -> None:
    model = ScriptedChatModel([BAD, GOOD])
    response = (
        _client(model, SelfRefineEvaluationAdvisor(evaluator)).prompt(QUESTION).call().chat_client_response()
    )
    assert [r.passed for r in response.context[AdvisorParams.EVALUATIONS]] == [False, True]


def test_a_bool_verdict_means_a_result_without_score_or_feedback() -> None:
    model = ScriptedChatModel([BAD, GOOD])
    response = (
        _client(model, SelfRefineEvaluationAdvisor(lambda r: r.answer == GOOD))
        .prompt(QUESTION)
        .call()
        .chat_client_response()
    )
    assert response.context[AdvisorParams.EVALUATIONS] == (EvaluationResult(False), EvaluationResult(True))
    assert _last_user_text(model, 1) == QUESTION + "\n" + TEMPLATE.format(feedback="", answer=BAD)


def test_an_evaluator_that_raises_propagates_and_no_answer_is_returned() -> None:
    def judge(request: EvaluationRequest) -> bool:
        raise ModelError("the judge is down", status_code=503)

    model = ScriptedChatModel([GOOD])
    with pytest.raises(ModelError, match="the judge is down"):
        _client(model, SelfRefineEvaluationAdvisor(judge)).prompt(QUESTION).call().content()


@pytest.mark.parametrize("verdict", [None, "yes", 1, {"passed": True}])
def test_a_verdict_that_is_neither_a_result_nor_a_bool_is_never_a_pass(verdict: object) -> None:
    model = ScriptedChatModel([GOOD])
    advisor = SelfRefineEvaluationAdvisor(lambda r: verdict)
    with pytest.raises(EvaluationFailedError, match="EvaluationResult or a bool"):
        _client(model, advisor).prompt(QUESTION).call().content()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SelfRefineEvaluationAdvisor(Judge(), 0), "max_attempts"),
        (lambda: SelfRefineEvaluationAdvisor(Judge(), max_attempts=-1), "max_attempts"),
        (lambda: SelfRefineEvaluationAdvisor(Judge(), order=Ordered.HIGHEST_PRECEDENCE), "order"),
        (lambda: SelfRefineEvaluationAdvisor(Judge(), order=Ordered.LOWEST_PRECEDENCE), "order"),
        (lambda: SelfRefineEvaluationAdvisor(Judge(), on_failure="ignore"), "on_failure"),  # type: ignore[arg-type]
        (lambda: SelfRefineEvaluationAdvisor(Judge(), feedback_template="{why}"), "feedback_template"),
        (lambda: SelfRefineEvaluationAdvisor(Judge(), feedback_template="{0}"), "feedback_template"),
        (lambda: SelfRefineEvaluationAdvisor(42), "not an evaluator"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_are_value_errors_naming_the_argument(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_an_expected_answer_evaluator_has_no_place_in_the_advisor() -> None:
    from advisorchain import ExpectedAnswerEvaluator

    with pytest.raises(ValueError, match="expected answer"):
        SelfRefineEvaluationAdvisor(ExpectedAnswerEvaluator())


# -- spans ---------------------------------------------------------------------------------------------


def test_one_span_per_evaluation_with_passed_and_score() -> None:
    exporter = span_exporter()
    model = ScriptedChatModel([BAD, GOOD])
    _client(model, SelfRefineEvaluationAdvisor(Judge())).prompt(QUESTION).call().content()
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("evaluate ")]
    assert [s.name for s in spans] == ["evaluate judge", "evaluate judge"]
    assert [dict(s.attributes or {}).get("advisorchain.evaluation.passed") for s in spans] == [False, True]
    assert [dict(s.attributes or {}).get("advisorchain.evaluation.score") for s in spans] == [1.0, 4.0]
    advisor_span = next(
        s for s in exporter.get_finished_spans() if s.name == "advisor Self Refine Evaluation Advisor"
    )
    assert all(s.parent is not None and s.parent.span_id == advisor_span.context.span_id for s in spans)
    assert all("advisorchain.evaluation.feedback" not in (s.attributes or {}) for s in spans)


def test_a_verdict_without_score_has_no_score_attribute() -> None:
    exporter = span_exporter()
    _client(ScriptedChatModel([GOOD]), SelfRefineEvaluationAdvisor(lambda r: True)).prompt(
        QUESTION
    ).call().content()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "evaluate <lambda>"]
    assert dict(span.attributes or {})["advisorchain.evaluation.passed"] is True
    assert "advisorchain.evaluation.score" not in (span.attributes or {})
