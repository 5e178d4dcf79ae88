"""OutputGuardrailAdvisor: the answer checked before any of it reaches the caller or a store.

The advisor does its checking at a *checkpoint* it places in the rest of its chain: just outside
the tool loop (inside any memory advisor there), or — when a memory advisor sits inside the loop —
at the innermost place, where each round is checked as the model answers it. So what a memory
advisor stores is always what passed (or its replacement), and a trip leaves nothing of the answer
stored. On a stream the checkpoint holds the text and releases it once it passed: the whole answer
(``release="answer"``), or sentence by sentence (``release="sentence"``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Final, Literal

from .._streams import closing
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import AdvisorParams, MemoryAdvisor, Ordered, ToolAdvisor, check_order
from ..errors import GuardrailError, GuardrailTripped
from ..guards import Guard, GuardContext, Verdict, check_guards, run_guards, tripped_error
from ..messages import AssistantMessage
from ..model import (
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    StreamAggregation,
)
from ._common import OnTrip, check_choice, finish_ending, guard_context_values, meter_usage, rebased

__all__ = ["OutputGuardrailAdvisor", "sentence_ends"]

Release = Literal["answer", "sentence"]

_SENTENCE_END = re.compile(r"[.!?\n](?=\s)|[\u3002\uff01\uff1f]")
"""Where a sentence ends: after ``.``, ``!``, ``?`` or a newline followed by whitespace (so ``2.50``
ends none), and right after the ideographic full stop and the full-width ``!`` and ``?`` (U+3002, U+FF01,
U+FF1F: no space follows them in Chinese and Japanese)."""


def sentence_ends(text: str, start: int = 0) -> list[int]:
    """The offsets in ``text`` (from ``start``) right after each sentence end."""
    return [m.end() for m in _SENTENCE_END.finditer(text, start)]


def _with_text(chat: ChatResponse, text: str | None) -> ChatResponse:
    """``chat`` whose first generation has ``text``."""
    if not chat.generations:
        return ChatResponse((Generation(AssistantMessage(text)),), chat.metadata)
    first = chat.generations[0]
    output = first.output
    message = AssistantMessage(text, output.tool_calls, output.metadata)
    return ChatResponse((Generation(message, first.finish_reason), *chat.generations[1:]), chat.metadata)


def _text_chunk(text: str, like: ChatClientResponse) -> ChatClientResponse:
    """A chunk holding only ``text`` (no finish reason, no usage), named as ``like`` is."""
    chat = like.chat_response
    assert chat is not None
    metadata = chat.generations[0].output.metadata if chat.generations else {}
    meta = ChatResponseMetadata(chat.metadata.id, chat.metadata.model, provider=chat.metadata.provider)
    return ChatClientResponse(
        ChatResponse((Generation(AssistantMessage(text, (), metadata)),), meta), like.context
    )


class _Checkpoint:
    """Where an OutputGuardrailAdvisor checks, for one of its invocations. ``per_round``: it sits
    inside the tool loop and sees each round (the text released in earlier rounds of the loop
    counts as released)."""

    def __init__(self, owner: OutputGuardrailAdvisor, per_round: bool) -> None:
        self.owner = owner
        self.order = owner.order
        self.per_round = per_round
        self.released = ""  # the text of the answer the caller has, as checked
        self.tripped: GuardrailTripped | None = None
        self._context: tuple[object, GuardContext] | None = None

    @property
    def name(self) -> str:
        return "OutputGuardrailAdvisor checkpoint"

    def _start(self, request: ChatClientRequest) -> None:
        if not self.per_round or request.context.get(AdvisorParams.TOOL_LOOP_ITERATION) in (None, 1):
            self.released = ""

    async def _check(self, text: str, of: ChatClientRequest | ChatClientResponse) -> Verdict:
        known = self._context
        if known is None or known[0] is not of.context:  # the chunks of an answer share one context
            known = self._context = (of.context, GuardContext("output", **guard_context_values(of.context)))
        return await run_guards(self.owner.guards, text, known[1])

    def _trip(self, verdict: Verdict, partial: ChatResponse | None) -> GuardrailTripped:
        error = tripped_error(verdict, "output", partial)
        self.tripped = error
        return error

    def _take(self, verdict: Verdict, checked: str) -> str:
        """Apply a passed verdict on the text so far: the new text to release (after ``released``)."""
        used = verdict.text
        if used != checked and not used.startswith(self.released):
            raise GuardrailError(
                f"guard {verdict.replaced_by!r} (output) replaced text the caller already has; with "
                "release='sentence' a replacement must begin with the text released so far",
                guard=verdict.replaced_by or "?",
                kind="output",
            )
        out = used[len(self.released) :]
        self.released = used
        return out

    # -- call -------------------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        self._start(request)
        response = await chain.next_call(request)
        chat = response.chat_response
        text = chat.text if chat is not None else None
        if chat is None or not text:
            return response
        verdict = await self._check(text, response)
        if not verdict.passed:
            error = self._trip(verdict, chat)
            if self.owner.on_trip == "raise":
                raise error
            return finish_ending(error.message, response.context, chat.metadata.usage, chat)
        if verdict.text == text:
            return response
        return response.copy(chat_response=_with_text(chat, verdict.text))

    # -- stream -----------------------------------------------------------------------------------

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self._start(request)
        by_sentence = self.owner.release == "sentence"
        aggregation = StreamAggregation()  # all but the text of plain text deltas (kept in pending)
        context: object = None  # the context of the chunks taken in so far
        pending = ""  # text that arrived and is not released yet
        async with closing(chain.next_stream(request)) as stream:
            async for chunk in stream:
                chat = chunk.chat_response
                if chat is None or chunk.context is not context or not _plain_delta(chat):
                    aggregation.add_client(chunk)
                    context = chunk.context
                text = chat.text if chat is not None else None
                if not text:
                    continue
                scanned = len(pending)
                pending += text
                if not by_sentence:
                    continue
                done = 0
                for end in sentence_ends(pending, max(scanned - 1, 0)):
                    checked = self.released + pending[done:end]
                    verdict = await self._check(checked, chunk)
                    if not verdict.passed:
                        raise self._trip(verdict, _with_text(aggregation.response(), self.released + pending))
                    out = self._take(verdict, checked)
                    done = end
                    if out:
                        yield _text_chunk(out, chunk)
                pending = pending[done:]
        yield await self._last_chunk(aggregation.client_response(), pending, by_sentence)

    async def _last_chunk(
        self, whole: ChatClientResponse, pending: str, by_sentence: bool
    ) -> ChatClientResponse:
        """The answer's last chunk: the text not released yet, checked with all before it, with the
        answer's finish reason, usage, tool calls and context (or the ``finish`` ending)."""
        chat = whole.chat_response or ChatResponse(())
        out: str | None = None
        if pending:
            checked = self.released + pending
            verdict = await self._check(checked, whole)
            if not verdict.passed:
                error = self._trip(verdict, _with_text(chat, checked))
                if by_sentence or self.owner.on_trip == "raise":
                    raise error
                return finish_ending(error.message, whole.context, chat.metadata.usage, chat)
            out = self._take(verdict, checked)
        return whole.copy(chat_response=_with_text(chat, out or None))


def _plain_delta(chat: ChatResponse) -> bool:
    """True for a chunk that is a text delta and nothing else (the aggregation need not see it:
    its text is kept apart)."""
    generations = chat.generations
    if len(generations) != 1:
        return False
    first = generations[0]
    output = first.output
    meta = chat.metadata
    return not (
        output.tool_calls or output.metadata or first.finish_reason or meta.finish_reason or meta.usage
    )


def _placed(checkpoint: _Checkpoint, advisors: Sequence[object]) -> tuple[object, ...]:
    """The advisors after the guard with its checkpoint in place: just outside the tool loop, or
    innermost when a memory advisor sits inside the loop (or there is no loop)."""
    loop = next((i for i, a in enumerate(advisors) if isinstance(a, ToolAdvisor)), None)
    if loop is None or checkpoint.per_round:
        return (*advisors, checkpoint)
    return (*advisors[:loop], checkpoint, *advisors[loop:])


def _memory_inside_the_loop(advisors: Sequence[object]) -> bool:
    loop = next((i for i, a in enumerate(advisors) if isinstance(a, ToolAdvisor)), None)
    return loop is not None and any(isinstance(a, MemoryAdvisor) for a in advisors[loop + 1 :])


class OutputGuardrailAdvisor:
    """Checks the answer's text with every guard before any of it reaches the caller or a store.

    Call path: the answer is checked before it is returned; a replacement becomes its text (and
    what memory stores). Stream path: ``release="answer"`` holds the text until the whole answer
    passed, then emits it as one chunk (with the finish reason and usage); ``release="sentence"``
    checks the text so far each time a sentence ends and releases the sentences that passed, so a
    long answer streams sentence by sentence. A guard always sees the whole text so far. With
    ``release="sentence"`` a replacement must begin with the text already released (as
    ``pii_guard``'s does), else ``GuardrailError``.

    A trip raises ``GuardrailTripped`` (``partial_response``: the answer tripped on, which never
    reached the caller), or with ``on_trip="finish"`` ends the run with one answer whose text is
    the guard's message (finish reason ``guardrailTripped``). Memory stores nothing of a raised
    trip, nor of a sentence-mode trip; it stores the ``finish`` ending on the call path and with
    ``release="answer"``.

    >>> ChatClient(model, default_advisors=[OutputGuardrailAdvisor(pii_guard(), release="sentence")])
    """

    DEFAULT_ORDER: Final[int] = Ordered.HIGHEST_PRECEDENCE + 150

    def __init__(
        self,
        *guards: Guard,
        on_trip: OnTrip = "raise",
        release: Release = "answer",
        order: int = DEFAULT_ORDER,
    ) -> None:
        self.guards = check_guards(guards, "OutputGuardrailAdvisor")
        self.on_trip: OnTrip = check_choice(on_trip, "on_trip", ("raise", "finish"))
        self.release: Release = check_choice(release, "release", ("answer", "sentence"))
        self.order = check_order(order, inside=True)

    @property
    def name(self) -> str:
        return "OutputGuardrailAdvisor"

    def _checkpoint(self, advisors: Sequence[object]) -> tuple[_Checkpoint, tuple[object, ...]]:
        checkpoint = _Checkpoint(self, _memory_inside_the_loop(advisors))
        return checkpoint, _placed(checkpoint, advisors)

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        _, advisors = self._checkpoint(chain.copy(self).call_advisors)
        return await rebased(chain, advisors).next_call(request)  # type: ignore[arg-type]

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        checkpoint, advisors = self._checkpoint(chain.copy(self).stream_advisors)
        stream = rebased(chain, advisors).next_stream(request)  # type: ignore[arg-type]
        if self.on_trip == "raise" or self.release == "answer":
            return stream  # the checkpoint raises or ends the answer itself: nothing to add here
        return self._finishing(stream, checkpoint, request, chain)

    async def _finishing(
        self,
        stream: AsyncIterator[ChatClientResponse],
        checkpoint: _Checkpoint,
        request: ChatClientRequest,
        chain: StreamAdvisorChain,
    ) -> AsyncIterator[ChatClientResponse]:
        """A sentence-mode stream with ``on_trip="finish"``: a trip the checkpoint raised (through
        any memory, which so stores nothing) becomes the ``finish`` ending."""
        try:
            async with closing(stream):
                async for chunk in stream:
                    yield chunk
        except GuardrailTripped as exc:
            if exc is not checkpoint.tripped:
                raise
            partial = exc.partial_response
            usage = meter_usage(chain)
            if usage is None and isinstance(partial, ChatResponse):
                usage = partial.metadata.usage
            like = partial if isinstance(partial, ChatResponse) else None
            yield finish_ending(exc.message, request.context, usage, like)
