"""The portable filter language: one parser, frozen nodes, and one backend per store (the Python
evaluator for in-memory stores, a SQL translator per database)."""

from .evaluator import kind_of, matches
from .nodes import And, Comparison, Filter, Membership, Not, NullCheck, Or, Scalar, check_depth, parse_filter
from .parser import MAX_DEPTH, FilterSyntaxError
from .sql import PostgresFilterTranslator, SqlFilterTranslator, SQLiteFilterTranslator

__all__ = [
    "MAX_DEPTH",
    "And",
    "Comparison",
    "Filter",
    "FilterSyntaxError",
    "Membership",
    "Not",
    "NullCheck",
    "Or",
    "PostgresFilterTranslator",
    "SQLiteFilterTranslator",
    "Scalar",
    "SqlFilterTranslator",
    "as_filter",
    "check_depth",
    "kind_of",
    "matches",
    "parse_filter",
]


def as_filter(value: str | Filter | None) -> Filter | None:
    """A filter from its text or builder form (None stays None); text that does not parse raises
    ``FilterSyntaxError``, a ValueError naming the position; a filter nesting deeper than
    ``MAX_DEPTH`` levels is a ValueError too (``check_depth``)."""
    if value is None:
        return value
    if isinstance(value, Filter):
        return check_depth(value)
    if isinstance(value, str):
        return parse_filter(value)
    raise TypeError(f"a filter must be a str, a Filter or None, got {value!r}")
