"""The wire form of each message, built and serialized once, reused while the message keeps
coming back.

A tool loop sends its whole history every round, and a conversation sends it every turn: the
same message objects, plus a few new ones. Messages are immutable, so the JSON of a message never
changes; ``WireCache`` keeps it, as bytes, by the message's identity (holding the message, so the
identity stays its own) and serializes only what is new: a request's body is its other fields,
serialized, with the cached messages spliced in (``json_body``). Bounded: the oldest entries go
first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...messages import Message
from .json import dumps

if TYPE_CHECKING:
    from ...model import Prompt

__all__ = [
    "HISTORY",
    "DefinitionsWire",
    "Spliced",
    "WireCache",
    "history_body",
    "json_body",
    "object_json",
]

Wire = tuple[dict[str, Any], ...]


class _History:
    def __repr__(self) -> str:
        return "HISTORY"


HISTORY: Any = _History()
"""Stands for the prompt's messages among a request's fields until the body is serialized."""


class WireCache:
    """``array(messages)``: the JSON array of ``messages`` (``build(message)`` gives the dicts of
    one message: it may become several), each message serialized once while cached.

    Two levels: each message's JSON, by identity; and, by the identity of a conversation's first
    message, the array last sent for it — a tool loop's next round and a conversation's next turn
    begin with the same messages, so only what was added since is joined on."""

    __slots__ = ("_build", "_entries", "_prefixes", "_size")

    def __init__(self, build: Callable[[Message], Wire], size: int = 4096) -> None:
        self._build = build
        self._size = size
        self._entries: OrderedDict[int, tuple[Message, bytes]] = OrderedDict()
        self._prefixes: OrderedDict[int, tuple[tuple[Message, ...], bytes]] = OrderedDict()

    def array(self, messages: Sequence[Message]) -> bytes:
        """The JSON array of ``messages``, as bytes (``[...]``)."""
        if not messages:
            return b"[]"
        messages = tuple(messages)
        head, start = b"", 0
        known = self._prefixes.get(id(messages[0]))
        # Equal messages serialize alike: a tuple compare (identity first, in C) finds the prefix.
        if known is not None and len(known[0]) <= len(messages) and messages[: len(known[0])] == known[0]:
            head, start = known[1], len(known[0])
        parts = [head] if head else []
        for message in messages[start:]:
            json = self._json(message)
            if json:
                parts.append(json)
        joined = b",".join(parts)
        _put(self._prefixes, id(messages[0]), (messages, joined), self._size // 4)
        return b"[" + joined + b"]"

    def _json(self, message: Message) -> bytes:
        entry = self._entries.get(id(message))
        if entry is None or entry[0] is not message:
            # One dumps of the tuple, its brackets cut: a copy of the exact size (orjson's output
            # holds a 4 KB buffer however short it is, too much to keep thousands of).
            entry = (message, dumps(self._build(message))[1:-1])
            _put(self._entries, id(message), entry, self._size)
        return entry[1]

    @property
    def size(self) -> int:
        """How many messages are cached."""
        return len(self._entries)


def _put(cache: OrderedDict[Any, Any], key: Any, value: Any, size: int) -> None:
    """``cache[key] = value``, the oldest entry dropped first when ``cache`` holds ``size``. An
    OrderedDict: a plain dict whose first entry is deleted over and over scans the deleted slots
    on every ``next(iter(...))`` (a microsecond per request once the cache is full)."""
    if key not in cache and len(cache) >= size:
        try:  # noqa: SIM105 — contextlib.suppress would build an object on every request
            cache.popitem(last=False)
        except KeyError:  # another thread evicted the last one meanwhile: nothing lost
            pass
    cache[key] = value


class Spliced:
    """JSON already serialized, put into a request body as it is by ``object_json`` (a
    conversation's messages, a request's tool definitions): what was serialized once is not
    serialized again."""

    __slots__ = ("json",)

    def __init__(self, json: bytes) -> None:
        self.json = json

    def __repr__(self) -> str:
        return f"Spliced({self.json[:60]!r})"


class DefinitionsWire:
    """Tool definitions serialized once: ``spliced(definitions)`` is the JSON array ``build`` makes
    of them, kept by the identity of the definitions (a tool's definition is made once and reused
    by every request that offers the tool; holding them keeps the identities theirs). Bounded: the
    oldest go first."""

    __slots__ = ("_build", "_entries", "_size")

    def __init__(self, build: Callable[[Sequence[Any]], list[dict[str, Any]]], size: int = 64) -> None:
        self._build = build
        self._size = size
        self._entries: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], Spliced]] = OrderedDict()

    def build(self, definitions: Sequence[Any]) -> list[dict[str, Any]]:
        """The list ``build`` makes of ``definitions``, not serialized (for a body whose tools are
        joined with others)."""
        return self._build(definitions)

    def spliced(self, definitions: Sequence[Any]) -> Spliced:
        """The JSON of ``definitions``, serialized on first use."""
        key = tuple(map(id, definitions))
        entry = self._entries.get(key)
        if entry is None:
            held = tuple(definitions)
            entry = (held, Spliced(b"".join((dumps(self._build(held)), b""))))  # of its own size
            _put(self._entries, key, entry, self._size)
        return entry[1]


def object_json(fields: Mapping[str, Any]) -> bytes:
    """The JSON object of ``fields``, in their order (the order the SDKs send them in, so the bytes
    are theirs); a ``Spliced`` value goes in as the JSON it already is."""
    parts: list[bytes] = []
    plain: dict[str, Any] = {}
    for key, value in fields.items():
        if type(value) is Spliced:
            if plain:
                parts.append(dumps(plain)[1:-1])
                plain = {}
            parts.append(dumps(key) + b":" + value.json)
        else:
            plain[key] = value
    if plain:
        parts.append(dumps(plain)[1:-1])
    return b"{" + b",".join(parts) + b"}"


def json_body(before: dict[str, Any], key: str, array: bytes, after: dict[str, Any]) -> bytes:
    """The JSON object of the fields ``before``, then ``key`` set to the serialized ``array``, then
    the fields ``after`` (the order the SDKs send them in, so the bytes are theirs)."""
    return object_json({**before, key: Spliced(array), **after})


def history_body(params: dict[str, Any], key: str, stream: bool, prompt: Prompt, wire: WireCache) -> bytes:
    """The request body of ``params`` (``model`` first, then ``stream``, then the rest, as the
    SDKs order them) whose ``key`` field (``messages``, ``input``) is either ``HISTORY`` — then the
    prompt's messages are spliced in from ``wire`` — or what a layer set it to. Other fields may be
    ``Spliced`` already (tool definitions)."""
    model = params.pop("model")
    history = params.pop(key)
    if history is HISTORY:
        history = Spliced(wire.array(prompt.instructions))
    return object_json({"model": model, "stream": stream, key: history, **params})
