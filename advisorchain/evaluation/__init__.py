"""Evaluation and self-refinement: evaluators (your own functions, LLM judges, expected answers), a
recursive advisor that judges each answer and asks again with the feedback, and offline evals over a
set of cases.

- ``api``: ``EvaluationRequest``, ``EvaluationResult``, the ``Evaluator`` protocol;
- ``judges``: ``LLMJudgeEvaluator``, ``RelevancyEvaluator``, ``FactCheckingEvaluator``;
- ``self_refine``: ``SelfRefineEvaluationAdvisor``;
- ``cases`` and ``offline``: ``Case``, ``ExpectedAnswerEvaluator``, ``evaluate_cases`` /
  ``aevaluate_cases`` and the ``EvaluationReport``.
"""

from ..errors import EvaluationFailedError
from .api import EvaluationRequest, EvaluationResult, Evaluator
from .cases import Case, CaseResult, EvaluationReport, EvaluatorTotals
from .judges import FactCheckingEvaluator, LLMJudgeEvaluator, RelevancyEvaluator
from .offline import ExpectedAnswerEvaluator, aevaluate_cases, evaluate_cases
from .self_refine import SelfRefineEvaluationAdvisor

__all__ = [  # by module, as imported above
    "EvaluationRequest",
    "EvaluationResult",
    "Evaluator",
    "EvaluationFailedError",
    "Case",
    "CaseResult",
    "EvaluationReport",
    "EvaluatorTotals",
    "FactCheckingEvaluator",
    "LLMJudgeEvaluator",
    "RelevancyEvaluator",
    "ExpectedAnswerEvaluator",
    "aevaluate_cases",
    "evaluate_cases",
    "SelfRefineEvaluationAdvisor",
]
