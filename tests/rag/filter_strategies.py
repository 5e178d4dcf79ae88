"""Hypothesis strategies for the filter language: any filter tree over given keys and values (the
parser's round trip and every store's translation are checked on them)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from advisorchain.rag.filters import And, Comparison, Filter, Membership, Not, NullCheck, Or


def filter_trees(keys: st.SearchStrategy[str], scalars: st.SearchStrategy[Any], *, max_leaves: int) -> st.SearchStrategy[Filter]:
    """Trees of comparisons, memberships and null checks on ``keys`` and ``scalars``, joined with
    and, or and not."""
    leaves = st.one_of(
        st.builds(Comparison, keys, st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), scalars),
        st.builds(Membership, keys, st.lists(scalars, max_size=3).map(tuple), st.booleans()),
        st.builds(NullCheck, keys, st.booleans()),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
        max_leaves=max_leaves,
    )
