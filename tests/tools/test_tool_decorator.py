"""@tool and tool_callbacks: names, schemas from type hints, ToolContext injection, execution."""

import enum
import inspect
import json
import keyword
import string
import threading
from typing import Annotated, Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from advisorchain.tools.api import InvalidToolArgumentsError, ToolContext, ToolDefinition, ToolMetadata
from advisorchain.tools.function import FunctionTool, tool, tool_callbacks
from advisorchain.tools.schema import parse_arguments


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(BaseModel):
    city: str
    country: str = "FR"


class Reading(BaseModel):
    degrees: float
    unit: Unit


@tool
def forecast(
    place: Annotated[Place, Field(description="Where to look")],
    unit: Unit = Unit.CELSIUS,
    days: int | None = None,
) -> Reading:
    """Forecast for a place."""
    return Reading(degrees=21.5, unit=unit)


@tool(name="echo_context")
def context_echo(key: str, context: ToolContext) -> str:
    return f"{key}={context.get(key)}"


class WeatherTools:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @tool
    def weather(self, city: str) -> str:
        """Weather in a city."""
        return f"{self.prefix}: sunny in {city}"

    @tool(description="Temperature in a city.", return_direct=True)
    async def temperature(self, city: str) -> int:
        return 21

    def not_a_tool(self) -> str:
        return "no"


# -- declaring tools -------------------------------------------------------------------------------


def test_tool_takes_its_name_from_the_function_and_description_from_the_docstring() -> None:
    assert forecast.definition.name == "forecast"
    assert forecast.definition.description == "Forecast for a place."
    assert forecast.metadata == ToolMetadata(return_direct=False)


def test_tool_arguments_set_name_description_and_return_direct() -> None:
    @tool(name="renamed", description="Explicit.", return_direct=True)
    def original(x: int) -> int:
        return x

    assert original.definition.name == "renamed"
    assert original.definition.description == "Explicit."
    assert original.metadata.return_direct is True


def test_a_decorated_function_is_still_callable_like_the_function() -> None:
    assert forecast(Place(city="Paris")) == Reading(degrees=21.5, unit=Unit.CELSIUS)


def test_a_tool_without_docstring_is_described_by_its_name() -> None:
    assert context_echo.definition.description == "echo_context"


def test_an_invalid_tool_name_is_rejected_with_how_to_fix_it() -> None:
    with pytest.raises(ValueError, match=r"invalid tool name '<lambda>'.*@tool\(name=\.\.\.\)"):
        tool(lambda x: x)


def test_var_args_are_rejected_when_the_schema_is_built() -> None:
    @tool
    def spread(*items: str) -> str:
        return ""

    with pytest.raises(ValueError, match=r"tool 'spread' has a \*args parameter 'items'"):
        _ = spread.definition


# -- input schema ------------------------------------------------------------------------------------


def test_schema_honours_field_descriptions_and_marks_required_parameters() -> None:
    schema = forecast.definition.input_schema
    assert schema["type"] == "object"
    assert schema["properties"]["place"]["description"] == "Where to look"
    assert schema["required"] == ["place"]


def test_schema_describes_nested_models_and_enums() -> None:
    schema = forecast.definition.input_schema
    assert schema["$defs"]["Place"]["properties"]["city"] == {"type": "string"}
    assert schema["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]
    assert schema["properties"]["unit"]["default"] == "celsius"


def test_optional_parameters_with_defaults_are_nullable_and_not_required() -> None:
    days = forecast.definition.input_schema["properties"]["days"]
    assert days == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}


def test_schema_has_no_pydantic_titles_but_keeps_a_property_named_title() -> None:
    @tool
    def publish(title: str, body: str) -> str:
        return title

    schema = publish.definition.input_schema
    assert "title" not in schema
    assert schema["properties"] == {"title": {"type": "string"}, "body": {"type": "string"}}


def test_parameters_named_like_pydantic_attributes_work() -> None:
    @tool
    def store(json: str, schema: int) -> str:
        return f"{json}:{schema}"

    assert set(store.definition.input_schema["properties"]) == {"json", "schema"}


def test_tool_context_parameter_is_never_shown_to_the_model() -> None:
    assert context_echo.definition.input_schema["properties"] == {"key": {"type": "string"}}


def test_a_function_without_parameters_has_an_empty_object_schema() -> None:
    @tool
    def ping() -> str:
        return "pong"

    schema = ping.definition.input_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {}


# -- calling -----------------------------------------------------------------------------------------


async def test_arguments_are_validated_into_nested_models_and_enums() -> None:
    @tool
    def describe(place: Place, unit: Unit) -> str:
        return f"{type(place).__name__}:{place.city}:{unit.name}"

    assert await describe.call('{"place": {"city": "Oslo"}, "unit": "fahrenheit"}', None) == (
        "Place:Oslo:FAHRENHEIT"
    )


async def test_tool_context_is_injected() -> None:
    assert await context_echo.call('{"key": "user"}', ToolContext({"user": "ada"})) == "user=ada"


async def test_a_missing_tool_context_is_injected_as_an_empty_one() -> None:
    assert await context_echo.call('{"key": "user"}', None) == "user=None"


async def test_non_str_results_are_json_encoded() -> None:
    assert json.loads(await forecast.call('{"place": {"city": "Oslo"}}', None)) == {
        "degrees": 21.5,
        "unit": "celsius",
    }


async def test_a_none_result_becomes_an_empty_text() -> None:
    @tool
    def forget(key: str) -> None:
        return None

    assert await forget.call('{"key": "k"}', None) == ""


async def test_sync_tools_run_in_a_worker_thread() -> None:
    @tool
    def where() -> str:
        return threading.current_thread().name

    assert await where.call("{}", None) != threading.current_thread().name


async def test_async_tools_run_on_the_event_loop() -> None:
    @tool
    async def where() -> str:
        return threading.current_thread().name

    assert await where.call("{}", None) == threading.current_thread().name


async def test_blank_and_null_arguments_mean_no_arguments() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert [await ping.call(a, None) for a in ("", "  ", "null")] == ["pong", "pong", "pong"]


async def test_schema_invalid_arguments_raise_naming_the_field_and_the_fix() -> None:
    with pytest.raises(InvalidToolArgumentsError) as info:
        await forecast.call('{"place": {"country": "NO"}, "days": "soon", "extra": 1}', None)
    message = str(info.value)
    assert message.startswith("invalid arguments for tool 'forecast': place.city: Field required; ")
    assert (
        "days: Input should be a valid integer, unable to parse string as an integer (got 'soon')" in message
    )
    assert "extra: Extra inputs are not permitted (got 1)" in message
    assert message.endswith("fix them and call 'forecast' again")


# -- methods and tool_callbacks ----------------------------------------------------------------------


async def test_method_tools_are_bound_to_their_instance() -> None:
    callbacks = tool_callbacks(WeatherTools("north"))
    weather = callbacks[0]
    assert await weather.call('{"city": "Oslo"}', None) == "north: sunny in Oslo"
    assert weather.definition.input_schema["properties"] == {"city": {"type": "string"}}


def test_tool_callbacks_collects_the_tool_methods_of_an_object_in_definition_order() -> None:
    callbacks = tool_callbacks(WeatherTools("x"))
    assert [cb.definition.name for cb in callbacks] == ["weather", "temperature"]
    assert [cb.metadata.return_direct for cb in callbacks] == [False, True]


def test_a_bound_method_tool_is_callable_like_the_method() -> None:
    assert WeatherTools("east").weather("Rome") == "east: sunny in Rome"


def test_tool_callbacks_accepts_functions_tools_callbacks_and_lists() -> None:
    def plain(x: int) -> int:
        """Plain function."""
        return x

    callbacks = tool_callbacks(forecast, plain, [context_echo], *tool_callbacks(WeatherTools("x")))
    assert [cb.definition.name for cb in callbacks] == [
        "forecast",
        "plain",
        "echo_context",
        "weather",
        "temperature",
    ]
    assert isinstance(callbacks[1], FunctionTool)


def test_tool_callbacks_accepts_an_object_with_a_tool_callbacks_method() -> None:
    class Provider:
        def tool_callbacks(self) -> list[Any]:
            return [forecast]

    assert tool_callbacks(Provider()) == [forecast]


def test_tool_callbacks_accepts_any_tool_callback() -> None:
    class Custom:
        definition = ToolDefinition("custom", "A custom tool.")
        metadata = ToolMetadata()

        async def call(self, arguments: str, context: ToolContext | None) -> str:
            return "custom"

    custom = Custom()
    assert tool_callbacks(custom) == [custom]


def test_duplicate_tool_names_raise_naming_the_name() -> None:
    @tool(name="forecast")
    def other() -> str:
        return ""

    with pytest.raises(ValueError, match=r"two tools are named 'forecast'.*rename one"):
        tool_callbacks(forecast, other)


def test_an_object_without_tools_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"is not a tool: pass a function, a ToolCallback"):
        tool_callbacks(object())


def test_a_tool_method_read_from_its_class_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"tool 'weather' is a method read from its class; pass an instance"):
        tool_callbacks(WeatherTools.weather)


# -- properties --------------------------------------------------------------------------------------

_TYPES: dict[type, st.SearchStrategy[Any]] = {
    int: st.integers(),
    str: st.text(max_size=20),
    bool: st.booleans(),
    float: st.floats(allow_nan=False, allow_infinity=False),
    list: st.lists(st.integers(), max_size=5),
}
_NAMES = st.text(string.ascii_lowercase + "_", min_size=1, max_size=12).filter(
    lambda n: n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_")
)


@st.composite
def _signatures(draw: st.DrawFn) -> tuple[list[tuple[str, type, bool]], dict[str, Any]]:
    names = draw(st.lists(_NAMES, min_size=0, max_size=6, unique=True))
    params = [(n, draw(st.sampled_from(list(_TYPES))), draw(st.booleans())) for n in names]
    values = {n: draw(_TYPES[t]) for n, t, optional in params if not optional or draw(st.booleans())}
    return params, values


def _annotation(kind: type, optional: bool) -> Any:
    annotation: Any = list[int] if kind is list else kind
    return annotation | None if optional else annotation


def _echo_tool(params: list[tuple[str, type, bool]]) -> FunctionTool[..., Any]:
    def echo(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    echo.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                n, inspect.Parameter.KEYWORD_ONLY, default=None if opt else inspect.Parameter.empty
            )
            for n, _, opt in params
        ]
    )
    echo.__annotations__ = {n: _annotation(t, optional) for n, t, optional in params}
    return tool(echo)


@settings(max_examples=60, deadline=None)
@given(_signatures())
def test_schema_lists_every_parameter_and_requires_those_without_defaults(
    case: tuple[list[tuple[str, type, bool]], dict[str, Any]],
) -> None:
    params, _ = case
    schema = _echo_tool(params).definition.input_schema
    assert list(schema["properties"]) == [n for n, _, _ in params]
    assert schema.get("required", []) == [n for n, _, optional in params if not optional]


@settings(max_examples=60, deadline=None)
@given(_signatures())
async def test_valid_arguments_reach_the_function_unchanged(
    case: tuple[list[tuple[str, type, bool]], dict[str, Any]],
) -> None:
    params, values = case
    result = json.loads(await _echo_tool(params).call(json.dumps(values), None))
    expected = {n: values.get(n) for n, _, _ in params}
    assert result == expected


@given(st.dictionaries(_NAMES, st.integers() | st.text(max_size=10), max_size=5))
def test_any_json_object_parses_to_the_same_dict(value: dict[str, Any]) -> None:
    assert parse_arguments(json.dumps(value), "t") == value


@given(st.integers() | st.text(max_size=10) | st.lists(st.integers(), max_size=3) | st.booleans())
def test_json_that_is_not_an_object_is_rejected_naming_its_type(value: Any) -> None:
    with pytest.raises(InvalidToolArgumentsError, match=r"arguments of tool 't' must be a JSON object, got "):
        parse_arguments(json.dumps(value), "t")


@given(st.text(min_size=1, max_size=30))
def test_text_that_is_not_json_is_rejected_with_the_parser_position(text: str) -> None:
    assume(text.strip() and not _is_json(text))
    with pytest.raises(InvalidToolArgumentsError, match=r"are not valid JSON \(.* at line \d+ column \d+\)"):
        parse_arguments(text, "t")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
