"""Offline evals: cases answered by a ChatClient or a function, every evaluator on every answer, a
bounded number at a time; failures are rows, never the end of the run; the report's totals, JSON
and table."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    Case,
    ChatClient,
    ChatResponse,
    EvaluationRequest,
    EvaluationResult,
    ExpectedAnswerEvaluator,
    FunctionChatModel,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ScriptedChatModel,
    SyncInAsyncContextError,
    Usage,
    aevaluate_cases,
    evaluate_cases,
)
from advisorchain.evaluation import CaseResult, EvaluationReport, EvaluatorTotals
from advisorchain.memory import ChatMemory
from tests.support.spans import span_exporter

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome"}
CASES = [
    Case("france", "Capital of France?", expected="Paris"),
    Case("japan", "Capital of Japan?", expected="Tokyo"),
    Case("italy", "Capital of Italy?", expected="Milan"),
    Case("chat", "Say hello."),
]


def capital(case: Case) -> str:
    for country, city in CAPITALS.items():
        if country in case.question:
            return f"The capital is {city}."
    return "Hello!"


def short(request: EvaluationRequest) -> EvaluationResult:
    n = len(request.answer or "")
    return EvaluationResult(n <= 20, score=float(n), feedback=f"{n} characters")


def test_every_evaluator_runs_on_every_answer_and_rows_keep_case_order() -> None:
    report = evaluate_cases(capital, CASES, [ExpectedAnswerEvaluator("contains"), short])
    assert [row.case.name for row in report.rows] == ["france", "japan", "italy", "chat"]
    assert [row.answer for row in report.rows] == [
        "The capital is Paris.",
        "The capital is Tokyo.",
        "The capital is Rome.",
        "Hello!",
    ]
    assert [sorted(row.results) for row in report.rows] == [
        ["ExpectedAnswerEvaluator", "short"],
        ["ExpectedAnswerEvaluator", "short"],
        ["ExpectedAnswerEvaluator", "short"],
        ["short"],  # no expected: no result from ExpectedAnswerEvaluator
    ]
    assert [row.passed for row in report.rows] == [False, False, False, True]  # 21 characters is too long
    assert report.passed_all == 1 and report.failed == 3


def test_totals_count_only_the_cases_an_evaluator_judged() -> None:
    report = evaluate_cases(capital, CASES, [ExpectedAnswerEvaluator("contains"), short])
    assert report.totals["ExpectedAnswerEvaluator"] == EvaluatorTotals(
        pass_rate=2 / 3, mean_score=None, cases=3
    )
    assert report.totals["short"] == EvaluatorTotals(
        pass_rate=2 / 4, mean_score=(21 + 21 + 20 + 6) / 4, cases=4
    )


def test_each_evaluator_gets_the_case_question_expected_and_context() -> None:
    seen: list[EvaluationRequest] = []

    def record(request: EvaluationRequest) -> bool:
        seen.append(request)
        return True

    case = Case("c", "Capital of France?", expected="Paris", context=["Paris is the capital."])
    evaluate_cases(capital, [case], [record])
    assert seen == [
        EvaluationRequest(
            "Capital of France?", "The capital is Paris.", ("Paris is the capital.",), (), "Paris"
        )
    ]


def test_a_target_that_raises_is_a_failed_row_and_the_run_goes_on() -> None:
    def flaky(case: Case) -> str:
        if case.name == "japan":
            raise ConnectionError("server went away")
        return capital(case)

    report = evaluate_cases(flaky, CASES, [ExpectedAnswerEvaluator("contains"), short])
    japan = report.rows[1]
    assert japan.error == "target: ConnectionError: server went away"
    assert (japan.passed, japan.answer, dict(japan.results)) == (False, None, {})
    assert report.rows[0].answer == "The capital is Paris." and report.rows[3].passed
    # a failed case counts as not passed for every evaluator that applies to it
    assert report.totals["ExpectedAnswerEvaluator"].cases == 3
    assert report.totals["ExpectedAnswerEvaluator"].pass_rate == pytest.approx(1 / 3)
    assert report.totals["short"].cases == 4


def test_a_failed_case_without_expected_is_not_counted_for_the_expected_answer_evaluator() -> None:
    def broken(case: Case) -> str:
        raise ValueError("nope")

    report = evaluate_cases(broken, [Case("chat", "hi")], [ExpectedAnswerEvaluator()])
    assert report.totals["ExpectedAnswerEvaluator"] == EvaluatorTotals(0.0, None, 0)
    assert report.rows[0].error == "target: ValueError: nope" and report.passed_all == 0


def test_an_evaluator_that_raises_fails_its_case_and_the_others_still_judge_it() -> None:
    def crashing(request: EvaluationRequest) -> bool:
        if "Tokyo" in (request.answer or ""):
            raise RuntimeError("judge crashed")
        return True

    report = evaluate_cases(capital, CASES, [crashing, ExpectedAnswerEvaluator("contains")])
    japan = report.rows[1]
    assert japan.error == "evaluator 'crashing': RuntimeError: judge crashed"
    assert japan.results["ExpectedAnswerEvaluator"].passed and not japan.passed
    assert report.totals["crashing"] == EvaluatorTotals(pass_rate=3 / 4, mean_score=None, cases=4)


def test_a_target_that_returns_something_else_than_text_is_a_failed_row() -> None:
    report = evaluate_cases(lambda case: 42, [Case("c", "q")], [])
    assert report.rows[0].error is not None and "return the answer's text" in report.rows[0].error


async def test_an_async_target_and_async_evaluators_work() -> None:
    async def target(case: Case) -> str:
        await asyncio.sleep(0)
        return capital(case)

    async def evaluator(request: EvaluationRequest) -> bool:
        return "Paris" in (request.answer or "")

    report = await aevaluate_cases(target, CASES[:2], [evaluator])
    assert [row.passed for row in report.rows] == [True, False]


async def test_no_more_cases_than_the_concurrency_run_at_once() -> None:
    running = peak = 0

    async def target(case: Case) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    cases = [Case(f"c{i}", "q") for i in range(12)]
    report = await aevaluate_cases(target, cases, [], concurrency=3)
    assert peak == 3 and len(report.rows) == 12
    peak = 0
    await aevaluate_cases(target, cases, [], concurrency=1)
    assert peak == 1


def test_progress_writes_nothing_when_stderr_is_no_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    report = evaluate_cases(capital, CASES, [short], progress=True)
    assert len(report.rows) == 4
    assert capsys.readouterr().err == ""


def test_sync_targets_and_evaluators_run_off_the_event_loop() -> None:
    threads: set[str] = set()

    def target(case: Case) -> str:
        threads.add(threading.current_thread().name)
        return "ok"

    evaluate_cases(target, [Case("c", "q")], [lambda r: True])
    assert threads and "advisorchain-sync" not in threads


async def test_the_blocking_form_refuses_inside_an_event_loop() -> None:
    with pytest.raises(SyncInAsyncContextError, match="aevaluate_cases"):
        evaluate_cases(capital, CASES, [])


# -- a ChatClient target ---------------------------------------------------------------------------------


def test_a_client_target_sends_each_question_and_reports_usage() -> None:
    def answer(prompt: Prompt) -> ChatResponse:
        user = prompt.last_user_message
        assert user is not None
        return ChatResponse.of(AssistantMessage(f"echo: {user.text}"), "stop", usage=Usage(7, 3))

    model = FunctionChatModel(answer)
    report = evaluate_cases(
        ChatClient(model), CASES[:2], [ExpectedAnswerEvaluator("contains")], concurrency=1
    )
    assert [p.instructions[-1].text for p in model.prompts] == ["Capital of France?", "Capital of Japan?"]  # type: ignore[union-attr]
    assert [row.answer for row in report.rows] == ["echo: Capital of France?", "echo: Capital of Japan?"]
    assert all(row.usage == Usage(7, 3) for row in report.rows)


def test_each_case_is_a_conversation_of_its_own_with_memory() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["one", "two"])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    evaluate_cases(client, [Case("a", "first?"), Case("b", "second?")], [], concurrency=1)
    assert [len(p.instructions) for p in model.prompts] == [1, 1]  # nothing of case a in case b's prompt
    assert all(len(memory.get(cid)) == 2 for cid in memory.repository.find_conversation_ids())  # type: ignore[attr-defined]


def test_a_case_context_rides_in_the_request_context_for_the_agents_own_evaluators() -> None:
    seen: list[Any] = []

    def model(prompt: Prompt) -> AssistantMessage:
        return AssistantMessage("Paris")

    class Spy:
        name, order = "spy", 0

        async def advise_call(self, request: Any, chain: Any) -> Any:
            seen.append(
                (
                    request.context.get(AdvisorParams.EVALUATION_CONTEXT),
                    request.context.get(ChatMemory.CONVERSATION_ID),
                )
            )
            return await chain.next_call(request)

    client = ChatClient(FunctionChatModel(model), default_advisors=[Spy()])
    evaluate_cases(client, [Case("a", "q", context=["passage"]), Case("b", "q")], [], concurrency=1)
    assert [s[0] for s in seen] == [("passage",), None]
    assert seen[0][1] != seen[1][1]


def test_a_client_target_error_is_a_failed_row() -> None:
    report = evaluate_cases(ChatClient(ScriptedChatModel([])), [Case("a", "q")], [])
    assert report.rows[0].error is not None and report.rows[0].error.startswith("target: AdvisorChainError")


# -- ExpectedAnswerEvaluator ---------------------------------------------------------------------------


def test_exact_compares_the_stripped_texts_case_sensitively() -> None:
    evaluator = ExpectedAnswerEvaluator()
    assert evaluator.evaluate(EvaluationRequest("q", "  Paris\n", expected=" Paris ")).passed
    assert not evaluator.evaluate(EvaluationRequest("q", "paris", expected="Paris")).passed
    assert not evaluator.evaluate(EvaluationRequest("q", None, expected="Paris")).passed


def test_contains_looks_for_the_expected_text_in_any_case() -> None:
    evaluator = ExpectedAnswerEvaluator("contains")
    assert evaluator.evaluate(EvaluationRequest("q", "It is PARIS.", expected="paris")).passed
    failed = evaluator.evaluate(EvaluationRequest("q", "It is Lyon.", expected="Paris"))
    assert not failed.passed and "Paris" in failed.feedback


def test_the_expected_answer_evaluator_needs_an_expected_answer() -> None:
    with pytest.raises(ValueError, match="expected"):
        ExpectedAnswerEvaluator().evaluate(EvaluationRequest("q", "a"))
    with pytest.raises(ValueError, match="mode"):
        ExpectedAnswerEvaluator("fuzzy")  # type: ignore[arg-type]


@given(st.text(max_size=20), st.text(min_size=1, max_size=10), st.text(max_size=20))
def test_contains_finds_the_expected_text_wherever_it_is(before: str, expected: str, after: str) -> None:
    if not expected.strip():
        return
    answer = before + expected.upper() + after
    assert (
        ExpectedAnswerEvaluator("contains").evaluate(EvaluationRequest("q", answer, expected=expected)).passed
    )


@given(st.text(max_size=30), st.text(max_size=30))
def test_exact_passes_exactly_when_the_stripped_texts_are_equal(answer: str, expected: str) -> None:
    result = ExpectedAnswerEvaluator().evaluate(EvaluationRequest("q", answer, expected=expected))
    assert result.passed == (answer.strip() == expected.strip())


# -- names, arguments --------------------------------------------------------------------------------------


def test_an_evaluators_name_is_its_name_attribute_else_its_class_or_function_name() -> None:
    class Named:
        name = "mine"

        def evaluate(self, request: EvaluationRequest) -> bool:
            return True

    class Plain:
        def evaluate(self, request: EvaluationRequest) -> bool:
            return True

    report = evaluate_cases(capital, CASES[:1], [Named(), Plain(), short])
    assert list(report.totals) == ["mine", "Plain", "short"]


def test_two_evaluators_with_one_name_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="'short'"):
        evaluate_cases(capital, CASES, [short, short])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: evaluate_cases(capital, CASES, [], concurrency=0), "concurrency"),
        (lambda: evaluate_cases(capital, [{"name": "a", "question": "q"}], []), "Case"),  # type: ignore[list-item]
        (lambda: evaluate_cases("not a target", CASES, []), "target"),  # type: ignore[arg-type]
        (lambda: evaluate_cases(capital, CASES, [42]), "not an evaluator"),
        (lambda: Case("", "q"), "name"),
        (lambda: Case("a", "  "), "question"),
        (lambda: Case("a", "q", context=[1]), "context"),
        (lambda: Case("a", "q", expected=3), "expected"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_are_value_errors(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_a_single_evaluator_may_be_given_on_its_own() -> None:
    report = evaluate_cases(capital, CASES[:1], short)
    assert list(report.totals) == ["short"]


def test_offline_evaluations_have_one_span_each() -> None:
    exporter = span_exporter()
    evaluate_cases(capital, CASES[:2], [short])
    spans = [s for s in exporter.get_finished_spans() if s.name == "evaluate short"]
    assert sorted(dict(s.attributes or {})["advisorchain.evaluation.score"] for s in spans) == [21.0, 21.0]


# -- the report --------------------------------------------------------------------------------------------


def test_the_report_as_json_safe_data_with_the_same_names() -> None:
    report = evaluate_cases(capital, CASES, [ExpectedAnswerEvaluator("contains"), short])
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) == {"rows", "totals", "passed_all"}
    assert data["passed_all"] == 1
    first = data["rows"][0]
    assert set(first) == {"case", "answer", "results", "duration_s", "usage", "error", "passed"}
    assert first["case"] == {
        "name": "france",
        "question": "Capital of France?",
        "expected": "Paris",
        "context": [],
        "metadata": {},
    }
    assert first["results"]["short"] == {
        "passed": False,
        "score": 21.0,
        "feedback": "21 characters",
        "metadata": {},
    }
    assert data["totals"]["short"] == {"pass_rate": 0.5, "mean_score": 17.0, "cases": 4}


_JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5), st.decimals()
)


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            _JSON_LEAVES,
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    )
)
def test_to_dict_is_json_for_any_metadata(metadata: dict[str, Any]) -> None:
    row = CaseResult(
        Case("c", "q", metadata=metadata),
        "a",
        {"e": EvaluationResult(True, metadata=metadata)},
        0.1,
        None,
        None,
        True,
    )
    report = EvaluationReport((row,), {"e": EvaluatorTotals(1.0, None, 1)}, 1)
    json.dumps(report.to_dict(), allow_nan=False)


def test_usage_in_the_json_has_every_count_and_the_total() -> None:
    row = CaseResult(Case("c", "q"), "a", {}, 0.5, Usage(7, 3), None, True)
    data = EvaluationReport((row,), {}, 1).to_dict()
    assert data["rows"][0]["usage"]["prompt_tokens"] == 7 and data["rows"][0]["usage"]["total_tokens"] == 10


def test_print_writes_a_table_with_every_case_mark_and_total() -> None:
    report = evaluate_cases(capital, CASES, [ExpectedAnswerEvaluator("contains"), short])
    out = io.StringIO()
    report.print(out)
    text = out.getvalue()
    for needed in (
        "france",
        "japan",
        "italy",
        "chat",
        "ExpectedAnswerEvaluator",
        "short",
        "✓",
        "✗",
        "67% of 3",
    ):
        assert needed in text, needed
    assert "'Milan'" in text
    assert text.rstrip().endswith("1 of 4 cases passed")
    italy = next(line for line in text.splitlines() if "italy" in line)
    assert "✗" in italy
