"""Offline evals: answer a set of cases with a target (a ChatClient or a function), run every
evaluator on every answer, a bounded number of cases at a time, and report.

A case whose target or evaluator raised is a failed row carrying the error; the run never stops for
it (only a cancellation or Ctrl-C ends it early).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar, Literal, TypeAlias, get_args

from .. import _sync
from .._checks import check_int
from ..chain.vocabulary import AdvisorParams
from ..client import ChatClient
from ..errors import ChainConfigurationError
from ..memory.api import ChatMemory
from ..model import Usage
from .api import (
    EvaluationRequest,
    EvaluationResult,
    EvaluatorLike,
    PreparedEvaluator,
    invoke,
    is_async_callable,
    prepare_evaluators,
)
from .cases import Case, CaseResult, EvaluationReport, EvaluatorTotals

__all__ = ["ExpectedAnswerEvaluator", "Target", "aevaluate_cases", "evaluate_cases"]

MatchMode = Literal["exact", "contains"]

Target: TypeAlias = ChatClient | Callable[[Case], str | Awaitable[str | None] | None]
"""What answers the cases: a ChatClient (each case sent as ``prompt(case.question)``) or a function
``fn(case) -> str`` (sync or async)."""

_Answer: TypeAlias = Callable[[Case, int], Awaitable[tuple[str | None, Usage | None]]]


class ExpectedAnswerEvaluator:
    """Compares the answer with the case's ``expected`` answer: ``"exact"`` compares the stripped
    texts case-sensitively, ``"contains"`` looks for ``expected`` in the answer case-insensitively.

    A case without ``expected`` gets no result from it (it is not counted in its pass rate); it has
    no place in a ``SelfRefineEvaluationAdvisor`` (a live request has no expected answer).
    """

    needs_expected: ClassVar[bool] = True
    """Run only on requests that carry an expected answer."""

    def __init__(self, mode: MatchMode = "exact", *, name: str | None = None) -> None:
        if mode not in get_args(MatchMode):
            raise ChainConfigurationError(
                f"mode must be 'exact' (stripped texts equal) or 'contains' (expected found in the "
                f"answer, any case), got {mode!r}"
            )
        self.mode: MatchMode = mode
        self._name = name

    @property
    def name(self) -> str:
        """The name results are reported under (default: the class name)."""
        return self._name or type(self).__name__

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        """Passed when the answer matches ``request.expected``; a request without one is a
        ChainConfigurationError (offline evals never send one)."""
        expected = request.expected
        if expected is None:
            raise ChainConfigurationError(
                f"{self.name!r} needs an expected answer and the request has none; give the case an "
                "'expected' (evaluate_cases skips it for cases without one)"
            )
        answer = request.answer or ""
        if self.mode == "exact":
            passed = answer.strip() == expected.strip()
            feedback = "" if passed else f"expected exactly {expected.strip()!r}"
        else:
            passed = expected.strip().casefold() in answer.casefold()
            feedback = "" if passed else f"does not contain {expected.strip()!r}"
        return EvaluationResult(passed=passed, feedback=feedback, metadata={"mode": self.mode})

    def __repr__(self) -> str:
        return f"ExpectedAnswerEvaluator({self.mode!r})"


def _applies(evaluator: PreparedEvaluator, case: Case) -> bool:
    """Whether ``evaluator`` judges ``case`` (one that needs an expected answer skips a case without)."""
    return case.expected is not None or not getattr(evaluator.evaluator, "needs_expected", False)


# -- the target ----------------------------------------------------------------------------------------


def _answerer(target: object) -> _Answer:
    """``target`` as ``answer(case, index) -> (text, usage)``."""
    if isinstance(target, ChatClient):
        return _client_answerer(target)
    if not callable(target):
        raise ChainConfigurationError(
            f"target must be a ChatClient or a function fn(case) -> str (sync or async), got {target!r}"
        )
    is_async = is_async_callable(target)

    async def answer(case: Case, index: int) -> tuple[str | None, Usage | None]:
        text = await invoke(target, is_async, case)
        if text is not None and not isinstance(text, str):
            raise ChainConfigurationError(
                f"the target returned {text!r} for case {case.name!r}; return the answer's text (a str)"
            )
        return text, None

    return answer


def _client_answerer(client: ChatClient) -> _Answer:
    """Each case as ``prompt(case.question)``, in a conversation of its own (memory never mixes two
    cases), with the case's passages under ``EVALUATION_CONTEXT``."""
    run = uuid.uuid4().hex[:12]

    async def answer(case: Case, index: int) -> tuple[str | None, Usage | None]:
        spec = client.prompt(case.question).param(ChatMemory.CONVERSATION_ID, f"eval-{run}-{index}")
        if case.context:
            spec.param(AdvisorParams.EVALUATION_CONTEXT, case.context)
        response = await spec.acall().chat_response()
        return response.text, response.metadata.usage

    return answer


# -- one case --------------------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def _run_case(
    answer: _Answer, evaluators: Sequence[PreparedEvaluator], case: Case, index: int
) -> CaseResult:
    start = time.perf_counter()
    try:
        text, usage = await answer(case, index)
    except Exception as exc:
        return CaseResult(
            case, None, {}, time.perf_counter() - start, None, f"target: {_describe(exc)}", False
        )
    duration = time.perf_counter() - start
    request = EvaluationRequest(case.question, text, case.context, (), case.expected)
    results: dict[str, EvaluationResult] = {}
    errors: list[str] = []
    for evaluator in evaluators:
        if not _applies(evaluator, case):
            continue
        try:
            results[evaluator.name] = await evaluator(request)
        except Exception as exc:
            errors.append(f"evaluator {evaluator.name!r}: {_describe(exc)}")
    error = "; ".join(errors) or None
    passed = error is None and all(r.passed for r in results.values())
    return CaseResult(case, text, results, duration, usage, error, passed)


def _totals(
    rows: Sequence[CaseResult], evaluators: Sequence[PreparedEvaluator]
) -> dict[str, EvaluatorTotals]:
    totals: dict[str, EvaluatorTotals] = {}
    for evaluator in evaluators:
        counted = passed = 0
        scores: list[float] = []
        for row in rows:
            result = row.results.get(evaluator.name)
            if result is not None:
                counted += 1
                passed += result.passed
                if result.score is not None:
                    scores.append(result.score)
            elif row.error is not None and _applies(evaluator, row.case):
                counted += 1  # it failed before this evaluator gave a result: not passed
        totals[evaluator.name] = EvaluatorTotals(
            pass_rate=passed / counted if counted else 0.0,
            mean_score=sum(scores) / len(scores) if scores else None,
            cases=counted,
        )
    return totals


# -- the run ---------------------------------------------------------------------------------------------


def _checked_cases(cases: Iterable[object]) -> list[Case]:
    checked = list(cases)
    for case in checked:
        if not isinstance(case, Case):
            raise ChainConfigurationError(
                f"cases must be Case objects, got {case!r}; build them with Case(name=..., question=...)"
            )
    return checked  # type: ignore[return-value]  # each item was checked above


def _evaluator_list(evaluators: object) -> list[object]:
    if isinstance(evaluators, list | tuple):
        return list(evaluators)
    return [evaluators]  # one evaluator given on its own


@contextmanager
def _progress(shown: bool, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr while inside (nothing when not ``shown`` or when stderr is no
    terminal); yields ``advance()``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not shown or not (console.is_terminal or console.is_jupyter):  # a file or pipe gets no bar
        yield lambda: None
        return
    with Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("cases", total=total)
        yield lambda: bar.advance(task)


async def aevaluate_cases(
    target: Target,
    cases: Iterable[Case],
    evaluators: Sequence[EvaluatorLike] | EvaluatorLike,
    *,
    concurrency: int = 8,
    progress: bool = False,
) -> EvaluationReport:
    """Answer every case with ``target`` and run every evaluator on every answer.

    ``target`` is a ``ChatClient`` (each case is sent as ``prompt(case.question)``, in a
    conversation of its own, with the case's ``context`` under ``AdvisorParams.EVALUATION_CONTEXT``)
    or a function ``fn(case) -> str`` (sync functions run in a worker thread). Each evaluator gets
    an ``EvaluationRequest`` with the case's question, ``expected`` and ``context``. At most
    ``concurrency`` cases run at once; ``progress=True`` shows a progress bar on stderr (when it is a
    terminal). A case whose
    target or evaluator raised is recorded as failed with the error and never stops the run.

    >>> report = await aevaluate_cases(client, cases, [ExpectedAnswerEvaluator("contains")])
    >>> report.print()
    """
    answer = _answerer(target)
    checked = _checked_cases(cases)
    prepared = prepare_evaluators(_evaluator_list(evaluators))
    limit = asyncio.Semaphore(check_int(concurrency, "concurrency", minimum=1))
    rows: list[CaseResult | None] = [None] * len(checked)
    with _progress(progress, len(checked)) as advance:

        async def run(index: int, case: Case) -> None:
            async with limit:
                rows[index] = await _run_case(answer, prepared, case, index)
            advance()

        async with asyncio.TaskGroup() as group:
            for index, case in enumerate(checked):
                group.create_task(run(index, case))
    done = tuple(row for row in rows if row is not None)
    return EvaluationReport(done, _totals(done, prepared), sum(row.passed for row in done))


def evaluate_cases(
    target: Target,
    cases: Iterable[Case],
    evaluators: Sequence[EvaluatorLike] | EvaluatorLike,
    *,
    concurrency: int = 8,
    progress: bool = False,
) -> EvaluationReport:
    """The blocking form of ``aevaluate_cases`` (from plain scripts; inside an event loop use the
    async form)."""
    return _sync.run(
        aevaluate_cases(target, cases, evaluators, concurrency=concurrency, progress=progress),
        "evaluate_cases()",
        "await aevaluate_cases()",
    )
