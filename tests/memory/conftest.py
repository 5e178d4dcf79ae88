"""Memory-test fixtures: every repository backend, each isolated per test
(``tests.support.memory_backends``), a fresh repository of each, and one message of every shape."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.memory_backends import (  # noqa: F401 (fixtures)
    backend,
    make_backend,
    persistent_backend,
    repository,
)


@pytest.fixture
def every_kind() -> list[Any]:
    """One of every message shape: tool calls, tool responses, metadata, unicode, empty and None."""
    from advisorchain.messages import (
        AssistantMessage,
        SystemMessage,
        ToolCall,
        ToolResponse,
        ToolResponseMessage,
        UserMessage,
    )

    return [
        SystemMessage("You are terse.", {"source": "config", "version": 3}),
        UserMessage('Héllo wörld 🌍 中文 \u0000 \ud800 \n\t"quoted" \\ back'),
        UserMessage(""),
        AssistantMessage(None),
        AssistantMessage(""),
        AssistantMessage(
            "Let me check.",
            [ToolCall("call_1", "weather", '{"city": "Zürich"}'), ToolCall("call_2", "broken", "{not json")],
            {"nested": {"list": [1, 2.5, None, True, "x"]}, "empty": {}},
        ),
        ToolResponseMessage(
            [ToolResponse("call_1", "weather", "☀️ 21°C"), ToolResponse("call_2", "broken", "")],
            {"elapsed_ms": 12},
        ),
        ToolResponseMessage([]),
        AssistantMessage("It is sunny in Zürich.", metadata={"finish_reason": "stop"}),
    ]
