"""The filter language's nodes: frozen values that the parser and the builder produce, and that
every store walks (the in-memory evaluator, one SQL translator per database).

Build a filter with ``Filter.eq("kind", "faq") & Filter.gte("year", 2023)`` or parse the portable text
form with ``Filter.parse('kind == "faq" and year >= 2023')``; ``str(filter)`` gives the text form back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .parser import parse_with

__all__ = [
    "And",
    "Comparison",
    "ComparisonOp",
    "Filter",
    "Membership",
    "Not",
    "NullCheck",
    "Or",
    "Scalar",
    "check_key",
    "check_value",
    "parse_filter",
]

Scalar: TypeAlias = str | int | float | bool
"""A literal a filter compares with."""

ComparisonOp = Literal["==", "!=", ">", ">=", "<", "<="]

_INT64 = (-(2**63), 2**63 - 1)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_KEYWORDS = frozenset({"and", "or", "not", "in", "nin", "is", "null", "true", "false"})


def check_key(key: object) -> str:
    """A metadata key: a non-empty str."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"a filter key must be a non-empty str, got {key!r}")
    return key


def check_value(value: object, key: str) -> Scalar:
    """A literal: a str, a 64-bit int, a finite float or a bool (None is tested with is_null)."""
    if value is None:
        raise ValueError(
            f"a filter cannot compare {key!r} with None; use Filter.is_null({key!r}) "
            f"(text: {key} is null) or is_not_null"
        )
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"the filter value {value} for {key!r} is outside the 64-bit integer range")
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError(f"a filter value for {key!r} must be a str, int, finite float or bool, got {value!r}")


def _render_key(key: str) -> str:
    if _PLAIN_KEY.match(key) and key.split(".")[0].lower() not in _KEYWORDS:
        return key
    return _render_string(key)


def _render_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _render_value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _render_string(value)
    return repr(value)


class Filter:
    """A filter on document metadata: a comparison, a membership or null test, or ``&``, ``|``,
    ``~`` of filters. Nodes are frozen and compare by value."""

    __slots__ = ()

    def __and__(self, other: Filter) -> Filter:
        return And(self, _as_filter(other))

    def __or__(self, other: Filter) -> Filter:
        return Or(self, _as_filter(other))

    def __invert__(self) -> Filter:
        return Not(self)

    @staticmethod
    def parse(text: str) -> Filter:
        """The filter that ``text`` (the portable expression language) describes; ValueError with
        the 1-based position where it does not parse."""
        return parse_filter(text)

    @staticmethod
    def eq(key: str, value: Scalar) -> Filter:
        """``key == value``."""
        return Comparison(key, "==", value)

    @staticmethod
    def ne(key: str, value: Scalar) -> Filter:
        """``key != value`` (true when the key is missing or holds another type)."""
        return Comparison(key, "!=", value)

    @staticmethod
    def gt(key: str, value: Scalar) -> Filter:
        """``key > value``."""
        return Comparison(key, ">", value)

    @staticmethod
    def gte(key: str, value: Scalar) -> Filter:
        """``key >= value``."""
        return Comparison(key, ">=", value)

    @staticmethod
    def lt(key: str, value: Scalar) -> Filter:
        """``key < value``."""
        return Comparison(key, "<", value)

    @staticmethod
    def lte(key: str, value: Scalar) -> Filter:
        """``key <= value``."""
        return Comparison(key, "<=", value)

    @staticmethod
    def in_(key: str, values: Iterable[Scalar]) -> Filter:
        """``key in [values...]``."""
        return Membership(key, tuple(values))

    @staticmethod
    def nin(key: str, values: Iterable[Scalar]) -> Filter:
        """``key nin [values...]`` (true when the key is missing or holds another type)."""
        return Membership(key, tuple(values), negated=True)

    @staticmethod
    def is_null(key: str) -> Filter:
        """``key is null``: the key is missing or holds None."""
        return NullCheck(key)

    @staticmethod
    def is_not_null(key: str) -> Filter:
        """``key is not null``."""
        return NullCheck(key, negated=True)


def _as_filter(value: object) -> Filter:
    if isinstance(value, Filter):
        return value
    raise TypeError(f"filters combine with filters only, got {value!r}")


@dataclass(frozen=True, slots=True)
class Comparison(Filter):
    """``key <op> value``: true only when the key holds a value of the literal's type (numbers are
    one type, int or float) that compares so."""

    key: str
    op: ComparisonOp
    value: Scalar

    def __post_init__(self) -> None:
        check_key(self.key)
        if self.op not in ("==", "!=", ">", ">=", "<", "<="):
            raise ValueError(f"unknown comparison operator {self.op!r}")
        check_value(self.value, self.key)

    def __str__(self) -> str:
        return f"{_render_key(self.key)} {self.op} {_render_value(self.value)}"


@dataclass(frozen=True, slots=True)
class Membership(Filter):
    """``key in [...]`` (``negated``: ``nin``)."""

    key: str
    values: tuple[Scalar, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        check_key(self.key)
        if isinstance(self.values, str) or not isinstance(self.values, Iterable):
            raise ValueError(
                f"the values of an in/nin filter on {self.key!r} must be a list, got {self.values!r}"
            )
        values = tuple(self.values)
        for v in values:
            check_value(v, self.key)
        object.__setattr__(self, "values", values)

    def __str__(self) -> str:
        listed = ", ".join(_render_value(v) for v in self.values)
        return f"{_render_key(self.key)} {'nin' if self.negated else 'in'} [{listed}]"


@dataclass(frozen=True, slots=True)
class NullCheck(Filter):
    """``key is null`` (missing or None; ``negated``: ``is not null``)."""

    key: str
    negated: bool = False

    def __post_init__(self) -> None:
        check_key(self.key)

    def __str__(self) -> str:
        return f"{_render_key(self.key)} is {'not ' if self.negated else ''}null"


@dataclass(frozen=True, slots=True)
class And(Filter):
    """Both filters hold."""

    left: Filter
    right: Filter

    def __str__(self) -> str:
        return f"({self.left} and {self.right})"


@dataclass(frozen=True, slots=True)
class Or(Filter):
    """Either filter holds."""

    left: Filter
    right: Filter

    def __str__(self) -> str:
        return f"({self.left} or {self.right})"


@dataclass(frozen=True, slots=True)
class Not(Filter):
    """The filter does not hold."""

    operand: Filter

    def __str__(self) -> str:
        return f"not ({self.operand})"


class _Make:
    """The parser's node factory."""

    def comparison(self, key: str, op: str, value: Any) -> Filter:
        return Comparison(key, op, value)  # type: ignore[arg-type]

    def membership(self, key: str, values: tuple[Any, ...], negated: bool) -> Filter:
        return Membership(key, values, negated)

    def null_check(self, key: str, negated: bool) -> Filter:
        return NullCheck(key, negated)

    def and_(self, left: Filter, right: Filter) -> Filter:
        return And(left, right)

    def or_(self, left: Filter, right: Filter) -> Filter:
        return Or(left, right)

    def not_(self, operand: Filter) -> Filter:
        return Not(operand)


_MAKE = _Make()


def parse_filter(text: str) -> Filter:
    """The filter ``text`` describes (the portable expression language); ``FilterSyntaxError``, a
    ValueError naming the 1-based position, when it does not parse."""
    return parse_with(text, _MAKE)
