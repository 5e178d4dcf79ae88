"""What every durable approval test checks: the approved call ran once, the denied one answered the
model with the denial text, and the stored conversation holds the whole decided round."""

from __future__ import annotations

import json
from pathlib import Path

from advisorchain import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from tests.durable.agent_app import stored
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL, round_counts

DENIAL = "Error: the user denied this tool call: not now"
CALLS = (
    ToolCall("call_a", "guarded", json.dumps({"n": 1})),
    ToolCall("call_b", "guarded", json.dumps({"n": 2})),
)
DECISION_ROUND = ToolResponseMessage(
    [ToolResponse("call_a", "guarded", "guarded 1"), ToolResponse("call_b", "guarded", DENIAL)]
)


def tool_answers(server: ScriptedServer, model: str) -> dict[str, str]:
    """The tool messages of the model's last request: call id -> what the model was told."""
    last = [b for b in server.bodies if b["model"] == model][-1]
    return {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}


def assert_decided_once(server: ScriptedServer, model: str, tool_file: Path, memory_db: Path) -> None:
    assert tool_file.read_text(encoding="utf-8").split() == ["g1"]  # approved: ran once; denied: never
    assert tool_answers(server, model) == {"call_a": "guarded 1", "call_b": DENIAL}
    assert round_counts(server)[(model, 1)] == 1  # the round that asked is never asked again
    assert round_counts(server)[(model, 2)] == 1
    assert stored(memory_db, "c1") == [
        UserMessage("Record 1 and 2."),
        AssistantMessage(None, CALLS),
        DECISION_ROUND,
        AssistantMessage(AGENT_FINAL),
    ]
