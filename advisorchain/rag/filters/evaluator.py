"""The filter language evaluated in Python, on a document's metadata (the in-memory store's backend).

The rules every backend follows (the SQL translators produce the same truth table):

- a value is one of four kinds: string, number (int or float, never bool), boolean, null; a list or
  a missing key is none of them;
- ``==``, ``<``, ``<=``, ``>``, ``>=`` and ``in`` hold only when the key holds a value of the
  literal's kind that compares so; ``!=`` and ``nin`` are their exact negations (so they hold for a
  missing key or a value of another kind);
- ``is null`` holds for a missing key or a None value; ``is not null`` is its negation;
- ``and``, ``or`` and ``not`` are plain two-valued logic.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from .nodes import And, Comparison, Filter, Membership, Not, NullCheck, Or, Scalar, chain, strip_nots

__all__ = ["kind_of", "matches"]

_MISSING = object()

_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def kind_of(value: object) -> str | None:
    """The kind a filter compares by: "string", "number", "boolean", "null", or None (a list, a
    missing key, anything else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _compares(value: object, op: str, literal: Scalar) -> bool:
    if kind_of(value) != kind_of(literal):
        return False
    return bool(_ORDERING[op](value, literal))


def matches(node: Filter, metadata: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies the filter ``node``. A chain of one operator and a run of
    ``not``s are walked without recursion; the recursion is as deep as ``nodes.depth(node)``."""
    if isinstance(node, Comparison):
        value = metadata.get(node.key, _MISSING)
        if node.op == "!=":
            return not _compares(value, "==", node.value)
        return _compares(value, node.op, node.value)
    if isinstance(node, Membership):
        value = metadata.get(node.key, _MISSING)
        found = any(_compares(value, "==", v) for v in node.values)
        return not found if node.negated else found
    if isinstance(node, NullCheck):
        is_null = metadata.get(node.key) is None
        return not is_null if node.negated else is_null
    if isinstance(node, And):  # a chain of any length; recursion only where the operator changes
        return all(matches(operand, metadata) for operand in chain(node))
    if isinstance(node, Or):
        return any(matches(operand, metadata) for operand in chain(node))
    if isinstance(node, Not):
        nots, inner = strip_nots(node)
        return matches(inner, metadata) != (nots % 2 == 1)
    raise TypeError(f"not a filter node: {node!r}")
