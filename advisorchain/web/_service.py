"""What the page asks of the agent, without HTTP: the conversations of the memory, and turns run
as a stream of events (text, tool calls, approvals, the end with usage and the trace tree).

Turns on one conversation run one after another (the ChatClient's conversation lock; the page
also checks, just before a turn runs, that the conversation is in the state the turn expects:
waiting for decisions or not). A turn whose reader goes away is cancelled, and memory stores
nothing of it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._serving import served_memory
from .._span_tree import SpanCollector, span_tree
from .._streams import closing, ready_batches
from ..advisors import ToolCallingAdvisor
from ..chain.vocabulary import AdvisorParams, Ordered
from ..client import ChatClient, ChatClientRequestSpec
from ..memory import ChatMemory
from ..messages import Message, ToolCall, UserMessage
from ..model import ChatClientResponse, Usage
from ..tools import Approved, Denied, ToolCallback
from ..tools.approvals import Decision
from ._views import (
    TURN_KEY,
    arranged,
    call_view,
    context_view,
    error_line,
    pending_calls,
    title_of,
    turns_of,
    usage_view,
)
from ._watch import WATCH_NAME, Emit, ToolWatch

__all__ = ["Refused", "TurnRequest", "WebService"]

_MAX_TEXT = 100_000
_TURNS_KEPT = 100
"""Runs the page remembers per conversation (tool calls, trace, usage), in this process only."""


class Refused(Exception):
    """A request the page refuses: its HTTP status and one line saying why and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """A new question (``text``), or the decisions for the tool calls a conversation waits on."""

    text: str | None = None
    approvals: Mapping[str, Decision] | None = None


RunKind = Literal["question", "approval"]


@dataclass
class _Run:
    """What the page records of one run of a turn (it keeps the last few in memory)."""

    kind: RunKind
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    context: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class WebService:
    """The agent behind the page: ``client`` runs the turns, ``memory`` holds the conversations."""

    def __init__(self, client: ChatClient, memory: ChatMemory | None) -> None:
        self.client = client
        self.memory, self._memory_advisor = served_memory(
            client, memory, own_memory=True, fix="pass that memory to create_app, or none"
        )
        self._watch_order = _watch_order(client)
        self.collector = SpanCollector.install()
        self._known: set[str] = set()  # conversations opened here that have no message yet
        self._touched: dict[str, float] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._runs: dict[str, OrderedDict[str, list[dict[str, Any]]]] = {}
        self.version = 0  # grows with every change the page makes: other tabs refresh on it

    # -- conversations -------------------------------------------------------------------------

    def tools(self) -> dict[str, ToolCallback]:
        """The client's tools by name, as of now."""
        return {t.definition.name: t for t in self.client.default_tool_callbacks()}

    async def messages(self, conversation_id: str) -> list[Message]:
        """The stored messages of a conversation."""
        aget = getattr(self.memory, "aget", None)
        if aget is not None:
            return list(await aget(conversation_id))
        return await asyncio.to_thread(self.memory.get, conversation_id)

    async def conversation_ids(self) -> list[str]:
        """Every conversation: those of the memory's repository and those opened here, the most
        recently used first."""
        repository = getattr(self.memory, "repository", None)
        find = getattr(repository, "find_conversation_ids", None)
        stored: list[str] = list(await asyncio.to_thread(find)) if callable(find) else []
        ids = {*stored, *self._known, *self._runs}
        return sorted(ids, key=lambda c: (-self._touched.get(c, 0.0), c))

    async def listing(self) -> list[dict[str, Any]]:
        """Each conversation with its title, message count and whether it waits for a decision."""
        tools = self.tools()
        listed = []
        for conversation_id in await self.conversation_ids():
            messages = await self.messages(conversation_id)
            listed.append(
                {
                    "id": conversation_id,
                    "title": title_of(messages),
                    "messages": len(messages),
                    "waiting": bool(pending_calls(messages, tools)),
                    "running": self.running(conversation_id),
                }
            )
        return listed

    def running(self, conversation_id: str) -> bool:
        """Whether a turn of the page runs (or waits to run) on the conversation."""
        lock = self._locks.get(conversation_id)
        return lock is not None and lock.locked()

    def open(self, conversation_id: str | None = None) -> str:
        """A conversation the page may run turns on: ``conversation_id``, or a new id."""
        conversation_id = conversation_id or f"web-{secrets.token_hex(4)}"
        check_id(conversation_id)
        self._known.add(conversation_id)
        self._touch(conversation_id)
        return conversation_id

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        """The conversation as turns, with the runs the page recorded and the calls it waits on."""
        messages = await self._existing(conversation_id)
        turns = turns_of(messages)
        recorded = self._runs.get(conversation_id, OrderedDict())
        for turn in turns:
            turn["runs"] = recorded.get(turn["id"], []) if turn["id"] is not None else []
            turn["steps"] = arranged(turn["steps"], turn["runs"])
        return {
            "id": conversation_id,
            "title": title_of(messages),
            "turns": turns,
            "pending": [call_view(c) for c in pending_calls(messages, self.tools())],
            "running": self.running(conversation_id),
        }

    async def delete(self, conversation_id: str) -> None:
        """Forget a conversation (refused while a turn runs on it)."""
        await self._existing(conversation_id)
        if self.running(conversation_id):
            raise Refused(409, f"a turn is running on conversation {conversation_id!r}; wait for it to end")
        aclear = getattr(self.memory, "aclear", None)
        if aclear is not None:
            await aclear(conversation_id)
        else:
            await asyncio.to_thread(self.memory.clear, conversation_id)
        self._known.discard(conversation_id)
        self._runs.pop(conversation_id, None)
        self._touched.pop(conversation_id, None)
        self.version += 1

    async def _existing(self, conversation_id: str) -> list[Message]:
        check_id(conversation_id)
        messages = await self.messages(conversation_id)
        if not messages and conversation_id not in self._known and conversation_id not in self._runs:
            raise Refused(
                404, f"no conversation {conversation_id!r}; pick one from the list or start a new one"
            )
        return messages

    def _touch(self, conversation_id: str) -> None:
        self._touched[conversation_id] = time.time()
        self.version += 1

    # -- turns ---------------------------------------------------------------------------------

    async def check_turn(self, conversation_id: str, turn: TurnRequest) -> list[Message]:
        """The stored conversation, when ``turn`` can run on it now; ``Refused`` otherwise."""
        messages = await self._existing(conversation_id)
        waiting = pending_calls(messages, self.tools())
        if turn.approvals is None:
            if waiting:
                raise Refused(
                    409,
                    f"conversation {conversation_id!r} waits for a decision on {_calls(waiting)}: "
                    "approve or deny first",
                )
            return messages
        if not waiting:
            raise Refused(409, f"conversation {conversation_id!r} waits for no decision; ask a question")
        ids = {c.id for c in waiting}
        unknown = sorted(set(turn.approvals) - ids)
        if unknown:
            raise Refused(
                400,
                f"no pending tool call {', '.join(map(repr, unknown))}; the conversation waits on "
                f"{_calls(waiting)}",
            )
        missing = [c for c in waiting if c.id not in turn.approvals]
        if missing:
            raise Refused(400, f"no decision for {_calls(missing)}: approve or deny every pending call")
        return messages

    async def turn_events(
        self, conversation_id: str, turn: TurnRequest
    ) -> AsyncIterator[list[tuple[str, Any]]]:
        """The events of one turn, as they happen, in batches (each batch holds what is ready when
        the reader asks: one event while a model streams at reading speed, many when it is faster):
        ``queued`` (another turn on this conversation runs first), ``run``, ``text``, ``tool``,
        ``approval``, ``done`` or ``error``, ``trace``.

        Closing the iterator early cancels the turn (memory stores nothing of it)."""
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        task = asyncio.create_task(self._produce(conversation_id, turn, queue))
        try:
            async with closing(ready_batches(queue)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            if not task.done():
                task.cancel()
            await asyncio.wait({task})

    async def _produce(
        self, conversation_id: str, turn: TurnRequest, queue: asyncio.Queue[tuple[str, Any] | None]
    ) -> None:
        try:
            await self._turn(conversation_id, turn, lambda name, data: queue.put_nowait((name, data)))
        except Refused as refused:
            queue.put_nowait(("error", {"message": refused.message}))
        finally:
            queue.put_nowait(None)

    async def _turn(self, conversation_id: str, turn: TurnRequest, emit: Emit) -> None:
        lock = self._locks[conversation_id]
        if lock.locked():
            emit("queued", {"message": "another turn on this conversation runs first; this one waits for it"})
        async with lock:
            messages = await self.check_turn(conversation_id, turn)
            self._touch(conversation_id)
            turn_id = _turn_id(turn, messages)
            run = _Run("question" if turn.text is not None else "approval")
            emit("run", {"turn": turn_id, "kind": run.kind})
            started = time.perf_counter()
            with self.collector.collecting() as spans:
                try:
                    await self._stream(self._spec(conversation_id, turn, turn_id, run, emit), run, emit)
                except Exception as exc:
                    run.error = error_line(exc)
                    emit("error", {"message": run.error})
            tree = self._tree(spans, run)
            ms = round((time.perf_counter() - started) * 1000, 3)
            emit("trace", {"tree": tree, "ms": ms})
            self._record(conversation_id, turn_id, run, tree, ms)

    def _spec(
        self, conversation_id: str, turn: TurnRequest, turn_id: str, run: _Run, emit: Emit
    ) -> ChatClientRequestSpec:
        def watched(name: str, data: dict[str, Any]) -> None:
            if data.get("id") is not None:
                run.tools[data["id"]] = data
            emit(name, data)

        spec = self.client.prompt()
        if turn.text is not None:
            spec.user(turn.text, metadata={TURN_KEY: turn_id})
        else:
            spec.tool_approvals(turn.approvals or {})
        spec.param(ChatMemory.CONVERSATION_ID, conversation_id)
        spec.advisors(ToolWatch(watched, self._watch_order))
        if self._memory_advisor is not None:
            spec.advisors(self._memory_advisor)
        return spec

    async def _stream(self, spec: ChatClientRequestSpec, run: _Run, emit: Emit) -> None:
        context: Mapping[str, Any] = {}
        last: ChatClientResponse | None = None
        agent: object = None  # the agent answering (with agents): each change is told before its text
        async with closing(spec.astream().chat_client_responses()) as source:
            async for chunk in source:
                last = chunk
                chat = chunk.chat_response
                if chat is None:
                    continue
                text = chat.text
                if text:
                    now = chunk.context.get(AdvisorParams.ACTIVE_AGENT)
                    if now is not None and now != agent:
                        agent = now
                        handoffs = [list(h) for h in chunk.context.get(AdvisorParams.HANDOFFS) or ()]
                        emit("agent", {"name": now, "handoffs": handoffs})
                    emit("text", {"text": text})
                if chat.metadata.usage is not None:
                    run.usage = chat.metadata.usage
                reason = chat.finish_reason
                if reason is not None:
                    run.finish_reason = reason
        if last is not None:
            context = last.context
        pending: Sequence[ToolCall] = context.get(AdvisorParams.PENDING_TOOL_CALLS) or ()
        if pending:
            emit("approval", {"calls": [call_view(c) for c in pending]})
        run.context = context_view(context)
        emit(
            "done",
            {"finish_reason": run.finish_reason, "usage": usage_view(run.usage), "context": run.context},
        )

    def _tree(self, spans: Sequence[Any], run: _Run) -> list[dict[str, Any]]:
        """The run's trace tree; tool calls carry the arguments and results the page saw, and the
        page's own tool watch is left out (its children are the agent's hops)."""
        return [n for root in span_tree(spans) for n in _shown(root.to_dict(), run.tools)]

    def _record(
        self, conversation_id: str, turn_id: str, run: _Run, tree: list[dict[str, Any]], ms: float
    ) -> None:
        runs = self._runs.setdefault(conversation_id, OrderedDict())
        runs.setdefault(turn_id, []).append(
            {
                "kind": run.kind,
                "tools": list(run.tools.values()),
                "finish_reason": run.finish_reason,
                "usage": usage_view(run.usage),
                "context": run.context,
                "error": run.error,
                "trace": tree,
                "ms": ms,
            }
        )
        runs.move_to_end(turn_id)
        while len(runs) > _TURNS_KEPT:
            runs.popitem(last=False)
        self._touch(conversation_id)


def _shown(node: dict[str, Any], tools: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    children = [n for child in node["children"] for n in _shown(child, tools)]
    if node["kind"] == "advisor" and node["name"] == f"advisor {WATCH_NAME}":
        return children
    seen = tools.get(node.get("call_id") or "")
    if node["kind"] == "tool" and seen is not None:
        for key in ("arguments", "result", "error"):
            if key in seen and key not in node:
                node[key] = seen[key]
    node["children"] = children
    return [node]


def _turn_id(turn: TurnRequest, messages: Sequence[Message]) -> str:
    """A new id for a question; for decisions, the id of the question they continue."""
    if turn.approvals is not None:
        for m in reversed(messages):
            if isinstance(m, UserMessage):
                found = m.metadata.get(TURN_KEY)
                if isinstance(found, str):
                    return found
                break
    return secrets.token_hex(6)


def _calls(calls: Sequence[ToolCall]) -> str:
    return ", ".join(f"{c.name} ({c.id!r})" for c in calls)


def check_id(conversation_id: str) -> str:
    """A conversation id the page accepts: 1 to 200 printable characters."""
    if not conversation_id.strip() or len(conversation_id) > 200 or not conversation_id.isprintable():
        raise Refused(400, f"{conversation_id!r} is not a conversation id: use 1 to 200 printable characters")
    return conversation_id


def parse_turn(body: object) -> TurnRequest:
    """The turn a request body asks for: ``{"text": "..."}`` or ``{"approvals": {call_id:
    {"approved": true|false, "reason": "..."}}}``; ``Refused`` (400) naming what is wrong."""
    if not isinstance(body, dict):
        raise Refused(400, 'the body must be a JSON object: {"text": "..."} or {"approvals": {...}}')
    unknown = sorted(set(body) - {"text", "approvals"})
    if unknown or ("text" in body) == ("approvals" in body):
        raise Refused(400, 'the body takes exactly one of "text" (a question) or "approvals" (decisions)')
    if "text" in body:
        text = body["text"]
        if not isinstance(text, str) or not text.strip():
            raise Refused(400, '"text" must be a non-blank string: the question to ask')
        if len(text) > _MAX_TEXT:
            raise Refused(400, f'"text" is {len(text)} characters; the page takes at most {_MAX_TEXT}')
        return TurnRequest(text=text)
    approvals = body["approvals"]
    if not isinstance(approvals, dict) or not approvals:
        raise Refused(400, '"approvals" must map each pending tool-call id to {"approved": true|false}')
    decisions: dict[str, Decision] = {}
    for call_id, decision in approvals.items():
        if not isinstance(decision, dict) or not isinstance(decision.get("approved"), bool):
            raise Refused(
                400, f'the decision for {call_id!r} must be {{"approved": true|false, "reason": "..."}}'
            )
        reason = decision.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise Refused(400, f"the reason for {call_id!r} must be a string")
        reason = reason.strip() if reason else None
        decisions[call_id] = Approved() if decision["approved"] else Denied(reason or None)
    return TurnRequest(approvals=decisions)


def _watch_order(client: ChatClient) -> int:
    """Just outside the client's tool loop (where its ToolCallingAdvisor sits, else the default)."""
    tool_orders = [a.order for a in client.default_advisors if isinstance(a, ToolCallingAdvisor)]
    loop = min(tool_orders, default=ToolCallingAdvisor.DEFAULT_ORDER)
    return max(loop - 1, Ordered.HIGHEST_PRECEDENCE + 1)
