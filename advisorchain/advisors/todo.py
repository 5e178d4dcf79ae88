"""TodoReminderAdvisor: nudges a model that forgets its todo list.

It sits inside the tool loop and counts, per conversation, consecutive tool rounds without a
``todo_write`` call. From the ``threshold``-th such round on it prepends a reminder to the first
tool response the model sees next. It edits an existing tool response rather than adding one,
because providers reject tool results whose call id they never issued.
"""

from __future__ import annotations

from .._checks import check_int
from .._tool_types import ToolContext
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import REMINDER_ORDER, check_order
from ..memory.api import ChatMemory, conversation_id_of
from ..messages import ToolResponseMessage
from ..model import ChatClientRequest
from .base import BaseAdvisor

__all__ = ["TodoReminderAdvisor"]


def _conversation_id(request: ChatClientRequest) -> str:
    """The conversation the todo tools see: the request's, else the one a hand-set tool context names."""
    options = request.prompt.options
    from_tools = ToolContext(options.tool_context).conversation_id if options is not None else None
    return conversation_id_of(request.context, from_tools) or ChatMemory.DEFAULT_CONVERSATION_ID


class TodoReminderAdvisor(BaseAdvisor):
    """Prepends ``reminder + "\\n"`` to the first tool response once the model has gone
    ``threshold`` tool rounds in a row without calling ``todo_write``; the count resets only
    when it calls ``todo_write``."""

    def __init__(
        self,
        threshold: int = 3,
        reminder: str = "<reminder>Update your todos.</reminder>",
        order: int = REMINDER_ORDER,
        *,
        todo_tool_name: str = "todo_write",
    ) -> None:
        self.threshold = check_int(threshold, "threshold", minimum=1)
        self.reminder = reminder
        self.order = check_order(order)
        self.todo_tool_name = todo_tool_name
        self._rounds: dict[str, int] = {}

    @property
    def name(self) -> str:
        return "Todo Reminder Advisor"

    def rounds_without_todo(self, conversation_id: str = ChatMemory.DEFAULT_CONVERSATION_ID) -> int:
        """Consecutive tool rounds of a conversation without a ``todo_write`` call."""
        return self._rounds.get(conversation_id, 0)

    def before(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        instructions = request.prompt.instructions
        if not instructions or not isinstance(instructions[-1], ToolResponseMessage):
            return request  # not a tool round: the first call of a turn
        results = instructions[-1]
        conversation_id = _conversation_id(request)
        if any(r.name == self.todo_tool_name for r in results.responses):
            self._rounds[conversation_id] = 0
            return request
        rounds = self._rounds.get(conversation_id, 0) + 1
        self._rounds[conversation_id] = rounds
        if rounds < self.threshold or not results.responses:
            return request
        first, *rest = results.responses
        nudged = type(first)(first.id, first.name, f"{self.reminder}\n{first.response_data}")
        message = ToolResponseMessage((nudged, *rest), results.metadata)
        return request.copy(prompt=request.prompt.copy(instructions=(*instructions[:-1], message)))
