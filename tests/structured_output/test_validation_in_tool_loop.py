"""StructuredOutputValidationAdvisor inside the ToolCallingAdvisor's loop: tool-call iterations pass
through, only final answers are validated and retried."""

from __future__ import annotations

import pytest

from advisorchain.advisors.structured_output import StructuredOutputValidationAdvisor
from advisorchain.client import ChatClient, ChatClientRequestSpec
from advisorchain.messages import ToolResponse, ToolResponseMessage, UserMessage
from advisorchain.model import ChatOptions
from advisorchain.testing import ScriptedChatModel
from tests.structured_output.structured_output_helpers import (
    FEEDBACK,
    VALID_PERSON,
    LookupTool,
    Person,
    client,
    tool_call_message,
)

tool_calling = pytest.importorskip("advisorchain.advisors.tool_calling")


class RecordingValidationAdvisor(StructuredOutputValidationAdvisor):
    """Records every text it is asked to validate."""

    def __init__(self) -> None:
        super().__init__(output_type=Person)
        self.validated: list[str | None] = []

    def validation_errors(self, text: str | None) -> str | None:
        self.validated.append(text)
        return super().validation_errors(text)


def _spec(
    model: ScriptedChatModel, validation: StructuredOutputValidationAdvisor, tool: LookupTool | None = None
) -> ChatClientRequestSpec:
    """A request with an explicit tool loop outside the validation advisor and one lookup tool."""
    advisors = [tool_calling.ToolCallingAdvisor(), validation]
    options = ChatOptions(tool_callbacks=[tool or LookupTool()])
    return client(model, default_advisors=advisors).prompt("Who is Ann?").options(options)


def test_validation_inside_the_loop_sees_only_final_answers() -> None:
    model = ScriptedChatModel([tool_call_message(), "sorry, no JSON", VALID_PERSON])
    tool, validation = LookupTool(), RecordingValidationAdvisor()
    assert _spec(model, validation, tool).call().content() == VALID_PERSON
    assert validation.validated == ["sorry, no JSON", VALID_PERSON]
    assert tool.calls == ["{}"]


def test_retry_inside_the_loop_keeps_the_tool_history() -> None:
    model = ScriptedChatModel([tool_call_message(), "sorry, no JSON", VALID_PERSON])
    _spec(model, StructuredOutputValidationAdvisor(output_type=Person)).call().content()
    history = (tool_call_message(), ToolResponseMessage([ToolResponse("call-1", "lookup", "Ann is 31")]))
    assert model.prompts[1].instructions == (UserMessage("Who is Ann?"), *history)
    errors = "<root>: Invalid JSON: expected value at line 1 column 1"
    assert model.prompts[2].instructions == (UserMessage("Who is Ann?\n" + FEEDBACK + errors), *history)


def test_a_tool_call_after_an_invalid_answer_goes_back_to_the_loop() -> None:
    model = ScriptedChatModel(["sorry, no JSON", tool_call_message(), VALID_PERSON])
    tool = LookupTool()
    assert _spec(model, StructuredOutputValidationAdvisor(Person), tool).call().content() == VALID_PERSON
    assert tool.calls == ["{}"]
    assert len(model.prompts) == 3
    assert isinstance(model.prompts[2].instructions[-1], ToolResponseMessage)


async def test_stream_inside_the_loop_emits_only_the_valid_final_answer() -> None:
    model = ScriptedChatModel([tool_call_message(), "sorry, no JSON", VALID_PERSON])
    spec = _spec(model, StructuredOutputValidationAdvisor(Person)).astream()
    assert "".join([d async for d in spec.content()]) == VALID_PERSON
    assert len(model.prompts) == 3


def test_entity_with_schema_validation_and_the_auto_registered_loop() -> None:
    model = ScriptedChatModel([tool_call_message(), '{"name": "Ann"}', VALID_PERSON])
    person = (
        ChatClient(model)
        .prompt("Who is Ann?")
        .options(ChatOptions(tool_callbacks=[LookupTool()]))
        .call()
        .entity(Person, schema_validation=True)
    )
    assert person == Person(name="Ann", age=31)
    assert len(model.prompts) == 3
    assert model.prompts[1].instructions[1] == tool_call_message()
    assert isinstance(model.prompts[2].instructions[-1], ToolResponseMessage)
