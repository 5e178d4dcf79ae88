"""The chain cursor: the two link contracts and the immutable chains that run them.

An advisor intercepts a request on its way to the model and the response on its way back. A chain
is an immutable cursor over the advisors sorted by ``order`` (lower runs first, outermost); its last
link always calls the model (``link``). A *recursive* advisor calls ``chain.copy(self)`` — the
advisors after it plus the model — as often as it likes; calling ``next_call`` twice on the same
chain simply runs the rest of the chain twice. Every chain of one request belongs to that request's
``Run`` (``chain.run``).

Every advisor runs on both paths: a call-only advisor in a stream chain gets the rest of the stream
folded into one response (its result goes out as one chunk); a stream-only advisor in a call chain
gets the rest of the call as a one-chunk stream (its chunks are aggregated). An advisor that returns
``None`` (or anything but a response) is named in a ``ChainConfigurationError``.

``CallAdvisor``/``StreamAdvisor`` live here because they and the chains refer to each other;
``advisorchain.advisors.api`` re-exports the whole contract.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterable
from typing import Generic, Protocol, Self, TypeAlias, TypeVar, runtime_checkable

from .. import observability as obs
from .._checks import check_int
from .._streams import closing, collect
from ..errors import ChainConfigurationError
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse, ChatModel
from .link import call_model, raised_in, stream_model
from .run import Run

__all__ = [
    "Advisor",
    "AdvisorChain",
    "CallAdvisor",
    "CallAdvisorChain",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "check_advisor",
    "checked_request",
    "checked_response",
    "collect_answer",
    "is_end_of_answer",
    "rebased",
]


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


Advisor: TypeAlias = CallAdvisor | StreamAdvisor
"""An advisor: it implements ``advise_call``, ``advise_stream`` or both."""

A = TypeVar("A", CallAdvisor, StreamAdvisor, Advisor)


# -- checks ------------------------------------------------------------------------------------------


def _label(advisor: object) -> str:
    name = getattr(advisor, "name", None)
    return repr(name) if isinstance(name, str) else type(advisor).__name__


def checked_response(response: object, advisor: object, where: str) -> ChatClientResponse:
    """``response`` if it is a ChatClientResponse, else a ChainConfigurationError naming ``advisor``."""
    if isinstance(response, ChatClientResponse):
        return response
    raise ChainConfigurationError(
        f"advisor {_label(advisor)} returned {response!r} from {where}; return a ChatClientResponse "
        "(the chain's response, or a copy of it)"
    )


def checked_request(request: object, advisor: object, where: str) -> ChatClientRequest:
    """``request`` if it is a ChatClientRequest, else a ChainConfigurationError naming ``advisor``."""
    if isinstance(request, ChatClientRequest):
        return request
    raise ChainConfigurationError(
        f"advisor {_label(advisor)} returned {request!r} from {where}; return a ChatClientRequest "
        "(the request it was given, or a copy of it)"
    )


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
    check_int(order, f"the order of advisor {name!r}")
    if not callable(getattr(advisor, "advise_call", None)) and not callable(
        getattr(advisor, "advise_stream", None)
    ):
        raise ChainConfigurationError(
            f"advisor {name!r} has neither advise_call nor advise_stream; "
            "subclass BaseAdvisor or implement one"
        )


def is_end_of_answer(response: ChatClientResponse) -> bool:
    """True for a stream chunk that carries a finish reason (the end of an answer)."""
    chat = response.chat_response
    return chat is not None and chat.finish_reason is not None


async def collect_answer(stream: AsyncIterator[ChatClientResponse]) -> ChatClientResponse:
    """A whole streamed answer as one response (``aggregate_responses`` of every chunk)."""
    return ChatClientMessageAggregator.aggregate_responses(await collect(stream))


# -- the chains --------------------------------------------------------------------------------------


class AdvisorChain(Generic[A]):
    """What call and stream chains share: the advisors they were built with, the model, the run."""

    __slots__ = ("_advisors", "_index", "_model", "_next", "_run", "_traced")

    def __init__(self, advisors: Iterable[A], model: ChatModel, *, run: Run | None = None) -> None:
        self._advisors: tuple[A, ...] = tuple(advisors)
        self._index = 0
        self._model = model
        self._next: Self | None = None
        # Decided once per chain: an untraced application pays nothing per hop.
        self._traced = obs.telemetry_enabled()
        # The run this chain belongs to (a chain built without a ChatClient gets an unmetered one).
        self._run = Run(advisors=self._advisors) if run is None else run

    def _at(self, index: int) -> Self:
        chain = object.__new__(type(self))
        chain._advisors, chain._index, chain._model = self._advisors, index, self._model
        chain._next, chain._traced, chain._run = None, self._traced, self._run
        return chain

    def _advance(self) -> Self:
        # Chains are immutable, so the chain after this hop can be built once and shared.
        if self._next is None:
            self._next = self._at(self._index + 1)
        return self._next

    @property
    def model(self) -> ChatModel:
        """The model the last link calls."""
        return self._model

    @property
    def run(self) -> Run:
        """The run this chain belongs to: the request's budget and totals, span, per-run slots."""
        return self._run

    def _suffix_after(self, after: object) -> tuple[A, ...]:
        for i, advisor in enumerate(self._advisors):
            if advisor is after:
                return self._advisors[i + 1 :]
        raise ValueError(
            f"{getattr(after, 'name', after)!r} is not an advisor of this chain; "
            f"it has {[getattr(a, 'name', a) for a in self._advisors]!r}"
        )


Chain = TypeVar("Chain", bound=AdvisorChain[Advisor])


def rebased(chain: Chain, advisors: Iterable[Advisor], model: ChatModel | None = None) -> Chain:
    """A chain of the same kind over ``advisors`` (and ``model``, else the same one) that belongs
    to the same run: what an advisor that assembles a chain of its own (context compaction, a
    handoff to an agent with its own model) uses, so the calls it makes count in the run."""
    kind = CallAdvisorChain if isinstance(chain, CallAdvisorChain) else StreamAdvisorChain
    return kind(advisors, chain.model if model is None else model, run=chain.run)  # type: ignore[return-value]


class CallAdvisorChain(AdvisorChain[Advisor]):
    """The chain for blocking calls. ``next_call`` runs the next advisor, or the model at the end."""

    __slots__ = ()

    @property
    def call_advisors(self) -> tuple[Advisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: Advisor) -> CallAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return CallAdvisorChain(self._suffix_after(after), self._model, run=self._run)

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        """Run the rest of the chain on ``request``: the next advisor, or the model at the end."""
        index = self._index
        if index >= len(self._advisors):
            return await call_model(self._run, self._model, request, self._traced)
        advisor = self._advisors[index]
        if self._run.records_hops:
            self._run.record_hop(advisor, request)
        advise = getattr(advisor, "advise_call", None)
        if advise is None:  # a stream-only advisor: the rest of the call is its one-chunk stream
            advise = functools.partial(_call_via_stream, advisor)
        try:
            if self._traced:
                with obs.span(f"advisor {advisor.name}", {"advisorchain.advisor.order": advisor.order}):
                    response = await advise(request, self._advance())
            else:
                response = await advise(request, self._advance())
        except Exception as exc:
            raised_in(exc, f"advisor {_label(advisor)}")
            raise
        if type(response) is ChatClientResponse:
            return response
        return checked_response(response, advisor, "advise_call")


class StreamAdvisorChain(AdvisorChain[Advisor]):
    """The chain for streams. ``next_stream`` runs the next advisor, or the model stream at the end."""

    __slots__ = ()

    @property
    def stream_advisors(self) -> tuple[Advisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: Advisor) -> StreamAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return StreamAdvisorChain(self._suffix_after(after), self._model, run=self._run)

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        """Run the rest of the chain on ``request`` as a stream of chunks."""
        index = self._index
        if index >= len(self._advisors):
            return stream_model(self._run, self._model, request, self._traced)
        advisor = self._advisors[index]
        if self._run.records_hops:
            self._run.record_hop(advisor, request)
        source = _hop_stream(advisor, request, self._advance())
        if self._traced:
            return obs.traced_stream(
                f"advisor {advisor.name}", source, {"advisorchain.advisor.order": advisor.order}
            )
        return source


# -- one hop: every advisor runs on both paths -------------------------------------------------------


async def _call_via_stream(
    advisor: Advisor, request: ChatClientRequest, rest: CallAdvisorChain
) -> ChatClientResponse:
    """A stream-only advisor on the call path: its chunks over the rest of the call, aggregated."""
    return await collect_answer(_hop_stream(advisor, request, _CallAsStream(rest)))


def _hop_stream(
    advisor: Advisor, request: ChatClientRequest, rest: StreamAdvisorChain
) -> AsyncIterator[ChatClientResponse]:
    advise = getattr(advisor, "advise_stream", None)
    if advise is None:
        return _fold(advisor, request, rest)  # type: ignore[arg-type]
    stream = advise(request, rest)
    if not hasattr(stream, "__anext__"):
        raise ChainConfigurationError(
            f"advisor {_label(advisor)} returned {stream!r} from advise_stream; it must return an "
            "async iterator of ChatClientResponse (write it as an async generator)"
        )
    if _is_library_stream(type(advisor)):
        return stream  # type: ignore[no-any-return]  # the library's own advisors yield only responses
    return _checked_chunks(stream, advisor)


@functools.cache
def _is_library_stream(cls: type) -> bool:
    """True when ``cls.advise_stream`` is the library's own code (its chunks need no check)."""
    return getattr(getattr(cls, "advise_stream", None), "__module__", "").startswith("advisorchain.")


async def _checked_chunks(
    stream: AsyncIterator[ChatClientResponse], advisor: object
) -> AsyncIterator[ChatClientResponse]:
    async with closing(stream):
        try:
            async for chunk in stream:
                yield checked_response(chunk, advisor, "advise_stream")
        except Exception as exc:
            raised_in(exc, f"advisor {_label(advisor)}")
            raise


async def _fold(
    advisor: CallAdvisor, request: ChatClientRequest, rest: StreamAdvisorChain
) -> AsyncIterator[ChatClientResponse]:
    """A call-only advisor on the stream path: the rest of the stream is aggregated into the one
    response its ``chain.next_call`` returns, and its result goes out as one chunk."""
    response = await advisor.advise_call(request, _StreamAsCall(rest))
    yield checked_response(response, advisor, "advise_call")


class _StreamAsCall(CallAdvisorChain):
    """A stream chain seen as a call chain: ``next_call`` aggregates the rest of the stream."""

    __slots__ = ("_stream",)

    def __init__(self, stream: StreamAdvisorChain) -> None:
        super().__init__(stream.stream_advisors[stream._index :], stream.model, run=stream.run)
        self._stream = stream

    def copy(self, after: Advisor) -> CallAdvisorChain:
        return _StreamAsCall(self._stream.copy(after))

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        return await collect_answer(self._stream.next_stream(request))


class _CallAsStream(StreamAdvisorChain):
    """A call chain seen as a stream chain: ``next_stream`` yields the rest's response as one chunk."""

    __slots__ = ("_call",)

    def __init__(self, call: CallAdvisorChain) -> None:
        super().__init__(call.call_advisors[call._index :], call.model, run=call.run)
        self._call = call

    def copy(self, after: Advisor) -> StreamAdvisorChain:
        return _CallAsStream(self._call.copy(after))

    async def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        yield await self._call.next_call(request)
