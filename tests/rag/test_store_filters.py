"""Every built-in store gives the same filter results as the Python evaluator (the reference), on
the same documents — hypothesis draws the filters. Parametrized over ``conftest.STORES``."""

from __future__ import annotations

import functools
import operator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisorchain.rag import Document, Filter, SearchRequest
from advisorchain.rag.filters import MAX_DEPTH, Comparison, FilterSyntaxError, Not, matches
from advisorchain.rag.filters.nodes import depth
from tests.rag.filter_strategies import filter_trees

KEYS = ["s", "n", "b", "z", "l", "source.kind", 'we"ird', "missing"]
VALUES: list[Any] = ["a", "b", "B", "é", "", "a b", 0, 1, 2, -1, 2.0, 2.5, 1e15, -0.5, 0.1, 1 / 3, 2**62 + 1, 5e-324, True, False, None, [1, "a"]]


def corpus() -> list[Document]:
    docs = []
    for i in range(48):
        metadata: dict[str, Any] = {}
        for j, key in enumerate(KEYS[:-1]):
            pick = (i * (j + 3) + j * 7) % (len(VALUES) + 3)
            if pick < len(VALUES):  # else the key is missing
                metadata[key] = VALUES[pick]
        docs.append(Document(f"document number {i} about topic {i % 5}", metadata, id=f"d{i}"))
    return docs


scalars = st.sampled_from([v for v in VALUES if v is not None and not isinstance(v, list)])
keys = st.sampled_from(KEYS)
filters = filter_trees(keys, scalars, max_leaves=5)


def expected_ids(node: Filter, docs: list[Document]) -> set[str]:
    return {d.id for d in docs if matches(node, d.metadata)}  # type: ignore[misc]


@pytest.fixture
def filled(store: Any) -> tuple[Any, list[Document]]:
    docs = corpus()
    store.add(docs)
    return store, docs


@given(node=filters)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_filtered_search_finds_exactly_the_matching_documents(filled: tuple[Any, list[Document]], node: Filter) -> None:
    store, docs = filled
    found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=node))
    assert {d.id for d in found} == expected_ids(node, docs)


@given(node=filters)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_text_form_filters_the_same(filled: tuple[Any, list[Document]], node: Filter) -> None:
    store, docs = filled
    found = store.similarity_search(SearchRequest("document", top_k=len(docs), filter=str(node)))
    assert {d.id for d in found} == expected_ids(node, docs)


@pytest.mark.parametrize(
    "text",
    [
        "n == 2",
        "n == 2.0",
        "n > 1 and n < 3",
        "s >= 'a'",
        "b == true",
        "b != true",
        "z is null",
        "l is not null",
        "\"source.kind\" in ['a', 1]",
        "source.kind nin ['a', 1]",
        "'we\"ird' is not null and not s == 'a'",
        "missing is null",
        "missing != 1",
    ],
)
def test_delete_by_filter_deletes_exactly_the_matching_documents(store: Any, text: str) -> None:
    docs = corpus()
    store.add(docs)
    wanted = expected_ids(Filter.parse(text), docs)
    assert store.delete(filter=text) == len(wanted)
    left = store.similarity_search(SearchRequest("document", top_k=100))
    assert {d.id for d in left} == {d.id for d in docs} - wanted


def test_a_filtered_search_returns_top_k_matching_documents_even_when_they_rank_last(store: Any) -> None:
    docs = [Document("alpha beta gamma " * 3, {"keep": False}, id=f"near{i}") for i in range(200)]
    docs += [Document("unrelated words entirely", {"keep": True}, id=f"far{i}") for i in range(3)]
    store.add(docs)
    found = store.similarity_search(SearchRequest("alpha beta gamma", top_k=5, filter="keep == true"))
    assert sorted(d.id for d in found) == ["far0", "far1", "far2"]
    found = store.similarity_search(SearchRequest("alpha beta gamma", top_k=2, filter=Filter.eq("keep", True)))
    assert len(found) == 2 and all(d.metadata["keep"] for d in found)


@pytest.mark.parametrize("key", ["a'; DROP TABLE x; --", 'b"); DELETE FROM documents; --', "c' OR '1'='1", "%s", "$1", "?"])
def test_a_key_with_sql_in_it_is_a_key_never_sql(store: Any, key: str) -> None:
    store.add([Document("one", {key: 1}, id="hit"), Document("two", {"other": 1}, id="miss")])
    for node in (Filter.eq(key, 1), Filter.parse(f"{_quoted(key)} == 1"), Filter.in_(key, [1, "x"])):
        found = store.similarity_search(SearchRequest("one two", top_k=5, filter=node))
        assert [d.id for d in found] == ["hit"]
    assert {d.id for d in store.similarity_search(SearchRequest("one two", top_k=5, filter=Filter.ne(key, 1)))} == {"miss"}
    assert store.delete(filter=Filter.is_not_null(key)) == 1
    assert [d.id for d in store.similarity_search(SearchRequest("one two", top_k=5))] == ["miss"]


def _quoted(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


BIG = [2**53, 2**53 + 1, 2**62 + 1, -(2**62) - 1, float(2**53), float(2**62), -float(2**62), 1e19, 9007199254740993.0, 0.1, 0.30000000000000004]


@pytest.mark.parametrize("literal", BIG)
@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_numbers_compare_exactly_across_int_and_float(store: Any, literal: int | float, op: str) -> None:
    docs = [Document(f"number {i}", {"v": v}, id=f"n{i}") for i, v in enumerate(BIG)]
    store.add(docs)
    node = Comparison("v", op, literal)  # type: ignore[arg-type]
    found = store.similarity_search(SearchRequest("number", top_k=50, filter=node))
    assert {d.id for d in found} == expected_ids(node, docs)
    stored = store.similarity_search(SearchRequest("number", top_k=50))
    assert {d.id: repr(d.metadata["v"]) for d in stored} == {d.id: repr(d.metadata["v"]) for d in docs}


# -- hardening (issue 37): long chains, deep nesting, the parameter limit, NUL ids -----------------


def _or_chain_text(terms: int) -> str:
    return " or ".join(f"n == {i}" for i in range(terms)) + " or s == 'a'"


def test_a_thousand_or_terms_work_on_every_store(filled: tuple[Any, list[Document]]) -> None:
    store, docs = filled
    text = _or_chain_text(1000)
    built = functools.reduce(operator.or_, [Filter.eq("n", i) for i in range(1000)]) | Filter.eq("s", "a")
    assert Filter.parse(text) == built and hash(Filter.parse(text)) == hash(built)
    assert Filter.parse(str(built)) == built and repr(built).startswith("Or(left=Or(left=")
    wanted = expected_ids(built, docs)
    assert wanted  # the filter selects some documents and leaves others
    assert wanted != {d.id for d in docs}

    for form in (text, built):
        found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=form))
        assert {d.id for d in found} == wanted
    right_deep = functools.reduce(lambda acc, f: f | acc, reversed([Filter.eq("n", i) for i in range(1000)]))
    found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=right_deep))
    assert {d.id for d in found} == expected_ids(right_deep, docs)
    assert store.delete(filter=text) == len(wanted)


def test_three_thousand_nots_work_on_every_store(filled: tuple[Any, list[Document]]) -> None:
    store, docs = filled
    text = "not " * 3000 + "(n == 2)"
    built = Filter.eq("n", 2)
    for _ in range(3001):
        built = ~built
    assert Filter.parse(text) == functools.reduce(lambda f, _: ~f, range(3000), Filter.eq("n", 2))
    assert len(str(built)) < 3001 * 5 + 20 and Filter.parse(str(built)) == built

    found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=text))
    assert {d.id for d in found} == expected_ids(Filter.eq("n", 2), docs)
    found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=built))
    assert {d.id for d in found} == {d.id for d in docs} - expected_ids(Filter.eq("n", 2), docs)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 3000])
def test_nesting_past_the_documented_depth_is_a_value_error_never_a_recursion_error(
    store: Any, levels: int
) -> None:
    parenthesized = "(" * levels + "n == 2" + ")" * levels
    with pytest.raises(FilterSyntaxError, match=f"nest deeper than {MAX_DEPTH} levels"):
        store.similarity_search(SearchRequest("document", filter=parenthesized))
    nested_nots = "not (" * levels + "n == 2" + ")" * levels
    with pytest.raises(FilterSyntaxError, match=f"nest deeper than {MAX_DEPTH} levels"):
        Filter.parse(nested_nots)
    alternating: Filter = Filter.eq("n", 2)
    for i in range(levels):
        alternating = ~(alternating & Filter.eq("s", "a")) if i % 2 else alternating | Filter.eq("b", True)
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH}"):
        store.similarity_search(SearchRequest("document", filter=alternating))
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH}"):
        store.delete(filter=alternating)


def test_the_deepest_allowed_filter_works_on_every_store(filled: tuple[Any, list[Document]]) -> None:
    store, docs = filled
    text = "(" * MAX_DEPTH + "n == 2" + ")" * MAX_DEPTH
    node: Filter = Filter.eq("n", 2)
    while depth(node) < MAX_DEPTH:  # not, and, not, and, ...: one level each
        node = node & Filter.eq("s", "a") if isinstance(node, Not) else ~node
    assert depth(node) == MAX_DEPTH
    for form in (text, node):
        found = store.similarity_search(SearchRequest("document topic", top_k=len(docs), filter=form))
        assert {d.id for d in found} == expected_ids(
            Filter.parse(form) if isinstance(form, str) else form, docs
        )


def test_a_filter_past_the_databases_parameter_limit_is_a_value_error_naming_it(
    make_store: Any, words_model: Any
) -> None:
    store = make_store(words_model)
    store.add(corpus())
    huge = Filter.in_("s", [f"v{i}" for i in range(70_000)])
    if make_store.kind == "memory":  # no parameters to bind: it simply works
        assert store.similarity_search(SearchRequest("document", filter=huge)) == []
        return
    limit = "65,535 parameters PostgreSQL" if make_store.kind == "postgres" else "parameters SQLite"
    with pytest.raises(ValueError, match=limit):
        store.similarity_search(SearchRequest("document", filter=huge))
    with pytest.raises(ValueError, match=limit):
        store.delete(filter=huge)
    assert len(store.similarity_search(SearchRequest("document", top_k=100))) == 48  # nothing deleted


def test_a_nul_in_a_document_id_is_a_value_error_on_every_store(store: Any) -> None:
    with pytest.raises(ValueError, match="NUL"):
        store.add([Document("text", id="a\0b")])
    store.add([Document("text", id="ab")])
    with pytest.raises(ValueError, match="NUL"):
        store.delete(ids=["a\0b"])
    assert store.delete(ids=["ab"]) == 1
