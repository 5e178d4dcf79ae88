"""StructuredOutputValidationAdvisor on the call path: validation, retries, errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from advisorchain.advisors.api import (
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    Ordered,
)
from advisorchain.advisors.structured_output import StructuredOutputValidationAdvisor
from advisorchain.errors import StructuredOutputValidationError
from advisorchain.messages import AssistantMessage, Message, SystemMessage, UserMessage
from advisorchain.model import Usage
from advisorchain.testing import ScriptedChatModel
from tests.structured_output.structured_output_helpers import (
    FEEDBACK,
    PERSON_SCHEMA,
    VALID_PERSON,
    Person,
    Team,
    client,
    tool_call_message,
    with_usage,
)


def _run(
    replies: list[Any], advisor: StructuredOutputValidationAdvisor, prompt: str = "Who is Ann?"
) -> tuple[ChatClientResponse, ScriptedChatModel]:
    model = ScriptedChatModel(replies)
    response = client(model, default_advisors=[advisor]).prompt(prompt).call().chat_client_response()
    return response, model


def _retry_text(model: ScriptedChatModel, call: int) -> str:
    last = model.prompts[call].instructions[-1]
    assert isinstance(last, UserMessage)
    return last.text


def test_name_and_default_order_follow_spring() -> None:
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    assert advisor.name == "Structured Output Validation Advisor"
    assert (
        advisor.order == Ordered.LOWEST_PRECEDENCE - 2000 == StructuredOutputValidationAdvisor.DEFAULT_ORDER
    )
    assert advisor.max_repeat_attempts == 3


def test_valid_answer_first_time_makes_one_call_and_returns_it_unchanged() -> None:
    response, model = _run([VALID_PERSON], StructuredOutputValidationAdvisor(output_type=Person))
    assert response.chat_response is not None
    assert response.chat_response.text == VALID_PERSON
    assert len(model.prompts) == 1
    assert model.prompts[0].instructions == (UserMessage("Who is Ann?"),)


def test_invalid_json_is_retried_with_the_errors_appended_to_the_user_text() -> None:
    response, model = _run(["Ann is 31", VALID_PERSON], StructuredOutputValidationAdvisor(output_type=Person))
    assert response.chat_response is not None and response.chat_response.text == VALID_PERSON
    assert _retry_text(model, 1) == (
        "Who is Ann?\n" + FEEDBACK + "<root>: Invalid JSON: expected value at line 1 column 1"
    )


def test_wrong_type_error_names_the_field() -> None:
    _, model = _run(
        ['{"name": "Ann", "age": "old"}', VALID_PERSON], StructuredOutputValidationAdvisor(Person)
    )
    assert _retry_text(model, 1).endswith(
        FEEDBACK + "age: Input should be a valid integer, unable to parse string as an integer"
    )


def test_missing_field_error_names_the_field() -> None:
    _, model = _run(['{"name": "Ann"}', VALID_PERSON], StructuredOutputValidationAdvisor(Person))
    assert _retry_text(model, 1).endswith(FEEDBACK + "age: Field required")


def test_extra_field_is_an_error_when_the_model_forbids_extras() -> None:
    _, model = _run(
        ['{"name": "Ann", "age": 31, "city": "Oslo"}', VALID_PERSON],
        StructuredOutputValidationAdvisor(Person),
    )
    assert _retry_text(model, 1).endswith(FEEDBACK + "city: Extra inputs are not permitted")


def test_several_errors_are_joined_with_semicolons() -> None:
    _, model = _run(['{"age": "old"}', VALID_PERSON], StructuredOutputValidationAdvisor(Person))
    assert _retry_text(model, 1).endswith(
        FEEDBACK
        + "name: Field required; age: Input should be a valid integer, unable to parse string as an integer"
    )


def test_fenced_json_answer_is_accepted() -> None:
    fenced = f"Here you go:\n```json\n{VALID_PERSON}\n```"
    response, model = _run([fenced], StructuredOutputValidationAdvisor(output_type=Person))
    assert response.chat_response is not None and response.chat_response.text == fenced
    assert len(model.prompts) == 1


def test_nested_list_error_path_points_at_the_item() -> None:
    bad = '{"name": "A-team", "members": [{"name": "Ann", "age": 31}, {"name": "Bo", "age": "x"}]}'
    good = '{"name": "A-team", "members": [{"name": "Ann", "age": 31}]}'
    _, model = _run([bad, good], StructuredOutputValidationAdvisor(output_type=Team))
    assert _retry_text(model, 1).endswith(
        FEEDBACK + "members.1.age: Input should be a valid integer, unable to parse string as an integer"
    )


def test_list_target_is_validated() -> None:
    _, model = _run(
        ['{"name": "Ann", "age": 31}', f"[{VALID_PERSON}]"], StructuredOutputValidationAdvisor(list[Person])
    )
    assert _retry_text(model, 1).endswith(FEEDBACK + "<root>: Input should be a valid array")


def test_retry_uses_the_original_prompt_and_changes_only_the_last_user_message() -> None:
    model = ScriptedChatModel(["nope", VALID_PERSON])
    history: list[Message] = [UserMessage("Hi"), AssistantMessage("Hello!")]
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    client(model, default_advisors=[advisor]).prompt().system("Be exact.").messages(history).user(
        "Who is Ann?"
    ).call().content()
    first, retry = model.prompts
    assert (
        retry.instructions[:-1]
        == first.instructions[:-1]
        == (
            SystemMessage("Be exact."),
            UserMessage("Hi"),
            AssistantMessage("Hello!"),
        )
    )
    assert retry.options == first.options
    assert "nope" not in _retry_text(model, 1)


def test_each_retry_carries_only_the_newest_errors() -> None:
    _, model = _run(
        ['{"name": "Ann"}', '{"name": "Ann", "age": "x"}', VALID_PERSON],
        StructuredOutputValidationAdvisor(Person),
    )
    third = _retry_text(model, 2)
    assert (
        third
        == "Who is Ann?\n"
        + FEEDBACK
        + "age: Input should be a valid integer, unable to parse string as an integer"
    )
    assert "Field required" not in third


def test_at_most_one_plus_max_repeat_attempts_model_calls() -> None:
    model = ScriptedChatModel(["bad"] * 10)
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=2)
    with pytest.raises(StructuredOutputValidationError):
        client(model, default_advisors=[advisor]).prompt("q").call().content()
    assert len(model.prompts) == 3


def test_zero_repeat_attempts_means_a_single_call() -> None:
    model = ScriptedChatModel(["bad", VALID_PERSON])
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=0)
    with pytest.raises(StructuredOutputValidationError):
        client(model, default_advisors=[advisor]).prompt("q").call().content()
    assert len(model.prompts) == 1 and model.remaining == 1


def test_exhaustion_error_carries_the_last_text_and_its_errors() -> None:
    model = ScriptedChatModel(["first bad", '{"name": "Ann"}'])
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=1)
    with pytest.raises(StructuredOutputValidationError) as info:
        client(model, default_advisors=[advisor]).prompt("q").call().content()
    assert info.value.text == '{"name": "Ann"}'
    assert info.value.errors == "age: Field required"
    assert "2 attempts" in str(info.value) and "age: Field required" in str(info.value)


def test_empty_answer_is_invalid() -> None:
    model = ScriptedChatModel([AssistantMessage(None)])
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=0)
    with pytest.raises(StructuredOutputValidationError) as info:
        client(model, default_advisors=[advisor]).prompt("q").call().content()
    assert info.value.text is None
    assert "empty" in info.value.errors


def test_tool_call_response_is_passed_through_unvalidated() -> None:
    response, model = _run([tool_call_message()], StructuredOutputValidationAdvisor(output_type=Person))
    assert response.chat_response is not None and response.chat_response.has_tool_calls()
    assert len(model.prompts) == 1


def test_usage_is_summed_over_all_attempts() -> None:
    replies = [with_usage("bad", 10, 1), with_usage('{"name": "A"}', 20, 2), with_usage(VALID_PERSON, 30, 3)]
    response, _ = _run(replies, StructuredOutputValidationAdvisor(output_type=Person))
    assert response.chat_response is not None
    assert response.chat_response.metadata.usage == Usage(60, 6)


def test_usage_of_a_single_valid_attempt_is_left_alone() -> None:
    response, _ = _run(
        [with_usage(VALID_PERSON, 7, 2)], StructuredOutputValidationAdvisor(output_type=Person)
    )
    assert response.chat_response is not None
    assert response.chat_response.metadata.usage == Usage(7, 2)


class _Counter(BaseAdvisor):
    def __init__(self, order: int, seen: list[int]) -> None:
        self.order, self.seen = order, seen

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        self.seen.append(self.order)
        return request


def test_advisors_after_it_run_on_every_attempt_and_those_before_it_once() -> None:
    seen: list[int] = []
    advisors = [
        _Counter(0, seen),
        StructuredOutputValidationAdvisor(output_type=Person),
        _Counter(Ordered.LOWEST_PRECEDENCE, seen),
    ]
    client(ScriptedChatModel(["bad", "worse", VALID_PERSON]), default_advisors=advisors).prompt(
        "q"
    ).call().content()
    assert seen == [0, Ordered.LOWEST_PRECEDENCE, Ordered.LOWEST_PRECEDENCE, Ordered.LOWEST_PRECEDENCE]


def test_request_context_comes_back_in_the_response() -> None:
    model = ScriptedChatModel(["bad", VALID_PERSON])
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    response = (
        client(model, default_advisors=[advisor])
        .prompt("q")
        .param("trace", "t-1")
        .call()
        .chat_client_response()
    )
    assert response.context["trace"] == "t-1"


# -- a supplied JSON schema -------------------------------------------------------------------


@pytest.mark.parametrize("as_text", [True, False], ids=["str", "mapping"])
def test_supplied_schema_accepts_a_valid_answer(as_text: bool) -> None:
    schema = json.dumps(PERSON_SCHEMA) if as_text else PERSON_SCHEMA
    response, model = _run([VALID_PERSON], StructuredOutputValidationAdvisor(output_json_schema=schema))
    assert response.chat_response is not None and response.chat_response.text == VALID_PERSON
    assert len(model.prompts) == 1


@pytest.mark.parametrize(
    ("answer", "errors"),
    [
        ('{"name": "Ann", "age": "old"}', "age: 'old' is not of type 'integer'"),
        ('{"name": "Ann"}', "<root>: 'age' is a required property"),
        (
            '{"name": "Ann", "age": 31, "city": "Oslo"}',
            "<root>: Additional properties are not allowed ('city' was unexpected)",
        ),
        ("Ann is 31", "<root>: Invalid JSON: Expecting value at line 1 column 1"),
    ],
    ids=["wrong-type", "missing-field", "extra-field", "invalid-json"],
)
def test_supplied_schema_violations_are_reported_with_path_and_message(answer: str, errors: str) -> None:
    _, model = _run(
        [answer, VALID_PERSON], StructuredOutputValidationAdvisor(output_json_schema=PERSON_SCHEMA)
    )
    assert _retry_text(model, 1) == "Who is Ann?\n" + FEEDBACK + errors


def test_supplied_schema_accepts_fenced_json() -> None:
    response, model = _run(
        [f"```json\n{VALID_PERSON}\n```"], StructuredOutputValidationAdvisor(output_json_schema=PERSON_SCHEMA)
    )
    assert response.chat_response is not None and response.chat_response.text is not None
    assert len(model.prompts) == 1


def test_supplied_schema_exhaustion_raises_with_jsonschema_errors() -> None:
    model = ScriptedChatModel(['{"name": 5, "age": 31}'])
    advisor = StructuredOutputValidationAdvisor(output_json_schema=PERSON_SCHEMA, max_repeat_attempts=0)
    with pytest.raises(StructuredOutputValidationError) as info:
        client(model, default_advisors=[advisor]).prompt("q").call().content()
    assert info.value.errors == "name: 5 is not of type 'string'"


def test_supplied_schema_with_draft7_uses_the_draft7_validator() -> None:
    tuple_schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "integer"}],
    }
    advisor = StructuredOutputValidationAdvisor(output_json_schema=tuple_schema)
    assert advisor.validation_errors("[1]") is None
    assert advisor.validation_errors('["x"]') == "0: 'x' is not of type 'integer'"


def test_json_schema_is_derived_from_the_output_type() -> None:
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    assert advisor.json_schema == Person.model_json_schema()
    assert advisor.output_type is Person


# -- constructor errors -----------------------------------------------------------------------


_BAD_ARGUMENTS: list[tuple[Callable[[], object], str]] = [
    (
        lambda: StructuredOutputValidationAdvisor(),
        "exactly one of output_type and output_json_schema; neither",
    ),
    (lambda: StructuredOutputValidationAdvisor(Person, PERSON_SCHEMA), "exactly one .* both"),
    (lambda: StructuredOutputValidationAdvisor(output_json_schema="{not json"), "not valid JSON"),
    (
        lambda: StructuredOutputValidationAdvisor(output_json_schema='{"type": "nope"}'),
        "not a valid JSON Schema",
    ),
    (
        lambda: StructuredOutputValidationAdvisor(output_json_schema='{"required": "age"}'),
        "not a valid JSON Schema: required",
    ),
    (lambda: StructuredOutputValidationAdvisor(output_json_schema="[1, 2]"), "must be a JSON object"),
    (lambda: StructuredOutputValidationAdvisor(output_json_schema={"$schema": 7}), r"\$schema 7"),
    (lambda: StructuredOutputValidationAdvisor(output_json_schema={"default": object()}), "only JSON values"),
    (lambda: StructuredOutputValidationAdvisor(output_json_schema=42), "as a str or a Mapping"),  # type: ignore[arg-type]
    (
        lambda: StructuredOutputValidationAdvisor(Person, max_repeat_attempts=-1),
        "max_repeat_attempts must be an int >= 0",
    ),
    (
        lambda: StructuredOutputValidationAdvisor(Person, max_repeat_attempts=True),
        "max_repeat_attempts must be an int",
    ),
    (lambda: StructuredOutputValidationAdvisor(Person, order="late"), "order must be an int"),  # type: ignore[arg-type]
    (
        lambda: StructuredOutputValidationAdvisor(output_type=Callable[[int], int]),
        "cannot derive a JSON schema",
    ),
]


@pytest.mark.parametrize(("make", "message"), _BAD_ARGUMENTS, ids=[m for _, m in _BAD_ARGUMENTS])
def test_bad_constructor_arguments_raise_value_error(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("order", [-(2**31), 2**31 - 1])
def test_an_order_at_either_bound_is_refused_like_the_tool_advisor(order: int) -> None:
    from advisorchain import StructuredOutputValidationAdvisor

    with pytest.raises(ValueError, match=r"strictly between Ordered\.HIGHEST_PRECEDENCE and"):
        StructuredOutputValidationAdvisor(output_type=int, order=order)
