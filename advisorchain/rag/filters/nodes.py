"""The filter language's nodes: frozen values that the parser and the builder produce, and that
every store walks (the in-memory evaluator, one SQL translator per database).

Build a filter with ``Filter.eq("kind", "faq") & Filter.gte("year", 2023)`` or parse the portable text
form with ``Filter.parse('kind == "faq" and year >= 2023')``; ``str(filter)`` gives the text form back.

Long filters are fine: a chain of one operator (``a or b or c ...``, thousands of terms) and a run
of ``not``s are walked without recursion everywhere (the stores, ``str``, ``repr``, ``==``,
``hash``). What may not grow without bound is nesting: a filter nests at most ``MAX_DEPTH`` (64)
levels — levels of parentheses in the text, and in a tree the alternations of ``and``, ``or`` and
``not`` (a chain or a run counts once); ``check_depth`` raises a ValueError past it, and the parser a
``FilterSyntaxError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .parser import MAX_DEPTH, parse_with

__all__ = [
    "MAX_DEPTH",
    "And",
    "Comparison",
    "ComparisonOp",
    "Filter",
    "Membership",
    "Not",
    "NullCheck",
    "Or",
    "Scalar",
    "check_depth",
    "check_key",
    "check_value",
    "chain",
    "depth",
    "parse_filter",
    "strip_nots",
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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class And(Filter):
    """Both filters hold."""

    left: Filter
    right: Filter

    # Written, compared and hashed without recursion (the same for Or and Not).
    def __str__(self) -> str:
        return _text(self)

    def __repr__(self) -> str:
        return _repr(self)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other)

    def __hash__(self) -> int:
        return hash(_prefix(self))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Or(Filter):
    """Either filter holds."""

    left: Filter
    right: Filter

    def __str__(self) -> str:
        return _text(self)

    def __repr__(self) -> str:
        return _repr(self)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other)

    def __hash__(self) -> int:
        return hash(_prefix(self))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(Filter):
    """The filter does not hold."""

    operand: Filter

    def __str__(self) -> str:
        return _text(self)

    def __repr__(self) -> str:
        return _repr(self)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other)

    def __hash__(self) -> int:
        return hash(_prefix(self))


# -- walking without recursion -------------------------------------------------------------------


def chain(node: Filter) -> list[Filter]:
    """The operands of the chain of ``node``'s operator (And or Or) that starts at ``node``, left to
    right, however the chain is grouped: ``(a or b) or (c or d)`` gives ``[a, b, c, d]``. Any other
    node gives ``[node]``. Found without recursion, so a chain of thousands of terms is fine."""
    kind = type(node)
    if kind is not And and kind is not Or:
        return [node]
    operands: list[Filter] = []
    stack: list[Filter] = [node]
    while stack:
        current = stack.pop()
        if type(current) is kind:
            stack.append(current.right)
            stack.append(current.left)
        else:
            operands.append(current)
    return operands


def strip_nots(node: Filter) -> tuple[int, Filter]:
    """How many ``not``s ``node`` starts with, and the node under them."""
    count = 0
    while isinstance(node, Not):
        count += 1
        node = node.operand
    return count, node


def depth(node: Filter) -> int:
    """How deep ``node`` nests: 1 for a comparison, membership or null check; one more for each
    alternation of and / or / not above it (a chain of one operator, and a run of ``not``s, count once)."""
    deepest = 0
    stack: list[tuple[Filter, int]] = [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(current, Not):
            stack.append((strip_nots(current)[1], level + 1))
        elif isinstance(current, And | Or):
            stack.extend((operand, level + 1) for operand in chain(current))
    return deepest


def check_depth(node: Filter) -> Filter:
    """``node``, refused (ValueError) when it nests deeper than ``MAX_DEPTH`` levels (see ``depth``):
    every walker of a filter recurses once per level."""
    found = depth(node)
    if found > MAX_DEPTH:
        raise ValueError(
            f"the filter nests {found} levels deep (alternations of and, or, not); at most {MAX_DEPTH} "
            "are allowed: flatten it (a chain like a or b or c ... may be as long as you like)"
        )
    return node


_AND, _OR, _NOT = object(), object(), object()


def _prefix(node: Filter) -> tuple[Any, ...]:
    """The tree in prefix order (operators as markers, leaves as themselves): equal exactly when
    the trees are, built without recursion."""
    out: list[Any] = []
    stack: list[Filter] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, And | Or):
            out.append(_AND if isinstance(current, And) else _OR)
            stack.append(current.right)
            stack.append(current.left)
        elif isinstance(current, Not):
            out.append(_NOT)
            stack.append(current.operand)
        else:
            out.append(current)
    return tuple(out)


def _equal(node: Filter, other: object) -> bool:
    if not isinstance(other, Filter):
        return NotImplemented  # type: ignore[no-any-return]
    return type(node) is type(other) and _prefix(node) == _prefix(other)


def _render(node: Filter, expand: Any) -> str:
    """``node`` as text, without recursion: ``expand(n)`` gives a leaf's text, or the pieces (texts
    and nodes) an operator node is written as."""
    pieces: list[str] = []
    stack: list[Filter | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            pieces.append(item)
            continue
        expanded = expand(item)
        if isinstance(expanded, str):
            pieces.append(expanded)
        else:
            stack.extend(reversed(expanded))
    return "".join(pieces)


def _text_pieces(node: Filter) -> str | list[Filter | str]:
    if isinstance(node, Not):
        # a run of nots as "not not (x)": the text nests no deeper than the tree does
        return ["not ", node.operand] if isinstance(node.operand, Not) else ["not (", node.operand, ")"]
    if isinstance(node, And | Or):
        # a left-leaning chain (what the parser and the builder's & and | make) without inner
        # parentheses, so the text parses back to the same tree
        word = " and " if isinstance(node, And) else " or "
        kind = type(node)
        operands: list[Filter] = []
        current: Filter = node
        while type(current) is kind:
            operands.append(current.right)
            current = current.left
        operands.append(current)
        pieces: list[Filter | str] = ["("]
        for i, operand in enumerate(reversed(operands)):
            if i:
                pieces.append(word)
            pieces.append(operand)
        pieces.append(")")
        return pieces
    return str(node)


def _repr_pieces(node: Filter) -> str | list[Filter | str]:
    if isinstance(node, Not):
        return ["Not(operand=", node.operand, ")"]
    if isinstance(node, And | Or):
        return [f"{type(node).__name__}(left=", node.left, ", right=", node.right, ")"]
    return repr(node)


def _text(node: Filter) -> str:
    return _render(node, _text_pieces)


def _repr(node: Filter) -> str:
    return _render(node, _repr_pieces)


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
    ValueError naming the 1-based position, when it does not parse or nests deeper than
    ``MAX_DEPTH`` levels of parentheses; a ValueError when the tree nests deeper (``check_depth``)."""
    return check_depth(parse_with(text, _MAKE))
