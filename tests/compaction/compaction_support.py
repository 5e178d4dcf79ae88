"""A scripted provider for the compaction and retry tests: it answers chat prompts from a script,
answers the summarizer's prompts with numbered summaries, and reports prompt tokens (by default the
library's own estimate, so the numbers in the tests are plain arithmetic)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from advisorchain import (
    AssistantMessage,
    ChatResponse,
    ContextCompactionAdvisor,
    Message,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
    tool,
)
from advisorchain._tokens import estimate_tokens
from advisorchain.testing import FunctionChatModel

SUMMARY = ContextCompactionAdvisor.SUMMARY_PREFIX


def text(tokens: int, tag: str) -> str:
    """A text of exactly ``tokens`` estimated tokens (4 characters each) starting with ``tag``."""
    chars = tokens * 4
    assert len(tag) <= chars
    return tag + "." * (chars - len(tag))


def is_summary_prompt(prompt: Prompt) -> bool:
    first = prompt.instructions[0] if prompt.instructions else None
    return isinstance(first, SystemMessage) and first.text.startswith(
        ContextCompactionAdvisor.SUMMARY_INSTRUCTION[:30]
    )


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def ask(call_id: str, key: str) -> AssistantMessage:
    """An assistant message asking for ``lookup(key)``."""
    return AssistantMessage(None, [ToolCall(call_id, "lookup", f'{{"key": "{key}"}}')])


def answered(call_id: str, key: str) -> ToolResponseMessage:
    """The tool response ``lookup(key)`` gives."""
    return ToolResponseMessage([ToolResponse(call_id, "lookup", f"value of {key}")])


Reply = AssistantMessage | str | BaseException | Callable[[Prompt], Any]


class Provider:
    """A chat model for the tests: ``replies`` answer the chat prompts in turn (a reply may be an
    exception to raise, or a function of the prompt); summarizer prompts get ``summary <n>``.

    ``prompts`` records the chat prompts, ``summary_prompts`` the summarizer's; ``reported`` maps
    a prompt to the prompt tokens the provider reports (None: no usage).
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        reported: Callable[[Prompt], int | None] | None = None,
        summaries: Iterable[str | BaseException] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.reported = reported or (lambda p: estimate_tokens(p.instructions))
        self.summaries = None if summaries is None else list(summaries)
        self.prompts: list[Prompt] = []
        self.summary_prompts: list[Prompt] = []
        self.model = FunctionChatModel(self._answer)

    def _answer(self, prompt: Prompt) -> ChatResponse:
        if is_summary_prompt(prompt):
            self.summary_prompts.append(prompt)
            n = len(self.summary_prompts)
            reply: Any = f"summary {n}" if self.summaries is None else self.summaries[n - 1]
            if isinstance(reply, BaseException):
                raise reply
            return ChatResponse.of(AssistantMessage(reply), "stop", usage=Usage(100, 10))
        self.prompts.append(prompt)
        if not self.replies:
            raise AssertionError(f"the script ran out at chat prompt {len(self.prompts)}")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(prompt)
        message = AssistantMessage(reply) if isinstance(reply, str) else reply
        tokens = self.reported(prompt)
        usage = None if tokens is None else Usage(tokens, 5)
        finish = "tool_calls" if message.tool_calls else "stop"
        return ChatResponse.of(message, finish, usage=usage)


def summary(n: int) -> UserMessage:
    """The summary message the provider's ``n``-th summary becomes."""
    return UserMessage(f"{SUMMARY} summary {n}")


def texts(messages: Sequence[Message]) -> list[str]:
    """Short labels of messages, to compare prompts at a glance."""
    labels = []
    for m in messages:
        if isinstance(m, ToolResponseMessage):
            labels.append("tool:" + ",".join(r.id for r in m.responses))
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            labels.append("call:" + ",".join(c.id for c in m.tool_calls))
        else:
            labels.append((m.text or "").rstrip(". "))
    return labels
