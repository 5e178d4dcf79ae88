"""The web page with several agents (API.md §18): each answer names its agent, a handoff is told as
it happens, and the trace tree holds the handoff span."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from advisorchain import ChatClient, MessageChatMemoryAdvisor, MessageWindowChatMemory
from advisorchain.agents import Agent
from advisorchain.testing import ScriptedChatModel
from advisorchain.web import create_app
from tests.support.spans import span_exporter
from tests.web.web_helpers import AUTH, TOKEN, TOOLS, asks, events, named


def _walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for node in nodes for n in [node, *_walk(node["children"])]]


def test_each_answer_names_its_agent_and_the_handoff_is_in_the_trace() -> None:
    span_exporter()  # a tracer provider, so the run has a trace tree
    billing = Agent("billing", instructions="You are billing.")
    triage = Agent("triage", instructions="You are triage.", handoffs=[billing])
    model = ScriptedChatModel(
        [asks(("h1", "transfer_to_billing", "{}"), text="One moment."), "Billing here: all paid."]
    )
    memory = MessageWindowChatMemory(max_messages=200)
    client = ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(memory)], default_tools=TOOLS, default_agent=triage
    )
    http = TestClient(create_app(client, token=TOKEN))
    conversation = http.post("/api/conversations", headers=AUTH).json()["id"]
    response = http.post(f"/api/conversations/{conversation}/turns", headers=AUTH, json={"text": "paid?"})
    found = events(response.text)

    assert named(found, "agent") == [
        {"name": "triage", "handoffs": []},
        {"name": "billing", "handoffs": [["triage", "billing"]]},
    ]
    said: list[list[str]] = []  # the text each agent streamed, in order
    for name, data in found:
        if name == "agent":
            said.append([data["name"], ""])
        elif name == "text":
            said[-1][1] += data["text"]
    assert said == [["triage", "One moment."], ["billing", "Billing here: all paid."]]
    tree = _walk(named(found, "trace")[0]["tree"])
    handoffs = [n for n in tree if n["kind"] == "handoff"]
    assert [n["name"] for n in handoffs] == ["handoff triage -> billing"]

    stored = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()
    steps = [s for s in stored["turns"][0]["steps"] if s["type"] == "text"]
    assert steps[-1]["agent"] == "billing" and steps[-1]["text"] == "Billing here: all paid."
