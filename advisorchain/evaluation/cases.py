"""The values of offline evals: a ``Case`` to answer, a ``CaseResult`` per case, the
``EvaluatorTotals`` per evaluator, and the ``EvaluationReport`` that holds them — as a JSON-safe
dict (``to_dict``) or a rich table (``print``, ``table``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import ChainConfigurationError
from ..model import Usage
from .api import EvaluationResult, as_passages

__all__ = ["Case", "CaseResult", "EvaluationReport", "EvaluatorTotals"]


@dataclass(frozen=True, slots=True)
class Case:
    """One question of an offline eval: its ``name``, the ``question`` sent to the target, the
    ``expected`` answer (for ``ExpectedAnswerEvaluator`` and judges), supporting passages
    (``context``) and free ``metadata``."""

    name: str
    question: str
    expected: str | None = None
    context: Sequence[str] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ChainConfigurationError(f"a case needs a non-empty str name, got {self.name!r}")
        if not isinstance(self.question, str) or not self.question.strip():
            raise ChainConfigurationError(
                f"case {self.name!r} needs a non-blank str question, got {self.question!r}"
            )
        if self.expected is not None and not isinstance(self.expected, str):
            raise ChainConfigurationError(
                f"case {self.name!r}: expected must be a str or None, got {self.expected!r}"
            )
        object.__setattr__(self, "context", as_passages(self.context, f"case {self.name!r}: context"))
        if not isinstance(self.metadata, Mapping):
            raise ChainConfigurationError(
                f"case {self.name!r}: metadata must be a mapping, got {self.metadata!r}"
            )
        object.__setattr__(self, "metadata", dict(self.metadata))


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What one case gave: the target's ``answer``, each evaluator's result by evaluator name, how
    long the target took to answer (``duration_s``), the answer's ``usage`` (when the target is a
    ChatClient), the ``error`` of a target or evaluator that raised, and ``passed`` (no error and
    every result passed)."""

    case: Case
    answer: str | None
    results: Mapping[str, EvaluationResult]
    duration_s: float
    usage: Usage | None
    error: str | None
    passed: bool


@dataclass(frozen=True, slots=True)
class EvaluatorTotals:
    """One evaluator over a run: ``pass_rate`` (0..1; a case that failed with an error counts as not
    passed), ``mean_score`` over the results that have a score (None when none has), and ``cases``,
    the number of cases counted (a case it does not apply to — no ``expected`` for
    ``ExpectedAnswerEvaluator`` — is not counted; with none counted the pass rate is 0.0)."""

    pass_rate: float
    mean_score: float | None
    cases: int = 0


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """The outcome of ``evaluate_cases``: ``rows`` in case order, ``totals`` by evaluator name and
    ``passed_all``, the number of cases that passed every evaluator without error."""

    rows: tuple[CaseResult, ...]
    totals: Mapping[str, EvaluatorTotals]
    passed_all: int

    @property
    def failed(self) -> int:
        """The number of cases that did not pass."""
        return len(self.rows) - self.passed_all

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-safe data, with the same names (``rows``, ``totals``, ``passed_all``)."""
        return {
            "rows": [_row_dict(row) for row in self.rows],
            "totals": {name: dataclasses.asdict(t) for name, t in self.totals.items()},
            "passed_all": self.passed_all,
        }

    def print(self, file: TextIO | None = None) -> None:
        """Write the report as a table (rich) and a summary line (``3 of 4 cases passed``) to
        ``file`` (default: stdout)."""
        console = Console(file=file, highlight=False, soft_wrap=False)
        if not console.is_terminal:
            console.width = max(console.width, _FILE_WIDTH)  # a file or pipe: no 80-column crop
        console.print(self.table())
        n = len(self.rows)
        style = "green" if self.passed_all == n else "bold red"
        console.print(f"{self.passed_all} of {n} case{'s' if n != 1 else ''} passed", style=style)

    def table(self) -> Table:
        """The report as a rich ``Table``: a row per case (its verdict, each evaluator's mark and
        score, the answer's time, tokens and cost, the error or first failing feedback), the totals
        in the footer."""
        names = list(self.totals)
        table = Table(show_footer=True)
        table.add_column("case", footer="total")
        table.add_column("passed", justify="center", footer=f"{self.passed_all}/{len(self.rows)}")
        for name in names:
            table.add_column(name, justify="center", footer=_total(self.totals[name]))
        table.add_column("time", justify="right")
        table.add_column("tokens", justify="right")
        table.add_column("cost", justify="right")
        table.add_column("note", overflow="fold")
        for row in self.rows:
            table.add_row(
                row.case.name,
                Text(PASS, style="green") if row.passed else Text(FAIL, style="bold red"),
                *(_mark(row.results.get(name)) for name in names),
                f"{row.duration_s:.2f}s",
                str(row.usage.total_tokens) if row.usage is not None else NONE,
                _cost(row.usage),
                _note(row),
            )
        return table


PASS, FAIL, NONE = "✓", "✗", "—"
_NOTE_WIDTH = 90
_FILE_WIDTH = 120


def _shorten(text: str, width: int = _NOTE_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _mark(result: EvaluationResult | None) -> Text:
    if result is None:
        return Text(NONE, style="dim")
    score = f" {result.score:g}" if result.score is not None else ""
    return Text(f"{PASS if result.passed else FAIL}{score}", style="green" if result.passed else "red")


def _total(totals: EvaluatorTotals) -> str:
    mean = f", mean {totals.mean_score:.2f}" if totals.mean_score is not None else ""
    return f"{totals.pass_rate:.0%} of {totals.cases}{mean}"


def _cost(usage: Usage | None) -> str:
    """An answer's cost in USD, ``n/a`` when it is not known (an unpriced model, no usage)."""
    return "n/a" if usage is None or usage.cost is None else f"${usage.cost:f}"


def _note(row: CaseResult) -> str:
    if row.error is not None:
        return _shorten(row.error)
    for name, result in row.results.items():
        if not result.passed:
            return _shorten(f"{name}: {result.feedback}" if result.feedback else f"{name}: failed")
    return ""


def _row_dict(row: CaseResult) -> dict[str, Any]:
    case = row.case
    return {
        "case": {
            "name": case.name,
            "question": case.question,
            "expected": case.expected,
            "context": list(case.context),
            "metadata": json_safe(case.metadata),
        },
        "answer": row.answer,
        "results": {name: _result_dict(r) for name, r in row.results.items()},
        "duration_s": row.duration_s,
        "usage": _usage_dict(row.usage),
        "error": row.error,
        "passed": row.passed,
    }


def _result_dict(result: EvaluationResult) -> dict[str, Any]:
    return {
        "passed": result.passed,
        "score": json_safe(result.score),
        "feedback": result.feedback,
        "metadata": json_safe(result.metadata),
    }


def _usage_dict(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    counts = {f.name: json_safe(getattr(usage, f.name)) for f in dataclasses.fields(usage)}
    return {**counts, "total_tokens": usage.total_tokens}


def json_safe(value: Any) -> Any:
    """``value`` as JSON data: mappings (str keys), lists, str, int, finite floats, bools and None
    as they are; anything else (a Decimal, a date, an object) as its ``str``."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)
