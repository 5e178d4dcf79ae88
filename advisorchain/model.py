"""The model layer: what goes to a chat model (Prompt, ChatOptions), what comes back
(ChatResponse, Generation, Usage), the ChatModel protocol, the request and response as they travel
the advisor chain (ChatClientRequest, ChatClientResponse), and the stream aggregator.

``Usage`` lives in ``advisorchain.usage`` (with prices and limits) and is re-exported here.

This layer imports only ``messages``, ``usage``, ``errors`` and the tool contract: the advisor chain builds on
it, never the other way round."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn, Protocol, Self, TypeVar, runtime_checkable

from ._tool_types import EMPTY_REGISTRY, ToolCallback, ToolRegistry
from .messages import AssistantMessage, Message, SystemMessage, ToolCall, UserMessage
from .usage import Usage

__all__ = [
    "ChatClientMessageAggregator",
    "ChatClientRequest",
    "ChatClientResponse",
    "ChatModel",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "FinishReason",
    "Generation",
    "Prompt",
    "Usage",
]


class FinishReason:
    """The finish reasons the library itself reads or sets (one home for each name).

    Providers' own values pass through unchanged; the adapters map each provider's words for "the
    model finished" and "the model asks for tools" to ``STOP`` and ``TOOL_CALLS``.
    """

    STOP: ClassVar[str] = "stop"
    """The model finished its answer."""
    TOOL_CALLS: ClassVar[str] = "tool_calls"
    """The model asks for tool calls."""
    LENGTH: ClassVar[str] = "length"
    """The answer was cut at the output token limit."""
    RETURN_DIRECT: ClassVar[str] = "returnDirect"
    """The tool loop ended with the tools' outputs as the answer (every tool was ``return_direct``)."""
    TOOL_CALL_LIMIT_EXCEEDED: ClassVar[str] = "toolCallLimitExceeded"
    """The tool loop ended because a per-turn tool-call limit was hit."""
    APPROVAL_REQUIRED: ClassVar[str] = "approvalRequired"
    """The tool loop stopped because a tool call waits for a person's decision."""
    USAGE_LIMIT_EXCEEDED: ClassVar[str] = "usageLimitExceeded"
    """The run ended because a usage limit was hit (``UsageLimits(on_exceeded="finish")``)."""


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Options for one model call. Unset (None) fields leave the provider's default.

    ``tool_callbacks`` are the tools the model may call, ``tool_context`` is handed to them;
    ``output_schema`` asks a provider that supports it for native JSON-schema output;
    ``extra`` is passed through to the provider's request as is; ``cache_key`` names a prompt
    cache for providers that route by key (OpenAI's ``prompt_cache_key``, API.md §21).
    """

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: Sequence[str] | None = None
    tool_callbacks: Sequence[ToolCallback] = ()
    tool_context: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    cache_key: str | None = None
    tool_registry: ToolRegistry = field(default=EMPTY_REGISTRY, init=False, repr=False, compare=False)
    """The tools by name, definitions resolved once (unique names are checked here, once)."""

    def __post_init__(self) -> None:
        if type(self.tool_callbacks) is not tuple:
            object.__setattr__(self, "tool_callbacks", tuple(self.tool_callbacks))
        if self.tool_callbacks:
            object.__setattr__(self, "tool_registry", ToolRegistry(self.tool_callbacks))
        if self.stop is not None and type(self.stop) is not tuple:
            if isinstance(self.stop, str):
                raise TypeError(
                    f"ChatOptions.stop must be a sequence of strings, not a string: {self.stop!r}"
                )
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.cache_key is not None and not isinstance(self.cache_key, str):
            raise TypeError(f"ChatOptions.cache_key must be a string or None, got {self.cache_key!r}")

    def copy(self, **changes: Any) -> ChatOptions:
        """A copy with ``changes`` applied (unknown names raise TypeError)."""
        return dataclasses.replace(self, **changes)

    def merged_over(self, base: ChatOptions | None) -> ChatOptions:
        """These options on top of ``base``: set fields win, tools and mappings are joined."""
        if base is None:
            return self
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            mine, theirs = getattr(self, f.name), getattr(base, f.name)
            if f.name == "tool_callbacks":
                changes[f.name] = tuple(theirs) + tuple(mine)
            elif f.name in ("tool_context", "extra"):
                changes[f.name] = {**theirs, **mine}
            else:
                changes[f.name] = theirs if mine is None else mine
        return ChatOptions(**changes)


@dataclass(frozen=True, slots=True)
class Prompt:
    """The messages for one model call and its options."""

    instructions: Sequence[Message]
    options: ChatOptions | None = None

    def __post_init__(self) -> None:
        if type(self.instructions) is not tuple:
            object.__setattr__(self, "instructions", tuple(self.instructions))

    def copy(self, **changes: Any) -> Prompt:
        """A copy with ``instructions`` and/or ``options`` replaced."""
        instructions = changes.pop("instructions", self.instructions)
        options = changes.pop("options", self.options)
        _no_other_fields("Prompt", changes)
        return Prompt(instructions, options)

    @property
    def system_message(self) -> SystemMessage | None:
        """The first system message, if any."""
        for m in self.instructions:
            if isinstance(m, SystemMessage):
                return m
        return None

    @property
    def last_user_message(self) -> UserMessage | None:
        """The last user message, if any."""
        for m in reversed(self.instructions):
            if isinstance(m, UserMessage):
                return m
        return None

    def with_last_user_text(self, text: str) -> Prompt:
        """A copy whose last user message has ``text`` (a user message is added when there is none)."""
        msgs = list(self.instructions)
        for i in range(len(msgs) - 1, -1, -1):
            m = msgs[i]
            if isinstance(m, UserMessage):
                msgs[i] = dataclasses.replace(m, text=text)
                return self.copy(instructions=tuple(msgs))
        return self.copy(instructions=(*msgs, UserMessage(text)))

    def with_text_appended_to_last_user(self, text: str) -> Prompt:
        """A copy whose last user message ends with a new line and ``text`` (format instructions,
        validation feedback); a user message holding ``text`` is added when there is none."""
        user = self.last_user_message
        return self.with_last_user_text(f"{user.text}\n{text}" if user is not None else text)


@dataclass(frozen=True, slots=True)
class Generation:
    """One answer of the model and why it ended."""

    output: AssistantMessage
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ChatResponseMetadata:
    """What the provider said about a response as a whole.

    ``provider`` is the provider whose price list prices the response (``"openai"``,
    ``"anthropic"``): set by the provider adapters on the provider's own host only, None for any
    other server and for models that are not adapters."""

    id: str | None = None
    model: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    provider: str | None = None


_EMPTY_METADATA = ChatResponseMetadata()


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A model's response (or one chunk of a streamed response)."""

    generations: Sequence[Generation]
    metadata: ChatResponseMetadata = _EMPTY_METADATA

    def __post_init__(self) -> None:
        if type(self.generations) is not tuple:
            object.__setattr__(self, "generations", tuple(self.generations))

    @classmethod
    def of(
        cls,
        message: AssistantMessage,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        **meta: Any,
    ) -> ChatResponse:
        """A one-generation response."""
        return cls(
            (Generation(message, finish_reason),),
            ChatResponseMetadata(usage=usage, finish_reason=finish_reason, **meta),
        )

    @property
    def result(self) -> Generation | None:
        """The first generation, or None."""
        return self.generations[0] if self.generations else None

    @property
    def text(self) -> str | None:
        """The first generation's text, or None."""
        return self.generations[0].output.text if self.generations else None

    @property
    def finish_reason(self) -> str | None:
        """The response's finish reason: the metadata's, else the first generation's."""
        if self.metadata.finish_reason is not None:
            return self.metadata.finish_reason
        for g in self.generations:
            if g.finish_reason is not None:
                return g.finish_reason
        return None

    def has_tool_calls(self) -> bool:
        """True when any generation asks for tool calls."""
        for g in self.generations:  # noqa: SIM110 — a loop, not any(): this runs per streamed chunk
            if g.output.tool_calls:
                return True
        return False

    def with_usage(self, usage: Usage | None) -> ChatResponse:
        """A copy whose metadata carries ``usage``."""
        m = self.metadata
        return ChatResponse(
            self.generations, ChatResponseMetadata(m.id, m.model, usage, m.finish_reason, m.provider)
        )


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one async call, or a stream of chunks. It never executes tools.

    A stream chunk's text is a delta; tool calls come whole, once the provider finished them;
    the last chunk carries the finish reason and usage when the provider reports them.
    """

    async def call(self, prompt: Prompt) -> ChatResponse: ...

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...


class _Context(dict[str, Any]):
    """A read-only snapshot of a request's or response's context.

    A ``dict`` (so ``{**context, key: value}``, ``json.dumps`` and equality with plain dicts work as
    usual) whose every mutation raises ``TypeError``. Requests and responses take one when built, so
    a later change to the caller's dict never shows in them; a snapshot given again is shared, not
    copied (the context rides on every chunk of a stream).
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "a request or response context is read-only; build a new one instead, e.g. "
            "request.copy(context={**request.context, key: value})"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    update = pop = popitem = clear = setdefault = _read_only

    def __reduce__(self) -> tuple[type[_Context], tuple[dict[str, Any]]]:
        return _Context, (dict(self),)

    def __copy__(self) -> _Context:
        return self


class _WithContext:
    """What a request and a response share: a read-only ``context`` snapshot taken when built, and
    ``copy()`` of their two fields built directly (``dataclasses.replace`` costs microseconds a
    call, several times per round)."""

    __slots__ = ()
    context: Mapping[str, Any]

    def __post_init__(self) -> None:
        if type(self.context) is not _Context:
            object.__setattr__(self, "context", _Context(self.context))

    def _copy(self, first: str, changes: dict[str, Any]) -> Self:
        value = changes.pop(first, getattr(self, first))
        context = changes.pop("context", self.context)
        _no_other_fields(type(self).__name__, changes)
        return type(self)(value, context)  # type: ignore[call-arg]


@dataclass(frozen=True, slots=True)
class ChatClientRequest(_WithContext):
    """A prompt on its way through the advisor chain, with the request context advisors share.

    ``context`` is a read-only snapshot of the mapping given: build a new request with
    ``copy(context={**request.context, ...})`` to change it.
    """

    prompt: Prompt
    context: Mapping[str, Any] = field(default_factory=_Context)

    def copy(self, **changes: Any) -> ChatClientRequest:
        """A copy with ``prompt`` and/or ``context`` replaced."""
        return self._copy("prompt", changes)


@dataclass(frozen=True, slots=True)
class ChatClientResponse(_WithContext):
    """A model response on its way back through the chain, with the context of its request
    (a read-only snapshot, as for ``ChatClientRequest``)."""

    chat_response: ChatResponse | None
    context: Mapping[str, Any] = field(default_factory=_Context)

    def copy(self, **changes: Any) -> ChatClientResponse:
        """A copy with ``chat_response`` and/or ``context`` replaced."""
        return self._copy("chat_response", changes)


def _no_other_fields(owner: str, changes: Mapping[str, Any]) -> None:
    """``copy()`` of a value built directly (``dataclasses.replace`` costs microseconds a call,
    several times per round); a field it does not have is the same TypeError."""
    if changes:
        raise TypeError(f"{owner}.copy() got fields it does not have: {', '.join(sorted(changes))}")


def with_total_usage(
    response: ChatClientResponse, usages: Iterable[Usage | None], chat: ChatResponse | None = None
) -> ChatClientResponse:
    """``response`` (its chat response replaced by ``chat`` when given) carrying the usage summed
    over ``usages``: the one rule for what a multi-round advisor (tool loop, validation retries)
    reports. Unknown usages are skipped; when none is known the response keeps its own."""
    chat = response.chat_response if chat is None else chat
    total = Usage.sum(usages)
    if chat is None or total is None:
        return response if chat is response.chat_response else response.copy(chat_response=chat)
    return response.copy(chat_response=chat.with_usage(total))


class ChatClientMessageAggregator:
    """Joins stream chunks into one response: the first generation's text deltas, the tool calls in
    order, and the last finish reason, usage, id, model and provider."""

    @staticmethod
    def aggregate(chunks: Iterable[ChatResponse]) -> ChatResponse:
        return _folded(chunks, StreamAggregation.add).response()

    @staticmethod
    def aggregate_responses(chunks: Iterable[ChatClientResponse]) -> ChatClientResponse:
        """The chunks' responses aggregated (as ``aggregate``), their contexts merged in order."""
        return _folded(chunks, StreamAggregation.add_client).client_response()


C = TypeVar("C")


def _folded(chunks: Iterable[C], add: Callable[[StreamAggregation, C], object]) -> StreamAggregation:
    aggregation = StreamAggregation()
    for chunk in chunks:
        add(aggregation, chunk)
    return aggregation


class StreamAggregation:
    """``ChatClientMessageAggregator``'s rule taken one chunk at a time, so that a stream's chunks
    need not be kept until its end: ``add`` (or ``add_client``) each chunk, then ``response()``
    (or ``client_response()``). The one home of the rule: both aggregators run through it."""

    __slots__ = (
        "_calls",
        "_context",
        "_finish",
        "_gen_finish",
        "_id",
        "_merged",
        "_metadata",
        "_model",
        "_provider",
        "_responses",
        "_texts",
        "_usage",
    )

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._calls: list[ToolCall] = []
        self._metadata: dict[str, Any] = {}
        self._gen_finish: str | None = None
        self._id: str | None = None
        self._model: str | None = None
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._provider: str | None = None
        self._context: dict[str, Any] = {}
        self._merged: Mapping[str, Any] | None = None
        self._responses = 0

    def add(self, chunk: ChatResponse) -> None:
        """Take in one chunk's response."""
        if chunk.generations:
            first = chunk.generations[0]
            out = first.output
            if out.text is not None:
                self._texts.append(out.text)
            if out.tool_calls:
                self._calls.extend(out.tool_calls)
            if out.metadata:
                self._metadata.update(out.metadata)
            if first.finish_reason:
                self._gen_finish = first.finish_reason
        meta = chunk.metadata
        if meta.id:
            self._id = meta.id
        if meta.model:
            self._model = meta.model
        if meta.usage:
            self._usage = meta.usage
        if meta.finish_reason:
            self._finish = meta.finish_reason
        if meta.provider:
            self._provider = meta.provider
        self._responses += 1

    def add_client(self, chunk: ChatClientResponse) -> None:
        """Take in one chunk: its response, and its context (merged in order)."""
        if chunk.chat_response is not None:
            self.add(chunk.chat_response)
        if chunk.context is not self._merged:  # the chunks of one answer usually share one context
            self._merged = chunk.context
            self._context.update(self._merged)

    def response(self) -> ChatResponse:
        """The chunks taken so far, as one response."""
        texts = self._texts
        message = AssistantMessage("".join(texts) if texts else None, tuple(self._calls), self._metadata)
        finish, gen_finish = self._finish, self._gen_finish
        return ChatResponse(
            (Generation(message, gen_finish or finish),),
            ChatResponseMetadata(self._id, self._model, self._usage, finish or gen_finish, self._provider),
        )

    def client_response(self) -> ChatClientResponse:
        """The chunks taken so far, as one response with their merged context (no response when
        no chunk had one)."""
        return ChatClientResponse(self.response() if self._responses else None, self._context)
