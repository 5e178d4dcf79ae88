"""Test doubles for your own tests: chat models that answer from a script or a function.

>>> model = ScriptedChatModel(["Paris."])
>>> ChatClient(model).prompt("Capital of France?").call().content()
'Paris.'
>>> model.prompts[0].instructions
(UserMessage(text='Capital of France?', metadata={}),)

Both models stream too: the text is split into word chunks, tool calls come whole in the last
chunk, which also carries the finish reason and usage.

``forbid_model_requests()`` (a context manager) and the pytest fixture ``no_model_requests``
make every provider adapter refuse requests that would leave this machine, so a test that forgot
its test model cannot reach (and pay) a real provider; loopback servers and replay clients stay
allowed::

    from advisorchain.testing import no_model_requests  # in conftest.py: every test may use it
"""

from __future__ import annotations

import contextlib
import inspect
import ipaddress
import re
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeAlias

from ._request_guard import set_requests_forbidden
from ._streams import closing
from .errors import AdvisorChainError
from .messages import AssistantMessage
from .model import ChatResponse, ChatResponseMetadata, Generation, Prompt
from .replay import (
    Cassette,
    RecordedRequest,
    cassette_transport,
    load_cassette,
    replay_anthropic_client,
    replay_openai_client,
)

__all__ = [
    "Cassette",
    "FunctionChatModel",
    "RecordedRequest",
    "Reply",
    "ScriptedChatModel",
    "cassette_transport",
    "forbid_model_requests",
    "load_cassette",
    "no_model_requests",  # noqa: F822 -- built on first access (module __getattr__), pytest only then
    "replay_anthropic_client",
    "replay_openai_client",
    "stream_chunks",
]

Reply: TypeAlias = AssistantMessage | ChatResponse | str
"""What a test model may answer: a message, a whole response, or plain text."""

_WORDS = re.compile(r"\s*\S+|\s+")


def _as_response(reply: Reply) -> ChatResponse:
    if isinstance(reply, ChatResponse):
        return reply
    if isinstance(reply, str):
        reply = AssistantMessage(reply)
    if isinstance(reply, AssistantMessage):
        finish = "tool_calls" if reply.tool_calls else "stop"
        return ChatResponse((Generation(reply, finish),), ChatResponseMetadata(finish_reason=finish))
    raise TypeError(f"a test model must answer with an AssistantMessage, ChatResponse or str, not {reply!r}")


def stream_chunks(response: ChatResponse) -> list[ChatResponse]:
    """``response`` as stream chunks: one per word of the first generation's text, then a last
    chunk with the tool calls, the finish reason, usage, id and model."""
    result = response.result
    message = result.output if result is not None else AssistantMessage()
    text = message.text or ""
    chunks = [ChatResponse((Generation(AssistantMessage(word)),)) for word in _WORDS.findall(text)]
    finish = response.finish_reason
    last = AssistantMessage(None, message.tool_calls, message.metadata)
    chunks.append(ChatResponse((Generation(last, finish),), response.metadata))
    return chunks


class ScriptedChatModel:
    """Answers with ``responses`` in turn and records every prompt it receives in ``.prompts``.

    A reply may also be an exception instance, which is raised in its turn (a provider failure).
    Running out of replies is an error that says how many were used.
    """

    model_name = "scripted"
    provider = "advisorchain.testing"

    def __init__(self, responses: Iterable[Reply | BaseException]) -> None:
        self._responses = list(responses)
        self._next = 0
        self.prompts: list[Prompt] = []

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self._responses) - self._next

    def _take(self, prompt: Prompt) -> ChatResponse:
        self.prompts.append(prompt)
        if self._next >= len(self._responses):
            raise AdvisorChainError(
                f"ScriptedChatModel ran out of replies: all {len(self._responses)} were used "
                f"and call {len(self.prompts)} wants another"
            )
        reply = self._responses[self._next]
        self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        return _as_response(reply)

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._take(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(self._take(prompt)):
            yield chunk


class FunctionChatModel:
    """Answers with ``fn(prompt)``, a sync or async function returning a Reply.

    ``stream_fn``, when given, produces the stream chunks itself (an async iterator of
    ChatResponse); otherwise ``fn``'s answer is split into chunks.
    """

    model_name = "function"
    provider = "advisorchain.testing"

    def __init__(
        self,
        fn: Callable[[Prompt], Reply | Awaitable[Reply]],
        stream_fn: Callable[[Prompt], AsyncIterator[ChatResponse]] | None = None,
    ) -> None:
        self.fn = fn
        self.stream_fn = stream_fn
        self.prompts: list[Prompt] = []

    async def call(self, prompt: Prompt) -> ChatResponse:
        self.prompts.append(prompt)
        reply = self.fn(prompt)
        if inspect.isawaitable(reply):
            reply = await reply
        return _as_response(reply)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if self.stream_fn is not None:
            self.prompts.append(prompt)
            async with closing(self.stream_fn(prompt)) as source:
                async for chunk in source:
                    yield chunk
            return
        for chunk in stream_chunks(await self.call(prompt)):
            yield chunk


# -- the request guard ---------------------------------------------------------------------------------


@contextlib.contextmanager
def forbid_model_requests(*, sockets: bool = False) -> Iterator[None]:
    """While inside, every provider adapter refuses (with a ``ModelError``) a request that would
    leave this machine; requests to loopback servers and through replay/mock transports still go.

    ``sockets=True`` also refuses every socket connection outside loopback, from any code (a net
    for libraries that bypass the adapters). Nestable; it applies to all threads.
    """
    set_requests_forbidden(True)
    if sockets:
        _guard_sockets(True)
    try:
        yield
    finally:
        if sockets:
            _guard_sockets(False)
        set_requests_forbidden(False)


def __getattr__(name: str) -> Any:
    # The pytest fixture is built on first use, so that importing this module never needs pytest.
    if name == "no_model_requests":
        fixture = _make_fixture()
        globals()[name] = fixture
        return fixture
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_fixture() -> Any:
    import pytest

    @pytest.fixture(name="no_model_requests")
    def no_model_requests() -> Iterator[None]:
        """Real provider requests are refused during the test (see ``forbid_model_requests``)."""
        with forbid_model_requests():
            yield

    return no_model_requests


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_socket_lock = threading.Lock()
_socket_depth = 0


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # a Unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse(address: Any) -> ConnectionRefusedError:
    return ConnectionRefusedError(
        f"connection to {address!r} refused: network access is forbidden here "
        "(advisorchain.testing.forbid_model_requests(sockets=True)); use a server on loopback"
    )


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise _refuse(address)
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise _refuse(address)
    return _real_connect_ex(self, address)


def _guard_sockets(on: bool) -> None:
    global _socket_depth
    with _socket_lock:
        _socket_depth = _socket_depth + 1 if on else max(0, _socket_depth - 1)
        guarded = _socket_depth > 0
        connect: Any = _guarded_connect if guarded else _real_connect
        connect_ex: Any = _guarded_connect_ex if guarded else _real_connect_ex
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
