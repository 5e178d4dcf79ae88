"""TodoTools: a todo list the model keeps for itself while it works through a task.

Two tools, ``todo_write`` (replace the list) and ``todo_read``; state per conversation id. The
tools validate their input themselves, so every failure is a text starting with ``Error:`` that
the model can act on, and a failed write changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from .api import ToolContext, ToolDefinition
from .callbacks import ParsedTool

__all__ = ["MAX_ITEMS", "TodoItem", "TodoTools"]

MAX_ITEMS = 20
TodoStatus = Literal["pending", "in_progress", "completed"]
_MARKERS: dict[str, str] = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One todo: an id the model chooses, what to do, and where it stands."""

    id: str
    text: str
    status: TodoStatus


_ITEM = TypeAdapter(TodoItem)


def render(items: Sequence[TodoItem]) -> str:
    """One line per item (status marker, ``#id``, text), then ``(<completed>/<total> completed)``."""
    if not items:
        return "No todos."
    lines = [f"{_MARKERS[i.status]} #{i.id} {i.text}" for i in items]
    done = sum(1 for i in items if i.status == "completed")
    lines.append(f"({done}/{len(items)} completed)")
    return "\n".join(lines)


def _check(raw: Any) -> list[TodoItem] | str:
    """The items, or an ``Error:`` text saying what is wrong."""
    if not isinstance(raw, list):
        return f"Error: 'items' must be a list of todos, got {raw!r}."
    if len(raw) > MAX_ITEMS:
        return f"Error: at most {MAX_ITEMS} todos are allowed, got {len(raw)}. Merge or drop some."
    items: list[TodoItem] = []
    for n, entry in enumerate(raw):
        if isinstance(entry, dict) and entry.get("status") not in _MARKERS:
            return (
                f"Error: todo {n} has status {entry.get('status')!r}; "
                "use one of 'pending', 'in_progress', 'completed'."
            )
        try:
            item = _ITEM.validate_python(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "item"
            return f"Error: todo {n} is invalid ({where}: {first['msg']})."
        if not item.text.strip():
            return f"Error: todo {n} (#{item.id}) has blank text; say what is to be done."
        items.append(item)
    in_progress = [i.id for i in items if i.status == "in_progress"]
    if len(in_progress) > 1:
        return f"Error: only one todo may be in_progress at a time, got {len(in_progress)} ({in_progress!r})."
    return items


def _conversation(context: ToolContext | None) -> str:
    conversation_id = context.conversation_id if context is not None else None
    return conversation_id or "default"


class _TodoTool(ParsedTool):
    def __init__(self, owner: TodoTools, definition: ToolDefinition) -> None:
        super().__init__(definition)
        self._owner = owner


class _TodoWrite(_TodoTool):
    async def call_parsed(self, args: Mapping[str, Any], context: ToolContext | None) -> str:
        if "items" not in args:
            return 'Error: call todo_write with {"items": [{"id": ..., "text": ..., "status": ...}, ...]}.'
        checked = _check(args["items"])
        if isinstance(checked, str):
            return checked
        self._owner._lists[_conversation(context)] = tuple(checked)
        return render(checked)


class _TodoRead(_TodoTool):
    async def call(self, arguments: str, context: ToolContext | None) -> str:
        return render(self._owner.todos(_conversation(context)))

    async def call_parsed(self, args: Mapping[str, Any], context: ToolContext | None) -> str:
        return render(self._owner.todos(_conversation(context)))


class TodoTools:
    """The ``todo_write`` and ``todo_read`` tools; pass the object to ``.tools(...)``.

    >>> todos = TodoTools()
    >>> client.prompt("Plan and do the task").tools(todos).call().content()
    >>> todos.todos("default")
    """

    def __init__(self) -> None:
        self._lists: dict[str, tuple[TodoItem, ...]] = {}
        item_schema = _ITEM.json_schema()
        write_schema = {
            "type": "object",
            "properties": {"items": {"type": "array", "items": item_schema, "maxItems": MAX_ITEMS}},
            "required": ["items"],
        }
        self._write = _TodoWrite(
            self,
            ToolDefinition(
                "todo_write",
                "Replace your todo list with `items`. Keep at most one item in_progress; mark items "
                "completed as you finish them. Returns the rendered list.",
                write_schema,
            ),
        )
        self._read = _TodoRead(
            self,
            ToolDefinition("todo_read", "Show your current todo list.", {"type": "object", "properties": {}}),
        )

    def todos(self, conversation_id: str = "default") -> tuple[TodoItem, ...]:
        """The current list of a conversation."""
        return self._lists.get(conversation_id, ())

    def tool_callbacks(self) -> list[_TodoTool]:
        """The two tools as ToolCallbacks."""
        return [self._write, self._read]
