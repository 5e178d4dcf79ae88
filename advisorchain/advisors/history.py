"""How an advisor inside the tool loop hands the loop a new history.

The tool loop owns the conversation of a turn: each round's request is the history so far, and the
next round's is that history plus the assistant's tool calls and their responses. An advisor
inside the loop (ContextCompactionAdvisor, or your own) that sends the model a rewritten history
says so in its response's context, under ``AdvisorParams.HISTORY_REPLACEMENTS``: a tuple of
``HistoryReplacement(replaced, replacement)``, oldest first, each meaning "these messages of the
round's request are gone; these new ones stand where the first of them stood". Then:

* the ToolCallingAdvisor applies them to its history before the round's tools run, so the next
  round builds on the rewritten history (and the ToolCallingManager sees it);
* the loop hands every replacement of the turn on in its final response's context (the key is not
  carried into the next round's request: each replacement is applied once);
* a MessageChatMemoryAdvisor, inside or outside the loop, stores the replacement in place of the
  messages it replaced, so the rewrite is what the conversation builds on from then on.

Messages are found by identity first (the objects the advisor received), then by equality.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..chain.vocabulary import AdvisorParams
from ..messages import Message

__all__ = ["HistoryReplacement", "replace_history", "replacements_in"]


@dataclass(frozen=True, slots=True)
class HistoryReplacement:
    """``replaced`` messages of a round's history (in their order there) are gone, and
    ``replacement`` stands where the first of them stood."""

    replaced: tuple[Message, ...]
    replacement: tuple[Message, ...]

    def __post_init__(self) -> None:
        for name in ("replaced", "replacement"):
            value = getattr(self, name)
            if type(value) is not tuple:
                object.__setattr__(self, name, tuple(value))


def replacements_in(context: Mapping[str, Any]) -> tuple[HistoryReplacement, ...]:
    """The history replacements a response's ``context`` carries (none when it carries none)."""
    found = context.get(AdvisorParams.HISTORY_REPLACEMENTS)
    if not found:
        return ()
    if not isinstance(found, Sequence) or not all(isinstance(r, HistoryReplacement) for r in found):
        raise TypeError(
            f"the context key {AdvisorParams.HISTORY_REPLACEMENTS!r} must hold a tuple of "
            f"HistoryReplacement, got {found!r}"
        )
    return tuple(found)


def replace_history(messages: Sequence[Message], replacements: Sequence[HistoryReplacement]) -> list[Message]:
    """``messages`` with each replacement applied in turn. A replacement none of whose replaced
    messages is in the history leaves it as it is (it concerned messages this history lacks)."""
    result = list(messages)
    for replacement in replacements:
        result = _apply(result, replacement)
    return result


def _apply(messages: list[Message], replacement: HistoryReplacement) -> list[Message]:
    gone = _positions(messages, replacement.replaced)
    if not gone:
        return messages
    first = min(gone)
    kept_before = [m for i, m in enumerate(messages[:first]) if i not in gone]
    kept_after = [m for i, m in enumerate(messages) if i > first and i not in gone]
    return [*kept_before, *replacement.replacement, *kept_after]


def _positions(messages: Sequence[Message], wanted: Sequence[Message]) -> set[int]:
    """Where the ``wanted`` messages are: each one by identity, else the first equal one not taken."""
    taken: set[int] = set()
    by_identity = {id(m): i for i, m in enumerate(messages)}
    for target in wanted:
        index = by_identity.get(id(target))
        if index is None or index in taken or messages[index] is not target:
            index = next((i for i, m in enumerate(messages) if i not in taken and m == target), None)
        if index is not None:
            taken.add(index)
    return taken
