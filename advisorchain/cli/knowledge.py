"""Knowledge bases on the command line: a store URL (``sqlite:///kb.db``, ``postgresql://…``) opened
as a vector store, the ``QuestionAnswerAdvisor`` that ``--knowledge URL`` adds to an agent, and the
citations shown under an answer.

A PostgreSQL URL may name the table with ``?table=name`` (default ``advisorchain_documents``); the
rest of the URL goes to the server as it is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import click

from .._urls import redact_url
from ._setup import CliError

__all__ = ["KnowledgeBase", "citation_lines", "knowledge_advisor", "open_knowledge", "source_label"]

_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


@dataclass(frozen=True)
class KnowledgeBase:
    """An opened store and how to name it to the user (never with a password)."""

    store: Any
    label: str

    def close(self) -> None:
        """Close the store's file or connections."""
        close = getattr(self.store, "close", None)
        if callable(close):
            close()


def _check_url(url: str, option: str) -> None:
    if not url.startswith(_SCHEMES):
        raise click.BadParameter(
            f"{redact_url(url)!r} is not a knowledge store URL; use sqlite:///kb.db or postgresql://user@host/db",
            param_hint=f"'{option}'",
        )
    if url.startswith("sqlite:///") and not url[len("sqlite:///") :]:
        raise click.BadParameter(f"{url!r} names no file; use sqlite:///kb.db", param_hint=f"'{option}'")


def _postgres_parts(url: str) -> tuple[str, str | None, str]:
    """The DSN without ``table=``, the table (or None) and a label without the password."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    table = next((v for k, v in query if k == "table"), None)
    dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "table"])))
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    label = f"{parts.scheme}://{host}{port}{parts.path}" + (f" (table {table})" if table else "")
    return dsn, table, label


def open_knowledge(
    url: str, *, option: str = "--knowledge", create: bool = False, embedding_model: Any = None
) -> KnowledgeBase:
    """The store ``url`` names. ``create=False`` (searching): a SQLite file must exist and a store
    must hold documents, else a CliError saying how to build it with ``advisorchain index``."""
    _check_url(url, option)
    try:
        from ..rag import PostgresVectorStore, SQLiteVectorStore
    except ImportError as exc:  # pragma: no cover - the rag package itself imports nothing optional
        raise CliError(f"{option} needs pip install 'advisorchain[rag]'") from exc
    try:
        if url.startswith("sqlite:///"):
            path = Path(url[len("sqlite:///") :])
            label = str(path)
            if not create and not path.exists():
                raise CliError(
                    f"no knowledge base at {label}: build one with 'advisorchain index PATH... --store {url}'"
                )
            if path.exists() and path.is_dir():
                raise CliError(
                    f"{label} is a folder; a SQLite knowledge base is one file (sqlite:///{label}/kb.db)"
                )
            store: Any = SQLiteVectorStore(path, embedding_model)
        else:
            dsn, table, label = _postgres_parts(url)
            if table is None:
                store = PostgresVectorStore(dsn, embedding_model)
            else:
                store = PostgresVectorStore(dsn, embedding_model, table=table)
    except ModuleNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except ValueError as exc:  # a table name that is not an identifier
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from exc
    base = KnowledgeBase(store, label)
    if not create and _is_empty(store):
        base.close()
        raise CliError(
            f"the knowledge base {label} holds no documents: "
            f"add some with 'advisorchain index PATH... --store {redact_url(url)}'"
        )
    return base


def _is_empty(store: Any) -> bool:
    from ..rag import SearchRequest

    return not store.similarity_search(SearchRequest("knowledge", top_k=1))


def knowledge_advisor(url: str | None) -> tuple[Any, KnowledgeBase] | None:
    """``--knowledge URL``: a ``QuestionAnswerAdvisor`` over that store (with its KnowledgeBase, to
    close at the end), or None without the flag."""
    if url is None:
        return None
    from ..rag import QuestionAnswerAdvisor

    base = open_knowledge(url)
    return QuestionAnswerAdvisor(base.store), base


def source_label(metadata: dict[str, Any]) -> str:
    """Where a chunk comes from, for a citation: its file (relative to here when inside), its
    title and chunk number when known."""
    source = metadata.get("source")
    where = str(source) if isinstance(source, str) else "(no source)"
    if isinstance(source, str) and os.path.isabs(source):
        try:
            where = os.path.relpath(source)
        except ValueError:  # another drive
            where = source
        if where.startswith(".." + os.sep + ".."):
            where = source
    title = metadata.get("title")
    chunk = metadata.get("chunk_index")
    extra = [f'"{title}"'] if isinstance(title, str) and title else []
    if isinstance(chunk, int):
        extra.append(f"chunk {chunk + 1}")
    return where + (f" ({', '.join(extra)})" if extra else "")


def citation_lines(citations: Sequence[Any]) -> list[str]:
    """One line per citation of an answer: ``[n] source (title, chunk k)``."""
    return [f"[{c.number}] {source_label(dict(c.document.metadata))}" for c in citations]
