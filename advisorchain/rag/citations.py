"""Citations: the documents handed to the model are numbered ``[1]``…``[n]``; the numbers the answer
writes are read back into ``Citation``s. The answer's text is never changed.

During one advised request a *ledger* holds the numbered documents: the retrieval advisor's, then
those a ``retrieval_tool`` finds in the same turn (numbered on from there, a document already
numbered keeping its number), so every ``[n]`` the model can see names one document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..chain import Run, current_run
from .documents import Document, document_id

__all__ = ["Citation", "Ledger", "citations_in", "current_ledger", "format_numbered", "using_ledger"]


@dataclass(frozen=True, slots=True)
class Citation:
    """A document the answer cites: its number in the context the model saw, and the document."""

    number: int
    document: Document


_GROUP = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]")


def citations_in(text: str | None, numbered: Mapping[int, Document]) -> tuple[Citation, ...]:
    """One Citation per distinct ``[n]`` in ``text`` that names a document of ``numbered``, in order
    of first appearance (``[1][3]`` and ``[1, 3]`` both cite 1 and 3)."""
    if not text:
        return ()
    seen: dict[int, Citation] = {}
    for group in _GROUP.finditer(text):
        for raw in group.group(1).split(","):
            number = int(raw)
            if number in numbered and number not in seen:
                seen[number] = Citation(number, numbered[number])
    return tuple(seen.values())


def format_numbered(numbered: Iterable[tuple[int, Document]]) -> str:
    """Documents as the model reads them: ``[n] text``, separated by blank lines."""
    return "\n\n".join(f"[{number}] {doc.text}" for number, doc in numbered)


def _key(doc: Document) -> str:
    return doc.id if doc.id is not None else document_id(doc.text, doc.metadata)


class Ledger:
    """The numbered documents of one advised request, and its context (for a tool's retriever)."""

    def __init__(self, documents: Sequence[Document], context: Mapping[str, Any]) -> None:
        self.context = context
        self._numbered: dict[int, Document] = {}
        self._by_key: dict[str, int] = {}
        self.add(documents)

    def add(self, documents: Iterable[Document]) -> list[tuple[int, Document]]:
        """Number ``documents`` on from the last number (a document met before keeps its number)."""
        out: list[tuple[int, Document]] = []
        for doc in documents:
            key = _key(doc)
            number = self._by_key.get(key)
            if number is None:
                number = len(self._numbered) + 1
                self._numbered[number] = doc
                self._by_key[key] = number
            out.append((number, doc))
        return out

    @property
    def numbered(self) -> Mapping[int, Document]:
        return dict(self._numbered)

    @property
    def documents(self) -> tuple[Document, ...]:
        return tuple(self._numbered.values())


_LEDGER = object()
"""The run slot holding the ledger of the retrieval advisor now advising (see ``using_ledger``)."""


def current_ledger() -> Ledger | None:
    """The ledger of the run whose tools are executing (a ``retrieval_tool`` numbers its documents
    on from the retrieval advisor's), if any."""
    run = current_run()
    ledger = None if run is None else run.get(_LEDGER)
    return ledger if isinstance(ledger, Ledger) else None


class using_ledger:
    """``with using_ledger(run, ledger):`` — the run's ledger inside (the one before it after)."""

    __slots__ = ("_ledger", "_previous", "_run")

    def __init__(self, run: Run, ledger: Ledger) -> None:
        self._run, self._ledger = run, ledger
        self._previous: Any = None

    def __enter__(self) -> Ledger:
        self._previous = self._run.get(_LEDGER)
        return self._run.put(_LEDGER, self._ledger)

    def __exit__(self, *exc_info: object) -> None:
        self._run.put(_LEDGER, self._previous)
