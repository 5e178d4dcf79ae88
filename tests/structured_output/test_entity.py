"""entity(T): format instructions, parsing into every kind of target, schema_validation, native."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from advisorchain.advisors.structured_output import StructuredOutputValidationAdvisor
from advisorchain.errors import ChainConfigurationError, StructuredOutputValidationError
from advisorchain.messages import UserMessage
from advisorchain.output import OutputConverter
from advisorchain.testing import ScriptedChatModel
from tests.structured_output.structured_output_helpers import (
    FEEDBACK,
    VALID_PERSON,
    Color,
    Movie,
    Person,
    Point,
    Team,
    client,
)


def _entity(answer: str, output_type: Any) -> Any:
    return client(ScriptedChatModel([answer])).prompt("q").call().entity(output_type)


def _sent_text(model: ScriptedChatModel, call: int = 0) -> str:
    last = model.prompts[call].instructions[-1]
    assert isinstance(last, UserMessage)
    return last.text


def test_format_instructions_with_the_schema_join_the_last_user_message() -> None:
    model = ScriptedChatModel([VALID_PERSON])
    client(model).prompt("Who is Ann?").call().entity(Person)
    assert _sent_text(model) == "Who is Ann?\n" + OutputConverter(Person).format_instructions
    assert '"additionalProperties": false' in _sent_text(model)


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Person, VALID_PERSON, Person(name="Ann", age=31)),
        (
            Team,
            '{"name": "T", "members": [{"name": "Bo", "age": 2}]}',
            Team(name="T", members=[Person(name="Bo", age=2)]),
        ),
        (list[Person], f"[{VALID_PERSON}]", [Person(name="Ann", age=31)]),
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Movie, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
        (Color, '"green"', Color.GREEN),
        (int, "42", 42),
        (float, "2.5", 2.5),
        (bool, "true", True),
        (str, '"hello"', "hello"),
        (list[int], "[1, 2, 3]", [1, 2, 3]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
    ],
    ids=[
        "model",
        "nested",
        "list-of-models",
        "dataclass",
        "typeddict",
        "enum",
        "int",
        "float",
        "bool",
        "str",
        "list-int",
        "dict",
    ],
)
def test_entity_parses_every_kind_of_target(output_type: Any, answer: str, expected: Any) -> None:
    assert _entity(answer, output_type) == expected


def test_entity_accepts_a_fenced_json_block() -> None:
    assert _entity(f"Sure!\n```json\n{VALID_PERSON}\n```\nAnything else?", Person) == Person(
        name="Ann", age=31
    )


def test_entity_accepts_a_fence_without_a_language_tag() -> None:
    assert _entity("```\n[1, 2]\n```", list[int]) == [1, 2]


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"), [(str, "just text", "just text"), (Color, "red", Color.RED)]
)
def test_string_targets_accept_an_answer_without_quotes(output_type: Any, answer: str, expected: Any) -> None:
    assert _entity(answer, output_type) == expected


def test_unquoted_answer_outside_an_enum_is_still_an_error() -> None:
    with pytest.raises(StructuredOutputValidationError) as info:
        _entity("blue", Color)
    assert info.value.errors == "<root>: Invalid JSON: expected value at line 1 column 1"


def test_invalid_answer_raises_with_text_and_readable_errors() -> None:
    with pytest.raises(StructuredOutputValidationError) as info:
        _entity('{"name": "Ann", "age": "old"}', Person)
    assert info.value.text == '{"name": "Ann", "age": "old"}'
    assert info.value.errors == "age: Input should be a valid integer, unable to parse string as an integer"
    assert "Person" in str(info.value)


def test_without_schema_validation_an_invalid_answer_is_not_retried() -> None:
    model = ScriptedChatModel(["bad", VALID_PERSON])
    with pytest.raises(StructuredOutputValidationError):
        client(model).prompt("q").call().entity(Person)
    assert len(model.prompts) == 1


def test_schema_validation_retries_with_errors_before_the_format_instructions() -> None:
    model = ScriptedChatModel(['{"name": "Ann"}', VALID_PERSON])
    result = client(model).prompt("q").call().entity(Person, schema_validation=True)
    assert result == Person(name="Ann", age=31)
    instructions = OutputConverter(Person).format_instructions
    assert _sent_text(model, 1) == "q\n" + FEEDBACK + "age: Field required\n" + instructions


def test_schema_validation_exhaustion_raises_after_four_calls() -> None:
    model = ScriptedChatModel(["bad"] * 4)
    with pytest.raises(StructuredOutputValidationError) as info:
        client(model).prompt("q").call().entity(Person, schema_validation=True)
    assert len(model.prompts) == 4
    assert info.value.text == "bad"


def test_schema_validation_keeps_the_chains_own_validation_advisor() -> None:
    model = ScriptedChatModel(["bad", VALID_PERSON])
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=0)
    with pytest.raises(StructuredOutputValidationError):
        client(model, default_advisors=[advisor]).prompt("q").call().entity(Person, schema_validation=True)
    assert len(model.prompts) == 1


def test_native_puts_the_schema_in_the_options() -> None:
    model = ScriptedChatModel([VALID_PERSON])
    client(model).prompt("q").call().entity(Person, native=True)
    options = model.prompts[0].options
    assert options is not None and options.output_schema == TypeAdapter(Person).json_schema()


def test_without_native_no_output_schema_is_sent() -> None:
    model = ScriptedChatModel([VALID_PERSON])
    client(model).prompt("q").call().entity(Person)
    options = model.prompts[0].options
    assert options is None or options.output_schema is None


def test_entity_runs_its_own_request_after_content() -> None:
    model = ScriptedChatModel(["plain text", VALID_PERSON])
    result = client(model).prompt("q").call()
    assert result.content() == "plain text"
    assert result.entity(Person) == Person(name="Ann", age=31)
    assert len(model.prompts) == 2


async def test_async_entity_parses_the_answer() -> None:
    model = ScriptedChatModel(['{"name": "Ann"}', VALID_PERSON])
    result = await client(model).prompt("q").acall().entity(Person, schema_validation=True)
    assert result == Person(name="Ann", age=31)
    assert len(model.prompts) == 2


async def test_async_entity_raises_on_invalid_output() -> None:
    with pytest.raises(StructuredOutputValidationError):
        await client(ScriptedChatModel(["[]"])).prompt("q").acall().entity(Person)


def test_a_type_without_json_schema_is_a_configuration_error() -> None:
    model = ScriptedChatModel([VALID_PERSON])
    with pytest.raises(ChainConfigurationError, match="cannot derive a JSON schema"):
        client(model).prompt("q").call().entity(type)
    assert model.prompts == []


def test_a_type_is_prepared_once_across_requests() -> None:
    from advisorchain.output import converter_for

    class Point(BaseModel):
        x: int

    assert converter_for(Point) is converter_for(Point)
    assert converter_for(list[Point]) is converter_for(list[Point])
