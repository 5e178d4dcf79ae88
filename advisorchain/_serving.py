"""Rules the two app layers (``serve/`` and ``web/``) share: which memory a served client's
conversations live in, and how a request's work stops when its client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .advisors import MessageChatMemoryAdvisor
from .client import ChatClient
from .errors import ChainConfigurationError
from .memory import ChatMemory, MessageWindowChatMemory

if TYPE_CHECKING:
    from starlette.types import Receive

T = TypeVar("T")


@overload
def served_memory(
    client: ChatClient, memory: ChatMemory | None, *, own_memory: Literal[True], fix: str
) -> tuple[ChatMemory, MessageChatMemoryAdvisor | None]: ...


@overload
def served_memory(
    client: ChatClient, memory: ChatMemory | None, *, own_memory: bool, fix: str
) -> tuple[ChatMemory | None, MessageChatMemoryAdvisor | None]: ...


def served_memory(
    client: ChatClient, memory: ChatMemory | None, *, own_memory: bool, fix: str
) -> tuple[ChatMemory | None, MessageChatMemoryAdvisor | None]:
    """The memory the conversations live in, and the memory advisor the app adds to each request
    (None when the client keeps that memory itself, or there is none).

    With no ``memory``, the client's own MessageChatMemoryAdvisor's memory is used, else (with
    ``own_memory``) a new in-memory one, else none. A ``memory`` other than the one the client
    keeps is refused; ``fix`` ends that error, saying how to pass the right one."""
    own = [a for a in client.default_advisors if isinstance(a, MessageChatMemoryAdvisor)]
    if memory is None:
        if own:
            return own[0].chat_memory, None
        if not own_memory:
            return None, None
        memory = MessageWindowChatMemory(max_messages=200)
        return memory, MessageChatMemoryAdvisor(memory)
    if any(a.chat_memory is memory for a in own):
        return memory, None
    if own:
        raise ChainConfigurationError(
            f"the client keeps its conversations in another memory (its MessageChatMemoryAdvisor's); {fix}"
        )
    return memory, MessageChatMemoryAdvisor(memory)


async def until_disconnect(receive: Receive, work: Coroutine[Any, Any, T]) -> T | None:
    """Run ``work`` while waiting for the client to go away; when it does, ``work`` is cancelled at
    once (its run stops, memory stores nothing of the turn) and the result is None. An error
    ``work`` raised is raised here."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(wait_disconnect(receive))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watch):
            pending.cancel()
        await asyncio.wait({task, watch})
    if task.cancelled():
        return None
    return task.result()


async def wait_disconnect(receive: Receive) -> None:
    """Returns when the client has gone away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
