from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from pydantic import Field

from advisorchain import ChatClient, ScriptedChatModel, StructuredOutputValidationAdvisor, tool


class Movie(TypedDict):
    """A film."""

    title: str
    year: NotRequired[int]


class Shelf(TypedDict):
    movies: list[Movie]


def test_entity_accepts_a_plain_typing_typeddict() -> None:
    model = ScriptedChatModel(['{"movies": [{"title": "Alien", "year": 1979}, {"title": "Heat"}]}'])
    shelf = ChatClient(model).prompt("Two films").call().entity(Shelf)
    assert shelf == {"movies": [{"title": "Alien", "year": 1979}, {"title": "Heat"}]}


def test_entity_of_a_list_of_typeddicts_validates_required_keys() -> None:
    import pytest

    from advisorchain import StructuredOutputValidationError

    with pytest.raises(StructuredOutputValidationError, match="title"):
        ChatClient(ScriptedChatModel(['[{"year": 1}]'])).prompt("q").call().entity(list[Movie])


def test_the_validation_advisor_takes_a_typeddict() -> None:
    advisor = StructuredOutputValidationAdvisor(output_type=Movie | None)
    model = ScriptedChatModel(['{"year": 1}', '{"title": "Heat"}'])
    assert ChatClient(model, default_advisors=[advisor]).prompt("q").call().content() == '{"title": "Heat"}'


def test_a_tool_can_take_a_typeddict_parameter() -> None:
    @tool
    def add_movie(movie: Annotated[Movie, Field(description="the film")]) -> str:
        """Add a film."""
        return movie["title"]

    schema = add_movie.definition.input_schema
    movie = schema["properties"]["movie"]
    assert movie.get("description") == "the film"
    assert "Movie" in str(schema)
