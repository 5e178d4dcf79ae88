from __future__ import annotations

import json
from typing import Any

import pytest

from advisorchain import ToolContext
from advisorchain.tools.todo import MAX_ITEMS, TodoItem, TodoTools


def _tools() -> tuple[TodoTools, Any, Any]:
    todos = TodoTools()
    write, read = todos.tool_callbacks()
    return todos, write, read


def _items(*specs: tuple[str, str, str]) -> str:
    return json.dumps({"items": [{"id": i, "text": t, "status": s} for i, t, s in specs]})


async def test_write_replaces_the_list_and_renders_it() -> None:
    todos, write, read = _tools()
    await write.call(_items(("1", "old", "pending")), None)
    out = await write.call(
        _items(("1", "Plan", "completed"), ("2", "Book", "in_progress"), ("3", "Pack", "pending")), None
    )
    assert out == "[x] #1 Plan\n[>] #2 Book\n[ ] #3 Pack\n(1/3 completed)"
    assert await read.call("{}", None) == out
    assert todos.todos() == (
        TodoItem(id="1", text="Plan", status="completed"),
        TodoItem(id="2", text="Book", status="in_progress"),
        TodoItem(id="3", text="Pack", status="pending"),
    )


async def test_an_empty_list_renders_as_no_todos() -> None:
    _, write, read = _tools()
    assert await read.call("", None) == "No todos."
    assert await write.call('{"items": []}', None) == "No todos."


async def test_lists_are_kept_per_conversation() -> None:
    todos, write, read = _tools()
    await write.call(_items(("a", "for c1", "pending")), ToolContext(conversation_id="c1"))
    assert await read.call("{}", ToolContext(conversation_id="c2")) == "No todos."
    assert await read.call("{}", ToolContext(conversation_id="c1")) == "[ ] #a for c1\n(0/1 completed)"
    assert todos.todos("c1")[0].text == "for c1"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (_items(*[(str(i), "t", "pending") for i in range(MAX_ITEMS + 1)]), "at most 20 todos"),
        (_items(("1", "  ", "pending")), "blank text"),
        (_items(("1", "x", "done")), "status 'done'"),
        (_items(("1", "x", "in_progress"), ("2", "y", "in_progress")), "only one todo may be in_progress"),
        ('{"items": "nope"}', "must be a list"),
        ('{"items": [{"id": "1"}]}', "todo 0"),
        ("{oops", "not valid JSON"),
        ("{}", "call todo_write with"),
    ],
)
async def test_invalid_writes_return_an_error_and_change_nothing(arguments: str, fragment: str) -> None:
    todos, write, _ = _tools()
    before = await write.call(_items(("keep", "me", "pending")), None)
    out = await write.call(arguments, None)
    assert out.startswith("Error:") and fragment in out
    assert todos.todos() == (TodoItem(id="keep", text="me", status="pending"),)
    assert before == "[ ] #keep me\n(0/1 completed)"


def test_the_write_schema_shows_the_item_fields_to_the_model() -> None:
    _, write, read = _tools()
    items = write.definition.input_schema["properties"]["items"]
    assert items["maxItems"] == MAX_ITEMS
    assert set(items["items"]["properties"]) == {"id", "text", "status"}
    assert items["items"]["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert (write.definition.name, read.definition.name) == ("todo_write", "todo_read")
