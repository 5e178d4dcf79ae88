"""The filter language: the parser, the builder, their text form, and the evaluator's truth table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain.rag import Filter, FilterSyntaxError, SearchRequest
from advisorchain.rag.filters import matches
from tests.rag.filter_strategies import filter_trees


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a == 1", Filter.eq("a", 1)),
        ("a != 'x'", Filter.ne("a", "x")),
        ('a > 1.5', Filter.gt("a", 1.5)),
        ("a >= -2", Filter.gte("a", -2)),
        ("a < 1e3", Filter.lt("a", 1000.0)),
        ("a <= true", Filter.lte("a", True)),
        ("a in ['x', 2, false]", Filter.in_("a", ["x", 2, False])),
        ("a nin [1]", Filter.nin("a", [1])),
        ("a NOT IN [1]", Filter.nin("a", [1])),
        ("a in []", Filter.in_("a", [])),
        ("a is null", Filter.is_null("a")),
        ("a IS NOT NULL", Filter.is_not_null("a")),
        ("source.kind == \"web\"", Filter.eq("source.kind", "web")),
        ("'odd key' == 1", Filter.eq("odd key", 1)),
        ("a == 1 AND b == 2", Filter.eq("a", 1) & Filter.eq("b", 2)),
        ("a == 1 && b == 2", Filter.eq("a", 1) & Filter.eq("b", 2)),
        ("a == 1 or b == 2", Filter.eq("a", 1) | Filter.eq("b", 2)),
        ("a == 1 || b == 2", Filter.eq("a", 1) | Filter.eq("b", 2)),
        ("NOT a == 1", ~Filter.eq("a", 1)),
        ("not (a == 1 or b == 2)", ~(Filter.eq("a", 1) | Filter.eq("b", 2))),
        ("a == 1 or b == 2 and c == 3", Filter.eq("a", 1) | (Filter.eq("b", 2) & Filter.eq("c", 3))),
        ("(a == 1 or b == 2) and c == 3", (Filter.eq("a", 1) | Filter.eq("b", 2)) & Filter.eq("c", 3)),
        ("a == 'it\\'s'", Filter.eq("a", "it's")),
        ("a == \"line\\nbreak\"", Filter.eq("a", "line\nbreak")),
        ("a == TRUE", Filter.eq("a", True)),
    ],
)
def test_the_parser_gives_the_builders_form(text: str, expected: Filter) -> None:
    assert Filter.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 1),
        ("a ==", 5),
        ("a === 1", 5),
        ("a == 1 and", 11),
        ("a in [1, 2", 11),
        ("(a == 1", 8),
        ("a == 'open", 6),
        ("and == 1", 1),
        ("a is nul", 6),
        ("a == 1 b == 2", 8),
        ("a == 99999999999999999999", 6),
        ("a ~ 1", 3),
        ("a not 1", 7),
    ],
)
def test_text_that_does_not_parse_names_the_position(text: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        Filter.parse(text)
    assert caught.value.position == position
    assert f"position {position}" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_search_request_parses_its_filter_when_built() -> None:
    assert SearchRequest("q", filter="a == 1").filter == Filter.eq("a", 1)
    with pytest.raises(ValueError, match="position 3"):
        SearchRequest("q", filter="a ! 1")


@pytest.mark.parametrize("bad", [{"top_k": 0}, {"top_k": -1}, {"similarity_threshold": 1.5}, {"similarity_threshold": -0.1}])
def test_a_search_request_refuses_bad_numbers(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SearchRequest("q", **bad)  # type: ignore[arg-type]


def test_the_builder_refuses_none_and_non_scalars() -> None:
    with pytest.raises(ValueError, match="is_null"):
        Filter.eq("a", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Filter.eq("a", [1])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Filter.gt("a", float("nan"))
    with pytest.raises(TypeError):
        Filter.eq("a", 1) & "b == 2"  # type: ignore[operator]


# -- the truth table ---------------------------------------------------------------------------------

DOC = {"s": "x", "n": 2, "f": 2.5, "b": True, "z": None, "l": [1, 2]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s == 'x'", True),
        ("n == 2.0", True),
        ("f > 2", True),
        ("b == true", True),
        ("b == 1", False),  # a bool is not a number
        ("n == true", False),
        ("s == 2", False),  # another type: false
        ("s != 2", True),
        ("missing == 1", False),
        ("missing != 1", True),
        ("missing < 1", False),
        ("missing in [1]", False),
        ("missing nin [1]", True),
        ("missing is null", True),
        ("z is null", True),
        ("z is not null", False),
        ("z == 1", False),
        ("l == 1", False),  # a list is none of the kinds
        ("l is not null", True),
        ("s in ['y', 'x']", True),
        ("n in ['2', 2]", True),
        ("not missing == 1", True),
        ("not (missing > 1)", True),
        ("s >= 'w' and s < 'y'", True),
    ],
)
def test_the_evaluator_follows_the_truth_table(text: str, expected: bool) -> None:
    assert matches(Filter.parse(text), DOC) is expected


# -- hypothesis: every filter's text form parses back to it; no text crashes the parser --------------

keys = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}(\.[a-z_]{1,4})?", fullmatch=True),
    st.text(min_size=1, max_size=8),
)
scalars = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
filters = filter_trees(keys, scalars, max_leaves=6)


@given(filters)
@settings(max_examples=300)
def test_the_text_form_parses_back_to_the_same_filter(node: Filter) -> None:
    assert Filter.parse(str(node)) == node


@given(st.text(alphabet=st.sampled_from(list("ab=!<>()[],'\" .-19andortiuslTRUE&|\\")), max_size=30))
@settings(max_examples=400)
def test_any_text_parses_or_raises_a_positioned_error(text: str) -> None:
    try:
        Filter.parse(text)
    except FilterSyntaxError as exc:
        assert 1 <= exc.position <= len(text) + 1
