"""Guardrails in durable runs (Temporal and DBOS): tool guards and tool-result guards run in the
workflow's code, before approvals and before the model sees a result; input and output guards run
there too. Guards in a workflow must be deterministic (the built-in pii, keyword and length guards
are); a sync guard runs inline on Temporal's workflow loop, which has no threads."""

from __future__ import annotations

import json

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    GuardContext,
    GuardResult,
    InputGuardrailAdvisor,
    OutputGuardrailAdvisor,
    ToolCall,
    ToolResponseMessage,
    pii_guard,
    tool,
)
from advisorchain.testing import ScriptedChatModel
from tests.durable.engines import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

SENT: list[str] = []


@tool
def send_mail(to: str) -> str:
    """Send a mail."""
    SENT.append(to)
    return f"sent to {to}, reply to ops@example.com"


def no_evil(arguments: str, context: GuardContext) -> GuardResult:  # a sync guard: inline on Temporal
    return GuardResult(False, "not to evil") if "evil" in arguments else GuardResult(True)


async def test_tool_guards_and_result_guards_hold_in_a_durable_run(engine: Engine) -> None:
    SENT.clear()
    calls = [
        ToolCall("c1", "send_mail", json.dumps({"to": "evil"})),
        ToolCall("c2", "send_mail", '{"to": "ada@example.com"}'),
    ]
    model = ScriptedChatModel([AssistantMessage(None, calls), "Mailed Ada at ada@example.com."])
    client = ChatClient(
        model,
        default_tools=[send_mail],
        default_advisors=[InputGuardrailAdvisor(pii_guard()), OutputGuardrailAdvisor(pii_guard())],
        tool_guards=[no_evil, pii_guard()],
        tool_result_guards=[pii_guard()],
    )
    agent = engine.agent(client, name="guarded")
    async with engine.serving(agent):
        result = await agent.result(await engine.start(agent, "Mail evil and ada@example.com."))

    assert result.output == "Mailed Ada at [EMAIL]."
    assert SENT == ["[EMAIL]"]  # the blocked call never ran; the other got the redacted address
    assert model.prompts[0].last_user_message is not None
    assert model.prompts[0].last_user_message.text == "Mail evil and [EMAIL]."
    responses = model.prompts[1].instructions[-1]
    assert isinstance(responses, ToolResponseMessage)
    assert [r.response_data for r in responses.responses] == [
        "Error: blocked by guardrail no_evil: not to evil",
        "sent to [EMAIL], reply to [EMAIL]",
    ]
