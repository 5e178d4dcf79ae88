"""OpenAI Chat Completions over the official ``openai`` SDK — and so any OpenAI-compatible server
(Ollama, vLLM, llama.cpp, Groq, DeepSeek, OpenRouter, Gemini's compatibility endpoint...).

>>> model = OpenAIChatModel("gpt-4o-mini")                      # key from OPENAI_API_KEY
>>> local = OpenAIChatModel("llama3.2", base_url="http://localhost:11434/v1")   # Ollama

The adapter maps messages and options to the wire format and back; it never executes tools.
Retries with backoff are the SDK's own (``max_retries``; or wrap the model in
``advisorchain.models.RetryChatModel``). Quirks of real servers are absorbed:
empty tool-call ids get a made-up id, ``content: ""`` and ``null`` both mean "no text",
``tool_calls: null``/``[]`` mean none, ``reasoning_content``/``reasoning`` go to the message
metadata (never into the text), errors inside a 200 stream become ``ModelError``, and a missing
finish reason is reported as ``"stop"`` (``"tool_calls"`` when the model called tools) — but only
for an answer the server marked complete: a stream that ends with neither a ``finish_reason`` nor
``[DONE]``, or an answer without choices, is a ``ModelError``, never a short answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._built import answer, text_delta, tool_call
from .._tool_types import ToolDefinition
from ..errors import ModelError
from ..messages import (
    AssistantMessage,
    Message,
    ToolCall,
)
from ..model import ChatResponse, ChatResponseMetadata, Generation, Prompt, Usage
from ._base import StreamAssembly
from ._common import (
    as_str,
    finish_reason_or_default,
    new_tool_call_id,
    openai_usage,
    option_params,
    read_dict,
    read_list,
    request_params,
    schema_name,
)
from ._http.failures import incomplete_answer, model_error, not_an_object
from ._http.sse import DONE as _DONE
from ._http.wire import HISTORY
from ._media import openai_chat_parts
from ._openai_base import MessageWire, OpenAIHttpModel
from .clients import OPENAI, require_sdk

require_sdk(__name__, OPENAI)  # found here; imported on first use (see _clients)

__all__ = ["OpenAIChatModel", "OpenAIResponsesChatModel", "parse_completion", "to_openai_messages"]

_REASONING_FIELDS = ("reasoning_content", "reasoning")


# -- request ---------------------------------------------------------------------------------------


def _function_tools(definitions: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": d.name, "description": d.description, "parameters": d.input_schema},
        }
        for d in definitions
    ]


def _response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name(schema), "schema": dict(schema), "strict": False},
    }


def to_openai_messages(messages: Sequence[Message], *, replay_reasoning: bool = True) -> list[dict[str, Any]]:
    """Chat Completions messages for ``messages``: one ``role=tool`` message per ToolResponse."""
    return [item for message in messages for item in _CHAT_MESSAGES.items(message, replay_reasoning)]


def _tool_message(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _assistant_message(message: AssistantMessage, replay_reasoning: bool) -> tuple[dict[str, Any]]:
    param: dict[str, Any] = {"role": "assistant"}
    if message.text is not None or not message.tool_calls:
        param["content"] = message.text or ""
    if message.tool_calls:
        param["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    # Only reasoning that came from a Chat Completions server (it names its field) goes back:
    # another provider's thinking would be an unknown field here.
    reasoning = message.metadata.get("reasoning")
    wire_field = message.metadata.get("reasoning_field")
    if replay_reasoning and isinstance(reasoning, str) and wire_field in _REASONING_FIELDS:
        param[wire_field] = reasoning
    return (param,)


_CHAT_MESSAGES = MessageWire("text", openai_chat_parts, _tool_message, _assistant_message)
"""Chat Completions messages: a ``role=tool`` message per tool response."""


class OpenAIChatModel(OpenAIHttpModel):
    """A ChatModel for the Chat Completions API of OpenAI or any OpenAI-compatible server.

    ``client`` is an ``openai.AsyncOpenAI`` you built yourself; otherwise one is built from
    ``base_url`` and ``api_key`` (the SDK falls back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``;
    with a ``base_url`` and no key at all, as local servers need none, a placeholder is sent) with
    ``max_retries`` for the SDK's retry with backoff. ``**defaults`` are request parameters sent with
    every call (``temperature=0``, ``reasoning_effort="low"``, ``extra_headers={...}``...);
    ``ChatOptions`` of a prompt override them and ``ChatOptions.extra`` overrides both. A ``None``
    value removes a parameter (``stream_options=None`` for servers that reject it).

    ``ChatOptions.max_tokens`` goes to OpenAI's own API (``api.openai.com``) as
    ``max_completion_tokens`` — its reasoning models refuse ``max_tokens``, deprecated there — and
    to any other server as ``max_tokens``, which OpenAI-compatible servers read. The request's cap
    (a usage limit's lowered one included) is then the only one sent: the other name, when the
    defaults give it, is left out.

    ``replay_reasoning`` sends a reasoning text the server returned (``reasoning_content`` or
    ``reasoning``, kept in ``AssistantMessage.metadata``) back with that assistant message, as
    DeepSeek's thinking mode requires in tool loops.
    """

    _ENDPOINT = "/chat/completions"
    _HISTORY_KEY = "messages"
    _MESSAGES = _CHAT_MESSAGES
    _tool_params = staticmethod(_function_tools)

    def _parse(self, data: dict[str, Any], url: str) -> ChatResponse:
        data = _checked(data, "the response body", self.provider)
        if not read_list(data.get("choices")):
            raise incomplete_answer(self.provider, url, "the response has no choices", body=data)
        return parse_completion(data)

    def _assembly(self, url: str) -> StreamAssembly:
        return StreamAssembler(provider=self.provider, url=url)

    @cached_property
    def _max_tokens_fields(self) -> tuple[str, str]:
        """(the field ``ChatOptions.max_tokens`` goes in, the other name of that cap):
        ``max_completion_tokens`` on OpenAI's own host, ``max_tokens`` on any other server."""
        if self._own_host == "openai":
            return "max_completion_tokens", "max_tokens"
        return "max_tokens", "max_completion_tokens"

    def _params(self, prompt: Prompt, stream: bool, *, spliced: bool = True) -> dict[str, Any]:
        base: dict[str, Any] = {"model": self.model_name, "messages": HISTORY}
        if stream:
            base["stream_options"] = {"include_usage": True}
        options = prompt.options
        field, other = self._max_tokens_fields
        request = option_params(prompt, max_tokens_key=field, stop_key="stop")
        if field in request and other in self.defaults:
            request[other] = None  # removed: one cap, the request's
        tools = self._tools(prompt, spliced=spliced)
        if tools is not None:
            request["tools"] = tools
        if options is not None and options.output_schema is not None:
            request["response_format"] = _response_format(options.output_schema)
        request.update(self._cache_key_params(prompt))
        return request_params(base, self.defaults, request, prompt)


def _checked(data: object, what: str, provider: str) -> dict[str, Any]:
    """``data`` when it is a JSON object without an ``error``; otherwise a ModelError."""
    if not isinstance(data, dict):
        raise not_an_object(provider, what, data)
    error = data.get("error")
    if error is not None:
        raise model_error(provider, error=error if isinstance(error, dict) else data)
    return data


def _stream_error(data: object, provider: str) -> ModelError:
    """The ModelError for an ``event: error`` frame of a stream (its ``error`` object when it has one)."""
    error = read_dict(data).get("error")
    return model_error(provider, error=error if isinstance(error, dict) else data)


# -- response --------------------------------------------------------------------------------------


def parse_completion(data: Mapping[str, Any]) -> ChatResponse:
    """A ChatResponse from a Chat Completions response body (one generation per choice)."""
    generations = tuple(_generation(read_dict(choice)) for choice in read_list(data.get("choices")))
    finish = generations[0].finish_reason if generations else None
    return ChatResponse(
        generations,
        ChatResponseMetadata(
            id=as_str(data.get("id")) or None,
            model=as_str(data.get("model")) or None,
            usage=parse_usage(data.get("usage")),
            finish_reason=finish,
        ),
    )


def _generation(choice: Mapping[str, Any]) -> Generation:
    message = read_dict(choice.get("message"))
    calls = tuple(_tool_call(read_dict(c)) for c in read_list(message.get("tool_calls")))
    metadata = _reasoning_metadata(message)
    refusal = as_str(message.get("refusal"))
    if refusal:
        metadata["refusal"] = refusal
    finish = finish_reason_or_default(as_str(choice.get("finish_reason")), bool(calls))
    # A fresh metadata dict and a tuple of calls: built as the constructors would build them.
    return answer(_content_text(message.get("content")), calls, metadata, finish)


def _content_text(content: object) -> str | None:
    if isinstance(content, list):
        parts = [
            as_str(read_dict(p).get("text")) or "" for p in content if read_dict(p).get("type") == "text"
        ]
        content = "".join(parts)
    return content if isinstance(content, str) and content else None


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    if call.get("type") == "custom":
        custom = read_dict(call.get("custom"))
        name, arguments = as_str(custom.get("name")), as_str(custom.get("input"))
    else:
        function = read_dict(call.get("function"))
        name, arguments = as_str(function.get("name")), as_str(function.get("arguments"))
    return tool_call(as_str(call.get("id")) or new_tool_call_id(), name or "", arguments or "")


def _reasoning_metadata(message: Mapping[str, Any]) -> dict[str, Any]:
    for wire_field in _REASONING_FIELDS:
        text = as_str(message.get(wire_field))
        if text:
            return {"reasoning": text, "reasoning_field": wire_field}
    return {}


def parse_usage(usage: object) -> Usage | None:
    """Usage from a Chat Completions ``usage`` object (the cached prompt tokens from
    ``prompt_tokens_details.cached_tokens``), or None when there is none."""
    return openai_usage(usage, "prompt_tokens", "completion_tokens")


# -- stream ----------------------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add(self, delta: Mapping[str, Any]) -> None:
        self.id = self.id or as_str(delta.get("id")) or ""
        function = read_dict(delta.get("function"))
        self.name += as_str(function.get("name")) or ""
        self.arguments.append(as_str(function.get("arguments")) or "")

    def done(self) -> ToolCall:
        return ToolCall(self.id or new_tool_call_id(), self.name, "".join(self.arguments))


@dataclass
class StreamAssembler:
    """Assembles Chat Completions stream chunks (parsed JSON) of the first choice: text deltas go
    out at once; tool-call deltas are joined by index into whole calls for the final chunk."""

    id: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str | None = None
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    done: bool = False
    """True once ``[DONE]`` came (the server's end-of-stream marker)."""
    choices_seen: bool = False
    provider: str = "openai"
    url: str | None = None
    """Where the stream comes from (named in its errors)."""
    _text_metadata: ChatResponseMetadata | None = field(default=None, repr=False, compare=False)

    def feed_events(self, events: Iterable[tuple[str, object]]) -> list[str]:
        """Take in decoded events in order (none after ``[DONE]``); their text deltas. An error
        event, or a chunk carrying an ``error``, raises its ModelError."""
        texts: list[str] = []
        for event, data in events:
            if event == "error":
                raise _stream_error(data, self.provider)
            text = self.feed(data if data is _DONE else _checked(data, "a stream event", self.provider))
            if text:
                texts.append(text)
            if self.done:
                break
        return texts

    def feed(self, chunk: object) -> str | None:
        """Take in one chunk (or the ``[DONE]`` marker); returns its text delta (or None)."""
        if chunk is _DONE:
            self.done = True
            return None
        if type(chunk) is not dict and not isinstance(chunk, Mapping):
            return None
        # Once per delta: read in place, copy nothing (the chunk is this stream's own parsed JSON).
        if self.id is None:
            self.id = as_str(chunk.get("id")) or None
            self._text_metadata = None
        if self.model is None:
            self.model = as_str(chunk.get("model")) or None
            self._text_metadata = None
        usage = chunk.get("usage")
        if usage:
            self.usage = parse_usage(usage) or self.usage
            self._text_metadata = None
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list | tuple):
            return None
        self.choices_seen = True
        choice = choices[0]
        if type(choice) is not dict or choice.get("index", 0) != 0:
            choice = next((c for c in choices if isinstance(c, Mapping) and c.get("index", 0) == 0), None)
            if choice is None:
                return None
        finish = choice.get("finish_reason")
        if finish and isinstance(finish, str):
            self.finish_reason = finish
        delta = choice.get("delta")
        if type(delta) is not dict and not isinstance(delta, Mapping):
            return None
        if "reasoning_content" in delta or "reasoning" in delta:
            self._add_reasoning(delta)
        calls = delta.get("tool_calls")
        if calls and isinstance(calls, list | tuple):
            for call in calls:
                self._add_call(read_dict(call))
        content = delta.get("content")
        if type(content) is str:
            return content or None
        return _content_text(content)

    def _add_reasoning(self, delta: Mapping[str, Any]) -> None:
        for wire_field in _REASONING_FIELDS:
            text = as_str(delta.get(wire_field))
            if text:
                self.reasoning.append(text)
                self.reasoning_field = self.reasoning_field or wire_field

    def _add_call(self, delta: Mapping[str, Any]) -> None:
        index = delta.get("index")
        if not isinstance(index, int):
            # No index (some servers): a delta with an id or a name starts a new call.
            starts = bool(delta.get("id")) or bool(read_dict(delta.get("function")).get("name"))
            index = len(self.calls) if starts or not self.calls else max(self.calls)
        self.calls.setdefault(index, _PartialCall()).add(delta)

    def _metadata(self, finish: str | None) -> ChatResponseMetadata:
        return ChatResponseMetadata(id=self.id, model=self.model, usage=self.usage, finish_reason=finish)

    def check_complete(self, provider: str, url: str | None = None) -> None:
        """Raise a ModelError unless the server marked the answer complete: a chunk with a
        ``finish_reason`` or the ``[DONE]`` marker (some servers send only one), and some choice."""
        if not self.done and self.finish_reason is None:
            what = "tool-call arguments cut off" if self.calls else "the answer cut off"
            raise incomplete_answer(
                provider, url, f"the stream ended with no finish_reason and no [DONE]: {what}"
            )
        if not self.choices_seen:
            raise incomplete_answer(provider, url, "the stream had no choices")

    def complete(self) -> ChatResponse:
        """The last chunk, once the stream is checked complete (``check_complete``)."""
        self.check_complete(self.provider, self.url)
        return self.final()

    def text_chunk(self, text: str) -> ChatResponse:
        """A chunk carrying one text delta."""
        # One metadata object for the deltas that share it (it is frozen); ``feed`` forgets it
        # when the id, model or usage it holds changes.
        metadata = self._text_metadata
        if metadata is None:
            metadata = self._text_metadata = self._metadata(None)
        return text_delta(text, metadata)

    def final(self) -> ChatResponse:
        """The last chunk: whole tool calls, finish reason, usage, reasoning metadata."""
        calls = tuple(self.calls[i].done() for i in sorted(self.calls))
        metadata: dict[str, Any] = {}
        if self.reasoning:
            metadata = {"reasoning": "".join(self.reasoning), "reasoning_field": self.reasoning_field}
        finish = finish_reason_or_default(self.finish_reason, bool(calls))
        return ChatResponse(
            (Generation(AssistantMessage(None, calls, metadata), finish),), self._metadata(finish)
        )


# The Responses API adapter lives in its own module and is importable from here too (API.md §8). It
# imports this module's helpers lazily, so either module can be imported first.
from .openai_responses import OpenAIResponsesChatModel  # noqa: E402
