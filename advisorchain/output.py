"""Structured output: a JSON schema for a Python type, format instructions for the model, and
parsing of the answer (a ```json fenced block accepted) validated with pydantic."""

from __future__ import annotations

import json
import re
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from .errors import StructuredOutputValidationError

__all__ = ["OutputConverter", "extract_json"]

T = TypeVar("T")

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> str:
    """The JSON part of a model answer: the body of its first ``` fenced block, else the text."""
    match = _FENCE.search(text)
    return (match.group(1) if match else text).strip()


class OutputConverter(Generic[T]):
    """Turns a model answer into an instance of ``output_type`` (pydantic model, dataclass,
    TypedDict, ``list[...]``, enum, primitive...)."""

    def __init__(self, output_type: type[T] | Any) -> None:
        self.output_type = output_type
        self._adapter: TypeAdapter[T] = TypeAdapter(output_type)

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the output type."""
        return self._adapter.json_schema()

    @cached_property
    def format_instructions(self) -> str:
        """The text that asks the model for JSON matching the schema."""
        schema = json.dumps(self.json_schema, ensure_ascii=False)
        return (
            "Your response should be in JSON format.\n"
            "Do not include any explanations, only provide a RFC8259 compliant JSON response "
            "following this format without deviation.\n"
            "Do not include markdown code blocks in your response.\n"
            f"Here is the JSON Schema instance your output must adhere to:\n```{schema}```"
        )

    def errors(self, text: str | None) -> str | None:
        """None when ``text`` is valid output, else the validation errors as one text."""
        try:
            self.parse(text)
        except StructuredOutputValidationError as exc:
            return exc.errors
        return None

    def parse(self, text: str | None) -> T:
        """The answer as an instance of the output type; StructuredOutputValidationError otherwise."""
        if text is None or not text.strip():
            raise StructuredOutputValidationError(
                "the model returned no text to parse as JSON", text=text, errors="the response is empty"
            )
        try:
            return self._adapter.validate_json(extract_json(text))
        except ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()
            )
            raise StructuredOutputValidationError(
                f"the model's answer does not match {_type_name(self.output_type)}: {errors}",
                text=text,
                errors=errors,
            ) from exc


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)
