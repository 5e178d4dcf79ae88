"""StructuredOutputValidationAdvisor: validates the model's JSON answer against a schema and asks
again, with the validation errors, until the answer is valid or the attempts run out.

It is a recursive advisor: each attempt runs ``chain.copy(self)`` (the advisors after it and the
model). Inside a tool loop it sees every iteration; a response that asks for tools is passed
through unvalidated, so only final answers are checked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

import jsonschema
import jsonschema.validators
import referencing.exceptions

from .._checks import check_int
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import STRUCTURED_OUTPUT_ORDER, check_order
from ..errors import ChainConfigurationError, StructuredOutputValidationError
from ..model import ChatClientRequest, ChatClientResponse, ChatResponse, with_total_usage
from ..output import (
    EMPTY_RESPONSE_ERROR,
    OutputConverter,
    converter_for,
    error_path,
    extract_json,
    join_errors,
)
from .attempts import Attempt, accepted_answer, accepted_chunks, usage_of

__all__ = ["StructuredOutputValidationAdvisor"]

R = TypeVar("R")


class _Check(Protocol):
    @property
    def json_schema(self) -> Mapping[str, Any]: ...

    def errors(self, text: str | None) -> str | None: ...


class _TypeCheck:
    """Validates with pydantic against a Python type."""

    def __init__(self, output_type: Any) -> None:
        self._converter: OutputConverter[Any] = converter_for(output_type)

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self._converter.json_schema

    def errors(self, text: str | None) -> str | None:
        return self._converter.errors(text)


class _SchemaCheck:
    """Validates with jsonschema against a supplied JSON Schema (the validator class its
    ``$schema`` names, Draft 2020-12 when it names none)."""

    def __init__(self, schema: str | Mapping[str, Any]) -> None:
        self._schema = _load_schema(schema)
        cls = _validator_class(self._schema)
        try:
            cls.check_schema(self._schema)
        except jsonschema.SchemaError as exc:
            raise ChainConfigurationError(
                f"output_json_schema is not a valid JSON Schema: {error_path(exc.absolute_path)}: "
                f"{exc.message}"
            ) from None
        self._validator = cls(self._schema, format_checker=cls.FORMAT_CHECKER)

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self._schema

    def errors(self, text: str | None) -> str | None:
        if text is None or not text.strip():
            return EMPTY_RESPONSE_ERROR
        try:
            instance = json.loads(extract_json(text))
        except json.JSONDecodeError as exc:
            return f"<root>: Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        except RecursionError:
            return "<root>: Invalid JSON: nested too deeply"
        try:
            found = sorted(self._validator.iter_errors(instance), key=_error_sort_key)
        except referencing.exceptions.Unresolvable as exc:
            raise ChainConfigurationError(
                f"output_json_schema has a $ref that cannot be resolved: {exc}; "
                "keep definitions in the schema itself (e.g. under $defs)"
            ) from exc
        if not found:
            return None
        return join_errors(f"{error_path(e.absolute_path)}: {e.message}" for e in found)


def _error_sort_key(error: jsonschema.ValidationError) -> tuple[str, str]:
    return (error_path(error.absolute_path), error.message)


def _load_schema(schema: object) -> dict[str, Any]:
    """The schema as plain JSON data (a deep copy), or ChainConfigurationError."""
    if isinstance(schema, str):
        try:
            loaded = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ChainConfigurationError(
                f"output_json_schema is not valid JSON ({exc.msg} at line {exc.lineno} column "
                f"{exc.colno}): {schema[:200]!r}"
            ) from None
    elif isinstance(schema, Mapping):
        try:
            loaded = json.loads(json.dumps(schema))
        except (TypeError, ValueError) as exc:
            raise ChainConfigurationError(f"output_json_schema must hold only JSON values: {exc}") from None
    else:
        raise ChainConfigurationError(
            f"output_json_schema must be a JSON Schema as a str or a Mapping, got {schema!r}"
        )
    if not isinstance(loaded, dict):
        raise ChainConfigurationError(f"output_json_schema must be a JSON object, got {loaded!r}")
    return loaded


def _validator_class(schema: dict[str, Any]) -> type[jsonschema.protocols.Validator]:
    if not isinstance(schema.get("$schema", ""), str):
        raise ChainConfigurationError(
            f"output_json_schema has $schema {schema['$schema']!r}; it must be a meta-schema URI string"
        )
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _make_check(output_type: Any, output_json_schema: str | Mapping[str, Any] | None) -> _Check:
    if (output_type is None) == (output_json_schema is None):
        given = "both" if output_type is not None else "neither"
        raise ChainConfigurationError(
            "StructuredOutputValidationAdvisor needs exactly one of output_type and "
            f"output_json_schema; {given} was given"
        )
    if output_type is not None:
        return _TypeCheck(output_type)
    assert output_json_schema is not None
    return _SchemaCheck(output_json_schema)


class StructuredOutputValidationAdvisor:
    """Validates the model's answer as JSON against a schema and retries with the errors.

    Give exactly one schema source: ``output_type`` (any type pydantic can validate; its JSON
    schema is derived with pydantic and answers are validated with a pydantic TypeAdapter) or
    ``output_json_schema`` (a JSON Schema as a str or Mapping, validated with ``jsonschema``).
    An answer may be wrapped in a ```json fenced block. When it is invalid the advisor calls the
    rest of the chain again with the original prompt whose last user message gets
    ``"\\nOutput JSON validation failed because of: <errors>"`` appended (only the newest errors,
    never the invalid answer), at most ``max_repeat_attempts`` times; then it raises
    StructuredOutputValidationError with the last text and errors. A response that asks for tools
    is passed through unvalidated. The returned response's usage is the sum over all attempts.

    On the stream path each attempt is buffered; only a valid answer (or a tool-call iteration)
    reaches the consumer, as the chunks the model streamed, so invalid attempts are never seen.

    The advisor does not add format instructions itself: ``entity(T)`` does, or your prompt does.

    >>> advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=2)
    >>> ChatClient(model, default_advisors=[advisor]).prompt("A person as JSON").call().content()
    """

    DEFAULT_ORDER: ClassVar[int] = STRUCTURED_OUTPUT_ORDER
    """Late (inner): inside a tool loop, so each final answer of the loop is validated."""

    VALIDATION_FEEDBACK: ClassVar[str] = "Output JSON validation failed because of: "
    """The text put before the errors in the retry prompt."""

    def __init__(
        self,
        output_type: Any = None,
        output_json_schema: str | Mapping[str, Any] | None = None,
        max_repeat_attempts: int = 3,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self._max_repeat_attempts = check_int(max_repeat_attempts, "max_repeat_attempts", minimum=0)
        self.order = check_order(order, inside=True)
        self._output_type = output_type
        self._check = _make_check(output_type, output_json_schema)

    @property
    def name(self) -> str:
        """``"Structured Output Validation Advisor"``."""
        return "Structured Output Validation Advisor"

    @property
    def output_type(self) -> Any:
        """The type answers are validated against, or None when a JSON schema was supplied."""
        return self._output_type

    @property
    def json_schema(self) -> Mapping[str, Any]:
        """The JSON schema answers are validated against (derived from ``output_type`` or supplied)."""
        return self._check.json_schema

    @property
    def max_repeat_attempts(self) -> int:
        """How many times the advisor asks again after an invalid answer."""
        return self._max_repeat_attempts

    def validation_errors(self, text: str | None) -> str | None:
        """None when ``text`` is a valid answer, else the errors (``path: message``, ``"; "``-joined)."""
        return self._check.errors(text)

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """Call the rest of the chain until the answer validates, at most 1 + max_repeat_attempts times."""
        return await accepted_answer(self._until_valid, request, chain.copy(self))

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Buffer each attempt; emit the chunks of the first valid answer (or tool-call iteration)."""
        return accepted_chunks(self._until_valid, request, chain.copy(self))

    async def _until_valid(
        self, request: ChatClientRequest, attempt: Attempt[R]
    ) -> tuple[ChatClientResponse, R]:
        """The retry loop both paths share: run ``attempt`` until its answer validates (or asks for
        tools); the returned response carries the usage summed over every attempt."""
        retry, usages = request, []
        text, errors = None, ""
        for _ in range(1 + self._max_repeat_attempts):
            response, extra = await attempt(retry)
            usages.append(usage_of(response))
            chat = response.chat_response
            outcome = self._errors_of(chat)
            if outcome is None:
                return (response if len(usages) == 1 else with_total_usage(response, usages)), extra
            text, errors = (chat.text if chat is not None else None), outcome
            retry = request.copy(
                prompt=request.prompt.with_text_appended_to_last_user(self.VALIDATION_FEEDBACK + errors)
            )
        raise self._exhausted(text, errors)

    def _errors_of(self, chat: ChatResponse | None) -> str | None:
        """None when the response is valid or asks for tools; else the validation errors."""
        if chat is not None and chat.has_tool_calls():
            return None
        return self.validation_errors(chat.text if chat is not None else None)

    def _exhausted(self, text: str | None, errors: str) -> StructuredOutputValidationError:
        attempts = 1 + self._max_repeat_attempts
        return StructuredOutputValidationError(
            f"the model's answer is still not valid JSON for the output schema after {attempts} "
            f"attempt{'s' if attempts > 1 else ''} (max_repeat_attempts={self._max_repeat_attempts}): "
            f"{errors}",
            text=text,
            errors=errors,
        )

    def __repr__(self) -> str:
        source = (
            f"output_type={self._output_type!r}"
            if self._output_type is not None
            else "output_json_schema=..."
        )
        return (
            f"StructuredOutputValidationAdvisor({source}, max_repeat_attempts={self._max_repeat_attempts}, "
            f"order={self.order})"
        )
