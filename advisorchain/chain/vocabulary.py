"""The chain's vocabulary: order constants (the built-in default orders named in one place),
well-known request-context keys, and the marker classes that tell the chain what an advisor is.

It imports nothing of the chain, so the chain, the built-in advisors and the client can all use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from .._checks import check_int
from ..errors import ChainConfigurationError
from ..model import FinishReason

if TYPE_CHECKING:
    from ..messages import Message
    from ..model import ChatClientRequest

__all__ = ["AdvisorParams", "MemoryAdvisor", "Ordered", "ToolAdvisor", "check_order"]


class Ordered:
    """Order constants: lower runs first (outermost); the model call is always innermost."""

    HIGHEST_PRECEDENCE: ClassVar[int] = -(2**31)
    LOWEST_PRECEDENCE: ClassVar[int] = 2**31 - 1


# The built-in advisors' default orders, with gaps so advisors fit between them.
MEMORY_ORDER = Ordered.HIGHEST_PRECEDENCE + 200
"""MessageChatMemoryAdvisor: outside the tool loop (one exchange per request)."""
SELF_REFINE_ORDER = Ordered.HIGHEST_PRECEDENCE + 250
"""SelfRefineEvaluationAdvisor: inside memory, outside the tool loop (each attempt runs the loop)."""
TOOL_CALLING_ORDER = Ordered.HIGHEST_PRECEDENCE + 300
"""ToolCallingAdvisor: owns the loop; advisors with a greater order run on every round."""
REMINDER_ORDER = TOOL_CALLING_ORDER + 100
"""TodoReminderAdvisor: inside the loop."""
STRUCTURED_OUTPUT_ORDER = Ordered.LOWEST_PRECEDENCE - 2000
"""StructuredOutputValidationAdvisor: late, so each final answer of the loop is validated."""
COMPACTION_ORDER = TOOL_CALLING_ORDER + 50
"""ContextCompactionAdvisor: inside the loop, so it sees every round."""
REQUEST_RETRY_ORDER = Ordered.LOWEST_PRECEDENCE - 1000
"""RequestRetryAdvisor: inside the loop, so each model call is retried on its own."""
DEFAULT_ORDER = 0
"""Advisors that name no order (BaseAdvisor, SimpleLoggerAdvisor, SafeGuardAdvisor)."""


def check_order(value: object, what: str = "order", *, inside: bool = False) -> int:
    """An advisor order: an int; with ``inside`` strictly between HIGHEST_PRECEDENCE and
    LOWEST_PRECEDENCE (a recursive advisor needs room for advisors outside and inside it)."""
    order = check_int(value, what)
    if inside and not Ordered.HIGHEST_PRECEDENCE < order < Ordered.LOWEST_PRECEDENCE:
        raise ChainConfigurationError(
            f"{what} {order} must lie strictly between Ordered.HIGHEST_PRECEDENCE and "
            "Ordered.LOWEST_PRECEDENCE, so advisors can run outside and inside it"
        )
    return order


APPROVAL_REQUIRED = FinishReason.APPROVAL_REQUIRED
"""The finish reason of a tool loop that stopped because a call waits for a person's decision."""


class AdvisorParams:
    """Well-known request-context keys."""

    TOOL_CALLING_ADVISOR_AUTO_REGISTER: ClassVar[str] = "tool_calling_advisor_auto_register"
    """Set to False on a request to keep the client from adding a ToolCallingAdvisor."""

    TOOL_LOOP_ITERATION: ClassVar[str] = "advisorchain.tool_loop.iteration"
    """Set by the ToolCallingAdvisor on each round's request (1, 2, ...); the round's responses and
    stream chunks carry it back, so an advisor outside the loop can tell the rounds apart."""

    OUTPUT_FORMAT: ClassVar[str] = "advisorchain.output_format"
    """Format instructions the model link appends to the last user message (set by ``entity``)."""

    TOOL_APPROVALS: ClassVar[str] = "advisorchain.tool_approvals"
    """Decisions by tool-call id for a round waiting for approval (set by ``.tool_approvals(...)``)."""

    PENDING_TOOL_CALLS: ClassVar[str] = "advisorchain.pending_tool_calls"
    """In the context of a response that ended with ``approvalRequired``: the ToolCalls that need a
    decision, in call order."""

    RESUMED_TOOL_RESPONSES: ClassVar[str] = "advisorchain.resumed_tool_responses"
    """Set by the ToolCallingAdvisor when it ran a round that waited for approval: that round's
    ToolResponseMessage (memory outside the loop stores it, so the stored tool-call message gets
    its responses)."""

    CONVERSATION_HISTORY: ClassVar[str] = "advisorchain.conversation_history"
    """In the context of a response that ended with ``approvalRequired``: the loop's whole history,
    ending with the assistant tool-call message (pass it to ``messages(...)`` to resume)."""

    EVALUATIONS: ClassVar[str] = "advisorchain.evaluations"
    """In the context of a response a ``SelfRefineEvaluationAdvisor`` returned: one
    ``EvaluationResult`` per attempt, in order."""

    EVALUATION_CONTEXT: ClassVar[str] = "advisorchain.evaluation_context"
    """Supporting passages (a sequence of str, e.g. the retrieved documents' texts) that evaluators
    receive as ``EvaluationRequest.context``."""

    RETRIEVED_DOCUMENTS: ClassVar[str] = "advisorchain.retrieved_documents"
    """The documents a retrieval advisor found for the request (a tuple of ``Document``, best first)."""

    RETRIEVAL_CONTEXT: ClassVar[str] = "advisorchain.retrieval_context"
    """The context text a retrieval advisor wrote for the request (numbered documents); the model
    link appends it to the last user message at each model call, before the format instructions."""

    CITATIONS: ClassVar[str] = "advisorchain.citations"
    """In a response's context: the retrieved documents the answer cites (a tuple of ``Citation``)."""

    RUN_USAGE: ClassVar[str] = "advisorchain.run_usage"
    """In every response's context: the run's totals so far (a ``RunUsage``)."""

    HISTORY_REPLACEMENTS: ClassVar[str] = "advisorchain.history_replacements"
    """In a response's context: how an advisor inside the tool loop rewrote the round's history (a
    tuple of ``HistoryReplacement``, oldest first). The ToolCallingAdvisor continues the loop from
    the history with them applied and hands every replacement of the loop on in its final
    response's context; a MessageChatMemoryAdvisor stores the replacement in place of what it
    replaced (see ``advisorchain.advisors.history``)."""

    ACTIVE_AGENT: ClassVar[str] = "advisorchain.active_agent"
    """In the request context while an agent is active, and in a response's context: the name of the
    agent that answered (§18)."""

    HANDOFFS: ClassVar[str] = "advisorchain.handoffs"
    """In a response's context: the run's handoffs, a tuple of ``(from_name, to_name)`` in order (§18)."""

    CACHE_REPORT: ClassVar[str] = "advisorchain.cache_report"
    """In a response's context with a ``PromptCacheAdvisor`` in the chain: the ``CacheReport`` of the
    run's last model call (§21)."""


class ToolAdvisor:
    """Marker: an advisor that owns the tool loop (at most one per chain)."""


class MemoryAdvisor:
    """Marker: an advisor that keeps conversation memory.

    Placed inside the tool loop, a memory advisor is where the loop finds a round that waits for
    approval when a resuming request carries no history: ``conversation_history`` returns the
    request's stored conversation (a custom memory advisor overrides it to take part; the default
    has none)."""

    async def conversation_history(self, request: ChatClientRequest) -> Sequence[Message]:
        """The stored messages of ``request``'s conversation, oldest first."""
        return ()
