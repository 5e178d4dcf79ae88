"""Every built-in store gives the same filter results as the Python evaluator (the reference), on
the same documents — hypothesis draws the filters. Parametrized over ``conftest.STORES``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisorchain.rag import Document, Filter, SearchRequest
from advisorchain.rag.filters import And, Comparison, Membership, Not, NullCheck, Or, matches

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
leaves = st.one_of(
    st.builds(Comparison, keys, st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), scalars),
    st.builds(Membership, keys, st.lists(scalars, max_size=3).map(tuple), st.booleans()),
    st.builds(NullCheck, keys, st.booleans()),
)
filters = st.recursive(
    leaves,
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=5,
)


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
