"""TextSplitter: documents cut into chunks of about ``chunk_size`` tokens (4 characters a token),
at paragraph ends first, then sentence ends, then between words — never inside a word of up to
``TextSplitter.MAX_WORD_CHARS`` characters.

Every chunk records where it came from: ``source_id``, ``chunk_index`` and the character offsets
``start``/``end`` in the source text, so ``source.text[start:end] == chunk.text`` always holds.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from .._checks import check_int
from .documents import Document, document_id

__all__ = ["CHARS_PER_TOKEN", "TextSplitter"]

CHARS_PER_TOKEN = 4
"""How tokens are counted here and in ContextCompactionAdvisor: 4 characters a token."""

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\Z")


@dataclass(frozen=True, slots=True)
class _Words:
    """A text's words (maximal runs of non-space characters) and the quality of each word end as a
    place to cut: 3 a paragraph end, 2 a sentence end, 1 any other word end."""

    starts: list[int]
    ends: list[int]
    quality: list[int]

    @classmethod
    def of(cls, text: str, max_word: int, piece: int) -> _Words:
        """The words of ``text``; a word longer than ``max_word`` characters is cut into pieces of
        ``piece`` characters (each piece a word of its own, but for the place to cut)."""
        starts, ends = [], []
        for match in _WORD.finditer(text):
            start, end = match.span()
            if end - start > max_word:
                for cut in range(start, end, piece):
                    starts.append(cut)
                    ends.append(min(cut + piece, end))
            else:
                starts.append(start)
                ends.append(end)
        quality = []
        for i, end in enumerate(ends):
            gap = text[end : starts[i + 1]] if i + 1 < len(starts) else "\n\n"
            if gap.count("\n") >= 2:
                quality.append(3)
            elif _SENTENCE_END.search(text[starts[i] : end]):
                quality.append(2)
            else:
                quality.append(1)
        return cls(starts, ends, quality)


class TextSplitter:
    """Cuts documents into chunks of at most ``chunk_size`` tokens, consecutive chunks of a source
    overlapping by at most ``chunk_overlap`` tokens (4 characters a token). A single word longer
    than a chunk is a chunk of its own, up to ``MAX_WORD_CHARS`` characters: a longer run of
    non-space characters (base64, minified code, a file of one "word") is not a word but data, and
    is cut into pieces of the chunk's size, so no chunk is longer than
    ``max(chunk_size * 4, MAX_WORD_CHARS)`` characters.

    >>> chunks = TextSplitter(chunk_size=200, chunk_overlap=20).split([Document(text, {"path": "a.md"})])
    """

    MAX_WORD_CHARS: ClassVar[int] = 10_000
    """The longest word kept whole in a chunk of its own (a longer one is cut into chunk-size pieces)."""

    def __init__(self, chunk_size: int = 800, chunk_overlap: int = 100) -> None:
        check_int(chunk_size, "chunk_size", minimum=1)
        check_int(chunk_overlap, "chunk_overlap", minimum=0)
        if chunk_overlap >= chunk_size:
            raise ValueError(
                f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size}), "
                "or no chunk would move forward"
            )
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    def split(self, documents: Iterable[Document]) -> list[Document]:
        """Every document's chunks, in order; each keeps its source's metadata plus ``source_id``,
        ``chunk_index``, ``start`` and ``end``."""
        if isinstance(documents, Document):
            raise TypeError("split() takes a list of Documents, not one Document: pass [document]")
        chunks: list[Document] = []
        for doc in documents:
            if not isinstance(doc, Document):
                raise TypeError(f"split() takes Documents, got {type(doc).__name__}: {doc!r}")
            source_id = doc.id if doc.id is not None else document_id(doc.text, doc.metadata)
            for index, (start, end) in enumerate(self.spans(doc.text)):
                metadata = {
                    **doc.metadata,
                    "source_id": source_id,
                    "chunk_index": index,
                    "start": start,
                    "end": end,
                }
                chunks.append(Document(doc.text[start:end], metadata))
        return chunks

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` character offsets of the chunks of ``text``."""
        size = self.chunk_size * CHARS_PER_TOKEN
        words = _Words.of(text, max(size, self.MAX_WORD_CHARS), size)
        if not words.starts:
            return []
        overlap = self.chunk_overlap * CHARS_PER_TOKEN
        spans: list[tuple[int, int]] = []
        first = 0  # index of the chunk's first word
        last_end = -1
        while True:
            last = self._last_word(words, first, size, last_end)
            start, end = words.starts[first], words.ends[last]
            spans.append((start, end))
            if last == len(words.ends) - 1:
                return spans
            first = self._next_first(words, first, last, overlap, size)
            last_end = end

    @staticmethod
    def _last_word(words: _Words, first: int, size: int, previous_end: int) -> int:
        """The index of the chunk's last word: as far as ``size`` allows, at the best place to cut
        in the chunk's second half, always past the previous chunk's end."""
        start = words.starts[first]
        limit = bisect_right(words.ends, start + size) - 1  # last word ending within the size
        must = max(first, bisect_right(words.ends, previous_end))  # first word ending past the previous chunk
        if limit < must:
            return must  # one word longer than a chunk: a chunk of its own
        half = start + size // 2
        best, best_quality = limit, words.quality[limit]
        for i in range(limit, must - 1, -1):
            if words.ends[i] < half and i != limit:
                break
            if words.quality[i] > best_quality:
                best, best_quality = i, words.quality[i]
        return best

    @staticmethod
    def _next_first(words: _Words, first: int, last: int, overlap: int, size: int) -> int:
        """The next chunk's first word: the earliest word after this chunk's first that starts in
        the last ``overlap`` characters of this chunk, else the word after this chunk."""
        end = words.ends[last]
        candidate = max(first + 1, bisect_left(words.starts, end - overlap))
        if candidate > last:
            return last + 1
        # the next chunk must reach past this one: its first word may not sit so early that the
        # word after this chunk cannot fit in it
        following_end = words.ends[last + 1]
        while candidate <= last and following_end - words.starts[candidate] > size:
            candidate += 1
        return candidate
