"""The advisor contract and the chain.

An advisor intercepts a request on its way to the model and the response on its way back. The
chain is an immutable cursor over the advisors sorted by ``order`` (lower runs first, outermost);
its last link always calls the model. A *recursive* advisor calls ``chain.copy(self)`` — the
advisors after it plus the model — as often as it likes; calling ``next_call`` twice on the same
chain simply runs the rest of the chain twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from opentelemetry.trace import Span, SpanKind

from .. import observability as obs
from .._streams import close_stream
from ..errors import ChainConfigurationError, ModelError
from ..model import ChatModel, ChatResponse, Prompt

__all__ = [
    "AdvisorChain",
    "AdvisorParams",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "ChatClientRequest",
    "ChatClientResponse",
    "MemoryAdvisor",
    "Ordered",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "ToolAdvisor",
]


class Ordered:
    """Order constants: lower runs first (outermost); the model call is always innermost."""

    HIGHEST_PRECEDENCE: ClassVar[int] = -(2**31)
    LOWEST_PRECEDENCE: ClassVar[int] = 2**31 - 1


class AdvisorParams:
    """Well-known request-context keys."""

    TOOL_CALLING_ADVISOR_AUTO_REGISTER: ClassVar[str] = "tool_calling_advisor_auto_register"
    """Set to False on a request to keep the client from adding a ToolCallingAdvisor."""

    TOOL_LOOP_ITERATION: ClassVar[str] = "advisorchain.tool_loop.iteration"
    """Set by the ToolCallingAdvisor on each round's request (1, 2, ...); the round's responses and
    stream chunks carry it back, so an advisor outside the loop can tell the rounds apart."""

    OUTPUT_FORMAT: ClassVar[str] = "advisorchain.output_format"
    """Format instructions the model link appends to the last user message (set by ``entity``)."""


@dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """A prompt on its way through the chain, with the request context advisors share."""

    prompt: Prompt
    context: Mapping[str, Any] = field(default_factory=dict)

    def copy(self, **changes: Any) -> ChatClientRequest:
        """A copy with ``prompt`` and/or ``context`` replaced."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class ChatClientResponse:
    """A model response on its way back, with the context of the request that produced it."""

    chat_response: ChatResponse | None
    context: Mapping[str, Any] = field(default_factory=dict)

    def copy(self, **changes: Any) -> ChatClientResponse:
        """A copy with ``chat_response`` and/or ``context`` replaced."""
        return dataclasses.replace(self, **changes)


@runtime_checkable
class CallAdvisor(Protocol):
    """Intercepts blocking calls."""

    @property
    def name(self) -> str: ...

    @property
    def order(self) -> int: ...

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse: ...


@runtime_checkable
class StreamAdvisor(Protocol):
    """Intercepts streams."""

    @property
    def name(self) -> str: ...

    @property
    def order(self) -> int: ...

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]: ...


class ToolAdvisor:
    """Marker: an advisor that owns the tool loop (at most one per chain)."""


class MemoryAdvisor:
    """Marker: an advisor that keeps conversation memory."""


A = TypeVar("A")


class AdvisorChain(Generic[A]):
    """What call and stream chains share: the advisors they were built with and the model."""

    __slots__ = ("_advisors", "_index", "_model", "_next", "_traced")

    def __init__(self, advisors: Sequence[A], model: ChatModel) -> None:
        self._advisors: tuple[A, ...] = tuple(advisors)
        self._index = 0
        self._model = model
        self._next: Any = None
        # Decided once per chain: an untraced application pays nothing per hop.
        self._traced = obs.tracing_enabled()

    def _at(self, index: int) -> Any:
        chain = object.__new__(type(self))
        chain._advisors, chain._index, chain._model = self._advisors, index, self._model
        chain._next, chain._traced = None, self._traced
        return chain

    def _advance(self) -> Any:
        # Chains are immutable, so the chain after this hop can be built once and shared.
        if self._next is None:
            self._next = self._at(self._index + 1)
        return self._next

    @property
    def model(self) -> ChatModel:
        """The model the last link calls."""
        return self._model

    def _suffix_after(self, after: A) -> tuple[A, ...]:
        for i, advisor in enumerate(self._advisors):
            if advisor is after:
                return self._advisors[i + 1 :]
        raise ValueError(
            f"{getattr(after, 'name', after)!r} is not an advisor of this chain; "
            f"it has {[getattr(a, 'name', a) for a in self._advisors]!r}"
        )

    def _model_name(self, prompt: Prompt) -> str:
        if prompt.options is not None and prompt.options.model:
            return prompt.options.model
        return str(
            getattr(self._model, "model_name", None)
            or getattr(self._model, "model", None)
            or type(self._model).__name__
        )


def _model_prompt(request: ChatClientRequest) -> Prompt:
    """The prompt the model receives: format instructions (``entity``) join the last user message."""
    fmt = request.context.get(AdvisorParams.OUTPUT_FORMAT)
    prompt = request.prompt
    if fmt:
        user = prompt.last_user_message
        prompt = prompt.with_last_user_text(f"{user.text}\n{fmt}" if user is not None else str(fmt))
    return prompt


class CallAdvisorChain(AdvisorChain["CallAdvisor"]):
    """The chain for blocking calls. ``next_call`` runs the next advisor, or the model at the end."""

    __slots__ = ()

    @property
    def call_advisors(self) -> tuple[CallAdvisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: CallAdvisor) -> CallAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return CallAdvisorChain(self._suffix_after(after), self._model)

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        index = self._index
        if index < len(self._advisors):
            advisor = self._advisors[index]
            if self._traced:
                with obs.span(f"advisor {advisor.name}", {"advisorchain.advisor.order": advisor.order}):
                    return await advisor.advise_call(request, self._advance())
            return await advisor.advise_call(request, self._advance())
        return await self._call_model(request)

    async def _call_model(self, request: ChatClientRequest) -> ChatClientResponse:
        prompt = _model_prompt(request)
        if self._traced:
            attrs = obs.model_span_attributes(
                self._model_name(prompt), getattr(self._model, "provider", None)
            )
            with obs.span(f"chat {self._model_name(prompt)}", attrs, SpanKind.CLIENT) as s:
                response = await self._model.call(prompt)
                obs.record_response(s, response)
        else:
            response = await self._model.call(prompt)
        if not isinstance(response, ChatResponse):
            raise ModelError(f"{type(self._model).__name__}.call() returned {response!r}, not a ChatResponse")
        return ChatClientResponse(response, request.context)


class StreamAdvisorChain(AdvisorChain["StreamAdvisor"]):
    """The chain for streams. ``next_stream`` runs the next advisor, or the model stream at the end."""

    __slots__ = ()

    @property
    def stream_advisors(self) -> tuple[StreamAdvisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: StreamAdvisor) -> StreamAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return StreamAdvisorChain(self._suffix_after(after), self._model)

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        index = self._index
        if index < len(self._advisors):
            advisor = self._advisors[index]
            source = advisor.advise_stream(request, self._advance())
            if self._traced:
                return obs.traced_stream(
                    f"advisor {advisor.name}", source, {"advisorchain.advisor.order": advisor.order}
                )
            return source
        source = self._stream_model(request)
        if self._traced:
            prompt = request.prompt
            attrs = obs.model_span_attributes(
                self._model_name(prompt), getattr(self._model, "provider", None)
            )
            return obs.traced_stream(
                f"chat {self._model_name(prompt)}", source, attrs, SpanKind.CLIENT, _record_chunks
            )
        return source

    async def _stream_model(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        context = request.context
        stream = self._model.stream(_model_prompt(request))
        try:
            async for chunk in stream:
                if not isinstance(chunk, ChatResponse):
                    raise ModelError(
                        f"{type(self._model).__name__}.stream() yielded {chunk!r}, not a ChatResponse"
                    )
                yield ChatClientResponse(chunk, context)
        finally:
            await close_stream(stream)


def _record_chunks(span: Span, chunks: list[ChatClientResponse]) -> None:
    obs.record_stream_response(span, [c.chat_response for c in chunks if c.chat_response is not None])


def is_end_of_answer(response: ChatClientResponse) -> bool:
    """True for a stream chunk that carries a finish reason (the end of an answer)."""
    chat = response.chat_response
    return chat is not None and chat.finish_reason is not None


class BaseAdvisor:
    """An advisor made of two plain functions: ``before`` edits the request, ``after`` the response.

    Subclasses override either or both, and set ``order`` (default 0) and ``name`` (default the
    class name) as class attributes or properties. No constructor arguments are needed. On the
    stream path ``before`` runs once and ``after`` is applied to each chunk that ends an answer.
    """

    order: int = 0

    @property
    def name(self) -> str:
        return type(self).__name__

    def before(self, request: ChatClientRequest, chain: AdvisorChain[Any]) -> ChatClientRequest:
        return request

    def after(self, response: ChatClientResponse, chain: AdvisorChain[Any]) -> ChatClientResponse:
        return response

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        response = await chain.next_call(self.before(request, chain))
        return self.after(response, chain)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        stream = chain.next_stream(self.before(request, chain))
        try:
            async for chunk in stream:
                yield self.after(chunk, chain) if is_end_of_answer(chunk) else chunk
        finally:
            await close_stream(stream)


def check_advisor(advisor: object) -> None:
    """Raise ChainConfigurationError unless ``advisor`` has a str ``name``, an int ``order`` and an
    ``advise_call`` or ``advise_stream`` method."""
    label = type(advisor).__name__
    try:
        name = advisor.name  # type: ignore[attr-defined]
    except AttributeError:
        raise ChainConfigurationError(f"advisor {label} has no 'name'; give it a str name") from None
    if not isinstance(name, str):
        raise ChainConfigurationError(f"advisor {label} has name {name!r}; it must be a str")
    try:
        order = advisor.order  # type: ignore[attr-defined]
    except AttributeError:
        raise ChainConfigurationError(
            f"advisor {name!r} has no 'order'; give it an int order (lower runs first)"
        ) from None
    if isinstance(order, bool) or not isinstance(order, int):
        raise ChainConfigurationError(f"advisor {name!r} has order {order!r}; it must be an int")
    if not callable(getattr(advisor, "advise_call", None)) and not callable(
        getattr(advisor, "advise_stream", None)
    ):
        raise ChainConfigurationError(
            f"advisor {name!r} has neither advise_call nor advise_stream; "
            "subclass BaseAdvisor or implement one"
        )
