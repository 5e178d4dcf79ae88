"""``advisorchain index PATH... --store URL``: text and Markdown files split into chunks and added to a
knowledge base (``sqlite:///kb.db``, ``postgresql://…``), with a progress bar on a terminal.

Every chunk records its file (``source``, the absolute path), the file's content hash (``version``)
and, for Markdown, its first heading (``title``). A file is added in one transaction (its chunks are
all there or none); then the chunks of its earlier versions are deleted, so re-indexing a changed
file replaces its chunks, and an unchanged file is skipped without embedding anything.

Every path is checked before anything is indexed: one that does not exist, one that is not a
regular file (a named pipe or a device named on the command line), a file over ``--max-file-size``
(4 MB by default) or a file that is not UTF-8 text stops the command with nothing written. A file
is opened without blocking and read no further than the size bound, so a FIFO never hangs the
command and ``/dev/zero`` never fills the memory.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ._options import debug_option
from .knowledge import KnowledgeBase, open_knowledge

__all__ = ["index"]

_MB = 1_000_000
DEFAULT_MAX_FILE_MB = 4.0
"""The largest file ``index`` reads unless ``--max-file-size`` says otherwise (in MB of 10**6 bytes)."""

_SUFFIXES = (".md", ".markdown", ".txt")
"""The files a folder contributes (a file named on the command line may have any suffix)."""


@dataclass(frozen=True)
class _File:
    """One file to index: its path as shown, its text and content hash."""

    path: Path
    shown: str
    text: str
    version: str

    @property
    def source(self) -> str:
        return self.path.resolve().as_posix()


def _read(path: Path, shown: str, max_bytes: int) -> _File:
    data = _read_regular(path, shown, max_bytes)
    if b"\0" in data[:8192]:
        raise click.BadParameter(
            f"{shown} is a binary file; index text and Markdown files (.md, .txt)", param_hint="'PATH...'"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(
            f"{shown} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "convert it to UTF-8 (iconv -t utf-8) or leave it out",
            param_hint="'PATH...'",
        ) from None
    return _File(path, shown, text, hashlib.sha256(data).hexdigest()[:16])


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _read_regular(path: Path, shown: str, max_bytes: int) -> bytes:
    """The bytes of ``path``, refused unless it is a regular file of at most ``max_bytes``: opened
    without blocking (a FIFO without a writer would wait forever) and read no further than the bound."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise click.BadParameter(f"{shown} cannot be read ({exc.strerror})", param_hint="'PATH...'") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise click.BadParameter(
                f"{shown} is {_kind(mode)}, not a regular file; index text and Markdown files (.md, .txt)",
                param_hint="'PATH...'",
            )
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise click.BadParameter(
            f"{shown} is over the {max_bytes / _MB:g} MB a file may have; split it, or raise --max-file-size",
            param_hint="'PATH...'",
        )
    return data


def collect(paths: tuple[Path, ...], max_bytes: int = int(DEFAULT_MAX_FILE_MB * _MB)) -> list[_File]:
    """The files to index, in order, each read and checked (a folder: its text and Markdown files,
    hidden ones left out; a file named on the command line: a regular file, any suffix), none over
    ``max_bytes``."""
    found: dict[Path, _File] = {}
    for given in paths:
        if given.is_dir():
            inside = sorted(
                p
                for p in given.rglob("*")
                if p.is_file()
                and p.suffix.lower() in _SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(given).parts)
            )
            if not inside:
                raise click.BadParameter(
                    f"{given} holds no text or Markdown files ({', '.join(_SUFFIXES)})",
                    param_hint="'PATH...'",
                )
            for p in inside:
                found.setdefault(p.resolve(), _read(p, str(p), max_bytes))
        else:
            found.setdefault(given.resolve(), _read(given, str(given), max_bytes))
    return list(found.values())


def _title(file: _File) -> str | None:
    if file.path.suffix.lower() not in (".md", ".markdown"):
        return None
    for line in file.text.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def _chunks(file: _File, splitter: Any) -> list[Any]:
    from ..rag import Document

    metadata: dict[str, Any] = {"source": file.source, "version": file.version}
    title = _title(file)
    if title is not None:
        metadata["title"] = title
    return list(splitter.split([Document(file.text, metadata, id=f"{file.source}@{file.version}")]))


def _indexed(base: KnowledgeBase, file: _File) -> bool:
    """True when this version of the file is in the store already."""
    from ..rag import Filter, SearchRequest

    same = Filter.eq("source", file.source) & Filter.eq("version", file.version)
    return bool(base.store.similarity_search(SearchRequest(file.shown, top_k=1, filter=same)))


def _drop_other_versions(base: KnowledgeBase, file: _File) -> int:
    from ..rag import Filter

    return int(
        base.store.delete(filter=Filter.eq("source", file.source) & Filter.ne("version", file.version))
    )


@contextmanager
def _progress(total: int) -> Iterator[tuple[Any, Any]]:
    """A bar over the chunks on a terminal (stderr), left on screen when done; yields ``(console,
    advance)``, ``advance(chunks, file)`` naming the file being indexed."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False)
    if not console.is_terminal:
        yield console, lambda n, what: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("indexing", total=total)
        yield console, lambda n, what: bar.update(task, advance=n, description=f"indexing {what}")
        bar.update(task, description="indexed")


@click.command()
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path), metavar="PATH..."
)
@click.option(
    "--store",
    "store_url",
    required=True,
    metavar="URL",
    help="sqlite:///kb.db or postgresql://user@host/db[?table=name].",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=16),
    default=800,
    show_default=True,
    help="Tokens a chunk holds at most (4 characters a token).",
)
@click.option(
    "--chunk-overlap",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Tokens consecutive chunks share.",
)
@click.option(
    "--max-file-size",
    "max_file_mb",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_MAX_FILE_MB,
    show_default=True,
    metavar="MB",
    help="Refuse a file larger than this many megabytes (10**6 bytes).",
)
@debug_option
def index(
    paths: tuple[Path, ...],
    store_url: str,
    chunk_size: int,
    chunk_overlap: int,
    max_file_mb: float,
    debug: bool,
) -> None:
    """Split text and Markdown files (or folders of them) into chunks and add them to a knowledge
    base, for 'chat --knowledge URL'. Re-indexing a changed file replaces its chunks."""
    from ..rag import TextSplitter

    if chunk_overlap >= chunk_size:
        raise click.BadParameter(
            f"--chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size ({chunk_size})",
            param_hint="'--chunk-overlap'",
        )
    files = collect(paths, int(max_file_mb * _MB))  # every path checked before anything is written
    splitter = TextSplitter(chunk_size, chunk_overlap)
    planned = [(file, _chunks(file, splitter)) for file in files]
    base = open_knowledge(store_url, option="--store", create=True)
    started = time.perf_counter()
    added = unchanged = chunks = 0
    try:
        with _progress(sum(len(c) for _, c in planned)) as (console, advance):
            for file, pieces in planned:
                if _indexed(base, file):
                    _drop_other_versions(base, file)  # left by a run stopped between the two steps
                    unchanged += 1
                    advance(len(pieces), file.shown)
                    console.print(f"  = {file.shown}: unchanged", style="dim")
                    continue
                base.store.add(pieces)  # one transaction: the file's chunks all there or none
                replaced = _drop_other_versions(base, file)
                added += 1
                chunks += len(pieces)
                advance(len(pieces), file.shown)
                note = f" (replaced {replaced})" if replaced else ""
                console.print(f"  + {file.shown}: {_count(len(pieces), 'chunk')}{note}")
    finally:
        base.close()
    seconds = time.perf_counter() - started
    kept = f", {unchanged} unchanged" if unchanged else ""
    sys.stdout.write(
        f"Indexed {_count(added, 'file')} ({_count(chunks, 'chunk')}{kept}) into {base.label} "
        f"in {seconds:.1f} s\n"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
