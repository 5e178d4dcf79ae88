"""Property tests: whatever JSON (or text) the model sends, validation answers clearly and never
crashes."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from advisorchain.advisors.structured_output import StructuredOutputValidationAdvisor
from advisorchain.errors import StructuredOutputValidationError
from advisorchain.output import OutputConverter, extract_json
from advisorchain.testing import ScriptedChatModel
from tests.structured_output.structured_output_helpers import PERSON_SCHEMA, Person, Team, client

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

# Values shaped like the target, so many are valid and the rest fail deep inside.
person_like = st.dictionaries(
    st.sampled_from(["name", "age", "extra"]), json_values | st.integers() | st.text(max_size=5), max_size=3
)

_BY_TYPE = StructuredOutputValidationAdvisor(output_type=Person)
_BY_SCHEMA = StructuredOutputValidationAdvisor(output_json_schema=PERSON_SCHEMA)
_TEAM = StructuredOutputValidationAdvisor(output_type=Team)


def _is_clear(errors: str | None) -> bool:
    """None (valid) or a non-blank text starting with ``path: message``."""
    return errors is None or (errors.strip() != "" and ": " in errors)


@settings(max_examples=150, deadline=None)
@given(value=json_values | person_like)
def test_type_validation_of_any_json_is_valid_or_a_clear_error(value: Any) -> None:
    errors = _BY_TYPE.validation_errors(json.dumps(value))
    assert _is_clear(errors)
    valid = True
    try:
        TypeAdapter(Person).validate_json(json.dumps(value))
    except ValueError:
        valid = False
    assert (errors is None) == valid


@settings(max_examples=150, deadline=None)
@given(value=json_values | person_like)
def test_schema_validation_of_any_json_agrees_with_jsonschema(value: Any) -> None:
    errors = _BY_SCHEMA.validation_errors(json.dumps(value))
    assert _is_clear(errors)
    assert (errors is None) == jsonschema.Draft202012Validator(PERSON_SCHEMA).is_valid(value)


@settings(max_examples=100, deadline=None)
@given(value=json_values)
def test_nested_target_never_crashes_on_any_json(value: Any) -> None:
    assert _is_clear(_TEAM.validation_errors(json.dumps({"name": "t", "members": value})))


@settings(max_examples=150, deadline=None)
@given(text=st.text())
@pytest.mark.parametrize("advisor", [_BY_TYPE, _BY_SCHEMA], ids=["type", "schema"])
def test_any_text_is_valid_or_a_clear_error(advisor: StructuredOutputValidationAdvisor, text: str) -> None:
    assert _is_clear(advisor.validation_errors(text))


@settings(max_examples=100, deadline=None)
@given(value=json_values, prose=st.text(alphabet=st.characters(exclude_characters="`"), max_size=20))
def test_a_fenced_block_yields_exactly_the_json_inside(value: Any, prose: str) -> None:
    body = json.dumps(value)
    assert json.loads(extract_json(f"{prose}\n```json\n{body}\n```\n{prose}")) == value


@settings(max_examples=50, deadline=None)
@given(value=json_values | person_like)
def test_entity_returns_a_person_or_raises_the_validation_error(value: Any) -> None:
    text = json.dumps(value)
    try:
        result = client(ScriptedChatModel([text])).prompt("q").call().entity(Person)
    except StructuredOutputValidationError as exc:
        assert exc.text == text and _is_clear(exc.errors)
    else:
        assert result == OutputConverter(Person).parse(text)
