"""ContextCompactionAdvisor: keeps what the model is sent under a token budget by summarizing the
older part of the conversation instead of dropping it.

It sits inside the tool loop and looks at every round's prompt. Its count is the prompt tokens the
provider reported for the previous model call (of this loop, or of the conversation's last request)
plus an estimate of the messages added since (4 characters a token, ``advisorchain._tokens``). When
the count is over ``max_tokens`` it replaces the older messages with one ``UserMessage`` that
summarizes them, and hands the loop (and memory) the rewritten history through
``AdvisorParams.HISTORY_REPLACEMENTS`` (see ``advisorchain.advisors.history``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from .. import observability as obs
from .._checks import check_int
from .._streams import closing
from .._tokens import estimate_tokens
from ..chain import Advisor, CallAdvisorChain, StreamAdvisorChain, rebased
from ..chain.vocabulary import COMPACTION_ORDER, AdvisorParams, MemoryAdvisor, check_order
from ..errors import ChainConfigurationError, ContextLengthExceededError, ModelError
from ..memory.api import conversation_id_of
from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ..model import ChatClientRequest, ChatClientResponse, ChatModel, ChatOptions, ChatResponse, Prompt, Usage
from .history import HistoryReplacement, replace_history, replacements_in
from .prompt_cache import PromptCacheAdvisor

__all__ = ["ContextCompactionAdvisor", "is_summary"]

SUMMARY_PREFIX = "Summary of the earlier conversation:"
"""How every summary message's text starts (the mark by which a summary is known again)."""

_SEEN = "advisorchain.compaction.last_prompt"
"""Context key: what the previous round of this tool loop sent and the prompt tokens reported for it."""

_SPAN = "advisorchain.compaction."


def is_summary(message: Message) -> bool:
    """True for a summary message a ContextCompactionAdvisor wrote (it never counts as a user turn)."""
    return isinstance(message, UserMessage) and message.text.startswith(SUMMARY_PREFIX)


@runtime_checkable
class _PromptClient(Protocol):
    """A ChatClient, as the summarizer (its ``prompt()`` builds the summarizing request)."""

    def prompt(self, prompt: Any = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class _Seen:
    """A prompt as the model was sent it, and the prompt tokens the provider reported (None: unknown)."""

    instructions: Sequence[Message]
    prompt_tokens: int | None


@dataclass(frozen=True, slots=True)
class _Compacted:
    """The request to send, how many messages the received prompt had, the history replacements
    made to get there, and the summaries' usage (when the chain's own model wrote them)."""

    request: ChatClientRequest
    messages_before: int
    replacements: tuple[HistoryReplacement, ...] = ()
    summary_usage: Usage | None = None


class ContextCompactionAdvisor:
    """Summarizes the older part of a conversation that outgrows ``max_tokens``.

    The count is the ``prompt_tokens`` the provider reported for the previous round of this tool
    loop (or, when the request names a conversation, for that conversation's last request) plus an
    estimate of the messages added since (4 characters a token); after a compaction, or when no
    usage is known, the estimate alone. When over, every message before the newest
    ``keep_last_turns`` user turns — and, when that is not enough, the oldest whole rounds of the
    current turn — is replaced by one ``UserMessage`` whose text starts ``Summary of the earlier
    conversation:``, written by ``summarizer`` (default: the chain's own model, called once with a
    summarizing instruction and no tools; a ``ChatModel`` or a ``ChatClient`` of your own may be
    given). System messages (they stay first), the current question and the newest tool round are
    never summarized, and a round (assistant tool-call message + its tool responses) is never
    split. The summary takes the place of the first message it replaces and never counts as a user
    turn; when the history is over again later, the old summary is summarized together with the
    newly replaced messages. When nothing may be summarized the prompt is sent as is and the
    summarizer is not called. "Not enough" means the kept messages plus room for the summary
    (``SUMMARY_SHARE`` of ``max_tokens``, at most ``SUMMARY_MAX_TOKENS``) are still over.

    The compacted history is what the conversation builds on from then on: the tool loop continues
    from it and a ``MessageChatMemoryAdvisor`` stores it in place of what it replaced, so each part
    is summarized once (``AdvisorParams.HISTORY_REPLACEMENTS``). A ``ContextLengthExceededError``
    from the model makes it compact (as if over the limit) and retry that call once (on the stream
    path only while no chunk of it went out). It works on the prompt the model is sent: when a
    memory advisor comes after it in the chain, it runs right after that advisor, so it sees the
    history memory adds. Its span has ``advisorchain.compaction.messages_before``,
    ``.messages_after`` (messages in the prompt, system messages included) and ``.summarized``.

    >>> memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(max_messages=1000))
    >>> ChatClient(model, default_advisors=[memory, ContextCompactionAdvisor(max_tokens=100_000)])
    """

    DEFAULT_ORDER: ClassVar[int] = COMPACTION_ORDER
    """Inside the tool loop (after the ToolCallingAdvisor), so it sees every round."""

    SUMMARY_PREFIX: ClassVar[str] = SUMMARY_PREFIX
    """How the summary message's text starts."""

    SUMMARY_INSTRUCTION: ClassVar[str] = (
        "You compact a conversation between a user and an AI assistant so that the assistant can "
        "continue it without the full transcript. Summarize the transcript you are given: keep every "
        "fact, decision, name, number, file, open question and unfinished task, and what each tool "
        "call found; leave out pleasantries and repetition. Write plain prose, at most about "
        "{words} words, without a preamble."
    )
    """The summarizer's instruction (``{words}`` becomes the summary's length budget in words)."""

    ALIGNED_INSTRUCTION_SUFFIX: ClassVar[str] = (
        "\n\nSummarize the conversation above in this way. Answer with text only: do not call any tool."
    )
    """Ends the instruction of a cache-aligned summary request (one ``UserMessage`` after the
    conversation's own prefix, API.md §21): the reply's text is the summary, its tool calls are ignored."""

    SUMMARY_SHARE: ClassVar[float] = 0.25
    """The part of ``max_tokens`` kept free for the summary when choosing what to summarize."""

    SUMMARY_MAX_TOKENS: ClassVar[int] = 2048
    """The most room kept for the summary, whatever ``max_tokens`` is."""

    _CONVERSATIONS_KEPT: ClassVar[int] = 1024
    """How many conversations' last prompts are remembered (least recently used go first)."""

    def __init__(
        self,
        summarizer: ChatModel | _PromptClient | None = None,
        *,
        max_tokens: int,
        keep_last_turns: int = 1,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self.summarizer: ChatModel | _PromptClient | None = _checked_summarizer(summarizer)
        self.max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        self.keep_last_turns = check_int(keep_last_turns, "keep_last_turns", minimum=0)
        self.order = check_order(order, inside=True)
        self._conversations: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``"Context Compaction Advisor"``."""
        return "Context Compaction Advisor"

    @property
    def summary_tokens(self) -> int:
        """The room kept for the summary: ``SUMMARY_SHARE`` of ``max_tokens``, at most
        ``SUMMARY_MAX_TOKENS``."""
        return min(int(self.max_tokens * self.SUMMARY_SHARE), self.SUMMARY_MAX_TOKENS)

    # -- the two paths -------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """Compact the prompt when it is over the budget, then call the rest of the chain (once
        more, compacted further, after a ``ContextLengthExceededError``)."""
        span = obs.current_span()
        moved = _after_last_memory(self, chain.copy(self).call_advisors, span)
        if moved is not None:
            return await rebased(chain, moved).next_call(request)
        return await self._run_call(request, chain, span)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """As ``advise_call``; after a ``ContextLengthExceededError`` the call is retried only while
        none of its chunks went out."""
        span = obs.current_span()  # the chain makes it current while this generator runs
        moved = _after_last_memory(self, chain.copy(self).stream_advisors, span)
        if moved is not None:
            source = rebased(chain, moved).next_stream(request)
        else:
            source = self._run_stream(request, chain, span)
        async with closing(source) as stream:
            async for chunk in stream:
                yield chunk

    async def _run_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain, span: obs.Span | None
    ) -> ChatClientResponse:
        """The call path where this advisor stands in ``chain`` (``span``: its span)."""
        compacted = await self._compacted(request, chain, span)
        try:
            response = await chain.next_call(compacted.request)
        except ContextLengthExceededError:
            again = await self._summarized(compacted, chain, span, forced=True)
            if again is None:
                raise
            compacted = again
            response = await chain.next_call(compacted.request)  # inside except: the error is chained
        return self._finished(request, compacted, response)

    async def _run_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain, span: obs.Span | None
    ) -> AsyncIterator[ChatClientResponse]:
        """The stream path where this advisor stands in ``chain`` (``span``: its span)."""
        compacted = await self._compacted(request, chain, span)
        delivered = False
        try:
            async with closing(self._passed_on(request, compacted, chain)) as stream:
                async for chunk in stream:
                    delivered = True
                    yield chunk
        except ContextLengthExceededError:
            again = None
            if not delivered:
                again = await self._summarized(compacted, chain, span, forced=True)
            if again is None:
                raise
            async with closing(self._passed_on(request, again, chain)) as stream:
                async for chunk in stream:
                    yield chunk

    # -- what goes back ------------------------------------------------------------------------

    def _finished(
        self, received: ChatClientRequest, compacted: _Compacted, response: ChatClientResponse
    ) -> ChatClientResponse:
        """The response with the summaries' usage added and this advisor's context keys set."""
        chat = response.chat_response
        usage = chat.metadata.usage if chat is not None else None
        seen = _Seen(compacted.request.prompt.instructions, usage.prompt_tokens if usage else None)
        self._remember(received, seen)
        if chat is not None and usage is not None and compacted.summary_usage is not None:
            chat = chat.with_usage(usage + compacted.summary_usage)
        return ChatClientResponse(chat, _context(response.context, compacted, seen))

    async def _passed_on(
        self, received: ChatClientRequest, compacted: _Compacted, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """The rest of the chain's chunks, each carrying this advisor's context keys; a chunk with
        usage also carries the summaries' usage."""
        sent = compacted.request.prompt.instructions
        seen = _Seen(sent, None)
        last: tuple[Mapping[str, Any], _Seen, Mapping[str, Any]] | None = None
        async with closing(chain.next_stream(compacted.request)) as stream:
            async for chunk in stream:
                chat = chunk.chat_response
                usage = chat.metadata.usage if chat is not None else None
                if chat is not None and usage is not None:
                    seen = _Seen(sent, usage.prompt_tokens)
                    if compacted.summary_usage is not None:
                        chat = chat.with_usage(usage + compacted.summary_usage)
                if last is None or last[0] is not chunk.context or last[1] is not seen:
                    # built once per distinct context: a read-only snapshot given again is shared
                    context = ChatClientResponse(None, _context(chunk.context, compacted, seen)).context
                    last = (chunk.context, seen, context)
                yield ChatClientResponse(chat, last[2])
        self._remember(received, seen)

    # -- counting and compacting ---------------------------------------------------------------

    def count_tokens(self, request: ChatClientRequest) -> int:
        """The count this advisor compares with ``max_tokens`` for ``request``'s prompt: the prompt
        tokens reported for the previous model call plus an estimate of the messages added since,
        or the estimate alone."""
        instructions = request.prompt.instructions
        seen = self._seen_for(request)
        if seen is None or seen.prompt_tokens is None:
            return estimate_tokens(instructions)
        return seen.prompt_tokens + estimate_tokens(_added_since(seen.instructions, instructions))

    async def _compacted(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain, span: obs.Span | None
    ) -> _Compacted:
        """The request to send: ``request`` itself when its count is within the budget or nothing
        may be summarized, else compacted."""
        start = _Compacted(request, len(request.prompt.instructions))
        if self.count_tokens(request) <= self.max_tokens:
            _annotate(span, start.messages_before, start.messages_before, summarized=False)
            return start
        return await self._summarized(start, chain, span, forced=False) or start

    async def _summarized(
        self,
        start: _Compacted,
        chain: CallAdvisorChain | StreamAdvisorChain,
        span: obs.Span | None,
        *,
        forced: bool,
    ) -> _Compacted | None:
        """``start`` compacted (further); None when nothing new may be summarized. ``forced``: the
        model said the prompt does not fit, whatever the count says."""
        request = start.request
        instructions = request.prompt.instructions
        replaced = _to_summarize(
            instructions, self.keep_last_turns, self.max_tokens, self.summary_tokens, forced=forced
        )
        if replaced is None:
            _annotate(span, start.messages_before, len(instructions), summarized=bool(start.replacements))
            return None
        text, usage = await self._summarize(replaced, request, chain)
        replacement = HistoryReplacement(replaced, (UserMessage(f"{SUMMARY_PREFIX} {text}"),))
        compacted = _systems_first(replace_history(instructions, [replacement]))
        _annotate(span, start.messages_before, len(compacted), summarized=True)
        return _Compacted(
            request.copy(prompt=request.prompt.copy(instructions=compacted)),
            start.messages_before,
            (*start.replacements, replacement),
            Usage.sum([start.summary_usage, usage]),
        )

    async def _summarize(
        self,
        messages: Sequence[Message],
        request: ChatClientRequest,
        chain: CallAdvisorChain | StreamAdvisorChain,
    ) -> tuple[str, Usage | None]:
        """The summary of ``messages`` and its usage (None unless the chain's own model wrote it:
        a summarizer of your own counts on its own)."""
        words = max(1, self.summary_tokens * 3 // 4)
        instruction = self.SUMMARY_INSTRUCTION.replace("{words}", str(words))
        transcript = "The conversation so far:\n\n" + _transcript(messages)
        summarizer = self.summarizer
        usage: Usage | None = None
        cache = _prompt_cache_of(chain) if summarizer is None else None
        if cache is not None:
            # Cache-aligned (API.md §21): the conversation's own prefix, marked as the cache advisor
            # marks a call, with its tools, tool choice and cache key, then one instruction.
            prefix = _through_last(request.prompt.instructions, messages)
            aligned = cache.prepare(request.copy(prompt=request.prompt.copy(instructions=prefix)))
            ask = UserMessage(instruction + self.ALIGNED_INSTRUCTION_SUFFIX)
            options = aligned.prompt.options
            prompt = Prompt(
                (*aligned.prompt.instructions, ask), options.copy(output_schema=None) if options else None
            )
            context = {k: v for k, v in request.context.items() if k != AdvisorParams.OUTPUT_FORMAT}
            chat = (await own_model_chain(chain).next_call(ChatClientRequest(prompt, context))).chat_response
            usage = chat.metadata.usage if chat is not None else None
        elif summarizer is None:
            prompt = Prompt(
                (SystemMessage(instruction), UserMessage(transcript)), _without_tools(request.prompt.options)
            )
            context = {k: v for k, v in request.context.items() if k != AdvisorParams.OUTPUT_FORMAT}
            chat = (await own_model_chain(chain).next_call(ChatClientRequest(prompt, context))).chat_response
            usage = chat.metadata.usage if chat is not None else None
        elif isinstance(summarizer, _PromptClient):
            chat = await summarizer.prompt().system(instruction).user(transcript).acall().chat_response()
        else:
            prompt = Prompt((SystemMessage(instruction), UserMessage(transcript)))
            chat = (await CallAdvisorChain((), summarizer).next_call(ChatClientRequest(prompt))).chat_response
        text = chat.text if isinstance(chat, ChatResponse) else None
        if text is None or not text.strip():
            raise ModelError(
                f"the summarizer of {self.name!r} returned no text, so the conversation cannot be "
                f"compacted (it was asked to summarize {len(messages)} messages); check the summarizer "
                "model, or give ContextCompactionAdvisor another one"
            )
        return text.strip(), usage

    # -- what was sent before ------------------------------------------------------------------

    def _seen_for(self, request: ChatClientRequest) -> _Seen | None:
        """What the previous model call of this loop (else of this conversation) was sent."""
        in_loop = request.context.get(_SEEN)
        if isinstance(in_loop, _Seen):
            return in_loop
        conversation = conversation_id_of(request.context)
        if conversation is None:
            return None
        with self._lock:
            return self._conversations.get(conversation)

    def _remember(self, request: ChatClientRequest, seen: _Seen) -> None:
        conversation = conversation_id_of(request.context)
        if conversation is None:
            return
        with self._lock:
            self._conversations[conversation] = seen
            self._conversations.move_to_end(conversation)
            while len(self._conversations) > self._CONVERSATIONS_KEPT:
                self._conversations.popitem(last=False)

    def __repr__(self) -> str:
        return (
            f"ContextCompactionAdvisor({self.summarizer!r}, max_tokens={self.max_tokens}, "
            f"keep_last_turns={self.keep_last_turns}, order={self.order})"
        )


class _AfterMemory:
    """The compaction advisor, run right after the last memory advisor that followed it (so that
    it sees the history that memory adds); its attributes go on the advisor's own span."""

    def __init__(self, owner: ContextCompactionAdvisor, span: obs.Span | None) -> None:
        self._owner, self._span = owner, span

    @property
    def name(self) -> str:
        return f"{self._owner.name} (after memory)"

    @property
    def order(self) -> int:
        return self._owner.order

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        return await self._owner._run_call(request, chain, self._span)

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        return self._owner._run_stream(request, chain, self._span)


def _after_last_memory(
    owner: ContextCompactionAdvisor, after: Sequence[Advisor], span: obs.Span | None
) -> tuple[Advisor, ...] | None:
    """The advisors after ``owner`` with it moved behind the last memory advisor among them; None
    when no memory advisor follows it."""
    last = max((i for i, a in enumerate(after) if isinstance(a, MemoryAdvisor)), default=None)
    if last is None:
        return None
    return (*after[: last + 1], _AfterMemory(owner, span), *after[last + 1 :])


# -- helpers ---------------------------------------------------------------------------------------


def _checked_summarizer(summarizer: object) -> Any:
    if summarizer is None or isinstance(summarizer, _PromptClient):
        return summarizer
    if callable(getattr(summarizer, "call", None)) and callable(getattr(summarizer, "stream", None)):
        return summarizer
    raise ChainConfigurationError(
        f"summarizer must be a ChatModel, a ChatClient or None (the chain's own model), got {summarizer!r}"
    )


def _without_tools(options: ChatOptions | None) -> ChatOptions | None:
    if options is None:
        return None
    return options.copy(tool_callbacks=(), tool_context={}, output_schema=None)


def _context(base: Mapping[str, Any], compacted: _Compacted, seen: _Seen) -> dict[str, Any]:
    """``base`` with what this advisor adds: what it sent (for the loop's next round) and its
    history replacements before those of advisors inside it."""
    context = {**base, _SEEN: seen}
    if compacted.replacements:
        stale = replacements_in(compacted.request.context)
        inner = [r for r in replacements_in(base) if not any(r is s for s in stale)]
        context[AdvisorParams.HISTORY_REPLACEMENTS] = (*compacted.replacements, *inner)
    return context


def _annotate(span: obs.Span | None, before: int, after: int, *, summarized: bool) -> None:
    if span is None:
        return
    span.set_attribute(_SPAN + "messages_before", before)
    span.set_attribute(_SPAN + "messages_after", after)
    span.set_attribute(_SPAN + "summarized", summarized)


def _added_since(before: Sequence[Message], now: Sequence[Message]) -> list[Message]:
    """The messages of ``now`` that ``before`` did not have (each message of ``before`` matched once)."""
    n, limit = 0, min(len(before), len(now))
    while n < limit and (before[n] is now[n] or before[n] == now[n]):
        n += 1
    remaining = list(before[n:])
    added: list[Message] = []
    for message in now[n:]:
        for j, old in enumerate(remaining):
            if old is message or old == message:
                del remaining[j]
                break
        else:
            added.append(message)
    return added


def _systems_first(messages: Sequence[Message]) -> tuple[Message, ...]:
    systems = [m for m in messages if isinstance(m, SystemMessage)]
    return (*systems, *(m for m in messages if not isinstance(m, SystemMessage)))


def _starts_turn(message: Message) -> bool:
    return isinstance(message, UserMessage) and not is_summary(message)


def _rounds(messages: Sequence[Message], start: int) -> list[range]:
    """``messages[start:]`` cut into rounds: each starts at an assistant message and holds the tool
    responses after it (messages before the first assistant message form a group of their own)."""
    groups: list[list[int]] = []
    for i in range(start, len(messages)):
        if not groups or isinstance(messages[i], AssistantMessage):
            groups.append([i, i + 1])
        else:
            groups[-1][1] = i + 1
    return [range(a, b) for a, b in groups]


def _to_summarize(
    instructions: Sequence[Message], keep_last_turns: int, budget: int, room: int, *, forced: bool
) -> tuple[Message, ...] | None:
    """The messages to replace by a summary, in order, or None when nothing new may be summarized.

    Every message before the newest ``keep_last_turns`` user turns; then, while the kept messages
    plus ``room`` for the summary are over ``budget`` (or, ``forced``, when the earlier turns hold
    nothing new), the oldest whole rounds of the current turn — never its question, never its
    newest round, never a system message.
    """
    rest = [m for m in instructions if not isinstance(m, SystemMessage)]
    starts = [i for i, m in enumerate(rest) if _starts_turn(m)]
    current = starts[-1] if starts else 0
    rounds = _rounds(rest, current + 1 if starts else 0)
    older_rounds = rounds[:-1]  # the newest round is never summarized
    if keep_last_turns == 0:
        boundary, taken = current, len(older_rounds)
    else:
        boundary = (
            starts[-keep_last_turns] if len(starts) >= keep_last_turns else (starts[0] if starts else 0)
        )
        systems = [m for m in instructions if isinstance(m, SystemMessage)]
        kept = estimate_tokens(systems) + room + estimate_tokens(rest[boundary:])
        taken = 0
        while taken < len(older_rounds) and kept > budget:
            kept -= estimate_tokens(rest[i] for i in older_rounds[taken])
            taken += 1
        if forced and taken == 0 and not _has_new(rest[:boundary]):
            taken = len(older_rounds)
    chosen = [*range(boundary), *(i for r in older_rounds[:taken] for i in r)]
    replaced = tuple(rest[i] for i in chosen)
    return replaced if _has_new(replaced) else None


def _has_new(messages: Sequence[Message]) -> bool:
    """True when ``messages`` hold something besides earlier summaries."""
    return any(not is_summary(m) for m in messages)


def _transcript(messages: Sequence[Message]) -> str:
    """``messages`` as plain text for the summarizer (no tool messages: it is called without tools)."""
    lines: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            lines.append(m.text if is_summary(m) else f"User: {m.text}")
        elif isinstance(m, AssistantMessage):
            if m.text:
                lines.append(f"Assistant: {m.text}")
            lines.extend(f"Assistant called tool {c.name} with {c.arguments}" for c in m.tool_calls)
        elif isinstance(m, ToolResponseMessage):
            lines.extend(f"Tool {r.name} returned: {r.response_data}" for r in m.responses)
        else:
            lines.append(f"System: {m.text}")
    return "\n".join(lines)


def _prompt_cache_of(chain: CallAdvisorChain | StreamAdvisorChain) -> PromptCacheAdvisor | None:
    """The chain's PromptCacheAdvisor, or None."""
    advisors = chain.call_advisors if isinstance(chain, CallAdvisorChain) else chain.stream_advisors
    for advisor in advisors:
        if isinstance(advisor, PromptCacheAdvisor):
            return advisor
    return None


def _through_last(instructions: Sequence[Message], replaced: Sequence[Message]) -> tuple[Message, ...]:
    """``instructions`` from the first message through the last of ``replaced`` (found by identity,
    else by equality): the prefix a cache-aligned summary request sends."""
    last = 0
    wanted = {id(m) for m in replaced}
    for i, message in enumerate(instructions):
        if id(message) in wanted or any(message == r for r in replaced):
            last = i
    return tuple(instructions[: last + 1])


def own_model_chain(chain: CallAdvisorChain | StreamAdvisorChain) -> CallAdvisorChain:
    """A call chain straight to ``chain``'s model, in the same run: the summary it writes counts
    in the run's usage and limits."""
    return CallAdvisorChain((), chain.model, run=chain.run)
