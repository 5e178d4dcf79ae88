"""What the recursive advisors that retry a whole answer share (StructuredOutputValidationAdvisor,
SelfRefineEvaluationAdvisor): one attempt on either path, each attempt's usage, and the buffered
chunks of the accepted attempt re-emitted with the total.

An attempt runs the rest of the chain once and returns the answer as one response, plus what the
path needs to deliver it: nothing on the call path, the attempt's chunks on the stream path (held
back until the advisor has accepted the answer, so a rejected attempt never reaches the caller).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from .._streams import collect
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse, Usage

__all__ = [
    "Attempt",
    "AttemptLoop",
    "accepted_answer",
    "accepted_chunks",
    "buffered_attempt",
    "call_attempt",
    "release_buffered",
    "usage_of",
]

R = TypeVar("R")

Attempt: TypeAlias = Callable[[ChatClientRequest], Awaitable[tuple[ChatClientResponse, R]]]
"""Runs the rest of the chain once: the answer as one response, and what delivers it."""


AttemptLoop: TypeAlias = Callable[
    [ChatClientRequest, Attempt[Any]], Awaitable[tuple[ChatClientResponse, Any]]
]
"""An advisor's loop over attempts (run one, judge it, maybe retry): the accepted answer, and what
delivers it."""


async def accepted_answer(
    loop: AttemptLoop, request: ChatClientRequest, rest: CallAdvisorChain
) -> ChatClientResponse:
    """The call path of an advisor that retries whole answers: ``loop`` over call attempts."""
    response, _ = await loop(request, call_attempt(rest))
    return response


async def accepted_chunks(
    loop: AttemptLoop, request: ChatClientRequest, rest: StreamAdvisorChain, *, with_context: bool = False
) -> AsyncIterator[ChatClientResponse]:
    """The stream path: ``loop`` over buffered attempts, then the accepted attempt's chunks (the
    last one with the answer's context too, ``with_context``)."""
    response, chunks = await loop(request, buffered_attempt(rest))
    for chunk in release_buffered(chunks, response, response.context if with_context else None):
        yield chunk


def call_attempt(rest: CallAdvisorChain) -> Attempt[None]:
    """An attempt on the call path: ``rest.next_call``."""

    async def attempt(request: ChatClientRequest) -> tuple[ChatClientResponse, None]:
        return await rest.next_call(request), None

    return attempt


def buffered_attempt(rest: StreamAdvisorChain) -> Attempt[list[ChatClientResponse]]:
    """An attempt on the stream path: every chunk of ``rest.next_stream`` held back, and the answer
    they make (``aggregate_responses``)."""

    async def attempt(request: ChatClientRequest) -> tuple[ChatClientResponse, list[ChatClientResponse]]:
        chunks = await collect(rest.next_stream(request))
        return ChatClientMessageAggregator.aggregate_responses(chunks), chunks

    return attempt


def usage_of(response: ChatClientResponse) -> Usage | None:
    """The usage an attempt's answer reports (None when it has no response or reports none)."""
    chat = response.chat_response
    return chat.metadata.usage if chat is not None else None


def release_buffered(
    chunks: list[ChatClientResponse], total: ChatClientResponse, context: Mapping[str, Any] | None = None
) -> list[ChatClientResponse]:
    """The held chunks of the accepted attempt, ready to emit: the last chunk that has a response
    carries the usage of ``total`` (the attempts' sum; aggregators keep a stream's last usage), and,
    when ``context`` is given, the very last chunk carries that context (a context-only chunk is
    added when the attempt streamed nothing)."""
    usage = total.chat_response.metadata.usage if total.chat_response is not None else None
    released = list(chunks)
    if usage is not None:
        for i in range(len(released) - 1, -1, -1):
            chat = released[i].chat_response
            if chat is not None:
                if chat.metadata.usage != usage:
                    released[i] = released[i].copy(chat_response=chat.with_usage(usage))
                break
    if context is not None:
        if released:
            released[-1] = released[-1].copy(context=context)
        else:
            released.append(ChatClientResponse(None, context))
    return released
