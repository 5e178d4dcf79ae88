"""Durable runs keep their budget (§12, §17): one set of totals across a run's approval pauses, rebuilt
from the recorded results when the run resumes; usage and cost survive the recording exactly."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    ModelPrice,
    ToolCall,
    Usage,
    UsageLimits,
    tool,
)
from advisorchain.durable._codec import response_from_dict, response_to_dict
from advisorchain.model import ChatResponseMetadata, Generation
from advisorchain.testing import ScriptedChatModel

dbos = pytest.importorskip("dbos")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402

DBOS = dbos.DBOS
PRICES = {"scripted": ModelPrice(Decimal(2), Decimal(10))}


def test_a_recorded_response_keeps_its_cache_counts_cost_and_provider() -> None:
    response = ChatResponse(
        (Generation(AssistantMessage("hi"), "stop"),),
        ChatResponseMetadata(
            "r1", "gpt-4o", Usage(100, 10, 40, 5, Decimal("0.000123456789")), "stop", "openai"
        ),
    )
    assert response_from_dict(response_to_dict(response)) == response
    unpriced = response.with_usage(Usage(1, 2))
    assert response_from_dict(response_to_dict(unpriced)) == unpriced


def test_a_response_recorded_before_usage_had_cache_counts_and_cost_still_reads() -> None:
    old = response_to_dict(ChatResponse.of(AssistantMessage("hi"), "stop", usage=Usage(7, 3)))
    old["usage"] = [7, 3]
    del old["provider"]
    assert response_from_dict(old).metadata.usage == Usage(7, 3)


def _config(path: Path) -> dict[str, Any]:
    return {
        "name": "advisorchain-usage-test",
        "system_database_url": f"sqlite:///{path}",
        "notification_listener_polling_interval_sec": 0.05,
    }


async def _waiting(agent: DBOSAgent[Any], workflow_id: str, count: int) -> tuple[ToolCall, ...]:
    deadline = time.monotonic() + 600  # a bound for a hang: a busy machine may take minutes
    while time.monotonic() < deadline:
        pending = await agent.pending(workflow_id)
        if pending and pending[0].id == f"c{count}":
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {workflow_id!r} never waited for approval {count}")


async def test_a_durable_run_keeps_one_budget_across_its_pauses_and_a_relaunch(tmp_path: Path) -> None:
    charged: list[int] = []

    @tool(requires_approval=True)
    def charge(cents: int) -> str:
        """Charge a card."""
        charged.append(cents)
        return "charged"

    def asks(n: int) -> ChatResponse:
        call = ToolCall(f"c{n}", "charge", f'{{"cents": {n}}}')
        return ChatResponse.of(AssistantMessage(None, (call,)), "tool_calls", usage=Usage(100, 10))

    model = ScriptedChatModel([asks(1), asks(2), "never sent"])
    client = ChatClient(
        model,
        default_tools=[charge],
        prices=PRICES,
        usage_limits=UsageLimits(request_limit=2, on_exceeded="finish"),
    )
    agent = DBOSAgent(client, name="budgeted")
    database = tmp_path / "sys.sqlite"
    DBOS(config=_config(database))  # type: ignore[arg-type]
    DBOS.launch()
    try:
        await agent.start("Pay twice.", workflow_id="b1")
        await _waiting(agent, "b1", 1)
        DBOS.destroy()  # the runtime goes away while the run waits; it resumes from its records
        DBOS(config=_config(database))  # type: ignore[arg-type]
        DBOS.launch()
        await _waiting(agent, "b1", 1)
        await agent.decide("b1", {"c1": True})
        await _waiting(agent, "b1", 2)
        await agent.decide("b1", {"c2": True})
        result = await agent.result("b1")
    finally:
        DBOS.destroy(destroy_registry=True)

    # Two requests were spent before the last pause: the call after it is refused, not sent.
    assert len(model.prompts) == 2 and charged == [1, 2]
    chat = result.chat_response
    assert chat is not None and chat.finish_reason == "usageLimitExceeded"
    assert "request_limit=2" in result.output
    assert chat.metadata.usage == Usage(200, 20, cost=Decimal("0.0006"))
