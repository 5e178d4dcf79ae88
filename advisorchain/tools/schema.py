"""Input schemas for function tools, derived from type hints via pydantic, and the parsing of the
arguments a model sends (raw JSON text) into validated Python values."""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.errors import PydanticUserError

from .._json import loads as _loads
from .._typing import pydantic_compatible
from .api import InvalidToolArgumentsError, ToolContext

__all__ = ["ToolSignature", "parse_arguments", "tool_signature"]

# Keys whose values are maps of names to schemas (the names are data, not schema keywords).
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
# Keys whose values are data (never cleaned).
_DATA_KEYS = frozenset({"default", "const", "enum", "examples"})
_UNSUPPORTED_KINDS = {
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
}


@dataclass(frozen=True, slots=True)
class ToolSignature:
    """A tool function's input: the pydantic model that validates it, its JSON schema, the
    (field, parameter) name pairs, and the parameters that receive the ToolContext."""

    model: type[BaseModel]
    schema: Mapping[str, Any]
    names: tuple[tuple[str, str], ...]
    context_params: tuple[str, ...]

    def bind(self, arguments: Mapping[str, Any], tool_name: str) -> dict[str, Any]:
        """Validate ``arguments`` and return the keyword arguments for the function (without the
        ToolContext); invalid arguments raise InvalidToolArgumentsError naming what to fix."""
        try:
            validated = self.model.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidToolArgumentsError(
                f"invalid arguments for tool {tool_name!r}: {format_validation_errors(exc)}; "
                f"fix them and call {tool_name!r} again"
            ) from exc
        return {param: getattr(validated, field) for field, param in self.names}


def parse_arguments(arguments: str | None, tool_name: str) -> dict[str, Any]:
    """The model's raw argument text as a dict; null or blank means ``{}``. Text that is not a JSON
    object raises InvalidToolArgumentsError with the parser's message and position."""
    if arguments is None or not arguments.strip():
        return {}
    try:
        value = _loads(arguments)
    except ValueError:
        value = _stdlib_read(arguments, tool_name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidToolArgumentsError(
            f"the arguments of tool {tool_name!r} must be a JSON object, got {type(value).__name__} "
            f"{_short(value)}; send one JSON object that matches the tool's input schema"
        )
    return value


def string_argument(arguments: str | None, tool_name: str, key: str) -> str:
    """The non-empty string ``key`` of a tool's JSON arguments (parsed as ``parse_arguments`` does);
    InvalidToolArgumentsError naming the key and what to send when it is missing or blank."""
    value = parse_arguments(arguments, tool_name).get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidToolArgumentsError(
            f'tool {tool_name!r} needs a non-empty string {key!r}, got {arguments!r}; send {{"{key}": "..."}}'
        )
    return value


def _stdlib_read(arguments: str, tool_name: str) -> Any:
    """``arguments`` read by the stdlib parser, whose error (message, line, column) is what the
    model is told when the text is not JSON."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise InvalidToolArgumentsError(
            f"the arguments of tool {tool_name!r} are not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}); send one strict JSON object that matches the tool's input schema: "
            "keys and strings in double quotes, no trailing commas, no comments, nothing around it"
        ) from exc


def format_validation_errors(exc: ValidationError) -> str:
    """Pydantic's errors as one line: ``field.path: message (got value)`` joined by ``; ``."""
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in error["loc"]) or "arguments"
        got = "" if error["type"] == "missing" else f" (got {_short(error.get('input'))})"
        parts.append(f"{loc}: {error['msg']}{got}")
    return "; ".join(parts)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_tool_context(annotation: Any) -> bool:
    """True for ``ToolContext``, ``ToolContext | None`` and ``Annotated[ToolContext, ...]``."""
    if annotation is ToolContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return is_tool_context(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and is_tool_context(args[0])
    return False


def tool_signature(fn: Callable[..., Any], *, skip_first: bool, tool_name: str) -> ToolSignature:
    """Build the input model and JSON schema of ``fn`` (skipping ``self`` when ``skip_first``).

    Annotated/Field descriptions, defaults, nested models and enums are honoured; a parameter
    annotated ``ToolContext`` is left out of the schema and injected at call time.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ValueError(
            f"cannot resolve the type hints of tool {tool_name!r} ({exc}); "
            "define the types it uses at module level"
        ) from exc
    params = list(inspect.signature(fn).parameters.values())[1 if skip_first else 0 :]
    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    context_params: list[str] = []
    for index, param in enumerate(params):
        if param.kind in _UNSUPPORTED_KINDS:
            raise ValueError(
                f"tool {tool_name!r} has a {_UNSUPPORTED_KINDS[param.kind]} parameter {param.name!r}; "
                "tools take named parameters only"
            )
        annotation = hints.get(param.name, Any)
        if is_tool_context(annotation):
            context_params.append(param.name)
            continue
        # Fields get neutral names and the parameter name as alias, so parameters such as `json`
        # or `schema` never shadow BaseModel attributes.
        field = f"p{index}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[field] = (Annotated[pydantic_compatible(annotation), Field(alias=param.name)], default)
        names.append((field, param.name))
    model = _create_model(tool_name, fields)
    return ToolSignature(model, _json_schema(model, tool_name), tuple(names), tuple(context_params))


def _create_model(tool_name: str, fields: dict[str, Any]) -> type[BaseModel]:
    try:
        return create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ValueError(f"cannot build the input schema of tool {tool_name!r}: {exc}") from exc


def _json_schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    try:
        schema = model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ValueError(f"cannot build the input schema of tool {tool_name!r}: {exc}") from exc
    cleaned = _without_titles(schema)
    cleaned.setdefault("properties", {})
    return cleaned  # type: ignore[no-any-return]


def _without_titles(node: Any) -> Any:
    """``node`` without the ``title`` keywords pydantic adds (they cost tokens and say nothing)."""
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYS:
            cleaned[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            cleaned[key] = {name: _without_titles(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _without_titles(value)
    return cleaned
