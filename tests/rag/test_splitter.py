"""TextSplitter: exact offsets, cuts at paragraphs, then sentences, then words, never inside a word,
bounded overlap — checked on hypothesis-drawn texts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain.rag import Document, TextSplitter
from advisorchain.rag.documents import document_id


def test_chunks_keep_metadata_and_say_where_they_came_from() -> None:
    source = Document("First paragraph here.\n\nSecond paragraph there.", {"path": "a.md"})
    chunks = TextSplitter(chunk_size=6, chunk_overlap=0).split([source])
    assert [c.text for c in chunks] == ["First paragraph here.", "Second paragraph there."]
    assert chunks[1].metadata == {
        "path": "a.md",
        "source_id": document_id(source.text, source.metadata),
        "chunk_index": 1,
        "start": 23,
        "end": 46,
    }
    assert all(c.id is None for c in chunks)


def test_the_source_id_is_the_sources_own_id_when_it_has_one() -> None:
    [chunk] = TextSplitter().split([Document("short", id="guide")])
    assert chunk.metadata["source_id"] == "guide"


def test_a_paragraph_end_is_preferred_to_a_sentence_end_and_a_sentence_end_to_a_word() -> None:
    text = "One two three four five six. Seven eight nine.\n\nTen eleven twelve thirteen fourteen."
    spans = TextSplitter(chunk_size=14, chunk_overlap=0).spans(text)
    assert text[spans[0][0] : spans[0][1]] == "One two three four five six. Seven eight nine."
    sentence = "Alpha beta gamma delta. Epsilon zeta eta theta iota kappa lambda"
    first = TextSplitter(chunk_size=10, chunk_overlap=0).spans(sentence)[0]
    assert sentence[first[0] : first[1]] == "Alpha beta gamma delta."


def test_a_word_longer_than_a_chunk_is_a_chunk_of_its_own() -> None:
    text = "short " + "x" * 50 + " tail"
    chunks = [text[s:e] for s, e in TextSplitter(chunk_size=3, chunk_overlap=1).spans(text)]
    assert "x" * 50 in chunks


def test_consecutive_chunks_overlap() -> None:
    text = " ".join(f"w{i}" for i in range(200))
    spans = TextSplitter(chunk_size=20, chunk_overlap=5).spans(text)
    assert all(b[0] < a[1] for a, b in itertools.pairwise(spans))


@pytest.mark.parametrize(("size", "overlap"), [(10, 10), (10, 11), (0, 0), (5, -1)])
def test_bad_sizes_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        TextSplitter(chunk_size=size, chunk_overlap=overlap)


def test_empty_and_blank_texts_have_no_chunks() -> None:
    assert TextSplitter().split([Document(""), Document(" \n\n\t ")]) == []


words = st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp", "Cs")), min_size=1, max_size=30)
separators = st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", ".\n\n", "\t", " \n \n"])
texts = st.lists(st.tuples(words, separators), max_size=120).map(lambda parts: "".join(w + s for w, s in parts))


@given(text=texts, size=st.integers(1, 40), overlap_ratio=st.floats(0, 0.95))
@settings(max_examples=300, deadline=None)
def test_offsets_are_exact_and_chunks_respect_words_sizes_and_overlap(text: str, size: int, overlap_ratio: float) -> None:
    overlap = min(int(size * overlap_ratio), size - 1)
    splitter = TextSplitter(chunk_size=size, chunk_overlap=overlap)
    chunks = splitter.split([Document(text, {"k": 1})])
    limit, overlap_chars = size * 4, overlap * 4
    covered = [False] * len(text)
    previous = None
    for index, chunk in enumerate(chunks):
        start, end = chunk.metadata["start"], chunk.metadata["end"]
        assert text[start:end] == chunk.text
        assert chunk.metadata["chunk_index"] == index and chunk.metadata["k"] == 1
        assert chunk.text and not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert start == 0 or text[start - 1].isspace()  # never starts inside a word
        assert end == len(text) or text[end].isspace()  # never ends inside a word
        assert len(chunk.text) <= limit or len(chunk.text.split()) == 1
        if previous is not None:
            assert start > previous[0] and end > previous[1]
            assert max(0, previous[1] - start) <= overlap_chars
        for i in range(start, end):
            covered[i] = True
        previous = (start, end)
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())  # every word is in a chunk


def test_a_run_of_non_space_characters_past_the_cap_is_cut_into_chunk_size_pieces() -> None:
    """Issue 37: a 5 MB file of one "word" was one 5 MB chunk (about 20 minutes of local embedding)."""
    blob = "QUJD" * 1_250_000  # 5 MB of base64, no space
    text = "intro words\n\n" + blob + " tail"
    splitter = TextSplitter(chunk_size=800, chunk_overlap=100)

    spans = splitter.spans(text)

    pieces = [text[s:e] for s, e in spans]
    assert max(len(p) for p in pieces) <= 800 * 4
    assert "".join(p for p in pieces if p.startswith(("QUJD", "UJD", "JD", "D")))[: len(blob)] == blob
    assert pieces[0] == "intro words" and pieces[-1].endswith("tail")
    assert len(spans) == 5_000_000 // 3200 + 2  # nothing overlaps inside the blob
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans[1:-1]))


def test_a_word_up_to_the_cap_stays_whole() -> None:
    word = "y" * TextSplitter.MAX_WORD_CHARS
    text = f"a {word} b"
    assert word in [text[s:e] for s, e in TextSplitter(chunk_size=3, chunk_overlap=1).spans(text)]
    longer = word + "y"
    pieces = [
        f"a {longer} b"[s:e] for s, e in TextSplitter(chunk_size=3, chunk_overlap=1).spans(f"a {longer} b")
    ]
    assert longer not in pieces and max(len(p) for p in pieces) == 3 * 4  # chunk-size pieces


class _SmallCap(TextSplitter):
    MAX_WORD_CHARS = 40


@given(
    text=st.lists(st.tuples(st.text("ab.", min_size=1, max_size=120), separators), max_size=40).map(
        lambda parts: "".join(w + s for w, s in parts)
    ),
    size=st.integers(1, 30),
    overlap_ratio=st.floats(0, 0.95),
)
@settings(max_examples=300, deadline=None)
def test_past_the_cap_no_chunk_is_longer_than_the_cap_and_every_character_is_kept(
    text: str, size: int, overlap_ratio: float
) -> None:
    overlap = min(int(size * overlap_ratio), size - 1)
    splitter = _SmallCap(chunk_size=size, chunk_overlap=overlap)
    covered = [False] * len(text)
    previous = None
    for chunk in splitter.split([Document(text)]):
        start, end = chunk.metadata["start"], chunk.metadata["end"]
        assert text[start:end] == chunk.text
        assert len(chunk.text) <= max(size * 4, _SmallCap.MAX_WORD_CHARS)
        if previous is not None:
            assert start > previous[0] and end > previous[1]
        for i in range(start, end):
            covered[i] = True
        previous = (start, end)
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
