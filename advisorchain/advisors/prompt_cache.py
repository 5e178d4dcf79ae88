"""PromptCacheAdvisor (API.md §21): marks where the stable prefix of each model call ends, names a
cache for the providers that route by key, and reports who broke the cache.

A tool loop re-sends a growing prompt every round. The advisor sits innermost (after memory,
compaction and retrieval), so it sees the prompt as the model is sent it, and for each call it

* marks the prompt's last system message and its last message with a cache point
  (``metadata["cache_point"]`` = its ``ttl``), keeps the newest two marks a caller set on other
  messages and takes the others off — Anthropic takes at most 4 (§8);
* sets ``ChatOptions.cache_key`` (unless the caller gave one) to a SHA-256 digest of the
  conversation id when the request names one, else of the system text and the tool names, so the
  key is the same in every process and never shows the id itself;
* compares the call's cache use with the previous call of the run (kept in a run slot; for a run's
  first call, the last call it saw on that conversation): when the cached share of the prompt fell
  although the prompt grew and less than the whole previous prompt was read, the call is a miss —
  the model span gets a ``cache_miss`` event naming the first message that differs from the
  previous prompt and the advisor responsible (``responsible``: from the run's recorded hops, which
  ``records_hops`` asks the kernel for);
* puts a ``CacheReport`` of the call in the response context under ``AdvisorParams.CACHE_REPORT``
  (on the stream path in the context of the chunk that ends the call's answer or carries its usage,
  or of one trailing context-only chunk when neither came).

With tracing on, the report is made inside the model span — the advisor hands the rest of the
chain its model behind a thin wrapper (``_ReportingModel``) that reads each answer's usage there —
so that the miss is an event of that span; with tracing off it is made from the response, and the
advisor costs a few microseconds a call.
"""

from __future__ import annotations

import hashlib
import operator
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from .. import observability as obs
from .._cache_points import CACHE_POINT, CacheTtl, check_ttl, with_cache_point, without_cache_point
from ..chain import CallAdvisorChain, Run, StreamAdvisorChain, model_prompt, rebased
from ..chain.vocabulary import AdvisorParams, Ordered, check_order
from ..memory.api import ChatMemory, conversation_id_of
from ..messages import Message, SystemMessage
from ..model import ChatClientRequest, ChatClientResponse, ChatModel, ChatOptions, ChatResponse, Prompt, Usage

__all__ = ["CacheReport", "PromptCacheAdvisor"]

_REPORT: Final = AdvisorParams.CACHE_REPORT
_CONVERSATION: Final = ChatMemory.CONVERSATION_ID
_EVENT: Final = "cache_miss"
_ATTR: Final = "advisorchain.cache."
_USER_MARKS_KEPT: Final = 2
_CONVERSATIONS_KEPT: Final = 1024
_KEYS_KEPT: Final = 256


@dataclass(frozen=True, slots=True)
class CacheReport:
    """The prompt cache use of a run's last model call (``AdvisorParams.CACHE_REPORT``).

    ``read_tokens`` / ``write_tokens``: the prompt tokens the provider read from / wrote to its cache
    (0 when it reported none); ``prompt_tokens``: the call's whole prompt (cached tokens included).
    ``changed_by`` and ``changed_index`` are those of a ``cache_miss`` on that call — the advisor
    responsible and the index of the first message that changed — else None."""

    read_tokens: int
    write_tokens: int
    prompt_tokens: int
    changed_by: str | None = None
    changed_index: int | None = None

    @property
    def cached_share(self) -> float:
        """``read_tokens / prompt_tokens`` (0.0 for an empty or unreported prompt)."""
        return self.read_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


_NO_REPORT: Final = CacheReport(0, 0, 0)
"""The report of a call whose usage never came."""


class _Call:
    """A model call as the advisor remembers it: the messages sent, the usage reported and the
    options (for the tool definitions and tool choice)."""

    __slots__ = ("messages", "options", "usage")

    def __init__(self, messages: Sequence[Message], usage: Usage | None, options: ChatOptions | None) -> None:
        self.messages, self.usage, self.options = messages, usage, options


def tools_of(options: ChatOptions | None) -> tuple[object, ...]:
    """What of a call's options comes before its messages in a provider's cached prefix: the tool
    definitions, in order, and the tool choice."""
    if options is None:
        return ((), None)
    return (tuple(options.tool_registry.definitions), options.extra.get("tool_choice"))


class PromptCacheAdvisor:
    """Marks the cacheable prefix of every model call, sets a stable cache key, and reports cache
    misses with the advisor that caused them (see the module docstring and API.md §21).

    ``ttl`` is the time to live of its marks: ``"5m"`` (default) or ``"1h"``; any other value is a
    ValueError. Give it to a ChatClient like any advisor; its default order puts it inside the tool
    loop, after memory, compaction and retrieval::

        client = ChatClient(model, default_advisors=[PromptCacheAdvisor()])

    With it in the chain, a ``ContextCompactionAdvisor`` sends its summary request as the
    conversation's own prefix, so the summary reads the cache (§14, §21)."""

    DEFAULT_ORDER: ClassVar[int] = Ordered.LOWEST_PRECEDENCE - 100
    """Innermost but for the model link: it sees the prompt as the model is sent it."""

    records_hops: ClassVar[bool] = True
    """Asks the run to record each advisor's request, so a cache miss can name who changed the prompt."""

    def __init__(self, *, ttl: CacheTtl = "5m", order: int = DEFAULT_ORDER) -> None:
        check_ttl(ttl, "PromptCacheAdvisor(ttl=...)")
        self.ttl: CacheTtl = ttl
        self.order = check_order(order, inside=True)
        self._conversations: OrderedDict[str, _Call] = OrderedDict()
        self._lock = threading.Lock()
        self._keys: dict[tuple[str, ...], str] = {}
        self._memo: tuple[Message, Message] | None = None
        self._scanned: tuple[Sequence[Message], int, tuple[int, ...]] | None = None
        self._keyed: tuple[object, ...] | None = None

    @property
    def name(self) -> str:
        """``"Prompt Cache Advisor"``."""
        return "Prompt Cache Advisor"

    def __repr__(self) -> str:
        return f"PromptCacheAdvisor(ttl={self.ttl!r}, order={self.order})"

    # -- marking -------------------------------------------------------------------------------

    def prepare(self, request: ChatClientRequest) -> ChatClientRequest:
        """``request`` as this advisor passes it on: its last system message and its last message
        marked with ``ttl``, at most the newest two of the caller's other marks kept, and
        ``cache_key`` set (unless given). No message's text or other metadata changes."""
        prompt = request.prompt
        instructions = prompt.instructions
        system, found = self._scan(instructions)
        messages = self._mark(instructions, system, found)
        system_text = instructions[system].text if system >= 0 else None  # type: ignore[union-attr]
        options = self._with_key(prompt.options, messages, request.context, system_text)
        if messages is prompt.instructions and options is prompt.options:
            return request
        return ChatClientRequest(Prompt(messages, options), request.context)

    def mark(self, messages: Sequence[Message]) -> Sequence[Message]:
        """``messages`` marked as this advisor marks a call (the same sequence when nothing changes)."""
        system, found = self._scan(messages)
        return self._mark(messages, system, found)

    def _mark(self, messages: Sequence[Message], system: int, found: list[int]) -> Sequence[Message]:
        count = len(messages)
        if not count:
            return messages
        ttl = self.ttl
        last = count - 1
        users = [i for i in found if i != last and i != system]
        strip = users[:-_USER_MARKS_KEPT] if len(users) > _USER_MARKS_KEPT else ()
        if not strip and type(messages) is tuple and 0 <= system < last:
            # The common case (a system message, a caller's marks within the limit), from slices.
            first, final = messages[system], messages[last]
            if first.metadata.get(CACHE_POINT) != ttl:
                first = self._marked(first)
            if final.metadata.get(CACHE_POINT) != ttl:
                final = self._marked(final)
            if first is messages[system] and final is messages[last]:
                return messages
            return (*messages[:system], first, *messages[system + 1 : last], final)
        changed: list[Message] | None = None
        for i in (system, last):
            if i < 0:
                continue
            message = messages[i]
            if message.metadata.get(CACHE_POINT) != ttl:
                if changed is None:
                    changed = list(messages)
                changed[i] = self._marked(message)
        for i in strip:
            if changed is None:
                changed = list(messages)
            changed[i] = without_cache_point(messages[i])
        return messages if changed is None else tuple(changed)

    def _scan(self, messages: Sequence[Message]) -> tuple[int, list[int]]:
        """(the index of the last system message or -1, the indices of the marked messages). A
        tool loop's prompt is the previous round's plus new messages: the same objects are not
        read again."""
        start, system, found = 0, -1, []
        scanned = self._scanned
        if scanned is not None:
            before = scanned[0]
            if len(before) <= len(messages) and all(map(operator.is_, before, messages)):
                start, system, found = len(before), scanned[1], list(scanned[2])
        for i in range(start, len(messages)):
            message = messages[i]
            metadata = message.metadata
            if metadata and CACHE_POINT in metadata:
                found.append(i)
            if isinstance(message, SystemMessage):
                system = i
        self._scanned = (messages, system, tuple(found))
        return system, found

    def _marked(self, message: Message) -> Message:
        """``message`` with this advisor's mark; the system message of a loop is marked once."""
        memo = self._memo
        if memo is not None and memo[0] is message and memo[1].metadata.get(CACHE_POINT) == self.ttl:
            return memo[1]
        marked = with_cache_point(message, self.ttl)
        if isinstance(message, SystemMessage):
            self._memo = (message, marked)
        return marked

    def cache_key(
        self, messages: Sequence[Message], options: ChatOptions | None, context: Mapping[str, Any]
    ) -> str:
        """The key this advisor gives a call: a digest of the conversation id when ``context`` names
        one, else of the last system text and the tool names, in order."""
        conversation = conversation_id_of(context)
        if conversation is not None:
            where: tuple[str, ...] = ("conversation", conversation)
        else:
            system = _last_system_text(messages) or ""
            names = [d.name for d in options.tool_registry.definitions] if options is not None else []
            where = ("prompt", system, *names)
        key = self._keys.get(where)  # a digest of a long system text is made once
        if key is None:
            key = _digest(*where)
            if len(self._keys) >= _KEYS_KEPT:
                self._keys.clear()
            self._keys[where] = key
        return key

    def _with_key(
        self,
        options: ChatOptions | None,
        messages: Sequence[Message],
        context: Mapping[str, Any],
        system_text: str | None,
    ) -> ChatOptions | None:
        if options is not None and options.cache_key is not None:
            return options
        conversation = context.get(ChatMemory.CONVERSATION_ID)
        keyed = self._keyed  # the options keyed last: a tool loop sends the same ones each round
        if (
            keyed is not None
            and keyed[0] is options
            and keyed[1] == conversation
            and (conversation is not None or keyed[2] is system_text)
        ):
            return keyed[3]  # type: ignore[return-value]
        key = self.cache_key(messages, options, context)
        if options is None:
            copied = ChatOptions(cache_key=key)
        else:
            # A field-for-field copy: ChatOptions.copy would build the tool registry again.
            copied = object.__new__(ChatOptions)
            for name in ChatOptions.__slots__:
                object.__setattr__(copied, name, getattr(options, name))
            object.__setattr__(copied, "cache_key", key)
        self._keyed = (options, conversation, None if conversation is not None else system_text, copied)
        return copied

    # -- the two paths -------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """Mark the call, send it on, and put the call's ``CacheReport`` in the response context."""
        sent = self.prepare(request)
        run = chain.run
        watch = _Watch(self, request, run, self._previous(request, run))
        if _traced():  # the report is made inside the model span, for its event
            inner = rebased(chain, chain.copy(self).call_advisors, _ReportingModel(chain.model, watch))
            response = await inner.next_call(sent)
        else:
            response = await chain.next_call(sent)
            chat = response.chat_response
            watch.finish(model_prompt(sent), chat.metadata.usage if chat is not None else None)
        return ChatClientResponse(response.chat_response, self._context(response.context, watch))

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """As ``advise_call``; the report rides on the chunk that carries the call's usage (else on
        one trailing context-only chunk)."""
        sent = self.prepare(request)
        run = chain.run
        watch = _Watch(self, request, run, self._previous(request, run))
        traced = _traced()
        if traced:  # the report is made inside the model span, for its event
            inner = rebased(chain, chain.copy(self).stream_advisors, _ReportingModel(chain.model, watch))
            stream = inner.next_stream(sent)
        else:
            stream = chain.next_stream(sent)
        prompt = None if traced else model_prompt(sent)
        last_context: Mapping[str, Any] | None = None
        delivered: CacheReport | None = None
        try:
            async for chunk in stream:
                last_context = chunk.context
                if prompt is not None and chunk.chat_response is not None:
                    watch.see(prompt, chunk.chat_response)
                if watch.report is not None and watch.report is not delivered:
                    delivered = watch.report
                    yield chunk.copy(context=self._context(chunk.context, watch))
                else:
                    yield chunk
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if delivered is None:
            watch.finish(None, None)
            yield ChatClientResponse(None, self._context(last_context or request.context, watch))

    # -- what the previous call was ------------------------------------------------------------

    def _previous(self, request: ChatClientRequest, run: Run) -> _Call | None:
        """The run's previous model call, else the last call this advisor saw on the conversation."""
        in_run = run.get(self)
        if in_run is not None:
            return in_run  # type: ignore[no-any-return]
        context = request.context
        conversation = context.get(_CONVERSATION)
        if conversation is None:
            return None
        return self._conversations.get(conversation_id_of(context) or "")

    def _context(self, base: Mapping[str, Any], watch: _Watch) -> dict[str, Any]:
        context = dict(base)
        context[_REPORT] = watch.report or _NO_REPORT
        if watch.call is not None:
            watch.run.put(self, watch.call)
            conversation = watch.request.context.get(_CONVERSATION)
            if conversation is not None:
                with self._lock:  # one advisor may serve requests from several threads
                    self._conversations[conversation] = watch.call
                    self._conversations.move_to_end(conversation)
                    while len(self._conversations) > _CONVERSATIONS_KEPT:
                        self._conversations.popitem(last=False)
        return context


class _Watch:
    """One call's watch: what was sent before it, and — once the answer's usage came — its report."""

    __slots__ = ("advisor", "call", "previous", "report", "request", "run")

    def __init__(
        self, advisor: PromptCacheAdvisor, request: ChatClientRequest, run: Run, previous: _Call | None
    ) -> None:
        self.advisor, self.request, self.run, self.previous = advisor, request, run, previous
        self.report: CacheReport | None = None
        self.call: _Call | None = None

    def see(self, prompt: Prompt, chunk: ChatResponse) -> None:
        """Take in a stream chunk of the call: its usage makes (or remakes) the report; the end of
        the answer makes one without usage when none came yet (usage may still follow)."""
        usage = chunk.metadata.usage
        if usage is not None:
            self.report = None  # a later usage report supersedes an earlier one
            self.finish(prompt, usage)
        elif self.report is None and chunk.finish_reason is not None:
            self.finish(prompt, None)

    def finish(self, prompt: Prompt | None, usage: Usage | None) -> None:
        """Make the call's report (inside the model span: a miss becomes its event)."""
        if self.report is not None:
            return
        messages = prompt.instructions if prompt is not None else ()
        if usage is None:
            self.report = _NO_REPORT
            if prompt is not None:
                self.call = _Call(messages, None, prompt.options)
            return
        read, write, total = usage.cache_read_tokens, usage.cache_write_tokens, usage.prompt_tokens
        previous = self.previous
        changed_by: str | None = None
        changed_index: int | None = None
        options = prompt.options if prompt is not None else None
        if previous is not None and previous.usage is not None and _is_miss(previous.usage, usage):
            # The tool definitions and tool choice come before every message in the cached prefix:
            # a change there is a change at the first message.
            tools = tools_of(previous.options) != tools_of(options)
            changed_index = 0 if tools and messages else first_difference(previous.messages, messages)
            if changed_index is not None:
                changed_by = responsible(
                    self.run, changed_index, messages, options, previous=previous.messages, tools=tools
                )
            _event(changed_index, messages, changed_by, tools=tools)
        self.report = CacheReport(read, write, total, changed_by, changed_index)
        self.call = _Call(messages, usage, options)


class _ReportingModel:
    """The chain's model behind a thin wrapper that makes the call's report when its usage comes,
    while the model span is still open. Every other attribute is the model's own."""

    def __init__(self, model: ChatModel, watch: _Watch) -> None:
        self._model = model
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def call(self, prompt: Prompt) -> ChatResponse:
        response = await self._model.call(prompt)
        if isinstance(response, ChatResponse):
            self._watch.finish(prompt, response.metadata.usage)
        return response

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        watch = self._watch
        source = self._model.stream(prompt)
        try:
            async for chunk in source:
                if isinstance(chunk, ChatResponse):
                    watch.see(prompt, chunk)
                yield chunk
            if watch.report is None:
                watch.finish(prompt, None)
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()


# -- the report ------------------------------------------------------------------------------------


def _traced() -> bool:
    """Whether spans are recorded: then the report is made inside the model span (for its event)."""
    return obs.tracing_enabled()


def _is_miss(before: Usage, now: Usage) -> bool:
    """The cached share fell although the prompt grew — and the call read less than the whole
    previous prompt (a loop whose new round is longer than the last one lowers the share a little
    while everything before it was read: no miss)."""
    if now.prompt_tokens <= before.prompt_tokens or now.cache_read_tokens >= before.prompt_tokens:
        return False
    share_before = before.cache_read_tokens / before.prompt_tokens if before.prompt_tokens else 0.0
    return now.cache_read_tokens / now.prompt_tokens < share_before


def _same(a: Message, b: Message) -> bool:
    return a is b or without_cache_point(a) == without_cache_point(b)


def first_difference(before: Sequence[Message], now: Sequence[Message]) -> int | None:
    """The index of the first message of ``now`` that differs from ``before`` (cache points left
    out); None when ``now`` begins with the whole of ``before``."""
    for i, old in enumerate(before):
        if i >= len(now) or not _same(old, now[i]):
            return i
    return None


def hop_changes(received: Sequence[Message], passed_on: Sequence[Message]) -> int | None:
    """The first index at which a hop changed the prompt — the message at that index of what it
    passed on differs from the one it received, or is missing — or None (appending is no change)."""
    for i, old in enumerate(received):
        if i >= len(passed_on) or not _same(old, passed_on[i]):
            return i
    return None


def responsible(
    run: Run,
    index: int,
    sent: Sequence[Message],
    options: ChatOptions | None = None,
    *,
    previous: Sequence[Message] = (),
    tools: bool = False,
) -> str | None:
    """The name of the advisor responsible for a change of the prompt at ``index`` (``sent`` with
    ``options``: the prompt the model got; ``previous``: the prompt of the previous call; ``tools``:
    the tool definitions or tool choice changed), from the run's recorded hops — each advisor's
    request in against its request out (the next advisor's, or ``sent`` for the innermost).

    Candidates are the advisors whose own hop changed the prompt at or before ``index`` (a message
    there differs or is missing; messages appended after the input are no change, so the tool
    loop's rounds never make it one; a hop that changed the tools changed it before the first
    message). Of those, the one responsible is the innermost that took out the previous prompt's
    message at ``index`` or brought in the new one (memory brings in its history every call, so an
    advisor inside it that rewrote a message is named, not memory); when only the tools changed,
    the innermost that changed them. None when no candidate did: the change came with the caller's
    input."""
    hops = run.hop_requests()
    if not hops:
        return None
    prompts = [model_prompt(r) for _, r in hops]
    sides: list[tuple[Sequence[Message], Sequence[Message], bool]] = []
    candidates: list[int] = []
    for k in range(len(hops)):
        got = prompts[k]
        out_messages = prompts[k + 1].instructions if k + 1 < len(prompts) else sent
        out_options = prompts[k + 1].options if k + 1 < len(prompts) else options
        changed_tools = tools_of(got.options) != tools_of(out_options)
        changed = 0 if changed_tools else hop_changes(got.instructions, out_messages)
        sides.append((got.instructions, out_messages, changed_tools))
        if changed is not None and changed <= index:
            candidates.append(k)
    if not candidates:
        return None
    old = previous[index] if index < len(previous) else None
    new = sent[index] if index < len(sent) else None
    for k in reversed(candidates):
        received, passed_on, changed_tools = sides[k]
        if tools and changed_tools:
            return _name(hops[k][0])
        if old is not None and _holds(received, old) and not _holds(passed_on, old):
            return _name(hops[k][0])  # it took out what was there
        if new is not None and not _holds(received, new) and _holds(passed_on, new):
            return _name(hops[k][0])  # it brought in what is there now
    return None


def _holds(messages: Sequence[Message], message: Message) -> bool:
    return any(_same(message, m) for m in messages)


def _name(advisor: object) -> str:
    return str(getattr(advisor, "name", type(advisor).__name__))


def _event(index: int | None, messages: Sequence[Message], changed_by: str | None, *, tools: bool) -> None:
    span = obs.current_span()
    if span is None:
        return
    attributes: dict[str, Any] = {_ATTR + "tools": True} if tools else {}
    if index is not None:
        attributes[_ATTR + "index"] = index
        if index < len(messages):
            attributes[_ATTR + "role"] = messages[index].type.value
        if changed_by is not None:
            attributes[_ATTR + "changed_by"] = changed_by
    span.add_event(_EVENT, attributes)


def _last_system_text(messages: Sequence[Message]) -> str | None:
    for m in reversed(messages):
        if isinstance(m, SystemMessage):
            return m.text
    return None


def _digest(kind: str, *parts: str) -> str:
    hasher = hashlib.sha256(kind.encode())
    for part in parts:
        hasher.update(b"\0")
        hasher.update(part.encode("utf-8", "surrogatepass"))
    return "advisorchain-" + hasher.hexdigest()[:32]
