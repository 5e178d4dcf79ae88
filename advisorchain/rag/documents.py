"""Documents: the unit that stores hold, searches return and advisors hand the model.

A document's metadata is flat and typed: ``str``, ``int``, ``float``, ``bool``, ``None`` or a list of
those. That is what every store can keep and every filter can test the same way, so anything else is
refused when the document is added (never silently turned into text).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Document", "check_metadata", "document_id", "prepare_documents"]

INT64 = (-(2**63), 2**63 - 1)
"""The integers every store keeps exactly (SQLite and PostgreSQL hold 64-bit integers)."""


@dataclass(frozen=True, slots=True)
class Document:
    """A text with metadata. ``id`` stays None until a store adds the document (a missing id then
    becomes ``document_id(text, metadata)``, the same in every store); ``score`` is set by searches
    (higher is more similar, in [0, 1])."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Document.text must be a str, got {type(self.text).__name__}: {self.text!r}")
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Document.metadata must be a mapping, got {self.metadata!r}")
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise ValueError(f"Document.id must be a non-empty str or None, got {self.id!r}")
        if self.id is not None and "\0" in self.id:
            raise ValueError(
                f"Document.id {self.id!r} holds a NUL character (\\x00), which no store keeps in an id "
                "(PostgreSQL text cannot hold it); remove it"
            )
        # A snapshot: a later change to the caller's dict never shows in the document.
        object.__setattr__(self, "metadata", dict(self.metadata))

    def with_score(self, score: float | None) -> Document:
        """A copy with ``score`` set."""
        return Document(self.text, self.metadata, self.id, score)


def _check_scalar(key: str, value: object, where: str) -> None:
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str):
            _check_text(value, f"{where} metadata {key!r}")
        return
    if isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise ValueError(
                f"{where} metadata {key!r} is {value}, outside the 64-bit range stores keep exactly; "
                "store it as a str or a float"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} metadata {key!r} is {value!r}; use a finite number or None")
        return
    raise ValueError(
        f"{where} metadata {key!r} has a value of type {type(value).__name__} ({value!r}); metadata "
        "values must be str, int, float, bool, None or a list of those — convert it (e.g. str(...))"
    )


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} is not valid Unicode text ({exc.reason} at {exc.start})") from None


def check_metadata(metadata: Mapping[str, Any], where: str = "document") -> None:
    """Raise ValueError naming the key unless every metadata value is a str, int (64-bit), finite
    float, bool, None or a list of those, and every key a str."""
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise ValueError(f"{where} metadata key {key!r} must be a str")
        _check_text(key, f"{where} metadata key {key!r}")
        if isinstance(value, list | tuple):
            for item in value:
                _check_scalar(key, item, where)
        else:
            _check_scalar(key, value, where)


def _canonical(text: str, metadata: Mapping[str, Any]) -> bytes:
    body = {
        "metadata": {k: list(v) if isinstance(v, tuple) else v for k, v in metadata.items()},
        "text": text,
    }
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def document_id(text: str, metadata: Mapping[str, Any]) -> str:
    """The id a store gives a document that has none: a hash of the text and the metadata (keys
    sorted), so adding the same chunk twice replaces it."""
    return hashlib.sha256(_canonical(text, metadata)).hexdigest()[:32]


def prepare_documents(documents: Iterable[Document], where: str = "add") -> list[Document]:
    """``documents`` checked and given ids, ready to be written; within one batch a later document
    with the same id replaces an earlier one (as adding them one by one would)."""
    if isinstance(documents, Document):
        raise TypeError(f"{where}() takes a list of Documents, not one Document: pass [document]")
    by_id: dict[str, Document] = {}
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise TypeError(f"{where}() takes Documents; item {i} is {type(doc).__name__}: {doc!r}")
        _check_text(doc.text, f"the text of document {i}")
        check_metadata(doc.metadata, f"document {i}")
        doc_id = doc.id if doc.id is not None else document_id(doc.text, doc.metadata)
        by_id.pop(doc_id, None)
        by_id[doc_id] = Document(doc.text, _listed(doc.metadata), doc_id)
    return list(by_id.values())


def _listed(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Tuples as lists: what comes back from a store is what JSON keeps."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in metadata.items()}
