"""ChatClient: the fluent front door. A spec builds one frozen request; the advisors of the client
and of the request, sorted by order, form the chain that runs it. One async implementation;
the blocking forms go through the bridge in ``_sync``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Generic, TypeVar, overload

from . import _sync
from ._run_meter import RunMeter
from ._streams import closing
from ._template import check_params, render
from ._tool_types import ToolCallback
from .advisors.structured_output import StructuredOutputValidationAdvisor
from .advisors.tool_calling import ToolCallingAdvisor
from .agents import wiring as agents
from .agents.agent import Agent
from .chain import (
    Advisor,
    CallAdvisorChain,
    Run,
    RunListener,
    StreamAdvisorChain,
    assemble_advisors,
    call_run,
    check_advisor,
    current_run,
    stream_run,
)
from .chain.vocabulary import AdvisorParams, ToolAdvisor
from .errors import ChainConfigurationError
from .guards import Guard
from .memory.api import conversation_id_of
from .messages import AssistantMessage, Media, Message, SystemMessage, ToolResponseMessage, UserMessage
from .model import ChatClientRequest, ChatClientResponse, ChatModel, ChatOptions, ChatResponse, Prompt
from .output import converter_for
from .tools.approvals import as_decisions
from .tools.function import ToolCallbackProvider, tool_callbacks, unchecked_tool_callbacks
from .tools.guarded import ToolGuards
from .usage import ModelPrice, PriceFunction, Prices, UsageLimits

__all__ = [
    "AsyncCallResponseSpec",
    "AsyncStreamResponseSpec",
    "CallResponseSpec",
    "ChatClient",
    "ChatClientRequestSpec",
    "ResponseEntity",
    "StreamResponseSpec",
]

T = TypeVar("T")
_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)
_MESSAGE_CLASSES = frozenset(_MESSAGE_TYPES)


def _check_model(model: object) -> ChatModel:
    if not (callable(getattr(model, "call", None)) and callable(getattr(model, "stream", None))):
        raise ChainConfigurationError(
            f"{model!r} is not a ChatModel: it needs `async call(prompt)` and `stream(prompt)` "
            "(see advisorchain.testing.ScriptedChatModel or advisorchain.models)"
        )
    return model  # type: ignore[return-value]


def _to_tool_callbacks(tools: Sequence[object]) -> tuple[ToolCallback, ...]:
    return tuple(tool_callbacks(*tools)) if tools else ()


class ChatClient:
    """Runs prompts through an advisor chain to a ChatModel.

    ``usage_limits`` bound every request's run (``UsageLimits``; a request's ``.usage_limits(...)``
    replaces them); ``prices`` add or override model prices (``{"model": ModelPrice(...)}`` or a
    function ``fn(model, provider, usage) -> Decimal | None``); ``tool_guards`` and
    ``tool_result_guards`` go to the tool loop the client adds (``advisorchain.guardrails``).

    >>> client = ChatClient(model, default_system="Be brief.")
    >>> client.prompt("What is the capital of France?").call().content()
    """

    def __init__(
        self,
        model: ChatModel,
        default_advisors: Iterable[object] = (),
        default_system: str | None = None,
        default_tools: Iterable[object] = (),
        default_options: ChatOptions | None = None,
        tool_calling_auto_register: bool = True,
        *,
        default_system_params: Mapping[str, Any] | None = None,
        default_user: str | None = None,
        default_user_params: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prices: Mapping[str, ModelPrice] | PriceFunction | None = None,
        default_agent: Agent | None = None,
        tool_guards: Sequence[Guard] = (),
        tool_result_guards: Sequence[Guard] = (),
    ) -> None:
        self.model = _check_model(model)
        self.default_agent = agents.checked_default_agent(default_agent)
        self.default_advisors: tuple[Advisor, ...] = _checked_advisors(default_advisors)
        self.default_system = _optional_text(default_system, "default_system")
        self.default_system_params = check_params(default_system_params, "default_system_params")
        self.default_user = _optional_text(default_user, "default_user")
        self.default_user_params = check_params(default_user_params, "default_user_params")
        tools = tuple(default_tools)
        # Providers (an MCP server) are asked again on every request: their tools can change.
        self._tool_providers = tuple(t for t in tools if isinstance(t, ToolCallbackProvider))
        self.default_tools: tuple[ToolCallback, ...] = _to_tool_callbacks(
            tuple(t for t in tools if not isinstance(t, ToolCallbackProvider))
        )
        self.default_options = default_options
        self.tool_calling_auto_register = tool_calling_auto_register
        self.usage_limits = _checked_limits(usage_limits, "usage_limits")
        self.prices = prices
        self.price_table: Prices | None = None if prices is None else Prices(prices)
        """``prices``, checked (what the model link prices responses with)."""
        self.tool_guards = ToolGuards(tool_guards, tool_result_guards)
        """The guards the auto-registered tool loop runs on each call's arguments and each result (§19)."""
        self._guarded_loops: dict[bool, Advisor] = {}
        # What the client was built with, for mutate(): every keyword of this constructor.
        self._settings: dict[str, Any] = {
            "model": model,
            "default_advisors": self.default_advisors,
            "default_system": default_system,
            "default_tools": tools,
            "default_options": default_options,
            "tool_calling_auto_register": tool_calling_auto_register,
            "default_system_params": self.default_system_params,
            "default_user": default_user,
            "default_user_params": self.default_user_params,
            "usage_limits": usage_limits,
            "prices": prices,
            "default_agent": default_agent,
            "tool_guards": self.tool_guards.calls,
            "tool_result_guards": self.tool_guards.results,
        }

    def _tool_advisor(self, conversation_history_enabled: bool) -> Advisor:
        """The auto-registered tool loop, with this client's tool guards (one per setting)."""
        loop = self._guarded_loops.get(conversation_history_enabled)
        if loop is None:
            loop = self._guarded_loops[conversation_history_enabled] = ToolCallingAdvisor(
                conversation_history_enabled=conversation_history_enabled,
                tool_guards=self.tool_guards.calls,
                tool_result_guards=self.tool_guards.results,
            )
        return loop

    def _check_guarded_loop(self, advisors: Sequence[Advisor]) -> None:
        """The client's tool guards go to the tool loop it adds: a chain with a tool loop of its own
        would run without them, which is an error (never a guard skipped silently)."""
        own = [a for a in advisors if isinstance(a, ToolAdvisor) and a not in self._guarded_loops.values()]
        if own:
            raise ChainConfigurationError(
                f"the client's tool_guards/tool_result_guards apply to the tool loop it adds, but this "
                f"chain has its own {own[0].name!r}; give that advisor tool_guards=... and "
                "tool_result_guards=... instead"
            )

    def mutate(self, **changes: Any) -> ChatClient:
        """A new client with this one's settings except ``changes`` (any keyword of the constructor,
        ``model`` included); this client is unchanged.

        >>> terse = client.mutate(default_system="Answer in one word.")
        """
        unknown = sorted(set(changes) - set(self._settings))
        if unknown:
            raise TypeError(
                f"mutate() got unknown keyword {', '.join(map(repr, unknown))}; "
                f"it takes the ChatClient keywords {', '.join(self._settings)}"
            )
        return type(self)(**{**self._settings, **changes})

    def default_tool_callbacks(self) -> tuple[ToolCallback, ...]:
        """The client's default tools as ToolCallbacks, as of now: tool sources (an MCP server) are
        asked for their current tools, so a request never uses a stale list."""
        if not self._tool_providers:
            return self.default_tools
        return self.default_tools + _to_tool_callbacks(self._tool_providers)

    def as_tool(self, *, name: str, description: str, agent: Agent | None = None) -> ToolCallback:
        """This client's whole chain as a tool taking ``{"input": "<text>"}`` (API.md §18): each call
        is one request on a fresh conversation (``agent`` active when given), counted in the
        calling run's usage and limits; its answer text is the result.

        >>> researcher = research_client.as_tool(name="research", description="Finds sources")
        """
        from .agents.tool import agent_tool

        return agent_tool(self, name=name, description=description, agent=agent)

    def prompt(self, prompt: str | Prompt | None = None) -> ChatClientRequestSpec:
        """Start a request: with the user text (sent verbatim), a whole Prompt (its messages as
        ``messages(...)``, its options as ``options(...)``; a system message in it replaces the
        client's default system text), or nothing (then use ``.user``)."""
        spec = ChatClientRequestSpec(self)
        if isinstance(prompt, Prompt):
            if any(isinstance(m, SystemMessage) for m in prompt.instructions):
                spec._system, spec._system_is_default = None, False
            spec.messages(prompt.instructions)
            if prompt.options is not None:
                spec.options(prompt.options)
        elif prompt is not None:
            spec.user(prompt)
        return spec


class ChatClientRequestSpec:
    """A fluent request builder; every method returns the spec. Nothing runs until a terminal
    operation (``call()``/``acall()``/``stream()``/``astream()`` and then ``content()``...)."""

    # Slots: a spec lives as long as its request, a thousand of them at a time in a busy process.
    __slots__ = (
        "_advisors",
        "_client",
        "_limits",
        "_messages",
        "_options",
        "_params",
        "_run_settings_given",
        "_system",
        "_system_is_default",
        "_system_params",
        "_tool_context",
        "_tools",
        "_user",
        "_user_params",
    )

    def __init__(self, client: ChatClient) -> None:
        self._client = client
        # The system and user texts: the client's default template (rendered at the terminal
        # operation with the default params and the request's *_params), or the request's own text.
        self._system: str | None = client.default_system
        self._system_is_default = client.default_system is not None
        self._system_params: dict[str, Any] = {}
        self._user: UserMessage | None = None
        self._user_params: dict[str, Any] = {}
        self._messages: list[Message] = []
        self._tools: list[object] = []
        self._tool_context: dict[str, Any] = {}
        self._options: ChatOptions | None = None
        self._advisors: list[Advisor] = []
        self._params: dict[str, Any] = {}
        self._limits: UsageLimits | _Unset | None = _UNSET
        self._run_settings_given: _RunSettings | None = None

    def system(self, text: str, /, **params: Any) -> ChatClientRequestSpec:
        """The system message (replaces the client's default). With ``params``, ``{name}``
        placeholders are filled (``{{``/``}}`` for literal braces); without, the text is sent as is."""
        text = _non_blank(text, "system text")
        self._system = render(text, params, "system text") if params else text
        self._system_is_default = False
        return self

    def user(
        self,
        text: str,
        /,
        *,
        media: Iterable[Media] = (),
        metadata: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ChatClientRequestSpec:
        """The user message, placed after ``messages(...)``, with any ``media`` (images, documents)
        and ``metadata``. With ``params``, ``{name}`` placeholders are filled (``{{``/``}}`` for
        literal braces); without, the text is sent as is.

        >>> client.prompt().user("Weather in {city}?", city="Oslo")
        """
        media = tuple(media)
        if not (media and isinstance(text, str) and not text.strip()):
            text = _non_blank(text, "user text")
        if params:
            text = render(text, params, "user text")
        self._user = UserMessage(text, metadata or {}, media)
        return self

    def system_params(self, **params: Any) -> ChatClientRequestSpec:
        """Values for the placeholders of the client's default system template (they win over
        ``default_system_params``); a request's own ``.system(text, **params)`` uses only its params."""
        self._system_params.update(params)
        return self

    def user_params(self, **params: Any) -> ChatClientRequestSpec:
        """Values for the placeholders of the client's default user template (they win over
        ``default_user_params``); a request's own ``.user(text, **params)`` uses only its params."""
        self._user_params.update(params)
        return self

    def copy(self) -> ChatClientRequestSpec:
        """An independent spec with everything set so far: a base spec reused for many requests.

        >>> base = client.prompt().system("Be brief.").tools(get_weather)
        >>> base.copy().user("Oslo?").call().content()
        """
        other = ChatClientRequestSpec(self._client)
        for name in ChatClientRequestSpec.__slots__:
            value = getattr(self, name)
            setattr(other, name, value.copy() if isinstance(value, list | dict) else value)
        return other

    def messages(self, *messages: Message | Iterable[Message]) -> ChatClientRequestSpec:
        """Messages (history) placed between the system text and the user text, in order; a
        ``SystemMessage`` among them replaces the client's default system text."""
        for item in messages:
            batch = [item] if isinstance(item, _MESSAGE_TYPES) else list(item)
            # Checked in C (a long history costs nanoseconds a message); the culprit named after.
            exact = _MESSAGE_CLASSES.issuperset(map(type, batch))
            if not exact and not all(map(isinstance, batch, repeat(_MESSAGE_TYPES))):
                wrong = next(m for m in batch if not isinstance(m, _MESSAGE_TYPES))
                raise ChainConfigurationError(f"messages() takes Message objects, got {wrong!r}")
            self._messages.extend(batch)
        return self

    def tools(self, *tools: object) -> ChatClientRequestSpec:
        """Tools for this request: ``@tool`` functions, objects with ``@tool`` methods, ToolCallbacks."""
        self._tools.extend(tools)
        return self

    def tool_context(self, context: Mapping[str, Any]) -> ChatClientRequestSpec:
        """Values handed to tools in their ToolContext (never shown to the model)."""
        self._tool_context.update(context)
        return self

    def options(self, options: ChatOptions) -> ChatClientRequestSpec:
        """Options for this request, on top of the client's defaults."""
        if not isinstance(options, ChatOptions):
            raise ChainConfigurationError(f"options() takes ChatOptions, got {options!r}")
        self._options = options if self._options is None else options.merged_over(self._options)
        return self

    def advisors(self, *advisors: object) -> ChatClientRequestSpec:
        """Advisors for this request, joining the client's default advisors."""
        for item in advisors:
            self._advisors.extend(_checked_advisors(item if isinstance(item, list | tuple) else (item,)))
        return self

    def tool_approvals(self, decisions: Mapping[str, object]) -> ChatClientRequestSpec:
        """Decisions for a round that waits for approval, by tool-call id: ``Approved()``,
        ``Approved(arguments=...)``, ``Denied("why")``, or ``True``/``False``. The request resumes
        that round (from ``messages(history)`` or, with memory, the conversation id); it needs no
        user text."""
        given = self._params.get(AdvisorParams.TOOL_APPROVALS, {})
        self._params[AdvisorParams.TOOL_APPROVALS] = {**given, **as_decisions(decisions)}
        return self

    def usage_limits(self, limits: UsageLimits | None) -> ChatClientRequestSpec:
        """Usage limits for this request, in place of the client's (``None`` lifts them).

        >>> client.prompt("Plan my trip").usage_limits(UsageLimits(request_limit=5)).call().content()
        """
        self._limits = _checked_limits(limits, "usage_limits()")
        return self

    def agent(self, agent: Agent, *, resume: bool = True) -> ChatClientRequestSpec:
        """Run the request through ``agent`` and the agents its handoffs reach (API.md §18); with
        ``resume`` the conversation goes on with the agent its newest answer names."""
        self._params[agents.AGENT_PARAM] = agents.agent_param(agent, resume)
        return self

    def param(self, key: str, value: Any) -> ChatClientRequestSpec:
        """A request-context entry (e.g. ``ChatMemory.CONVERSATION_ID``) that advisors read."""
        self._params[key] = value
        return self

    def _run_settings(
        self,
        *,
        parent: Run | None = None,
        meter: RunMeter | None = None,
        listener: RunListener | None = None,
    ) -> ChatClientRequestSpec:
        """How the request's run is built (for the library's own callers): a ``parent`` run this
        one is part of (its meter counts in the parent's and checks its limits too), an existing
        ``meter`` (a durable run resumes with its totals), a ``listener`` for run events."""
        self._run_settings_given = _RunSettings(parent, meter, listener)
        return self

    # -- terminal operations -------------------------------------------------------------------

    def call(self) -> CallResponseSpec:
        """Blocking call; the request runs on the first ``content()``/``chat_response()``..."""
        return CallResponseSpec(AsyncCallResponseSpec(self))

    def acall(self) -> AsyncCallResponseSpec:
        """Async call; the request runs on the first awaited ``content()``/``chat_response()``..."""
        return AsyncCallResponseSpec(self)

    def stream(self) -> StreamResponseSpec:
        """Blocking stream of chunks or text deltas."""
        _sync.ensure_no_running_loop("stream()", "astream()")
        return StreamResponseSpec(AsyncStreamResponseSpec(self))

    def astream(self) -> AsyncStreamResponseSpec:
        """Async stream of chunks or text deltas."""
        return AsyncStreamResponseSpec(self)

    # -- building the request ------------------------------------------------------------------

    def _build(
        self,
        extra_context: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        extra_advisors: Sequence[Advisor] = (),
    ) -> tuple[ChatClientRequest, Run]:
        """The request and the run it runs in."""
        instructions: list[Message] = []
        system = self._system_text()
        if system is not None:
            instructions.append(SystemMessage(system))
        instructions.extend(self._messages)
        user = self._user_message()
        if user is not None:
            instructions.append(user)
        if not instructions and AdvisorParams.TOOL_APPROVALS not in self._params:
            raise ChainConfigurationError(
                "the prompt is empty: give it user text (prompt('...') or .user('...'))"
            )
        context: dict[str, Any] = {**self._params, **(extra_context or {})}
        options = self._build_options(context)
        if output_schema is not None:
            options = (options or ChatOptions()).copy(output_schema=output_schema)
        client = self._client
        if client.default_agent is not None or agents.AGENT_PARAM in context:
            given = [*client.default_advisors, *self._advisors, *extra_advisors]
            extra_advisors = (*extra_advisors, *agents.agent_advisors(client.default_agent, context, given))
        advisors = assemble_advisors(
            client.default_advisors,
            [*self._advisors, *extra_advisors],
            auto_register=bool(
                client.tool_calling_auto_register
                and context.get(AdvisorParams.TOOL_CALLING_ADVISOR_AUTO_REGISTER, True)
            ),
            tool_advisor_factory=client._tool_advisor if client.tool_guards else _tool_calling_advisor,
        )
        if client.tool_guards:
            client._check_guarded_loop(advisors)
        return ChatClientRequest(Prompt(tuple(instructions), options), context), self._run(advisors)

    def _run(self, advisors: tuple[Advisor, ...]) -> Run:
        """The request's run: its meter holds the request's limits (else the client's) and the
        client's prices."""
        client = self._client
        given = self._run_settings_given or _NO_SETTINGS
        meter = given.meter
        if meter is None:
            limits = client.usage_limits if isinstance(self._limits, _Unset) else self._limits
            parent = given.parent.meter if given.parent is not None else None
            meter = RunMeter(limits, client.price_table, parent=parent)
        outer = given.parent or current_run()
        return Run(meter, advisors=advisors, listener=given.listener, parent=given.parent, outer=outer)

    def _system_text(self) -> str | None:
        if not self._system_is_default or self._system is None:
            return self._system
        if any(type(m) is SystemMessage for m in self._messages):
            return None  # a history with its own system message (a resumed round): not added twice
        params = {**self._client.default_system_params, **self._system_params}
        return render(self._system, params, "default system text") if params else self._system

    def _user_message(self) -> UserMessage | None:
        if self._user is not None:
            return self._user
        template = self._client.default_user
        if template is None or AdvisorParams.TOOL_APPROVALS in self._params:
            return None  # decisions resume a waiting round: no new user turn of the defaults'
        params = {**self._client.default_user_params, **self._user_params}
        return UserMessage(render(template, params, "default user text") if params else template)

    def _build_options(self, context: Mapping[str, Any]) -> ChatOptions | None:
        client = self._client
        options = client.default_options
        if self._options is not None:
            options = self._options.merged_over(options)
        # Unique names are checked once, by the ChatOptions' registry below.
        tools = client.default_tool_callbacks() + tuple(unchecked_tool_callbacks(*self._tools))
        tool_context = dict(self._tool_context)
        conversation_id = conversation_id_of(context)
        if conversation_id is not None:
            tool_context["conversation_id"] = conversation_id
        if not tools and not tool_context:
            return options
        # ChatOptions checks the tool names are unique (its ToolRegistry).
        return ChatOptions(tool_callbacks=tools, tool_context=tool_context).merged_over(options)


class _Unset:
    """No ``usage_limits(...)`` on the request: the client's apply."""


_UNSET = _Unset()


def _checked_limits(limits: object, what: str) -> UsageLimits | None:
    if limits is None or isinstance(limits, UsageLimits):
        return limits
    raise ChainConfigurationError(f"{what} takes UsageLimits(...) or None, got {limits!r}")


def _checked_advisors(advisors: Iterable[object]) -> tuple[Advisor, ...]:
    checked: list[Advisor] = []
    for advisor in advisors:
        check_advisor(advisor)
        checked.append(advisor)  # type: ignore[arg-type]  # check_advisor verified the protocol
    return tuple(checked)


@functools.cache
def _tool_calling_advisor(conversation_history_enabled: bool) -> Advisor:
    """The auto-registered tool loop: one per setting, shared by every request (it keeps each
    loop's state in the loop, none in itself)."""
    return ToolCallingAdvisor(conversation_history_enabled=conversation_history_enabled)


def _optional_text(text: str | None, what: str) -> str | None:
    return None if text is None else _non_blank(text, what)


def _non_blank(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise ChainConfigurationError(f"{what} must be a str, got {text!r}")
    if not text.strip():
        raise ChainConfigurationError(f"{what} is blank; give the model something to answer")
    return text


@dataclass(frozen=True, slots=True)
class _RunSettings:
    parent: Run | None
    meter: RunMeter | None
    listener: RunListener | None


_NO_SETTINGS = _RunSettings(None, None, None)


def _call(request: ChatClientRequest, run: Run, model: ChatModel) -> Coroutine[Any, Any, ChatClientResponse]:
    """The request's whole chain in its run (a coroutine to await)."""
    chain = CallAdvisorChain(run.advisors, model, run=run)  # type: ignore[arg-type]
    return call_run(run, request, chain.next_call)


def _stream(request: ChatClientRequest, run: Run, model: ChatModel) -> AsyncIterator[ChatClientResponse]:
    chain = StreamAdvisorChain(run.advisors, model, run=run)  # type: ignore[arg-type]
    return stream_run(run, request, chain.next_stream)


@dataclass(frozen=True, slots=True)
class ResponseEntity(Generic[T]):
    """The answer parsed into a type, beside the ``ChatResponse`` of the same request (usage,
    metadata, finish reason): what ``response_entity(T)`` returns."""

    response: ChatResponse
    entity: T


class AsyncCallResponseSpec:
    """The result of ``acall()``: the request runs once, on the first awaited accessor."""

    __slots__ = ("_result", "_running", "_spec")

    def __init__(self, spec: ChatClientRequestSpec) -> None:
        self._spec = spec
        self._result: ChatClientResponse | None = None
        self._running: asyncio.Future[None] | None = None
        """Done when the request that runs now ends: accessors awaited together make one request
        (one that failed is made again by the next accessor, as a lock would have it)."""

    async def chat_client_response(self) -> ChatClientResponse:
        """The response with the request context the advisors left."""
        while self._result is None:
            running = self._running
            if running is not None:
                await asyncio.shield(running)  # a waiter cancelled leaves the others waiting
                continue
            running = self._running = asyncio.get_running_loop().create_future()
            try:
                self._result = await _call(*self._spec._build(), self._spec._client.model)
            finally:
                self._running = None
                running.set_result(None)
        return self._result

    async def chat_response(self) -> ChatResponse:
        """The model's (final) response."""
        return _chat_response_of(await self.chat_client_response())

    async def content(self) -> str | None:
        """The first generation's text."""
        return _chat_response_of(await self.chat_client_response()).text

    @overload
    async def entity(
        self, output_type: type[T], schema_validation: bool = ..., *, native: bool = ...
    ) -> T: ...
    @overload
    async def entity(self, output_type: Any, schema_validation: bool = ..., *, native: bool = ...) -> Any: ...
    async def entity(self, output_type: Any, schema_validation: bool = False, *, native: bool = False) -> Any:
        """The answer parsed into ``output_type`` (its own request, with format instructions).

        ``schema_validation=True`` adds a StructuredOutputValidationAdvisor (validate and retry);
        ``native=True`` also asks the provider for native JSON-schema output where it has one.
        """
        return (await self.response_entity(output_type, schema_validation, native=native)).entity

    @overload
    async def response_entity(
        self, output_type: type[T], schema_validation: bool = ..., *, native: bool = ...
    ) -> ResponseEntity[T]: ...
    @overload
    async def response_entity(
        self, output_type: Any, schema_validation: bool = ..., *, native: bool = ...
    ) -> ResponseEntity[Any]: ...
    async def response_entity(
        self, output_type: Any, schema_validation: bool = False, *, native: bool = False
    ) -> ResponseEntity[Any]:
        """``entity(output_type, ...)`` and the ``ChatResponse`` of that same request (one request):
        the parsed answer beside its usage and metadata."""
        converter = converter_for(output_type)
        spec = self._spec
        validation: tuple[Advisor, ...] = ()
        if schema_validation and not any(
            isinstance(a, StructuredOutputValidationAdvisor)
            for a in (*spec._client.default_advisors, *spec._advisors)
        ):
            validation = (StructuredOutputValidationAdvisor(output_type=output_type),)
        request, run = spec._build(
            {AdvisorParams.OUTPUT_FORMAT: converter.format_instructions},
            converter.json_schema if native else None,
            validation,
        )
        response = await _call(request, run, spec._client.model)
        chat = response.chat_response
        if chat is None:
            raise ChainConfigurationError("the advisor chain returned no chat response")
        return ResponseEntity(chat, converter.parse(chat.text))


def _chat_response_of(response: ChatClientResponse) -> ChatResponse:
    chat = response.chat_response
    if chat is None:
        raise ChainConfigurationError("the advisor chain returned no chat response")
    return chat


class CallResponseSpec:
    """The result of ``call()``: blocking accessors; the request runs once, on the first one."""

    def __init__(self, spec: AsyncCallResponseSpec) -> None:
        self._async = spec

    def chat_client_response(self) -> ChatClientResponse:
        return _sync.run(
            self._async.chat_client_response,
            "call().chat_client_response()",
            "await acall().chat_client_response()",
        )

    def chat_response(self) -> ChatResponse:
        return _sync.run(self._async.chat_response, "call().chat_response()", "await acall().chat_response()")

    def content(self) -> str | None:
        return _sync.run(self._async.content, "call().content()", "await acall().content()")

    @overload
    def entity(self, output_type: type[T], schema_validation: bool = ..., *, native: bool = ...) -> T: ...
    @overload
    def entity(self, output_type: Any, schema_validation: bool = ..., *, native: bool = ...) -> Any: ...
    def entity(self, output_type: Any, schema_validation: bool = False, *, native: bool = False) -> Any:
        """The answer parsed into ``output_type``; the blocking form of ``acall().entity(...)``."""
        return _sync.run(
            functools.partial(
                self._async.entity, output_type, schema_validation=schema_validation, native=native
            ),
            "call().entity()",
            "await acall().entity()",
        )

    @overload
    def response_entity(
        self, output_type: type[T], schema_validation: bool = ..., *, native: bool = ...
    ) -> ResponseEntity[T]: ...
    @overload
    def response_entity(
        self, output_type: Any, schema_validation: bool = ..., *, native: bool = ...
    ) -> ResponseEntity[Any]: ...
    def response_entity(
        self, output_type: Any, schema_validation: bool = False, *, native: bool = False
    ) -> ResponseEntity[Any]:
        """The blocking form of ``acall().response_entity(...)``: the entity and its ChatResponse."""
        return _sync.run(
            functools.partial(
                self._async.response_entity, output_type, schema_validation=schema_validation, native=native
            ),
            "call().response_entity()",
            "await acall().response_entity()",
        )


class AsyncStreamResponseSpec:
    """The result of ``astream()``: async iterators over chunks or text deltas."""

    def __init__(self, spec: ChatClientRequestSpec) -> None:
        self._spec = spec

    def chat_client_responses(self) -> AsyncIterator[ChatClientResponse]:
        """Every chunk with its context."""
        return _stream(*self._spec._build(), self._spec._client.model)

    async def chat_responses(self) -> AsyncIterator[ChatResponse]:
        """Every chunk's ChatResponse (a context-only chunk, which has none, is skipped)."""
        async with closing(self.chat_client_responses()) as source:
            async for chunk in source:
                if chunk.chat_response is not None:
                    yield chunk.chat_response

    async def content(self) -> AsyncIterator[str]:
        """The text deltas."""
        async with closing(self.chat_client_responses()) as source:
            async for chunk in source:
                text = chunk.chat_response.text if chunk.chat_response is not None else None
                if text:
                    yield text


class StreamResponseSpec:
    """The result of ``stream()``: blocking iterators over chunks or text deltas."""

    def __init__(self, spec: AsyncStreamResponseSpec) -> None:
        self._async = spec

    def chat_client_responses(self) -> Iterator[ChatClientResponse]:
        return _sync.iterate(
            self._async.chat_client_responses(),
            "stream().chat_client_responses()",
            "astream().chat_client_responses()",
        )

    def chat_responses(self) -> Iterator[ChatResponse]:
        return _sync.iterate(
            self._async.chat_responses(), "stream().chat_responses()", "astream().chat_responses()"
        )

    def content(self) -> Iterator[str]:
        return _sync.iterate(self._async.content(), "stream().content()", "astream().content()")
