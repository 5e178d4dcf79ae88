"""The filter language translated to SQL: one translator per database, walking the same nodes.

Every value — literals and metadata keys alike — is bound as a parameter, never spliced into the SQL.
A translated predicate is never SQL NULL (each test is wrapped in ``coalesce(..., 0)``), so ``not``
keeps two-valued logic and the truth table of ``evaluator`` holds in every database.

A backend subclasses ``SqlFilterTranslator`` and says how to test a key's kind and read its value;
``SQLiteFilterTranslator`` reads the JSON metadata column with ``json_type``/``json_extract``,
``PostgresFilterTranslator`` a ``jsonb`` column with ``jsonb_typeof`` and casts (each cast guarded by a
``CASE``, since PostgreSQL does not promise to evaluate ``AND`` left to right).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from decimal import Decimal
from typing import Any, ClassVar

from .evaluator import kind_of
from .nodes import And, Comparison, Filter, Membership, Not, NullCheck, Or, Scalar, chain, strip_nots

__all__ = [
    "PostgresFilterTranslator",
    "SQLiteFilterTranslator",
    "SqlFilterTranslator",
    "check_parameter_count",
    "exact_number",
]


class SqlFilterTranslator(ABC):
    """Turns a filter into ``(sql, params)``: a boolean SQL expression over one row's metadata,
    which ``column`` names (``metadata``, or ``d.metadata`` under a table alias).

    Subclasses give ``kind_test`` (the key holds a value of a kind), ``value_of`` (the key's value
    as a comparable SQL value), ``null_test`` (missing or None) and ``literal`` (a literal as bound).
    """

    placeholder: ClassVar[str] = "?"
    false: ClassVar[str] = "0"

    def __init__(self, column: str = "metadata") -> None:
        self.column = column

    def translate(self, node: Filter) -> tuple[str, list[Any]]:
        """The SQL expression for ``node`` and its parameters, in order."""
        params: list[Any] = []
        return self._node(node, params), params

    def _node(self, node: Filter, params: list[Any]) -> str:
        if isinstance(node, Comparison):
            if node.op == "!=":
                return f"NOT {self._compare(node.key, '=', node.value, params)}"
            op = "=" if node.op == "==" else node.op
            return self._compare(node.key, op, node.value, params)
        if isinstance(node, Membership):
            sql = self._membership(node, params)
            return f"NOT {sql}" if node.negated else sql
        if isinstance(node, NullCheck):
            sql = self.null_test(node.key, params)
            return f"NOT {sql}" if node.negated else sql
        if isinstance(node, And | Or):
            # A chain of any length, written as a balanced tree: the SQL nests log2(terms) deep, not
            # one level per term (SQLite refuses an expression over 1,000 levels deep).
            word = " AND " if isinstance(node, And) else " OR "
            return _balanced([self._node(operand, params) for operand in chain(node)], word)
        if isinstance(node, Not):
            nots, inner = strip_nots(node)  # never SQL NULL, so two nots cancel exactly
            sql = self._node(inner, params)
            return f"NOT {sql}" if nots % 2 else sql
        raise TypeError(f"not a filter node: {node!r}")

    def _compare(self, key: str, op: str, literal: Scalar, params: list[Any]) -> str:
        kind = kind_of(literal)
        assert kind is not None
        test = self.kind_test(key, kind, params)
        value = self.value_of(key, kind, params)
        params.append(self.literal(literal))
        return self.guard(test, f"{value} {op} {self.bound(kind)}")

    def _membership(self, node: Membership, params: list[Any]) -> str:
        groups: dict[str, list[Scalar]] = {}
        for v in node.values:
            kind = kind_of(v)
            assert kind is not None
            groups.setdefault(kind, []).append(v)
        if not groups:
            return self.false
        tests = []
        for kind, values in groups.items():
            test = self.kind_test(node.key, kind, params)
            value = self.value_of(node.key, kind, params)
            params.extend(self.literal(v) for v in values)
            marks = ", ".join(self.bound(kind) for _ in values)
            tests.append(self.guard(test, f"{value} IN ({marks})"))
        return tests[0] if len(tests) == 1 else "(" + " OR ".join(tests) + ")"

    # -- what a backend says ---------------------------------------------------------------------

    @abstractmethod
    def kind_test(self, key: str, kind: str, params: list[Any]) -> str:
        """SQL true when ``key`` holds a value of ``kind`` ("string", "number", "boolean"); it may be
        SQL NULL for a missing key (the caller coalesces)."""

    @abstractmethod
    def value_of(self, key: str, kind: str, params: list[Any]) -> str:
        """SQL for the value ``key`` holds, comparable with a bound literal of ``kind``."""

    @abstractmethod
    def null_test(self, key: str, params: list[Any]) -> str:
        """SQL true when ``key`` is missing or holds null, false otherwise (never SQL NULL)."""

    def literal(self, value: Scalar) -> Any:
        """``value`` as bound to a parameter."""
        return value

    def bound(self, kind: str) -> str:
        """The SQL for one bound literal of ``kind`` (a placeholder, with a cast where needed)."""
        return self.placeholder

    def guard(self, test: str, comparison: str) -> str:
        """``comparison`` where ``test`` (the key's kind) holds, else false; never SQL NULL."""
        return f"coalesce(({test} AND {comparison}), 0)"


def check_parameter_count(params: list[Any], extra: int, limit: int, database: str) -> list[Any]:
    """``params``, refused (ValueError) when they and ``extra`` more exceed the ``limit`` of bound
    parameters ``database`` takes in one statement: a filter that large is the caller's to split,
    not a failure of the store."""
    if len(params) + extra > limit:
        raise ValueError(
            f"the filter binds {len(params):,} values, over the {limit:,} parameters {database} takes in "
            "one query; use fewer terms or shorter in [...] lists, or split it into several searches"
        )
    return params


def _balanced(parts: list[str], word: str) -> str:
    """``parts`` joined by ``word`` in a balanced tree of parentheses, order kept (the parameters
    were bound in this order)."""
    while len(parts) > 1:
        paired = [f"({parts[i]}{word}{parts[i + 1]})" for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            paired.append(parts[-1])
        parts = paired
    return parts[0]


class SQLiteFilterTranslator(SqlFilterTranslator):
    """Filters over a JSON metadata column in SQLite (``json_type`` / ``json_extract``, the key's
    JSON path bound as a parameter)."""

    _KINDS: ClassVar[dict[str, str]] = {
        "string": "IN ('text')",
        "number": "IN ('integer', 'real')",
        "boolean": "IN ('true', 'false')",
    }

    @staticmethod
    def path(key: str) -> str:
        """The JSON path naming one flat key (dots, quotes and all kept literally)."""
        return "$." + json.dumps(key)

    def kind_test(self, key: str, kind: str, params: list[Any]) -> str:
        params.append(self.path(key))
        return f"json_type({self.column}, ?) {self._KINDS[kind]}"

    def value_of(self, key: str, kind: str, params: list[Any]) -> str:
        params.append(self.path(key))
        return f"json_extract({self.column}, ?)"

    def null_test(self, key: str, params: list[Any]) -> str:
        params.append(self.path(key))
        return f"(coalesce(json_type({self.column}, ?), 'null') = 'null')"

    def literal(self, value: Scalar) -> Any:
        if isinstance(value, bool):
            return int(value)  # json_extract gives true/false as 1/0
        return value


def exact_number(value: int | float) -> Decimal:
    """A metadata number as PostgreSQL's ``numeric`` holds it: an int exactly; an integral float
    exactly (past 2**53 its shortest text form is not its value); any other float by its shortest
    text form, between which and its value no integer lies. So int-float comparisons agree with
    Python's, and float-float ones keep their order."""
    if isinstance(value, float) and value.is_integer():
        return Decimal(int(value))
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


class PostgresFilterTranslator(SqlFilterTranslator):
    """Filters over a ``jsonb`` metadata column in PostgreSQL: the kind by ``jsonb_typeof``, values by
    casts run only under a ``CASE`` that checked the kind, strings compared byte-wise (``COLLATE
    "C"``, code-point order as Python), numbers as ``numeric``. Keys are bound parameters."""

    placeholder: ClassVar[str] = "%s"
    false: ClassVar[str] = "false"

    _VALUES: ClassVar[dict[str, str]] = {
        "string": '({column} ->> %s::text) COLLATE "C"',
        "number": "({column} -> %s::text)::numeric",
        "boolean": "({column} -> %s::text)::boolean",
    }
    _BOUND: ClassVar[dict[str, str]] = {
        "string": "%s::text",
        "number": "%s::numeric",
        "boolean": "%s::boolean",
    }

    def kind_test(self, key: str, kind: str, params: list[Any]) -> str:
        params.append(key)
        return f"jsonb_typeof({self.column} -> %s::text) = '{kind}'"

    def value_of(self, key: str, kind: str, params: list[Any]) -> str:
        params.append(key)
        return self._VALUES[kind].format(column=self.column)

    def null_test(self, key: str, params: list[Any]) -> str:
        params.append(key)
        return f"(coalesce(jsonb_typeof({self.column} -> %s::text), 'null') = 'null')"

    def literal(self, value: Scalar) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return exact_number(value)
        return value

    def bound(self, kind: str) -> str:
        return self._BOUND[kind]

    def guard(self, test: str, comparison: str) -> str:
        return f"(CASE WHEN {test} THEN coalesce({comparison}, false) ELSE false END)"
