"""Structured output: a JSON schema for a Python type, format instructions for the model, and
parsing of the answer (a ```json fenced block accepted) validated with pydantic.

Validation errors are rendered one per problem as ``path: message`` (``<root>`` for the value
itself) and joined with ``"; "``, e.g. ``age: Input should be a valid integer``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

from ._typing import pydantic_compatible
from .errors import ChainConfigurationError, StructuredOutputValidationError

__all__ = ["EMPTY_RESPONSE_ERROR", "OutputConverter", "converter_for", "extract_json", "join_errors"]

T = TypeVar("T")

# The opening fence: ```json / ```JSON (same line allowed), or any language tag followed by a
# newline, or nothing; then the body up to the closing fence.
_FENCE = re.compile(r"```(?:json\b|JSON\b|[\w+-]*[ \t]*\r?\n)?[ \t]*\r?\n?(.*?)```", re.DOTALL)

EMPTY_RESPONSE_ERROR = "<root>: the response is empty, expected JSON"
"""The error text for a response without text (or only whitespace)."""

_MAX_ERRORS = 20
_MAX_MESSAGE = 300


def extract_json(text: str) -> str:
    """The JSON part of a model answer: the body of its first ``` fenced block, else the text."""
    match = _FENCE.search(text)
    return (match.group(1) if match else text).strip()


def error_path(parts: Iterable[object]) -> str:
    """A location as a dotted path (``items.0.name``), or ``<root>`` for the value itself."""
    return ".".join(str(p) for p in parts) or "<root>"


def join_errors(errors: Iterable[str]) -> str:
    """Validation error lines joined with ``"; "``: at most 20, each cut to 300 characters."""
    items = [e if len(e) <= _MAX_MESSAGE else e[: _MAX_MESSAGE - 1] + "…" for e in errors]
    if len(items) > _MAX_ERRORS:
        rest = len(items) - _MAX_ERRORS
        items = [*items[:_MAX_ERRORS], f"... and {rest} more error{'s' if rest > 1 else ''}"]
    return "; ".join(items)


def pydantic_errors(exc: ValidationError) -> str:
    """A pydantic ValidationError as readable ``path: message`` text."""
    return join_errors(f"{error_path(e['loc'])}: {e['msg']}" for e in exc.errors())


@functools.lru_cache(maxsize=256)
def _cached_converter(output_type: Any) -> OutputConverter[Any]:
    return OutputConverter(output_type)


def converter_for(output_type: Any) -> OutputConverter[Any]:
    """The (cached) converter of ``output_type``: building the pydantic adapter and the JSON schema
    costs far more than parsing an answer, so each type is prepared once."""
    try:
        return _cached_converter(output_type)
    except TypeError:  # an unhashable type form
        return OutputConverter(output_type)


class OutputConverter(Generic[T]):
    """Turns a model answer into an instance of ``output_type`` (pydantic model, dataclass,
    TypedDict, ``list[...]``, enum, primitive...).

    >>> OutputConverter(list[int]).parse("```json\\n[1, 2]\\n```")
    [1, 2]

    A type pydantic cannot describe as JSON schema is a ChainConfigurationError (a ValueError).
    When the schema's root is a string (``str``, a str-valued enum, ``Literal["a", "b"]``, dates...),
    an answer that is not JSON is also tried as the bare string, since models often drop the quotes.
    """

    def __init__(self, output_type: type[T] | Any) -> None:
        self.output_type = output_type
        try:
            self._adapter: TypeAdapter[T] = TypeAdapter(pydantic_compatible(output_type))
            self._schema: dict[str, Any] = self._adapter.json_schema()
        except PydanticUserError as exc:
            reason = exc.message.rstrip(".")
            raise ChainConfigurationError(
                f"cannot derive a JSON schema for {_type_name(output_type)}: {reason}; use a pydantic "
                "model, dataclass, TypedDict, enum, list[...] or primitive type"
            ) from exc

    @property
    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the output type."""
        return self._schema

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
                "the model returned no text to parse as JSON", text=text, errors=EMPTY_RESPONSE_ERROR
            )
        body = extract_json(text)
        try:
            return self._adapter.validate_json(body)
        except ValidationError as exc:
            bare = self._parse_bare_string(body, exc)
            if bare is not None:
                return bare[0]
            errors = pydantic_errors(exc)
            raise StructuredOutputValidationError(
                f"the model's answer does not match {_type_name(self.output_type)}: {errors}",
                text=text,
                errors=errors,
            ) from exc

    def _parse_bare_string(self, body: str, exc: ValidationError) -> tuple[T] | None:
        """``(value,)`` when the schema's root is a string, ``body`` is not JSON and is valid as a
        bare string; else None."""
        if self._schema.get("type") != "string" or any(e["type"] != "json_invalid" for e in exc.errors()):
            return None
        try:
            return (self._adapter.validate_python(body),)
        except ValidationError:
            return None


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)
