"""ToolCallingManager: runs the tool calls of one model response and builds the next history.

>>> manager = ToolCallingManager()
>>> result = await manager.execute_tool_calls(prompt, chat_response)
>>> next_prompt = Prompt(result.conversation_history, prompt.options)
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from .. import observability as obs
from .._checks import check_int, check_seconds
from .._tool_types import EMPTY_REGISTRY, ToolRegistry
from ..errors import ChainConfigurationError, ToolCallLimitExceeded, ToolError, ToolExecutionError
from ..messages import AssistantMessage, Message, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from ..model import ChatOptions, ChatResponse, FinishReason, Generation, Prompt
from .api import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition
from .approvals import Approver
from .function import encode_result
from .schema import parse_arguments

__all__ = ["ToolCallingManager", "ToolCallingManagerProtocol", "ToolExecutionResult"]

NOT_EXECUTED = "Error: not executed: "
"""How a tool response begins for a call a per-turn limit kept from running."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The outcome of executing one response's tool calls.

    ``conversation_history`` is the prompt's instructions, the assistant tool-call message and one
    ToolResponseMessage (a response per call, in call order); ``return_direct`` is true when every
    called tool has ``return_direct`` (the tool outputs go straight to the caller);
    ``malformed_calls`` are the calls whose argument text was not valid JSON (their responses tell
    the model the parse error).
    """

    FINISH_REASON: ClassVar[str] = FinishReason.RETURN_DIRECT

    conversation_history: tuple[Message, ...]
    return_direct: bool = False
    malformed_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        if type(self.conversation_history) is not tuple:
            object.__setattr__(self, "conversation_history", tuple(self.conversation_history))

    @staticmethod
    def build_generations(result: ToolExecutionResult) -> list[Generation]:
        """One Generation per tool response of the newest ToolResponseMessage, its text the
        response data, finish reason ``"returnDirect"`` (used for return direct)."""
        last = result.conversation_history[-1] if result.conversation_history else None
        if not isinstance(last, ToolResponseMessage):
            return []
        return [
            Generation(
                AssistantMessage(r.response_data, metadata={"tool_id": r.id, "tool_name": r.name}),
                ToolExecutionResult.FINISH_REASON,
            )
            for r in last.responses
        ]


@runtime_checkable
class ToolCallingManagerProtocol(Protocol):
    """What the tool loop needs of a manager: these two methods, nothing else.

    ``ToolCallingManager`` implements it; a user's own manager (one that audits, filters or
    sandboxes tool calls, often by wrapping a ``ToolCallingManager``) implements just these two.
    ``execute_tool_calls`` runs every call of the response it is given and returns the history
    extended by the assistant message and one ToolResponseMessage (a response per call, in call
    order). The loop decides approvals before it and never passes a keyword argument.
    """

    def resolve_tool_definitions(self, options: ChatOptions | None) -> list[ToolDefinition]: ...

    async def execute_tool_calls(
        self, prompt: Prompt, chat_response: ChatResponse
    ) -> ToolExecutionResult: ...


class _ToolFailure(Exception):
    """A tool call that failed; ``text`` is what the model is told, ``__cause__`` why."""

    def __init__(self, text: str, *, malformed: bool = False) -> None:
        super().__init__(text)
        self.text = text
        self.malformed = malformed  # the argument text is not JSON at all


@dataclass(frozen=True, slots=True)
class _Outcome:
    response: ToolResponse
    return_direct: bool
    malformed: bool = False


@dataclass(frozen=True, slots=True)
class _Breach:
    tool_name: str | None
    limit: int
    message: str


class ToolCallingManager:
    """Executes the tool calls a model asked for, with the request's tools only.

    The calls of one response run concurrently (``parallel=True``) and their responses keep the
    order of the calls. Unknown tools, malformed or schema-invalid arguments, exceptions and
    timeouts become an error text in that call's response (the model can correct itself), or a
    ToolExecutionError when ``raise_on_error=True``. Per-turn limits count the tool responses in the
    history since the last user message plus the calls being executed; a breach raises
    ToolCallLimitExceeded. ``tool_timeout`` (seconds) bounds each call: an async tool is cancelled,
    a sync tool's worker thread cannot be stopped and finishes in the background, its result unused.

    Each tool receives a ToolContext with the request's tool context, ``conversation_id`` when
    known and the ``tool_call_id`` of the call it runs.

    ``approver(call, context)``, when given, decides the calls of tools whose metadata has
    ``requires_approval``: the tool loop asks it once per such call, in call order, before this
    manager runs the round (``execute_tool_calls`` itself runs every call it is given).

    The protocol a user's own manager implements is just ``resolve_tool_definitions(options)`` and
    ``async execute_tool_calls(prompt, chat_response)``; wrap or subclass this class to audit,
    filter or sandbox tool calls.
    """

    def __init__(
        self,
        *,
        parallel: bool = True,
        raise_on_error: bool = False,
        max_calls_per_tool: int = 40,
        max_total_calls: int = 150,
        tool_timeout: float | None = None,
        approver: Approver | None = None,
    ) -> None:
        if approver is not None and not callable(approver):
            raise ChainConfigurationError(
                f"approver must be a function (call, context) -> decision, got {approver!r}"
            )
        self.approver = approver
        self.parallel = parallel
        self.raise_on_error = raise_on_error
        self.max_calls_per_tool = check_int(max_calls_per_tool, "max_calls_per_tool", minimum=1)
        self.max_total_calls = check_int(max_total_calls, "max_total_calls", minimum=1)
        self.tool_timeout: float | None = check_seconds(tool_timeout, "tool_timeout", optional=True)

    def resolve_tool_definitions(self, options: ChatOptions | None) -> list[ToolDefinition]:
        """The definitions of the tools in ``options`` (duplicate names raise ValueError)."""
        return list(_registry(options).definitions)

    async def execute_tool_calls(self, prompt: Prompt, chat_response: ChatResponse) -> ToolExecutionResult:
        """Run the tool calls of ``chat_response`` with the tools of ``prompt.options`` and return
        the history extended by the assistant message and one ToolResponseMessage (a response per
        call, in call order).

        Every call given runs: approvals are decided before (by the tool loop, or by a hand-driven
        loop); the ``approver`` of this manager is what the tool loop asks."""
        message = _tool_call_message(chat_response)
        callbacks = _registry(prompt.options)
        context = prompt.options.tool_context if prompt.options is not None else {}
        calls = tuple(message.tool_calls)
        admitted, breach = self._admit(prompt.instructions, calls)
        outcomes = await self._run_all(calls[:admitted], callbacks, context)
        responses = [o.response for o in outcomes]
        if breach is not None:
            note = f"{NOT_EXECUTED}{breach.message}"
            responses.extend(ToolResponse(c.id, c.name, note) for c in calls[admitted:])
        history = (*prompt.instructions, message, ToolResponseMessage(tuple(responses)))
        if breach is not None:
            raise ToolCallLimitExceeded(
                breach.message,
                tool_name=breach.tool_name,
                limit=breach.limit,
                partial_result=ToolExecutionResult(history, False),
            )
        malformed = tuple(call for call, o in zip(calls, outcomes, strict=False) if o.malformed)
        return ToolExecutionResult(
            history, bool(outcomes) and all(o.return_direct for o in outcomes), malformed
        )

    # -- limits --------------------------------------------------------------------------------

    def _admit(self, history: Sequence[Message], calls: Sequence[ToolCall]) -> tuple[int, _Breach | None]:
        """How many of ``calls`` (a prefix) fit the per-turn limits, and the breach, if any."""
        per_tool = _calls_this_turn(history)
        total = sum(per_tool.values())
        for index, call in enumerate(calls):
            if per_tool[call.name] + 1 > self.max_calls_per_tool:
                return index, _Breach(
                    call.name,
                    self.max_calls_per_tool,
                    f"tool call limit reached: the model asked for more than "
                    f"max_calls_per_tool={self.max_calls_per_tool} calls of {call.name!r} in this turn",
                )
            if total + 1 > self.max_total_calls:
                return index, _Breach(
                    None,
                    self.max_total_calls,
                    f"tool call limit reached: the model asked for more than "
                    f"max_total_calls={self.max_total_calls} tool calls in this turn",
                )
            per_tool[call.name] += 1
            total += 1
        return len(calls), None

    # -- running -------------------------------------------------------------------------------

    async def _run_all(
        self, calls: Sequence[ToolCall], callbacks: ToolRegistry, context: Mapping[str, Any]
    ) -> list[_Outcome]:
        # Untraced, a call runs without a span to open (decided once per round).
        run = self._run_traced if obs.tracing_enabled() else self._run_one
        if not self.parallel or len(calls) < 2:
            return [await run(call, callbacks, context) for call in calls]
        return await _gather_or_cancel([run(call, callbacks, context) for call in calls])

    async def _run_traced(
        self, call: ToolCall, callbacks: ToolRegistry, context: Mapping[str, Any]
    ) -> _Outcome:
        with obs.span(f"execute_tool {call.name}", obs.tool_span_attributes(call.name, call.id)) as s:
            return await self._run_one(call, callbacks, context, s)

    async def _run_one(
        self, call: ToolCall, callbacks: ToolRegistry, context: Mapping[str, Any], s: obs.Span | None = None
    ) -> _Outcome:
        callback = callbacks.get(call.name)
        try:
            tool_context = ToolContext(context, tool_call_id=call.id)
            text = await self._invoke(call, callback, callbacks, tool_context)
        except _ToolFailure as failure:
            cause = failure.__cause__
            if s is not None:
                obs.record_failure(s, type(cause or failure).__qualname__, failure.text)
            if self.raise_on_error:
                raise ToolExecutionError(failure.text, tool_name=call.name, tool_call_id=call.id) from cause
            return _Outcome(
                ToolResponse(call.id, call.name, f"Error: {failure.text}"), False, failure.malformed
            )
        direct = callback is not None and callback.metadata.return_direct
        return _Outcome(ToolResponse(call.id, call.name, text, getattr(text, "media", ())), direct)

    async def _invoke(
        self,
        call: ToolCall,
        callback: ToolCallback | None,
        callbacks: ToolRegistry,
        context: ToolContext,
    ) -> str:
        if callback is None:
            raise _ToolFailure(_unknown_tool_text(call.name, callbacks)) from LookupError(call.name)
        try:
            arguments = parse_arguments(call.arguments, call.name)
        except InvalidToolArgumentsError as exc:
            raise _ToolFailure(str(exc), malformed=isinstance(exc.__cause__, json.JSONDecodeError)) from exc
        # Parsed once: a tool that takes parsed arguments gets them; any other gets the raw JSON.
        call_parsed = getattr(callback, "call_parsed", None)
        if call_parsed is not None:
            pending = call_parsed(arguments, context)
        else:
            pending = callback.call(call.arguments if arguments else "{}", context)
        try:
            result = await (pending if self.tool_timeout is None else self._with_timeout(pending, call.name))
        except _ToolFailure:
            raise
        except ToolError as exc:  # told to the model as it is (InvalidToolArgumentsError, McpToolError...)
            raise _ToolFailure(str(exc)) from (exc.__cause__ if getattr(exc, "relays_cause", False) else exc)
        except Exception as exc:
            if getattr(exc, "ends_the_run", False):  # the calling run's budget, spent in an agent tool
                raise
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise _ToolFailure(
                f"tool {call.name!r} failed with {detail}; check the arguments or answer without it"
            ) from exc
        return result if isinstance(result, str) else encode_result(result)

    async def _with_timeout(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        if self.tool_timeout is None:
            return await coro
        try:
            async with asyncio.timeout(self.tool_timeout) as scope:
                return await coro
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise _ToolFailure(
                f"tool {name!r} did not finish within {self.tool_timeout:g} seconds and was cancelled; "
                "try a smaller request or answer without it"
            ) from exc


async def _gather_or_cancel(coros: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``coros`` concurrently, results in order; on any failure or cancellation every task is
    cancelled and awaited, so none is left running."""
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise


def _calls_this_turn(history: Sequence[Message]) -> Counter[str]:
    """Tool responses per tool name since the last user message."""
    counts: Counter[str] = Counter()
    for message in reversed(history):
        if isinstance(message, ToolResponseMessage):
            for response in message.responses:
                counts[response.name] += 1
        elif isinstance(message, UserMessage):
            break
    return counts


def _registry(options: ChatOptions | None) -> ToolRegistry:
    return options.tool_registry if options is not None else EMPTY_REGISTRY


def _tool_call_message(chat_response: ChatResponse) -> AssistantMessage:
    for generation in chat_response.generations:
        if generation.output.has_tool_calls():
            return generation.output
    raise ChainConfigurationError(
        f"the response has no tool calls to execute (finish reason {chat_response.finish_reason!r}); "
        "check has_tool_calls() before calling execute_tool_calls"
    )


def _unknown_tool_text(name: str, callbacks: ToolRegistry) -> str:
    if not callbacks:
        return f"there is no tool named {name!r}: this request has no tools; answer without calling tools"
    available = ", ".join(repr(n) for n in callbacks.names)
    return (
        f"there is no tool named {name!r}; available tools: {available}. Call one of them by its exact name"
    )
