"""Targets and small helpers shared by the structured-output tests."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from advisorchain.client import ChatClient
from advisorchain.messages import AssistantMessage, ToolCall
from advisorchain.model import ChatResponse, Usage
from advisorchain.tools.api import ToolContext, ToolDefinition, ToolMetadata

FEEDBACK = "Output JSON validation failed because of: "

VALID_PERSON = '{"name": "Ann", "age": 31}'

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


class Person(BaseModel):
    """A strict target: unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid")

    name: str
    age: int


class Team(BaseModel):
    name: str
    members: list[Person]


@dataclass(frozen=True)
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def client(model: object, **kwargs: Any) -> ChatClient:
    """A client without the auto-registered tool loop, so these tests need only this feature."""
    return ChatClient(model, tool_calling_auto_register=False, **kwargs)  # type: ignore[arg-type]


def with_usage(text: str, prompt_tokens: int, completion_tokens: int) -> ChatResponse:
    """A plain answer that reports its token usage."""
    return ChatResponse.of(AssistantMessage(text), "stop", Usage(prompt_tokens, completion_tokens))


def tool_call_message(
    name: str = "lookup", arguments: str = "{}", call_id: str = "call-1"
) -> AssistantMessage:
    """An assistant message asking for one tool call."""
    return AssistantMessage(None, (ToolCall(call_id, name, arguments),))


class LookupTool:
    """A hand-written ToolCallback that answers every call with the same text and counts calls."""

    def __init__(self, answer: str = "Ann is 31") -> None:
        self.answer = answer
        self.calls: list[str] = []

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition("lookup", "Looks a person up.")

    @property
    def metadata(self) -> ToolMetadata:
        return ToolMetadata()

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        self.calls.append(arguments)
        return self.answer
