"""What the guardrail advisors share: their settings checks, the ``finish`` ending, and the kernel
pieces they build on (the chain over other advisors, the run's meter and gates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..chain import rebased
from ..chain.vocabulary import AdvisorParams
from ..memory.api import ChatMemory
from ..messages import AssistantMessage
from ..model import ChatClientResponse, ChatResponse, Usage

__all__ = [
    "DEFAULT_REFUSAL",
    "GUARDRAIL_TRIPPED",
    "OnTrip",
    "check_choice",
    "finish_ending",
    "guard_context_values",
    "meter_usage",
    "rebased",
]

OnTrip = Literal["raise", "finish"]

GUARDRAIL_TRIPPED = "guardrailTripped"
"""The finish reason of a run a guard ended with ``on_trip="finish"``."""

DEFAULT_REFUSAL = "I can't help with that."
"""The ``finish`` ending's text when the guard gave no message."""


def check_choice(value: object, what: str, choices: tuple[str, ...]) -> Any:
    """``value`` when it is one of ``choices``, else a ValueError naming them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def guard_context_values(context: Mapping[str, Any]) -> dict[str, Any]:
    """The conversation id and the active agent a request context names (for a GuardContext)."""
    values: dict[str, Any] = {}
    conversation = context.get(ChatMemory.CONVERSATION_ID)
    if isinstance(conversation, str):
        values["conversation_id"] = conversation
    agent = context.get(AdvisorParams.ACTIVE_AGENT)
    if isinstance(agent, str):
        values["agent"] = agent
    return values


def meter_usage(chain: object) -> Usage | None:
    """The run's usage so far (None when unmetered or nothing was reported)."""
    run = getattr(chain, "run", None)
    meter = getattr(run, "meter", None)
    if meter is None or not getattr(meter, "reported", False):
        return None
    usage: Usage | None = meter.usage
    return usage


def finish_ending(
    message: str | None,
    context: Mapping[str, Any],
    usage: Usage | None,
    like: ChatResponse | None = None,
) -> ChatClientResponse:
    """The ``on_trip="finish"`` ending: one generation whose text is the guard's message (else
    ``I can't help with that.``), finish reason ``guardrailTripped``, the usage as far as it went."""
    meta = like.metadata if like is not None else None
    chat = ChatResponse.of(
        AssistantMessage(message or DEFAULT_REFUSAL),
        GUARDRAIL_TRIPPED,
        usage=usage,
        id=meta.id if meta is not None else None,
        model=meta.model if meta is not None else None,
    )
    return ChatClientResponse(chat, context)
