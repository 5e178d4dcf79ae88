"""The advisor chain: its two link contracts, the immutable chain cursors, the model link at the
end, and the assembly of a request's chain.

An advisor intercepts a request on its way to the model and the response on its way back. A chain
is an immutable cursor over the advisors sorted by ``order`` (lower runs first, outermost); its last
link always calls the model. A *recursive* advisor calls ``chain.copy(self)`` — the advisors after it
plus the model — as often as it likes; calling ``next_call`` twice on the same chain simply runs the
rest of the chain twice.

Every advisor runs on both paths: a call-only advisor in a stream chain gets the rest of the stream
folded into one response (its result goes out as one chunk); a stream-only advisor in a call chain
gets the rest of the call as a one-chunk stream (its chunks are aggregated). An advisor that returns
``None`` (or anything but a response) is named in a ``ChainConfigurationError``.

``CallAdvisor``/``StreamAdvisor`` live here rather than in ``api`` because they and the chains
refer to each other; ``advisorchain.advisors.api`` re-exports the whole contract.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Generic, Protocol, Self, TypeAlias, TypeVar, runtime_checkable

from .. import observability as obs
from .._checks import check_int
from .._run_meter import RunMeter, StreamTally
from .._streams import closing, collect
from ..errors import ChainConfigurationError, ModelError
from ..model import (
    ChatClientMessageAggregator,
    ChatClientRequest,
    ChatClientResponse,
    ChatModel,
    ChatResponse,
    Prompt,
)
from .vocabulary import TOOL_CALLING_ORDER, AdvisorParams, MemoryAdvisor, ToolAdvisor

__all__ = [
    "Advisor",
    "AdvisorChain",
    "CallAdvisor",
    "CallAdvisorChain",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "assemble_advisors",
    "check_advisor",
    "checked_request",
    "checked_response",
    "collect_answer",
    "is_end_of_answer",
    "rebased",
    "run_meter",
    "with_run_meter",
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
    """What call and stream chains share: the advisors they were built with and the model."""

    __slots__ = ("_advisors", "_index", "_meter", "_model", "_next", "_traced")

    def __init__(self, advisors: Iterable[A], model: ChatModel) -> None:
        self._advisors: tuple[A, ...] = tuple(advisors)
        self._index = 0
        self._model = model
        self._next: Self | None = None
        # Decided once per chain: an untraced application pays nothing per hop.
        self._traced = obs.telemetry_enabled()
        # The run's budget and totals (set by the ChatClient for its request; None: unmetered).
        self._meter: RunMeter | None = None

    def _at(self, index: int) -> Self:
        chain = object.__new__(type(self))
        chain._advisors, chain._index, chain._model = self._advisors, index, self._model
        chain._next, chain._traced, chain._meter = None, self._traced, self._meter
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

    def _suffix_after(self, after: object) -> tuple[A, ...]:
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

    def _span_attributes(self, prompt: Prompt) -> dict[str, object]:
        return obs.model_span_attributes(
            self._model_name(prompt),
            getattr(self._model, "provider", None),
            prompt.options,
            obs.server_url_of(self._model),
        )


Chain = TypeVar("Chain", bound=AdvisorChain[Advisor])


def with_run_meter(chain: Chain, meter: RunMeter | None) -> Chain:
    """``chain`` keeping the run's meter (every chain of one request shares it: its model link
    checks and counts each call against the run's limits)."""
    chain._meter = meter
    return chain


def run_meter(chain: AdvisorChain[Advisor]) -> RunMeter | None:
    """The meter of the run ``chain`` belongs to (None for a chain built without a ChatClient)."""
    return chain._meter


def rebased(chain: Chain, advisors: Iterable[Advisor], model: ChatModel | None = None) -> Chain:
    """A chain of the same kind over ``advisors`` (and ``model``, else the same one) that belongs
    to the same run: what an advisor that assembles a chain of its own (context compaction) uses,
    so the calls it makes count in the run."""
    kind = CallAdvisorChain if isinstance(chain, CallAdvisorChain) else StreamAdvisorChain
    made = kind(advisors, chain.model if model is None else model)
    made._meter = chain._meter
    return made  # type: ignore[return-value]


def _model_prompt(request: ChatClientRequest) -> Prompt:
    """The prompt the model receives: the retrieval context (retrieval advisors), then the format
    instructions (``entity``), join the last user message; the request's own prompt is unchanged."""
    context = request.context
    retrieved = context.get(AdvisorParams.RETRIEVAL_CONTEXT)
    fmt = context.get(AdvisorParams.OUTPUT_FORMAT)
    if not retrieved and not fmt:
        return request.prompt
    text = "\n".join(str(part) for part in (retrieved, fmt) if part)
    return request.prompt.with_text_appended_to_last_user(text)


class CallAdvisorChain(AdvisorChain[Advisor]):
    """The chain for blocking calls. ``next_call`` runs the next advisor, or the model at the end."""

    __slots__ = ()

    @property
    def call_advisors(self) -> tuple[Advisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: Advisor) -> CallAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return with_run_meter(CallAdvisorChain(self._suffix_after(after), self._model), self._meter)

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        """Run the rest of the chain on ``request``: the next advisor, or the model at the end."""
        index = self._index
        if index >= len(self._advisors):
            return await self._call_model(request)
        advisor = self._advisors[index]
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
            _raised_in(exc, f"advisor {_label(advisor)}")
            raise
        if type(response) is ChatClientResponse:
            return response
        return checked_response(response, advisor, "advise_call")

    async def _call_model(self, request: ChatClientRequest) -> ChatClientResponse:
        prompt = _model_prompt(request)
        meter = self._meter
        lowered = None
        if meter is not None:  # the run's budget: checked before the call is sent (§17)
            prompt, lowered = meter.before_request(prompt, self._model)
        try:
            if self._traced:
                name = self._model_name(prompt)
                with obs.model_call(f"chat {name}", self._span_attributes(prompt)) as record:
                    response = await self._model.call(prompt)
                    if meter is not None and meter.prices is not None and type(response) is ChatResponse:
                        response = meter.priced(response, prompt, self._model)
                    record(response)
            else:
                response = await self._model.call(prompt)
                if meter is not None and meter.prices is not None and type(response) is ChatResponse:
                    response = meter.priced(response, prompt, self._model)
        except Exception as exc:
            _raised_in(exc, f"model {type(self._model).__name__}")
            raise
        if not isinstance(response, ChatResponse):
            raise ModelError(f"{type(self._model).__name__}.call() returned {response!r}, not a ChatResponse")
        if response.has_tool_calls():
            response = _with_unique_call_ids(response, set())
        if meter is not None:
            meter.after_response(response, prompt, self._model, lowered)
        return ChatClientResponse(response, request.context)


class StreamAdvisorChain(AdvisorChain[Advisor]):
    """The chain for streams. ``next_stream`` runs the next advisor, or the model stream at the end."""

    __slots__ = ()

    @property
    def stream_advisors(self) -> tuple[Advisor, ...]:
        """Every advisor this chain was built with, in order (the model link excluded)."""
        return self._advisors

    def copy(self, after: Advisor) -> StreamAdvisorChain:
        """A chain of the advisors after ``after`` (found by identity); ValueError if absent."""
        return with_run_meter(StreamAdvisorChain(self._suffix_after(after), self._model), self._meter)

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        """Run the rest of the chain on ``request`` as a stream of chunks."""
        index = self._index
        if index < len(self._advisors):
            advisor = self._advisors[index]
            source = _hop_stream(advisor, request, self._advance())
            if self._traced:
                return obs.traced_stream(
                    f"advisor {advisor.name}", source, {"advisorchain.advisor.order": advisor.order}
                )
            return source
        prompt = _model_prompt(request)
        meter = self._meter
        if meter is not None:  # checked when the stream is made: a refused call opens no span
            prompt, lowered = meter.before_request(prompt, self._model)
            source = self._stream_model(request, prompt, meter.stream(prompt, self._model, lowered))
        else:
            source = self._stream_model(request, prompt)
        if self._traced:
            name = self._model_name(request.prompt)
            return obs.model_stream(f"chat {name}", source, self._span_attributes(prompt), _responses)
        return source

    async def _stream_model(
        self, request: ChatClientRequest, prompt: Prompt, tally: StreamTally | None = None
    ) -> AsyncIterator[ChatClientResponse]:
        context = request.context
        call_ids: set[str] = set()  # tool calls come whole, possibly over several chunks
        async with closing(self._model.stream(prompt)) as stream:
            while True:
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    _raised_in(exc, f"model {type(self._model).__name__}")
                    raise
                if not isinstance(chunk, ChatResponse):
                    raise ModelError(
                        f"{type(self._model).__name__}.stream() yielded {chunk!r}, not a ChatResponse"
                    )
                if chunk.has_tool_calls():
                    chunk = _with_unique_call_ids(chunk, call_ids)
                if tally is not None:  # the run's meter: a new usage report or the answer's end
                    meta = chunk.metadata
                    if meta.usage is not tally.seen or meta.finish_reason is not None:
                        chunk = tally.chunk(chunk)
                    elif tally.kept is not None:
                        tally.kept.append(chunk)
                yield ChatClientResponse(chunk, context)
        if tally is not None:
            # The answer's text has reached the caller by now: a limit it passed raises after it.
            tally.end()


def _with_unique_call_ids(response: ChatResponse, seen: set[str]) -> ChatResponse:
    """``response`` with each tool call's id unique within the answer (``seen`` holds the ids met
    so far): a repeated id gets a ``_2``, ``_3``... suffix. Providers have been seen repeating ids
    (or sending none); two calls under one id would be answered under one id, and the provider
    could not tell their results apart."""
    ids = [call.id for generation in response.generations for call in generation.output.tool_calls]
    if len(set(ids)) == len(ids) and seen.isdisjoint(ids):  # the usual answer: nothing to rename
        seen.update(ids)
        return response
    generations = []
    changed = False
    for generation in response.generations:
        calls = []
        for call in generation.output.tool_calls:
            new_id, n = call.id, 1
            while new_id in seen:
                n += 1
                new_id = f"{call.id}_{n}"
            seen.add(new_id)
            changed = changed or new_id != call.id
            calls.append(call if new_id == call.id else dataclasses.replace(call, id=new_id))
        output = (
            dataclasses.replace(generation.output, tool_calls=tuple(calls)) if changed else generation.output
        )
        generations.append(dataclasses.replace(generation, output=output) if changed else generation)
    return dataclasses.replace(response, generations=tuple(generations)) if changed else response


def _raised_in(exc: BaseException, where: str) -> None:
    """Note on ``exc``, once, the first link it came out of: the advisor or model that raised it
    (outer links see it pass through and leave the note alone). Errors that name their advisor
    already (ChainConfigurationError) get no note."""
    if isinstance(exc, ChainConfigurationError) or getattr(exc, "__advisorchain_raised_in__", None):
        return
    try:
        setattr(exc, "__advisorchain_raised_in__", where)  # noqa: B010
    except (AttributeError, TypeError):  # an exception type that takes no attributes
        return
    exc.add_note(f"(raised in {where})")


def _responses(chunks: list[ChatClientResponse]) -> list[ChatResponse]:
    return [c.chat_response for c in chunks if c.chat_response is not None]


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
            _raised_in(exc, f"advisor {_label(advisor)}")
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
        super().__init__(stream.stream_advisors[stream._index :], stream.model)
        self._meter = stream._meter
        self._stream = stream

    def copy(self, after: Advisor) -> CallAdvisorChain:
        return _StreamAsCall(self._stream.copy(after))

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        return await collect_answer(self._stream.next_stream(request))


class _CallAsStream(StreamAdvisorChain):
    """A call chain seen as a stream chain: ``next_stream`` yields the rest's response as one chunk."""

    __slots__ = ("_call",)

    def __init__(self, call: CallAdvisorChain) -> None:
        super().__init__(call.call_advisors[call._index :], call.model)
        self._meter = call._meter
        self._call = call

    def copy(self, after: Advisor) -> StreamAdvisorChain:
        return _CallAsStream(self._call.copy(after))

    async def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        yield await self._call.next_call(request)


# -- assembly of a request's chain -------------------------------------------------------------------


def assemble_advisors(
    defaults: Sequence[Advisor],
    requested: Sequence[Advisor],
    *,
    auto_register: bool,
    tool_advisor_factory: Callable[[bool], Advisor],
) -> tuple[Advisor, ...]:
    """The advisors of one request's chain, sorted by order (ties keep registration order, the
    client's defaults first).

    Each advisor may appear once; a chain holds at most one ``ToolAdvisor``; with ``auto_register``
    and none given, ``tool_advisor_factory(conversation_history_enabled)`` makes one — with the
    history off when a ``MemoryAdvisor`` sits inside the loop (it supplies the history).
    """
    if not defaults and not requested:  # the common request: the tool loop alone, or nothing
        return (tool_advisor_factory(True),) if auto_register else ()
    advisors: list[Advisor] = [*defaults, *requested]
    seen: set[int] = set()
    for advisor in advisors:
        if id(advisor) in seen:
            raise ChainConfigurationError(f"advisor {advisor.name!r} was registered twice")
        seen.add(id(advisor))
    tool_advisors = [a for a in advisors if isinstance(a, ToolAdvisor)]
    if len(tool_advisors) > 1:
        names = " and ".join(repr(a.name) for a in tool_advisors)
        raise ChainConfigurationError(f"a chain may hold one ToolAdvisor, this one has {names}")
    if not tool_advisors and auto_register:
        inner_memory = any(isinstance(a, MemoryAdvisor) and a.order > TOOL_CALLING_ORDER for a in advisors)
        advisors.append(tool_advisor_factory(not inner_memory))
    # sorted() is stable: equal orders keep registration order, defaults first.
    return tuple(sorted(advisors, key=_order))


def _order(advisor: Advisor) -> int:
    return advisor.order
