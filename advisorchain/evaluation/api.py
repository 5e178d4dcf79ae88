"""The evaluation contract: what an evaluator is given (``EvaluationRequest``), what it answers
(``EvaluationResult``), the ``Evaluator`` protocol, and the one way every caller runs an evaluator
(``prepare_evaluator``): its name, sync or async, a plain callable or a bool verdict, one span.

This module sits below the judges, the advisor and the offline runner: it imports the model layer
and nothing of the chain or the client.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .. import observability as obs
from ..errors import ChainConfigurationError, EvaluationFailedError
from ..messages import Message

__all__ = [
    "EvaluationRequest",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorLike",
    "PreparedEvaluator",
    "as_passages",
    "evaluator_name",
    "invoke",
    "is_async_callable",
    "prepare_evaluator",
    "prepare_evaluators",
]


def as_passages(value: object, what: str) -> tuple[str, ...]:
    """Supporting passages as a tuple of str: a str is one passage, a sequence of str is several;
    anything else is a ChainConfigurationError naming ``what``."""
    if type(value) is tuple and all(type(p) is str for p in value):
        return value  # the common case (and the empty one), checked without the Sequence ABC
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(p, str) for p in value):
        return tuple(value)
    raise ChainConfigurationError(f"{what} must be a sequence of str (the passages' texts), got {value!r}")


@dataclass(frozen=True, slots=True)
class EvaluationRequest:
    """What an evaluator judges: the question (the last user message's text — on a retry still the
    original question), the answer's text, supporting passages (retrieved documents; from the request
    context's ``AdvisorParams.EVALUATION_CONTEXT`` or a case's ``context``), the prompt sent for that
    attempt (empty in offline evals) and the expected answer (offline evals, from the case)."""

    user_text: str
    answer: str | None
    context: Sequence[str] = ()
    messages: Sequence[Message] = ()
    expected: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.user_text, str):
            raise ChainConfigurationError(
                f"EvaluationRequest.user_text must be a str, got {self.user_text!r}"
            )
        if self.answer is not None and not isinstance(self.answer, str):
            raise ChainConfigurationError(
                f"EvaluationRequest.answer must be a str or None, got {self.answer!r}"
            )
        if self.expected is not None and not isinstance(self.expected, str):
            raise ChainConfigurationError(
                f"EvaluationRequest.expected must be a str or None, got {self.expected!r}"
            )
        object.__setattr__(self, "context", as_passages(self.context, "EvaluationRequest.context"))
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", tuple(self.messages))


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """An evaluator's verdict: ``passed``, an optional ``score`` (e.g. 1..4 from an LLM judge), the
    ``feedback`` that a self-refining advisor hands the model on its next attempt, and ``metadata``."""

    passed: bool
    score: float | None = None
    feedback: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.passed, bool):
            raise ChainConfigurationError(f"EvaluationResult.passed must be a bool, got {self.passed!r}")
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, int | float):
                raise ChainConfigurationError(
                    f"EvaluationResult.score must be a number or None, got {self.score!r}"
                )
            object.__setattr__(self, "score", float(self.score))
        if not isinstance(self.feedback, str):
            raise ChainConfigurationError(f"EvaluationResult.feedback must be a str, got {self.feedback!r}")
        object.__setattr__(self, "metadata", dict(self.metadata) if self.metadata else {})


@runtime_checkable
class Evaluator(Protocol):
    """Judges an answer. ``evaluate`` may be a plain or an ``async`` method.

    Wherever an evaluator is taken, a callable ``fn(request) -> EvaluationResult | bool`` (sync or
    async) is accepted too; ``True``/``False`` mean ``EvaluationResult(passed=True/False)``. An
    evaluator's name is its ``name`` attribute, else its class or function name. Sync evaluators run
    in a worker thread (as sync tools do), so one that blocks on a network call never stalls the loop.
    """

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult | Awaitable[EvaluationResult]: ...


EvaluatorLike: TypeAlias = (
    Evaluator | Callable[[EvaluationRequest], EvaluationResult | bool | Awaitable[EvaluationResult | bool]]
)
"""An ``Evaluator`` or a callable verdict (sync or async)."""


def evaluator_name(evaluator: object) -> str:
    """The evaluator's ``name`` attribute, else its class or function name."""
    name = getattr(evaluator, "name", None)
    if isinstance(name, str) and name:
        return name
    if inspect.isfunction(evaluator) or inspect.ismethod(evaluator):
        return evaluator.__name__
    return type(evaluator).__name__


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """True for an ``async def`` function or method, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 -- a callable object's async __call__
    return call is not None and inspect.iscoroutinefunction(call)


async def invoke(fn: Callable[[Any], Any], is_async: bool, argument: object) -> Any:
    """``fn(argument)``: awaited when ``fn`` is async, else in a worker thread (as sync tools run),
    so a user's blocking evaluator or target never stalls the loop; a plain function that returns an
    awaitable has it awaited."""
    if is_async:
        return await fn(argument)
    result = await asyncio.to_thread(fn, argument)
    if inspect.isawaitable(result):
        result = await result
    return result


class PreparedEvaluator:
    """An evaluator made ready to run once (name, function, sync or async): awaiting it judges one
    request inside an ``evaluate <name>`` span and returns an ``EvaluationResult``."""

    __slots__ = ("_async", "_fn", "evaluator", "name")

    def __init__(self, evaluator: object) -> None:
        method = getattr(evaluator, "evaluate", None)
        fn = method if callable(method) else evaluator
        if not callable(fn):
            raise ChainConfigurationError(
                f"{evaluator!r} is not an evaluator: give an object with an evaluate(request) method, or "
                "a function fn(request) -> EvaluationResult | bool (sync or async)"
            )
        self.evaluator = evaluator
        self.name = evaluator_name(evaluator)
        self._fn: Callable[[EvaluationRequest], Any] = fn
        self._async = is_async_callable(fn)

    async def __call__(self, request: EvaluationRequest) -> EvaluationResult:
        if not obs.tracing_enabled():
            return await self._run(request)
        with obs.span(f"evaluate {self.name}", {"advisorchain.evaluator": self.name}) as s:
            result = await self._run(request)
            obs.record_evaluation(s, result.passed, result.score, result.feedback)
            return result

    async def _run(self, request: EvaluationRequest) -> EvaluationResult:
        return self._as_result(await invoke(self._fn, self._async, request), request)

    def _as_result(self, verdict: object, request: EvaluationRequest) -> EvaluationResult:
        if isinstance(verdict, EvaluationResult):
            return verdict
        if isinstance(verdict, bool):
            return EvaluationResult(passed=verdict)
        raise EvaluationFailedError(
            f"evaluator {self.name!r} returned {verdict!r}; an evaluator returns an EvaluationResult or a "
            "bool (a verdict that is neither is never counted as a pass)",
            results=(),
            answer=request.answer,
            response=None,
        )

    def __repr__(self) -> str:
        return f"PreparedEvaluator({self.evaluator!r})"


def prepare_evaluator(evaluator: object) -> PreparedEvaluator:
    """``evaluator`` ready to run (a PreparedEvaluator is returned as is); a ChainConfigurationError
    when it is neither an Evaluator nor a callable."""
    return evaluator if isinstance(evaluator, PreparedEvaluator) else PreparedEvaluator(evaluator)


def prepare_evaluators(evaluators: Iterable[object]) -> tuple[PreparedEvaluator, ...]:
    """Several evaluators ready to run; two with one name are a ChainConfigurationError (results are
    reported by name)."""
    prepared = tuple(prepare_evaluator(e) for e in evaluators)
    seen: set[str] = set()
    for p in prepared:
        if p.name in seen:
            raise ChainConfigurationError(
                f"two evaluators are named {p.name!r}; results are reported by name, so give each a "
                "distinct `name` attribute (or pass name=... to the built-in evaluators)"
            )
        seen.add(p.name)
    return prepared
