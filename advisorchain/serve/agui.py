"""``agui_app``: any ChatClient as an AG-UI agent (protocol 1.0, the ``ag-ui-protocol`` package's
models and encoder): ``POST`` a ``RunAgentInput``, read the run as a stream of AG-UI events
(API.md §20).

A run: ``RUN_STARTED``; per model round a step ``round <n>``; the answer's text live as
``TEXT_MESSAGE_START``/``CONTENT``/``END``; each tool call the agent runs as
``TOOL_CALL_START``/``ARGS``/``END`` then, once the round's step is closed, ``TOOL_CALL_RESULT``; a
nested agent tool inside ``SUBAGENT_STARTED``/``FINISHED``; a handoff as a step ``handoff <from> ->
<to>``; then ``RUN_FINISHED`` with the run's ``usage`` (its outcome an interrupt per call waiting
for approval) or ``RUN_ERROR``. The input's ``tools`` are front-end tools: a round that calls one
ends the run after its ``TOOL_CALL_END``; the front end runs it and sends the result in a new run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AssistantMessage as AguiAssistant,
)
from ag_ui.core import (
    BaseEvent,
    DataSource,
    DeveloperMessage,
    ImagePart,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
)
from ag_ui.core import (
    SystemMessage as AguiSystem,
)
from ag_ui.core import (
    UserMessage as AguiUser,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._streams import closing
from ..advisors import AdvisorParams
from ..chain.events import (
    HandoffEvent,
    RoundFinished,
    RoundStarted,
    RunEvent,
    SubRunFinished,
    SubRunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from ..client import ChatClient, ChatClientRequestSpec
from ..errors import UsageLimitExceeded
from ..memory import ChatMemory
from ..messages import (
    AssistantMessage,
    Media,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..model import ChatClientResponse
from ..tools import Approved, Denied, ToolDefinition
from ..tools.approvals import Decision
from ..usage import RunUsage
from ._http import EventStream, Guard, Refusal, error_line
from ._turns import Paused, Plan, ServeCore, TurnInput

__all__ = ["INTERRUPT_PREFIX", "agui_app"]

INTERRUPT_PREFIX = "approval:"
"""An approval interrupt's id is this prefix and the tool call's id (stable across retries)."""

_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
_ENCODER = EventEncoder()


def agui_app(
    client: ChatClient, *, token: str | None = None, memory: ChatMemory | None = None, path: str = "/"
) -> Starlette:
    """``client`` served as an AG-UI agent at ``POST path`` (an ASGI app; serve it with uvicorn).

    ``threadId`` names the conversation; with ``memory`` (else the client's memory advisor's) the
    stored conversation wins over the messages a front end resends, and only those after its last
    assistant message are new. Without memory the input's messages are the conversation.

    >>> app = agui_app(ChatClient(model), token="s3cret")
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)
    >>> # new HttpAgent({url: "http://127.0.0.1:8000/", headers: {Authorization: "Bearer s3cret"}})
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    served = _Agui(ServeCore(client, memory))
    app = Starlette(
        routes=[Route(path, served.run, methods=["POST"])],
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
    )
    app.add_middleware(Guard, token=token, errors=error_response)
    return app


def error_response(refusal: Refusal) -> Response:
    """A refusal as JSON: ``{"error": {"message", "code", "field"}}`` with the refusal's status."""
    body = {"error": {"message": refusal.message, "code": refusal.code, "field": refusal.param}}
    headers = {"www-authenticate": "Bearer"} if refusal.status == 401 else None
    return JSONResponse(body, status_code=refusal.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = {404: "no AG-UI agent at this path", 405: "POST a RunAgentInput here"}.get(
        status, "the request failed"
    )
    return error_response(Refusal(status, message, "not_found" if status == 404 else "error"))


class _Agui:
    def __init__(self, core: ServeCore) -> None:
        self.core = core

    async def run(self, request: Request) -> Response:
        try:
            body = _json(await request.body())
            given = _input(body)
            turn = _turn(given)
            await self.core.check(turn)
        except Refusal as refusal:
            return error_response(refusal)
        return EventStream(self._events(given, turn))

    async def _events(self, given: RunAgentInput, turn: TurnInput) -> AsyncIterator[bytes]:
        run = _Run(given.thread_id, given.run_id)
        yield _encode(RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
        try:
            async with self.core.turn(turn.conversation_id) as held:
                plan = self.core.plan(turn, held)
                try:
                    async for frame in self._run(plan, run):
                        yield frame
                except BaseException:
                    self.core.abandon(plan)
                    raise
        except Exception as exc:
            for event in run.close_text():
                yield _encode(event)
            code = _code(exc)
            yield _encode(RunErrorEvent(message=error_line(exc), code=code))

    async def _run(self, plan: Plan, run: _Run) -> AsyncIterator[bytes]:
        """The run's events as they happen: the stream's text and the run's events (rounds, tool
        calls, handoffs, sub-agents) through one queue, in the order they happened."""
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        run.resumed = {c.id: c for c in (*plan.round_calls, *plan.resumed)}
        run.caller_names = plan.caller_names

        def listen(event: RunEvent) -> None:
            if threading.get_ident() == run.thread:
                queue.put_nowait(("event", event))
            else:
                loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

        spec = plan.listened(listen)
        producer = asyncio.ensure_future(_produce(spec, queue))
        try:
            ended = False
            while not ended:
                frames: list[bytes] = []
                item = await queue.get()
                while True:  # what is ready goes out in one write
                    kind, value = item
                    if kind == "end":
                        ended = True
                        break
                    if kind == "error":
                        assert isinstance(value, BaseException)
                        if frames:
                            yield b"".join(frames)
                        raise value
                    events = run.on_event(value) if kind == "event" else run.on_chunk(value)
                    frames.extend(e if isinstance(e, bytes) else _encode(e) for e in events)
                    if queue.empty():
                        break
                    item = queue.get_nowait()
                if frames:
                    yield b"".join(frames)
        finally:
            if not producer.done():
                producer.cancel()
            await asyncio.wait({producer})
        paused = self.core.paused(plan, run.context, run.message)
        yield b"".join(_encode(e) for e in run.finish(paused))


_Item = tuple[str, Any]


async def _produce(spec: ChatClientRequestSpec, queue: asyncio.Queue[_Item]) -> None:
    try:
        async with closing(spec.astream().chat_client_responses()) as source:
            async for chunk in source:
                queue.put_nowait(("chunk", chunk))
    except Exception as exc:
        queue.put_nowait(("error", exc))
        return
    queue.put_nowait(("end", None))


def _encode(event: BaseEvent) -> bytes:
    return _ENCODER.encode(event).encode()


def _code(exc: BaseException) -> str:
    """The ``RUN_ERROR`` code of a failure: ``usage_limit_exceeded``, ``refused`` (the input could
    not run on the conversation as it stood when its turn came) or ``error``."""
    if isinstance(exc, UsageLimitExceeded):
        return "usage_limit_exceeded"
    return "refused" if isinstance(exc, Refusal) else "error"


@dataclass
class _Steps:
    """One run's (the top run's or a sub-agent's) open round and the results it holds back until
    the round's step is closed."""

    subagent: str | None
    round: int | None = None
    results: list[BaseEvent] = field(default_factory=list)
    message_id: str | None = None
    """The assistant message of the open round (its text, then its tool calls); a new one each round."""


class _Run:
    """The AG-UI events of one run, from the stream's chunks and the run's events."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.thread = threading.get_ident()
        self.message_id: str | None = None
        self.text_open = False
        self.context: Mapping[str, Any] = {}
        self.message: AssistantMessage | None = None
        self.usage: RunUsage | None = None
        self.resumed: dict[str, ToolCall] = {}
        self.caller_names: frozenset[str] = frozenset()
        self._runs: dict[str, _Steps] = {}
        self._top: _Steps = _Steps(None)
        self._content: tuple[bytes, bytes] = (b"", b"")

    # -- text ----------------------------------------------------------------------------------

    def on_chunk(self, chunk: ChatClientResponse) -> list[BaseEvent | bytes]:
        self.context = chunk.context
        chat = chunk.chat_response
        if chat is None:
            return []
        events: list[BaseEvent | bytes] = []
        text = chat.text
        if text:
            if not self.text_open:
                self.message_id = _new_id("msg")
                self.text_open = True
                self._content = _content_frame(self.message_id)
                events.append(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
            before, after = self._content
            events.append(before + json.dumps(text, ensure_ascii=False).encode() + after)
        if chat.finish_reason is not None and chat.result is not None:
            self.message = chat.result.output
        return events

    def close_text(self) -> list[BaseEvent]:
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self.message_id or "")]

    # -- the run's events ----------------------------------------------------------------------

    def _steps(self, run_id: str) -> _Steps:
        return self._runs.get(run_id, self._top)

    def on_event(self, event: RunEvent) -> list[BaseEvent]:
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def _round_started(self, event: RoundStarted) -> list[BaseEvent]:
        steps = self._steps(event.run_id)
        events = self._close_round(steps)
        steps.round = event.iteration
        steps.message_id = None  # a round's calls join its own message, never an earlier round's
        if steps is self._top:
            self.message_id = None
        events.append(StepStartedEvent(step_name=f"round {event.iteration}", subagent_run_id=steps.subagent))
        return events

    def _round_finished(self, event: RoundFinished) -> list[BaseEvent]:
        steps = self._steps(event.run_id)
        return self.close_text() if steps is self._top else []

    def _close_round(self, steps: _Steps) -> list[BaseEvent]:
        events: list[BaseEvent] = self.close_text() if steps is self._top else []
        if steps.round is not None:
            events.append(StepFinishedEvent(step_name=f"round {steps.round}", subagent_run_id=steps.subagent))
            steps.round = None
        events.extend(steps.results)
        steps.results = []
        return events

    def _tool_started(self, event: ToolCallStarted) -> list[BaseEvent]:
        steps = self._steps(event.run_id)
        call: ToolCall = event.call
        if steps is self._top and call.id in self.resumed:
            return []  # its START/ARGS/END went out with the run that paused on it
        return [*self.close_text(), *_call_events(call, steps.subagent, self._parent(steps))]

    def _parent(self, steps: _Steps) -> str:
        """The id of the assistant message a call of ``steps``' open round belongs to: the round's
        text message, else one the client makes for the round's calls."""
        if steps is self._top:
            if self.message_id is None:
                self.message_id = _new_id("msg")
            return self.message_id
        if steps.message_id is None:
            steps.message_id = _new_id("msg")
        return steps.message_id

    def _tool_finished(self, event: ToolCallFinished) -> list[BaseEvent]:
        steps = self._steps(event.run_id)
        call: ToolCall = event.call
        if steps is self._top and call.name in self.caller_names:
            return []  # the front end's own tool: it has the result
        result = ToolCallResultEvent(
            message_id=_new_id("tool"),
            tool_call_id=call.id,
            content=event.result,
            role="tool",
            subagent_run_id=steps.subagent,
        )
        if steps.round is None:
            return [result]
        steps.results.append(result)
        return []

    def _handoff(self, event: HandoffEvent) -> list[BaseEvent]:
        steps = self._steps(event.run_id)
        name = f"handoff {event.from_agent} -> {event.to_agent}"
        return [
            *self._close_round(steps),
            StepStartedEvent(step_name=name, subagent_run_id=steps.subagent),
            StepFinishedEvent(step_name=name, subagent_run_id=steps.subagent),
        ]

    def _sub_started(self, event: SubRunStarted) -> list[BaseEvent]:
        parent = self._steps(event.run_id)
        self._runs[event.child_run_id] = _Steps(event.child_run_id)
        return [
            SubagentStartedEvent(
                subagent_run_id=event.child_run_id,
                name=event.name,
                parent_tool_call_id=event.tool_call_id,
                parent_subagent_run_id=parent.subagent,
            )
        ]

    def _sub_finished(self, event: SubRunFinished) -> list[BaseEvent]:
        steps = self._runs.get(event.child_run_id)
        events = self._close_round(steps) if steps is not None else []
        events.append(
            SubagentFinishedEvent(
                subagent_run_id=event.child_run_id, outcome=SubagentFinishedSuccessOutcome()
            )
        )
        return events

    # -- the end -------------------------------------------------------------------------------

    def finish(self, paused: Paused | None) -> list[BaseEvent]:
        events: list[BaseEvent] = self.close_text()
        if paused is not None:  # the paused round's calls, all of them (the others run on resume)
            calls = paused.message.tool_calls if paused.message is not None else [c for c, _ in paused.calls]
            for call in calls:
                events.extend(_call_events(call, None, self._parent(self._top)))
        events.extend(self._close_round(self._top))
        usage = _usage(self.context)
        outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome | None = None
        if paused is not None and paused.approvals:
            outcome = RunFinishedInterruptOutcome(interrupts=[_interrupt(c) for c in paused.approvals])
        elif paused is not None:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=[c.id for c in paused.caller_calls])
        events.append(
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, usage=usage)
        )
        return events


_HANDLERS: dict[type, Callable[[_Run, Any], list[BaseEvent]]] = {
    RoundStarted: _Run._round_started,
    RoundFinished: _Run._round_finished,
    ToolCallStarted: _Run._tool_started,
    ToolCallFinished: _Run._tool_finished,
    HandoffEvent: _Run._handoff,
    SubRunStarted: _Run._sub_started,
    SubRunFinished: _Run._sub_finished,
}


def _content_frame(message_id: str) -> tuple[bytes, bytes]:
    """The encoded ``TEXT_MESSAGE_CONTENT`` event of a message, split where its delta's JSON goes
    (the hot path: the event's own encoding, made once per message)."""
    marker = "\x00delta\x00"
    frame = _ENCODER.encode(TextMessageContentEvent(message_id=message_id, delta=marker))
    before, after = frame.split(json.dumps(marker), 1)
    return before.encode(), after.encode()


def _call_events(call: ToolCall, subagent: str | None, parent: str | None) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(
            tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent, subagent_run_id=subagent
        ),
        ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments, subagent_run_id=subagent),
        ToolCallEndEvent(tool_call_id=call.id, subagent_run_id=subagent),
    ]


def _interrupt(call: ToolCall) -> Interrupt:
    return Interrupt(
        id=INTERRUPT_PREFIX + call.id,
        reason="tool_call",
        tool_call_id=call.id,
        message=f"approve the tool call {call.name}({call.arguments})?",
        response_schema=_RESPONSE_SCHEMA,
    )


def _usage(context: Mapping[str, Any]) -> list[TokenUsage] | None:
    run = context.get(AdvisorParams.RUN_USAGE)
    if not isinstance(run, RunUsage):
        return None
    u = run.usage
    return [
        TokenUsage(
            input_tokens=u.prompt_tokens,
            output_tokens=u.completion_tokens,
            total_tokens=u.prompt_tokens + u.completion_tokens,
            cached_input_tokens=u.cache_read_tokens,
            cache_write_input_tokens=u.cache_write_tokens,
        )
    ]


def _new_id(kind: str) -> str:
    return f"{kind}-{secrets.token_hex(8)}"


# -- the input ---------------------------------------------------------------------------------


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Refusal(400, "the body is not JSON: send a RunAgentInput", "invalid_json") from None


def _input(body: Any) -> RunAgentInput:
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise Refusal(422, f"not a RunAgentInput: {where}: {first['msg']}", "invalid_input", where) from None


def _turn(given: RunAgentInput) -> TurnInput:
    if not given.thread_id.strip() or len(given.thread_id) > 200:
        raise Refusal(422, "threadId must be 1 to 200 characters", "invalid_input", "threadId")
    tools = [
        ToolDefinition(
            t.name, t.description, t.parameters if isinstance(t.parameters, dict) else {"type": "object"}
        )
        for t in given.tools or ()
    ]
    return TurnInput(
        conversation_id=given.thread_id,
        messages=_messages(given),
        resends=True,
        caller_tools=tools,
        decisions=_decisions(given.resume or ()),
    )


def _decisions(entries: Any) -> dict[str, Decision]:
    decisions: dict[str, Decision] = {}
    for index, entry in enumerate(entries):
        assert isinstance(entry, ResumeEntry)
        where = f"resume.{index}"
        if not entry.interrupt_id.startswith(INTERRUPT_PREFIX):
            raise Refusal(400, f"no interrupt {entry.interrupt_id!r} was raised", "unknown_interrupt", where)
        call_id = entry.interrupt_id[len(INTERRUPT_PREFIX) :]
        if entry.status == "cancelled":
            decisions[call_id] = Denied()
            continue
        payload = entry.payload
        if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
            raise Refusal(
                422,
                f'{where}.payload must be {{"approved": true}} or {{"approved": false, "reason": "..."}}',
                "invalid_input",
                f"{where}.payload",
            )
        reason = payload.get("reason")
        decisions[call_id] = (
            Approved()
            if payload["approved"]
            else Denied(reason if isinstance(reason, str) and reason else None)
        )
    return decisions


def _messages(given: RunAgentInput) -> list[Message]:
    converted: list[Message] = []
    names: dict[str, str] = {}
    for index, message in enumerate(given.messages):
        item = message.root if hasattr(message, "root") else message
        if getattr(item, "subagent_run_id", None) is not None:
            continue  # a nested agent tool's own rounds: its answer is the tool result, not the thread
        if isinstance(item, AguiSystem | DeveloperMessage):
            converted.append(SystemMessage(item.content))
        elif isinstance(item, AguiUser):
            converted.append(_user(item, f"messages.{index}.content"))
        elif isinstance(item, AguiAssistant):
            calls = tuple(
                ToolCall(c.id, c.function.name, c.function.arguments or "{}") for c in item.tool_calls or ()
            )
            names.update((c.id, c.name) for c in calls)
            converted.append(AssistantMessage(item.content, calls))
        elif isinstance(item, ToolMessage):
            content = item.content if isinstance(item.content, str) else _parts_text(item.content)
            response = ToolResponse(item.tool_call_id, names.get(item.tool_call_id, ""), content)
            previous = converted[-1] if converted else None
            if isinstance(previous, ToolResponseMessage):
                converted[-1] = ToolResponseMessage((*previous.responses, response))
            else:
                converted.append(ToolResponseMessage((response,)))
        # activity and reasoning messages are the front end's own: not part of the conversation
    return converted


def _user(item: AguiUser, where: str) -> UserMessage:
    if isinstance(item.content, str):
        return UserMessage(item.content)
    texts: list[str] = []
    media: list[Media] = []
    for part in item.content:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart):
            source = part.source.root if hasattr(part.source, "root") else part.source
            if isinstance(source, DataSource):
                media.append(Media(source.mime_type, data=base64.b64decode(source.value)))
            elif isinstance(source, UrlSource):
                media.append(Media(source.mime_type or "image/png", url=source.value))
            else:
                raise Refusal(
                    422, f"{where}: an image part needs a data or url source", "invalid_input", where
                )
        else:
            raise Refusal(422, f"{where}: only text and image parts are taken", "invalid_input", where)
    return UserMessage("".join(texts), media=media)


def _parts_text(parts: Any) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))
