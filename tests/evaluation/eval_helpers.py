"""What the evaluation tests share: answers with usage, recording evaluators, a span exporter."""

from __future__ import annotations

from dataclasses import dataclass, field

from advisorchain import AssistantMessage, ChatResponse, EvaluationRequest, EvaluationResult, ToolCall, Usage

QUESTION = "What is the capital of France?"
GOOD = "Paris."
BAD = "It is a city in France."


def answer(text: str, prompt_tokens: int = 10, completion_tokens: int = 2) -> ChatResponse:
    """A final answer that reports usage."""
    return ChatResponse.of(AssistantMessage(text), "stop", usage=Usage(prompt_tokens, completion_tokens))


def tool_round(call_id: str, city: str = "Paris", text: str | None = None) -> AssistantMessage:
    """A model message that asks for ``get_weather(city)``."""
    return AssistantMessage(text, [ToolCall(call_id, "get_weather", f'{{"city": "{city}"}}')])


@dataclass
class Judge:
    """Passes the answers in ``accept``; records every request it is given."""

    accept: tuple[str, ...] = (GOOD,)
    requests: list[EvaluationRequest] = field(default_factory=list)
    name: str = "judge"

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        self.requests.append(request)
        n = len(self.requests)
        passed = request.answer in self.accept
        return EvaluationResult(passed, score=4.0 if passed else 1.0, feedback=f"feedback {n}")


