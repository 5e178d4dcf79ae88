"""SelfRefineEvaluationAdvisor: an evaluator judges each answer; a rejected answer sends the rest of
the chain round again with the judgement's feedback (Spring AI's LLM-as-a-Judge guide).

It is a recursive advisor, as the tool loop and the validation advisor are: each attempt runs
``chain.copy(self)`` — by default the whole tool loop and the model — and only the answer it
accepts (or, when the attempts run out, the last one) goes back out; on the stream path each
attempt is held back, so a rejected answer never reaches the caller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Literal, TypeVar, get_args

from .._checks import check_int
from ..advisors.attempts import Attempt, accepted_answer, accepted_chunks, usage_of
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import SELF_REFINE_ORDER, AdvisorParams, check_order
from ..errors import ChainConfigurationError, EvaluationFailedError
from ..model import ChatClientRequest, ChatClientResponse, FinishReason, Usage, with_total_usage
from .api import EvaluationRequest, EvaluationResult, EvaluatorLike, as_passages, prepare_evaluator

__all__ = ["OnFailure", "SelfRefineEvaluationAdvisor"]

R = TypeVar("R")
OnFailure = Literal["return", "raise"]

_DEFAULT_FEEDBACK_TEMPLATE = (
    "Your previous answer was not accepted.\n"
    'Previous answer:\n"""\n{answer}\n"""\n'
    "Feedback on it: {feedback}\n"
    "Write a better answer to the question above that addresses this feedback."
)

_LIMIT = FinishReason.USAGE_LIMIT_EXCEEDED


class SelfRefineEvaluationAdvisor:
    """Evaluates each answer and, when it falls short, asks again with the evaluator's feedback.

    ``evaluator`` is any evaluator (an ``LLMJudgeEvaluator``, a ``RelevancyEvaluator``, your own
    object or function; §13). Each attempt calls the rest of the chain; a passing answer is returned.
    A failing one, while fewer than ``max_attempts`` answers were made, sends the ORIGINAL prompt
    again with ``"\\n" + feedback_template.format(feedback=..., answer=...)`` appended to its last
    user message (only the newest judgement). A response that still asks for tools (user-controlled
    tool mode) is passed through unevaluated.

    The returned response's context holds ``AdvisorParams.EVALUATIONS`` (one ``EvaluationResult``
    per attempt, in order) and its usage is the sum over the attempts. When the attempts run out,
    ``on_failure="return"`` returns the last answer, ``"raise"`` raises ``EvaluationFailedError``.
    An evaluator that fails (a judge's ``ModelError``, a verdict that does not parse) raises: no
    answer is returned unjudged.

    The default order sits inside a memory advisor and outside the tool loop, so every attempt runs
    the whole loop and memory stores only the answer returned.

    >>> judge = LLMJudgeEvaluator(judge_model)
    >>> client = ChatClient(model, default_advisors=[SelfRefineEvaluationAdvisor(judge)])
    """

    DEFAULT_ORDER: ClassVar[int] = SELF_REFINE_ORDER
    """``Ordered.HIGHEST_PRECEDENCE + 250``: inside memory (+200), outside the tool loop (+300)."""

    DEFAULT_FEEDBACK_TEMPLATE: ClassVar[str] = _DEFAULT_FEEDBACK_TEMPLATE
    """The text appended to the last user message on a retry: ``{answer}`` is the rejected answer,
    ``{feedback}`` the evaluator's feedback."""

    def __init__(
        self,
        evaluator: EvaluatorLike,
        max_attempts: int = 3,
        *,
        on_failure: OnFailure = "return",
        feedback_template: str = DEFAULT_FEEDBACK_TEMPLATE,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self._evaluator = prepare_evaluator(evaluator)
        if getattr(evaluator, "needs_expected", False):
            raise ChainConfigurationError(
                f"{self._evaluator.name!r} judges against an expected answer, which a live request does "
                "not have; use it in offline evals (evaluate_cases), or pick an evaluator such as "
                "LLMJudgeEvaluator here"
            )
        self.max_attempts = check_int(max_attempts, "max_attempts", minimum=1)
        """How many answers the advisor asks for at most."""
        if on_failure not in get_args(OnFailure):
            raise ChainConfigurationError(
                f"on_failure must be 'return' (the last answer) or 'raise' (EvaluationFailedError), "
                f"got {on_failure!r}"
            )
        self.on_failure: OnFailure = on_failure
        """What happens when every attempt was rejected: ``"return"`` or ``"raise"``."""
        self._feedback_template = _check_template(feedback_template)
        self.order = check_order(order, inside=True)

    @property
    def name(self) -> str:
        """``"Self Refine Evaluation Advisor"``."""
        return "Self Refine Evaluation Advisor"

    @property
    def evaluator(self) -> object:
        """The evaluator that judges each answer."""
        return self._evaluator.evaluator

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """Call the rest of the chain until an answer passes, at most ``max_attempts`` times."""
        return await accepted_answer(self._refine, request, chain.copy(self))

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Buffer each attempt; emit only the chunks of the answer returned (its last chunk carries
        the evaluations and the summed usage)."""
        return accepted_chunks(self._refine, request, chain.copy(self), with_context=True)

    async def _refine(self, request: ChatClientRequest, attempt: Attempt[R]) -> tuple[ChatClientResponse, R]:
        """The loop both paths share: run ``attempt``, judge its answer, retry with the feedback."""
        question = _question(request)
        results: list[EvaluationResult] = []
        usages: list[Usage | None] = []
        retry = request
        while True:
            response, extra = await attempt(retry)
            usages.append(usage_of(response))
            chat = response.chat_response
            if chat is not None and (chat.has_tool_calls() or chat.finish_reason == _LIMIT):
                # user-controlled tools: not an answer yet; a usage limit ended the run: no retry
                return _finished(response, usages, results), extra
            answer = chat.text if chat is not None else None
            result = await self._evaluator(
                EvaluationRequest(question, answer, _passages(request, response), retry.prompt.instructions)
            )
            results.append(result)
            if result.passed or len(results) >= self.max_attempts:
                break
            feedback = self._feedback_template.format(feedback=result.feedback, answer=answer or "")
            retry = request.copy(prompt=request.prompt.with_text_appended_to_last_user(feedback))
        final = _finished(response, usages, results)
        if not results[-1].passed and self.on_failure == "raise":
            raise self._exhausted(final, tuple(results))
        return final, extra

    def _exhausted(
        self, final: ChatClientResponse, results: tuple[EvaluationResult, ...]
    ) -> EvaluationFailedError:
        chat = final.chat_response
        n = len(results)
        last = results[-1].feedback
        return EvaluationFailedError(
            f"evaluator {self._evaluator.name!r} rejected all {n} answer{'s' if n > 1 else ''} "
            f"(max_attempts={self.max_attempts})" + (f"; last feedback: {last}" if last else ""),
            results=results,
            answer=chat.text if chat is not None else None,
            response=chat,
        )

    def __repr__(self) -> str:
        return (
            f"SelfRefineEvaluationAdvisor({self._evaluator.name}, max_attempts={self.max_attempts}, "
            f"on_failure={self.on_failure!r}, order={self.order})"
        )


def _check_template(template: object) -> str:
    """A feedback template that formats with ``feedback`` and ``answer`` alone."""
    if not isinstance(template, str):
        raise ChainConfigurationError(f"feedback_template must be a str, got {template!r}")
    try:
        template.format(feedback="", answer="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ChainConfigurationError(
            f"feedback_template {template!r} does not format with {{feedback}} and {{answer}} alone "
            f"({type(exc).__name__}: {exc}); write other braces as {{{{ and }}}}"
        ) from None
    return template


def _question(request: ChatClientRequest) -> str:
    user = request.prompt.last_user_message
    return user.text if user is not None else ""


def _passages(request: ChatClientRequest, response: ChatClientResponse) -> tuple[str, ...]:
    """The supporting passages under ``EVALUATION_CONTEXT``: put there by an advisor inside (they
    come back in the response's context) or outside (the request's)."""
    key = AdvisorParams.EVALUATION_CONTEXT
    found = response.context.get(key, request.context.get(key))
    return () if found is None else as_passages(found, f"the request context's {key!r}")


def _finished(
    response: ChatClientResponse, usages: list[Usage | None], results: list[EvaluationResult]
) -> ChatClientResponse:
    """The response handed back: the attempts' usage summed, the evaluations in its context."""
    total = response if len(usages) == 1 else with_total_usage(response, usages)
    context: Mapping[str, Any] = {**total.context, AdvisorParams.EVALUATIONS: tuple(results)}
    return total.copy(context=context)
