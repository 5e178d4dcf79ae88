"""A PostgreSQL memory whose server is not there, or goes away while in use (issue 37): every
operation fails within seconds with a ConnectionError naming the server (``host:port``, never the
password) and the reason, instead of waiting the pool's 30 s and raising a PoolTimeout naming
nothing. The server that goes away is a real one behind a TCP forwarder the test cuts."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from advisorchain.memory import MessageWindowChatMemory, PostgresChatMemoryRepository
from advisorchain.messages import AssistantMessage, UserMessage
from tests.support.services import POSTGRES_ENV, service_url

pytest.importorskip("psycopg_pool")

# A timeout far longer than the test may take: a call that waited for the pool would hang past the
# join below, so the test fails on a wait, not on a measured duration.
POOL_TIMEOUT = 600.0
HANG = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _finishes(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a thread; the exception it raised (None when it returned). Fails the test when
    it does not finish (it waited for the pool's timeout)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert outcome, "the call waited for the pool instead of naming the dead server"
    return outcome[0]


class _Forwarder:
    """A TCP forwarder on loopback to ``target``; ``cut()`` closes it and every connection through it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                if self.closed:  # accepted while being cut
                    client.close()
                    upstream.close()
                    return
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.listener.close()
        with self.lock:
            self.closed = True
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


@pytest.fixture
def forwarded() -> Iterator[tuple[_Forwarder, str]]:
    """The test PostgreSQL server behind a forwarder, and a DSN through it carrying a password."""
    parts = urlsplit(service_url(POSTGRES_ENV))
    forwarder = _Forwarder((parts.hostname or "127.0.0.1", parts.port or 5432))
    dsn = urlunsplit(parts._replace(netloc=f"postgres:pa55w0rd@127.0.0.1:{forwarder.port}"))
    yield forwarder, dsn
    forwarder.cut()


def _check(exc: BaseException | None, port: int, what: str) -> None:
    assert isinstance(exc, ConnectionError), repr(exc)
    message = str(exc)
    assert f"the PostgreSQL server at 127.0.0.1:{port} {what}" in message
    assert "pa55w0rd" not in message and "\n" not in message


def test_a_server_that_is_not_there_is_named_at_once_by_every_operation() -> None:
    port = _free_port()
    repository = PostgresChatMemoryRepository(
        f"postgresql://app:pa55w0rd@127.0.0.1:{port}/app", timeout=POOL_TIMEOUT
    )
    memory = MessageWindowChatMemory(repository)
    operations: list[Callable[[], Any]] = [
        repository.find_conversation_ids,
        lambda: repository.find_by_conversation_id("c1"),
        lambda: repository.save_all("c1", [UserMessage("hi")]),
        lambda: repository.delete_by_conversation_id("c1"),
        lambda: memory.add("c1", [UserMessage("hi"), AssistantMessage("hello")]),
        lambda: repository.try_lock("c1", "me"),
    ]
    try:
        for operation in operations:
            exc = _finishes(operation)
            _check(exc, port, "could not be reached")
            assert "Connection refused" in str(exc)
        assert "pa55w0rd" not in repr(repository)
    finally:
        repository.close()


def test_a_server_that_goes_away_while_in_use_is_named_by_every_operation(
    forwarded: tuple[_Forwarder, str],
) -> None:
    forwarder, dsn = forwarded
    table = f"chat_dead_{_free_port()}"
    repository = PostgresChatMemoryRepository(dsn, table_name=table, timeout=POOL_TIMEOUT, min_size=2)
    try:
        repository.save_all("c1", [UserMessage("kept")])
        assert repository.try_lock("c1", "me")
        repository.unlock("c1", "me")

        forwarder.cut()

        for operation in (
            repository.find_conversation_ids,
            lambda: repository.find_by_conversation_id("c1"),
            lambda: repository.save_all("c1", [UserMessage("lost")]),
            lambda: repository.try_lock("c1", "me"),
            repository.find_conversation_ids,  # a pool emptied of its broken connections: probed
        ):
            exc = _finishes(operation)
            assert isinstance(exc, ConnectionError), repr(exc)
            assert f"127.0.0.1:{forwarder.port}" in str(exc) and "pa55w0rd" not in str(exc)
    finally:
        repository.close()
        direct = PostgresChatMemoryRepository(service_url(POSTGRES_ENV), table_name=table)
        assert direct.find_by_conversation_id("c1") == [UserMessage("kept")]  # nothing half-written
        direct.delete_by_conversation_id("c1")
        direct.close()
