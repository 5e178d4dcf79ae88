"""One turn of a served conversation, whatever the protocol: which of the input's messages are new,
which waiting tool calls the caller answers (its own tools' results, or approval decisions), the
request that runs it, and what the caller must answer next when the run pauses.

The caller's own tools (OpenAI ``tools``, AG-UI front-end tools) join the request as tools that need
approval, so a round that calls one ends with ``approvalRequired`` and the calls in
``PENDING_TOOL_CALLS`` (API.md §10): the caller runs them. Its results resume the round with
``tool_approvals``: an approved caller tool "runs" by answering the result the caller sent. A
resume may only name calls the server issued and that still wait: with memory the stored
conversation says which (its last message is the waiting tool-call message); without memory the
server keeps the rounds it paused, in this process, until they are answered.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from .._serving import served_memory
from ..advisors import AdvisorParams, MessageChatMemoryAdvisor
from ..advisors.memory import hold_turn
from ..chain import Run
from ..chain.events import RunListener
from ..client import ChatClient, ChatClientRequestSpec
from ..errors import ChainConfigurationError
from ..memory import ChatMemory
from ..messages import AssistantMessage, Message, ToolCall, ToolResponseMessage, UserMessage
from ..model import ChatOptions
from ..tools import Approved, Denied, ToolCallback, ToolContext, ToolDefinition, ToolMetadata
from ..tools.approvals import Decision
from ..tools.callbacks import FixedTool
from ._http import Refusal

__all__ = ["CallerTool", "Held", "Paused", "Plan", "ServeCore", "TurnInput", "approval_decision"]

_ROUNDS_KEPT = 1024
"""Paused rounds a server without memory keeps for their answers (the oldest are forgotten)."""


class CallerTool(FixedTool):
    """A tool the caller runs (OpenAI request ``tools``, AG-UI front-end tools): offered to the
    model, it needs approval so the loop pauses on it; once the caller sent its result, the resumed
    round's "run" answers that result."""

    def __init__(self, definition: ToolDefinition, results: Mapping[str, str] | None = None) -> None:
        super().__init__(definition, ToolMetadata(requires_approval=True))
        self._results = dict(results or {})

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """The result the caller sent for this call."""
        call_id = context.tool_call_id if context is not None else None
        if call_id is None or call_id not in self._results:
            raise ChainConfigurationError(
                f"the caller's tool {self.definition.name!r} ran without the caller's result for "
                f"call {call_id!r}"
            )
        return self._results[call_id]


@dataclass(frozen=True)
class TurnInput:
    """What one protocol request asks for, in advisorchain's terms.

    ``messages``: the input's messages (a resending client's whole thread, or only the new ones);
    ``resends``: whether the client resends the thread (only what follows its last assistant
    message is new when memory holds the conversation); ``decisions``: approval decisions by call id
    (AG-UI ``resume``, A2A approvals); ``decisions_in_results``: whether a tool message answering
    an approval call holds the decision as ``{"approved": ..., "reason": ...}`` (OpenAI).
    """

    conversation_id: str | None
    messages: Sequence[Message] = ()
    resends: bool = True
    caller_tools: Sequence[ToolDefinition] = ()
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    decisions_in_results: bool = False
    options: ChatOptions | None = None


@dataclass
class _Round:
    """A paused round, as a server without memory keeps it for its answers."""

    conversation_id: str | None
    history: tuple[Message, ...]
    calls: tuple[ToolCall, ...]


@dataclass
class Plan:
    """The request that runs a turn, and what it resumes."""

    spec: ChatClientRequestSpec
    conversation_id: str | None
    caller_names: frozenset[str]
    resumed: tuple[ToolCall, ...] = ()
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    _taken: _Round | None = None
    round_calls: tuple[ToolCall, ...] = ()
    """Every call of the round a resume runs (those the caller answered and the others)."""
    parent: Run | None = None
    """The run holding the conversation's turn, which the request's run is part of."""

    def listened(self, listener: RunListener) -> ChatClientRequestSpec:
        """The request, with its run's events sent to ``listener``."""
        return self.spec._run_settings(parent=self.parent, listener=listener)


@dataclass(frozen=True)
class Held:
    """A conversation's turn, held: what memory holds of it, and the run that holds it."""

    stored: tuple[Message, ...]
    run: Run


@dataclass(frozen=True)
class Paused:
    """A run that ended waiting for the caller: the calls it must answer, in call order; each is a
    call of the caller's own tools (``caller``) or a call of the agent's that needs approval."""

    calls: tuple[tuple[ToolCall, bool], ...]
    message: AssistantMessage | None

    @property
    def approvals(self) -> tuple[ToolCall, ...]:
        """The calls that wait for an approval decision."""
        return tuple(c for c, caller in self.calls if not caller)

    @property
    def caller_calls(self) -> tuple[ToolCall, ...]:
        """The calls of the caller's own tools."""
        return tuple(c for c, caller in self.calls if caller)


def approval_decision(text: str, call: ToolCall) -> Decision:
    """The decision a tool message answering an approval call holds: ``{"approved": true}`` or
    ``{"approved": false, "reason": "..."}``."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("approved"), bool):
        raise Refusal(
            400,
            f"the answer to tool call {call.id!r} ({call.name}, which needs approval) must be "
            '{"approved": true} or {"approved": false, "reason": "..."}',
            param="messages",
        )
    reason = data.get("reason")
    if data["approved"]:
        return Approved()
    return Denied(reason if isinstance(reason, str) and reason.strip() else None)


class ServeCore:
    """The served agent: ``client`` runs the turns; ``memory`` (given, else the client's memory
    advisor's, else none — or with ``own_memory`` a new in-memory one) holds the conversations."""

    def __init__(self, client: ChatClient, memory: ChatMemory | None, *, own_memory: bool = False) -> None:
        if not isinstance(client, ChatClient):
            raise TypeError(f"the served agent must be a ChatClient, got {client!r}")
        self.client = client
        self.memory, self._advisor = served_memory(
            client, memory, own_memory=own_memory, fix="serve it with that memory, or none"
        )
        # A request that names no conversation runs without memory: the client's own memory
        # advisor would file it under its default conversation, beside every other such request.
        kept = [a for a in client.default_advisors if not isinstance(a, MessageChatMemoryAdvisor)]
        self._unnamed = (
            client if len(kept) == len(client.default_advisors) else client.mutate(default_advisors=kept)
        )
        self._rounds: OrderedDict[str, _Round] = OrderedDict()

    def tools(self) -> dict[str, ToolCallback]:
        """The agent's own tools by name."""
        return {t.definition.name: t for t in self.client.default_tool_callbacks()}

    @asynccontextmanager
    async def turn(self, conversation_id: str | None) -> AsyncIterator[Held]:
        """Hold the conversation's turn (a second request on it waits, API.md §6) and yield what
        memory holds of it (nothing without memory or a conversation id), with the run the turn's
        request runs inside (so its memory advisor knows the turn is held already)."""
        if self.memory is None or conversation_id is None:
            yield Held((), Run())
            return
        async with hold_turn(self.memory, conversation_id) as holder:
            yield Held(tuple(await self.stored(conversation_id)), holder)

    async def check(self, turn: TurnInput) -> None:
        """Refuse ``turn`` now (before a stream starts) when it cannot run on the conversation as it
        stands; it is checked again when its turn comes."""
        stored = await self.stored(turn.conversation_id) if turn.conversation_id is not None else []
        self.plan(turn, Held(tuple(stored), Run()), dry_run=True)

    async def stored(self, conversation_id: str) -> list[Message]:
        """What memory holds of a conversation."""
        if self.memory is None:
            return []
        aget = getattr(self.memory, "aget", None)
        if aget is not None:
            return list(await aget(conversation_id))
        return list(await asyncio.to_thread(self.memory.get, conversation_id))

    # -- planning ------------------------------------------------------------------------------

    def plan(self, turn: TurnInput, held: Held, *, dry_run: bool = False) -> Plan:
        """The request for ``turn`` on a conversation whose memory holds ``held.stored``;
        ``Refusal`` (nothing runs) naming what is wrong with the input. ``dry_run``: only check (a
        paused round it resumes stays waiting)."""
        plan = self._plan(turn, held.stored, dry_run)
        plan.parent = held.run
        plan.spec._run_settings(parent=held.run)
        return plan

    def _plan(self, turn: TurnInput, stored: Sequence[Message], dry_run: bool) -> Plan:
        caller = self._caller_tools(turn.caller_tools)
        head, tail = self._split(turn, stored)
        results = {
            r.id: r.response_data for m in tail if isinstance(m, ToolResponseMessage) for r in m.responses
        }
        fresh = [m for m in tail if not isinstance(m, ToolResponseMessage)]
        names = frozenset(d.name for d in turn.caller_tools)
        if results or turn.decisions:
            plan = self._resume(turn, stored, results, caller, names, True)
            if fresh:
                raise Refusal(
                    400,
                    "send the tool results (or decisions) alone: the next question goes in the request "
                    "after the run they resume",
                    param="messages",
                )
            return plan if dry_run else self._resume(turn, stored, results, caller, names, False)
        if not fresh:
            raise Refusal(
                400,
                "nothing to answer: the input ends with an assistant message or holds no message",
                param="messages",
            )
        spec = self._spec(turn, caller)
        before: list[Message] = [] if stored else list(head)
        combined: list[Message] = [*before, *fresh]
        earlier, last = combined[:-1], combined[-1]
        if earlier:
            spec.messages(earlier)
        if isinstance(last, UserMessage):
            spec.user(last.text, media=last.media, metadata=dict(last.metadata) or None)
        else:
            spec.messages(last)
        return Plan(spec, turn.conversation_id, names)

    def _split(self, turn: TurnInput, stored: Sequence[Message]) -> tuple[list[Message], list[Message]]:
        """The input as (what came before, what is new): for a resending client, what follows its
        last assistant message is new."""
        messages = list(turn.messages)
        if not turn.resends:
            return [], messages
        last = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
        return messages[: last + 1], messages[last + 1 :]

    def _resume(
        self,
        turn: TurnInput,
        stored: Sequence[Message],
        results: Mapping[str, str],
        caller: Mapping[str, ToolDefinition],
        names: frozenset[str],
        dry_run: bool,
    ) -> Plan:
        named = [*results, *turn.decisions]
        waiting, taken = self._waiting(turn.conversation_id, stored, named, names)
        ids = {c.id: c for c in waiting}
        unknown = [i for i in dict.fromkeys(named) if i not in ids]
        if unknown:
            raise Refusal(
                400,
                f"no tool call {', '.join(map(repr, unknown))} waits for an answer: the server never "
                "issued it, or it was answered already",
                param="messages" if any(i in results for i in unknown) else "resume",
            )
        missing = [c for c in waiting if c.id not in results and c.id not in turn.decisions]
        if missing:
            raise Refusal(
                400,
                f"no answer for {', '.join(f'{c.name} ({c.id!r})' for c in missing)}: answer every "
                "waiting call",
                param="messages",
            )
        decisions: dict[str, Decision] = {}
        sent: dict[str, str] = {}
        for call in waiting:
            if call.name in names:
                if call.id not in results:
                    raise Refusal(
                        400, f"the caller's tool call {call.id!r} needs its result", param="messages"
                    )
                sent[call.id] = results[call.id]
                decisions[call.id] = Approved()
            elif call.id in turn.decisions:
                decisions[call.id] = turn.decisions[call.id]
            elif turn.decisions_in_results:
                decisions[call.id] = approval_decision(results[call.id], call)
            else:
                raise Refusal(
                    400, f"tool call {call.id!r} ({call.name}) needs a decision, not a result", param="resume"
                )
        spec = self._spec(turn, {n: d for n, d in caller.items()}, sent, history=taken)
        spec.tool_approvals(decisions)
        if not dry_run:
            self._take(taken)
        return Plan(
            spec,
            turn.conversation_id,
            names,
            tuple(waiting),
            decisions,
            taken,
            _round_calls(stored, taken),
        )

    def _waiting(
        self,
        conversation_id: str | None,
        stored: Sequence[Message],
        named: Sequence[str],
        names: frozenset[str],
    ) -> tuple[list[ToolCall], _Round | None]:
        """The calls that wait for the caller's answer: with memory, those of the stored
        conversation's last message; without, those of the paused round the named calls belong to."""
        if self.memory is not None and conversation_id is not None:
            last = stored[-1] if stored else None
            if not isinstance(last, AssistantMessage) or not last.tool_calls:
                return [], None
            return [c for c in last.tool_calls if self._needs_answer(c, names)], None
        rounds = {id(r): r for i in named if (r := self._rounds.get(i)) is not None}
        if len(rounds) != 1:
            return [], None
        (found,) = rounds.values()
        if found.conversation_id != conversation_id:
            return [], None
        return list(found.calls), found

    def _needs_answer(self, call: ToolCall, names: frozenset[str]) -> bool:
        if call.name in names:
            return True
        tool = self.tools().get(call.name)
        return tool is not None and tool.metadata.requires_approval

    def _take(self, taken: _Round | None) -> None:
        if taken is not None:
            for call in taken.calls:
                self._rounds.pop(call.id, None)

    def abandon(self, plan: Plan) -> None:
        """The run of ``plan`` did not finish: a round it resumed waits for its answers again."""
        taken = plan._taken
        if taken is not None:
            self._keep(taken)

    def _keep(self, paused: _Round) -> None:
        for call in paused.calls:
            self._rounds[call.id] = paused
        while len(self._rounds) > _ROUNDS_KEPT:
            self._rounds.popitem(last=False)

    def _caller_tools(self, tools: Sequence[ToolDefinition]) -> dict[str, ToolDefinition]:
        own = self.tools()
        seen: dict[str, ToolDefinition] = {}
        for definition in tools:
            if definition.name in own:
                raise Refusal(
                    400,
                    f"the tool {definition.name!r} is one of the agent's own tools: rename the caller's",
                    param="tools",
                )
            if definition.name in seen:
                raise Refusal(400, f"two tools are named {definition.name!r}", param="tools")
            seen[definition.name] = definition
        return seen

    def _spec(
        self,
        turn: TurnInput,
        caller: Mapping[str, ToolDefinition],
        results: Mapping[str, str] | None = None,
        *,
        history: _Round | None = None,
    ) -> ChatClientRequestSpec:
        spec = (self.client if turn.conversation_id is not None else self._unnamed).prompt()
        if turn.conversation_id is not None:
            spec.param(ChatMemory.CONVERSATION_ID, turn.conversation_id)
            if self._advisor is not None:
                spec.advisors(self._advisor)
        if history is not None:
            spec.messages(history.history)
        if caller:
            spec.tools(*(CallerTool(d, results) for d in caller.values()))
        if turn.options is not None:
            spec.options(turn.options)
        return spec

    # -- the end of a run ----------------------------------------------------------------------

    def paused(
        self, plan: Plan, context: Mapping[str, Any], message: AssistantMessage | None
    ) -> Paused | None:
        """What the caller must answer when the run ended waiting (``approvalRequired``), else None;
        without memory the round is kept for its answers."""
        pending: Sequence[ToolCall] = context.get(AdvisorParams.PENDING_TOOL_CALLS) or ()
        if not pending:
            return None
        calls = tuple((c, c.name in plan.caller_names) for c in pending)
        if self.memory is None or plan.conversation_id is None:
            history = tuple(context.get(AdvisorParams.CONVERSATION_HISTORY) or ())
            self._keep(_Round(plan.conversation_id, history, tuple(pending)))
        return Paused(calls, message)


def _round_calls(stored: Sequence[Message], taken: _Round | None) -> tuple[ToolCall, ...]:
    """The calls of the waiting assistant message (of the stored conversation, or of the round kept)."""
    history = taken.history if taken is not None else stored
    last = history[-1] if history else None
    return tuple(last.tool_calls) if isinstance(last, AssistantMessage) else ()
