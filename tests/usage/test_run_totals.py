"""What a run's usage and cost sum (§17): tool rounds, validation retries, self-refine attempts,
request retries and compaction summaries made through the chain's own model; judges and
summarizers with models of their own, and a sub-agent's client, count on their own."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel
from usage_support import PATHS, PRICES, Path, run, says, weather

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    ContextCompactionAdvisor,
    FunctionChatModel,
    LLMJudgeEvaluator,
    ModelError,
    Prompt,
    RequestRetryAdvisor,
    RunUsage,
    ScriptedChatModel,
    SelfRefineEvaluationAdvisor,
    StructuredOutputValidationAdvisor,
    SystemMessage,
    Usage,
    UsageLimits,
    tool,
)

pytestmark = pytest.mark.parametrize("path", PATHS)
COST = Decimal("0.0003")  # one scripted answer: 100 in + 10 out at $2 / $10 per million


class City(BaseModel):
    name: str


async def test_validation_retries_count(path: Path) -> None:
    model = ScriptedChatModel([says("not json"), says('{"name": "Oslo"}')])
    client = ChatClient(model, prices=PRICES, default_advisors=[StructuredOutputValidationAdvisor(City)])
    outcome = await run(client.prompt("A city?"), path)
    assert outcome.run_usage == RunUsage(2, 0, Usage(200, 20, cost=2 * COST))
    assert outcome.usage == Usage(200, 20, cost=2 * COST)


async def test_self_refine_attempts_count_and_the_judge_counts_on_its_own(path: Path) -> None:
    judge = ScriptedChatModel(
        [
            says('{"score": 1, "feedback": "vague"}', usage=Usage(1000, 1000)),
            says('{"score": 4, "feedback": "ok"}', usage=Usage(1000, 1000)),
        ]
    )
    model = ScriptedChatModel([says("Somewhere."), says("Oslo.")])
    refine = SelfRefineEvaluationAdvisor(LLMJudgeEvaluator(judge), max_attempts=2)
    outcome = await run(ChatClient(model, prices=PRICES, default_advisors=[refine]).prompt("Where?"), path)
    assert outcome.text == "Oslo."
    assert outcome.run_usage == RunUsage(
        2, 0, Usage(200, 20, cost=2 * COST)
    )  # the judge's tokens are not here


async def test_self_refine_stops_at_a_limit_ending_without_judging_it(path: Path) -> None:
    judged: list[str | None] = []

    def evaluator(request: object) -> bool:
        judged.append(getattr(request, "answer", None))
        return False

    model = ScriptedChatModel([says("Somewhere.")])
    refine = SelfRefineEvaluationAdvisor(evaluator, max_attempts=3)
    client = ChatClient(
        model, default_advisors=[refine], usage_limits=UsageLimits(request_limit=1, on_exceeded="finish")
    )
    outcome = await run(client.prompt("Where?"), path)
    assert outcome.finish_reason == "usageLimitExceeded" and judged == ["Somewhere."]


async def test_request_retries_count_every_call_sent(path: Path) -> None:
    model = ScriptedChatModel([ModelError("busy", status_code=503), says("Hi.")])
    retry = RequestRetryAdvisor(lambda request, error, attempt: request)
    outcome = await run(ChatClient(model, prices=PRICES, default_advisors=[retry]).prompt("hi"), path)
    assert outcome.run_usage == RunUsage(2, 0, Usage(100, 10, cost=COST))


def _with_summaries(script: list[ChatResponse]) -> FunctionChatModel:
    """Answers from ``script``; a summarizing prompt gets a summary (which costs too)."""
    answers = iter(script)

    def reply(prompt: Prompt) -> ChatResponse:
        first = prompt.instructions[0]
        if isinstance(first, SystemMessage) and first.text.startswith(
            ContextCompactionAdvisor.SUMMARY_INSTRUCTION[:30]
        ):
            return ChatResponse.of(AssistantMessage("They talked."), "stop", usage=Usage(400, 40))
        return next(answers)

    model = FunctionChatModel(reply)
    model.model_name = "scripted"  # type: ignore[misc]
    return model


async def test_a_compaction_summary_by_the_chains_own_model_counts(path: Path) -> None:
    from advisorchain import UserMessage

    history = [UserMessage("x" * 400), AssistantMessage("y" * 400)]
    model = _with_summaries([says("Done.")])
    compaction = ContextCompactionAdvisor(max_tokens=150, keep_last_turns=1)
    client = ChatClient(model, prices=PRICES, default_advisors=[compaction])
    outcome = await run(client.prompt("Go on.").messages(history), path)
    assert outcome.run_usage.requests == 2
    # the summary: 400 in + 40 out, $0.0012; the answer: $0.0003
    assert outcome.run_usage.usage == Usage(500, 50, cost=Decimal("0.0015"))


async def test_a_summarizer_of_its_own_counts_on_its_own(path: Path) -> None:
    from advisorchain import UserMessage

    history = [UserMessage("x" * 400), AssistantMessage("y" * 400)]
    summarizer = _with_summaries([])
    compaction = ContextCompactionAdvisor(summarizer, max_tokens=150, keep_last_turns=1)
    client = ChatClient(ScriptedChatModel([says("Done.")]), prices=PRICES, default_advisors=[compaction])
    outcome = await run(client.prompt("Go on.").messages(history), path)
    assert outcome.run_usage == RunUsage(1, 0, Usage(100, 10, cost=COST))


async def test_a_sub_agent_is_a_run_of_its_own(path: Path) -> None:
    inner = ChatClient(ScriptedChatModel([says("Sunny.", usage=Usage(5000, 500))] * 2), prices=PRICES)

    @tool
    async def ask_expert(question: str) -> str:
        """Ask the weather expert."""
        return await inner.prompt(question).acall().content() or ""

    from advisorchain import ToolCall

    model = ScriptedChatModel(
        [
            ChatResponse.of(
                AssistantMessage(None, (ToolCall("e1", "ask_expert", '{"question": "Oslo?"}'),)),
                "tool_calls",
                usage=Usage(100, 10),
            ),
            says("Sunny, the expert says."),
        ]
    )
    client = ChatClient(
        model,
        default_tools=[ask_expert, weather],
        prices=PRICES,
        usage_limits=UsageLimits(total_tokens_limit=1000),
    )
    outcome = await run(client.prompt("W?"), path)
    assert outcome.run_usage == RunUsage(2, 1, Usage(200, 20, cost=2 * COST))


async def test_a_limit_of_a_sub_agent_is_its_own_error_not_the_outer_runs_ending(path: Path) -> None:
    inner = ChatClient(ScriptedChatModel([says("Sunny.")]), usage_limits=UsageLimits(request_limit=0))

    @tool
    async def ask_expert(question: str) -> str:
        """Ask the weather expert."""
        return await inner.prompt(question).acall().content() or ""

    from advisorchain import ToolCall

    model = ScriptedChatModel(
        [
            ChatResponse.of(
                AssistantMessage(None, (ToolCall("e1", "ask_expert", '{"question": "Oslo?"}'),)), "tool_calls"
            ),
            says("The expert could not answer."),
        ]
    )
    client = ChatClient(
        model, default_tools=[ask_expert], usage_limits=UsageLimits(request_limit=5, on_exceeded="finish")
    )
    outcome = await run(client.prompt("W?"), path)
    # The sub-agent's limit is the tool's failure (its result tells the model), not the outer run's ending.
    assert outcome.text == "The expert could not answer." and outcome.finish_reason == "stop"
    assert "request_limit=0" in model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[union-attr]
