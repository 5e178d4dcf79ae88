"""OutputConverter and the JSON extraction helpers."""

from __future__ import annotations

import pytest

from advisorchain.errors import StructuredOutputValidationError
from advisorchain.output import OutputConverter, extract_json, join_errors
from tests.structured_output.structured_output_helpers import Person


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ('  {"a": 1}\n', '{"a": 1}'),
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```JSON\n{"a": 1}\n```', '{"a": 1}'),
        ('```json {"a": 1}```', '{"a": 1}'),
        ('```\n{"a": 1}\n```', '{"a": 1}'),
        ('```javascript\n{"a": 1}\n```', '{"a": 1}'),
        ("```true```", "true"),
        ("Here:\n```json\n[1]\n```\nand\n```json\n[2]\n```", "[1]"),
    ],
    ids=[
        "bare",
        "padded",
        "json-fence",
        "upper-tag",
        "same-line",
        "no-tag",
        "other-tag",
        "one-line",
        "first-block",
    ],
)
def test_extract_json_takes_the_first_fenced_block_or_the_text(text: str, expected: str) -> None:
    assert extract_json(text) == expected


def test_join_errors_caps_the_count_and_the_length() -> None:
    joined = join_errors([f"f{i}: bad" for i in range(25)] + ["x: " + "y" * 1000])
    parts = joined.split("; ")
    assert parts[:20] == [f"f{i}: bad" for i in range(20)]
    assert parts[20] == "... and 6 more errors"


def test_join_errors_cuts_a_long_message() -> None:
    joined = join_errors(["x: " + "y" * 1000])
    assert len(joined) == 300 and joined.endswith("…")


def test_blank_answer_is_an_empty_response_error() -> None:
    with pytest.raises(StructuredOutputValidationError) as info:
        OutputConverter(Person).parse("   ")
    assert info.value.errors == "<root>: the response is empty, expected JSON"
    assert info.value.text == "   "


def test_errors_is_none_for_a_valid_answer() -> None:
    assert OutputConverter(Person).errors('{"name": "A", "age": 1}') is None


def test_format_instructions_carry_the_schema() -> None:
    instructions = OutputConverter(list[int]).format_instructions
    assert instructions.endswith('```{"items": {"type": "integer"}, "type": "array"}```')
    assert "RFC8259" in instructions
