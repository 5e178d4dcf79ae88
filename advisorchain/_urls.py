"""URLs as the library shows them: the one home of redaction.

A URL may carry a secret — ``https://user:password@host/`` (a self-hosted server behind basic
auth, a database DSN) or ``?token=...`` / ``?api_key=...`` in its query. Everything advisorchain
prints or records about a URL (error messages, reprs, span attributes, the CLI's output) goes
through ``redact_url``, which keeps where the URL points and hides what would let someone in.
"""

from __future__ import annotations

from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

__all__ = ["REDACTED", "redact_url", "split_userinfo"]

REDACTED = "***"
"""What stands in for a hidden part of a URL."""


def redact_url(url: str) -> str:
    """``url`` with its userinfo (``user:password@``) and every query value replaced by ``***``;
    the scheme, host, port, path and the query's parameter names are kept::

        >>> redact_url("https://me:s3cret@llm.example.com/v1?token=abc&v=2")
        'https://***@llm.example.com/v1?token=***&v=***'

    Text that is not a URL with a host comes back as it is, but for what looks like userinfo."""
    if not isinstance(url, str):
        return repr(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all (an unbalanced "[", say): hide anything before an "@"
        return _hide_userinfo_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = _redact_query(parts.query)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_query(query: str) -> str:
    if not query:
        return query
    pieces = []
    for piece in query.split("&"):
        name, sep, value = piece.partition("=")
        pieces.append(f"{name}={REDACTED}" if sep and value else piece)
    return "&".join(pieces)


def _hide_userinfo_text(text: str) -> str:
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return text
    return f"{scheme}://{REDACTED}@{rest.split('@', 1)[1]}"


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without its userinfo, and the user name and password it held (percent-decoded, as
    HTTP clients send them in Basic auth), or None for each that is absent."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, has_password, password = userinfo.partition(":")
    bare = urlunsplit(SplitResult(parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, unquote(user), unquote(password) if has_password else None
