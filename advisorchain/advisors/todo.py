"""TodoReminderAdvisor: nudges a model that forgets its todo list.

It sits inside the tool loop and counts, per conversation, consecutive tool rounds without a
``todo_write`` call. From the ``threshold``-th such round on it prepends a reminder to the first
tool response the model sees next. It edits an existing tool response rather than adding one,
because providers reject tool results whose call id they never issued.
"""

from __future__ import annotations

from ..memory.api import ChatMemory
from ..messages import ToolResponseMessage
from .api import AdvisorChain, BaseAdvisor, ChatClientRequest, Ordered

__all__ = ["TodoReminderAdvisor"]

# ToolCallingAdvisor.DEFAULT_ORDER + 100, spelled out to keep this module free of the loop's import.
_DEFAULT_ORDER = Ordered.HIGHEST_PRECEDENCE + 400


def _conversation_id(request: ChatClientRequest) -> str:
    conversation_id = request.context.get(ChatMemory.CONVERSATION_ID)
    if conversation_id is None and request.prompt.options is not None:
        conversation_id = request.prompt.options.tool_context.get("conversation_id")
    return str(conversation_id) if conversation_id is not None else ChatMemory.DEFAULT_CONVERSATION_ID


class TodoReminderAdvisor(BaseAdvisor):
    """Prepends ``reminder + "\\n"`` to the first tool response once the model has gone
    ``threshold`` tool rounds in a row without calling ``todo_write``; the count resets only
    when it calls ``todo_write``."""

    def __init__(
        self,
        threshold: int = 3,
        reminder: str = "<reminder>Update your todos.</reminder>",
        order: int = _DEFAULT_ORDER,
        *,
        todo_tool_name: str = "todo_write",
    ) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be at least 1, got {threshold!r}")
        self.threshold = threshold
        self.reminder = reminder
        self.order = order
        self.todo_tool_name = todo_tool_name
        self._rounds: dict[str, int] = {}

    @property
    def name(self) -> str:
        return "Todo Reminder Advisor"

    def rounds_without_todo(self, conversation_id: str = ChatMemory.DEFAULT_CONVERSATION_ID) -> int:
        """Consecutive tool rounds of a conversation without a ``todo_write`` call."""
        return self._rounds.get(conversation_id, 0)

    def before(self, request: ChatClientRequest, chain: AdvisorChain[object]) -> ChatClientRequest:
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
