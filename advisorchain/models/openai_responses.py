"""OpenAI's Responses API (``POST /v1/responses``) over the official ``openai`` SDK.

>>> model = OpenAIResponsesChatModel("gpt-5-mini")               # key from OPENAI_API_KEY

Importable from ``advisorchain.models.openai`` too. The mapping:

* System, user, assistant and tool messages become ``input`` items: role messages, one
  ``function_call`` item per ToolCall (its ``call_id`` is the ToolCall id) and one
  ``function_call_output`` item per ToolResponse. Media of a user message become ``input_image`` /
  ``input_file`` parts.
* Tools are ``{"type": "function", ...}`` entries (``strict: false``: the API's strict default
  would reject ordinary schemas); ``ChatOptions.output_schema`` becomes ``text.format`` with a
  native JSON schema; ``max_tokens`` is ``max_output_tokens``.
* Output items that are not plain text or function calls (``reasoning`` above all) are kept, in
  order, in ``AssistantMessage.metadata["openai_output"]`` and sent back with that message on
  the next request, so reasoning carries across the rounds of a tool loop. The reasoning summary
  text is also in ``metadata["reasoning"]``. For stateless use (``store=False``) ask for the
  encrypted reasoning: ``OpenAIResponsesChatModel(..., store=False,
  include=["reasoning.encrypted_content"])``, or send none: ``replay_reasoning=False``.
* An answer the API did not complete — status ``incomplete`` or ``failed``, a stream that ends
  without ``response.completed`` — is a ModelError, never a short answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._built import text_delta
from .._tool_types import ToolDefinition
from ..errors import IncompleteAnswerError, ModelError, UnsupportedRequestError
from ..messages import (
    AssistantMessage,
    Message,
    ToolCall,
)
from ..model import ChatResponse, ChatResponseMetadata, Generation, Prompt, Usage
from ._base import StreamAssembly
from ._common import (
    as_dict,
    as_int,
    as_list,
    as_str,
    finish_reason_or_default,
    new_tool_call_id,
    openai_usage,
    option_params,
    request_params,
    schema_name,
)
from ._http.failures import incomplete_answer, model_error, not_an_object
from ._http.sse import DONE
from ._http.wire import HISTORY
from ._media import responses_parts
from ._openai_base import MessageWire, OpenAIHttpModel
from .clients import OPENAI, require_sdk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

require_sdk(__name__, OPENAI)  # found here; imported on first use (see _clients)

__all__ = ["OpenAIResponsesChatModel", "ResponsesStreamAssembler", "parse_response", "to_responses_input"]

STORED_OUTPUT_KEY = "openai_output"
"""The ``AssistantMessage.metadata`` key holding the output items sent back on the next request."""

# The fields an output item may carry back as an input item, per item type.
_REQUEST_FIELDS = {
    "reasoning": ("type", "id", "summary", "encrypted_content", "content"),
    "message": ("type", "id", "role", "content", "status"),
    "function_call": ("type", "id", "call_id", "name", "arguments"),
}
_PLAIN_TYPES = ("message", "function_call")


# -- request ---------------------------------------------------------------------------------------


def _function_tools(definitions: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Function tools, not strict (the API's strict default would reject ordinary schemas)."""
    return [
        {
            "type": "function",
            "name": d.name,
            "description": d.description,
            "parameters": dict(d.input_schema),
            "strict": False,
        }
        for d in definitions
    ]


def _json_schema_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "name": schema_name(schema), "schema": dict(schema), "strict": False}


def to_responses_input(messages: Sequence[Message], *, replay_reasoning: bool = True) -> list[dict[str, Any]]:
    """Responses API ``input`` items for ``messages`` (with ``replay_reasoning=False``, an assistant
    message as its own text and tool calls, without the output items kept from its answer)."""
    return [item for message in messages for item in _RESPONSES_INPUT.items(message, replay_reasoning)]


def _call_output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _assistant_items(message: AssistantMessage, replay_reasoning: bool) -> tuple[dict[str, Any], ...]:
    kept = message.metadata.get(STORED_OUTPUT_KEY) if replay_reasoning else None
    stored = [as_dict(item) for item in as_list(kept)]
    if stored and _items_match(stored, message):
        return tuple(_request_item(item) for item in stored)
    # Changed after it was parsed (or never had stored items): the reasoning first, then the
    # message's own text and calls.
    items = [_request_item(item) for item in stored if item.get("type") == "reasoning"]
    if message.text:
        items.append({"role": "assistant", "content": message.text})
    items.extend(
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    )
    return tuple(items)


def _items_match(items: list[dict[str, Any]], message: AssistantMessage) -> bool:
    calls = [_tool_call(item) for item in items if item.get("type") == "function_call"]
    return _output_text(items) == (message.text or None) and calls == list(message.tool_calls)


def _request_item(item: Mapping[str, Any]) -> dict[str, Any]:
    keep = _REQUEST_FIELDS.get(as_str(item.get("type")) or "")
    if keep is None:
        return {k: v for k, v in item.items() if v is not None}
    result = {k: item[k] for k in keep if item.get(k) is not None}
    if result.get("type") == "message":
        result["content"] = [_request_part(as_dict(p)) for p in as_list(result.get("content"))]
    return result


def _request_part(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") == "output_text":
        return {
            "type": "output_text",
            "text": part.get("text") or "",
            "annotations": part.get("annotations") or [],
        }
    return {k: v for k, v in part.items() if v is not None}


_RESPONSES_INPUT = MessageWire("input_text", responses_parts, _call_output, _assistant_items)
"""Responses ``input`` items: a ``function_call_output`` item per tool response."""


class OpenAIResponsesChatModel(OpenAIHttpModel):
    """A ChatModel for OpenAI's Responses API: tools, streaming, native structured output, and
    reasoning items carried across the rounds of a tool loop.

    Construction is that of ``OpenAIChatModel``: a ready ``openai.AsyncOpenAI`` as ``client``, or
    one built from ``base_url`` / ``api_key`` (``OPENAI_API_KEY`` otherwise) with ``max_retries``.
    ``**defaults`` are request fields sent with every call (``reasoning={"effort": "low"}``,
    ``store=False``, ``extra_headers={...}``...); ``ChatOptions`` override them and
    ``ChatOptions.extra`` overrides both; ``None`` removes a field.

    ``replay_reasoning`` sends the output items of an answer (its reasoning above all, kept in
    ``AssistantMessage.metadata["openai_output"]``) back with that assistant message; with
    ``False`` an assistant message goes as its own text and tool calls only — for ``store=False``
    without the encrypted reasoning, where the API could not find those items.
    """

    _ENDPOINT = "/responses"
    _HISTORY_KEY = "input"
    _MESSAGES = _RESPONSES_INPUT
    _tool_params = staticmethod(_function_tools)

    def _parse(self, data: dict[str, Any], url: str) -> ChatResponse:
        return parse_response(_checked(data, "the response body", self.provider), self.provider)

    def _assembly(self, url: str) -> StreamAssembly:
        return ResponsesStreamAssembler(self.provider, url=url)

    def _params(self, prompt: Prompt, stream: bool, *, spliced: bool = True) -> dict[str, Any]:
        base: dict[str, Any] = {"model": self.model_name, "input": HISTORY}
        request = option_params(prompt, max_tokens_key="max_output_tokens", stop_key="stop")
        if "stop" in request:
            raise UnsupportedRequestError(
                f"the Responses API has no stop sequences, got stop={request['stop']!r}; leave "
                "ChatOptions.stop unset or use OpenAIChatModel (Chat Completions)",
                error_type="unsupported_option",
                provider=self.provider,
            )
        tools = self._tools(prompt, spliced=spliced)
        if tools is not None:
            request["tools"] = tools
        options = prompt.options
        if options is not None and options.output_schema is not None:
            request["text"] = {"format": _json_schema_format(options.output_schema)}
        request.update(self._cache_key_params(prompt))
        return request_params(base, self.defaults, request, prompt)


def _checked(data: object, what: str, provider: str) -> dict[str, Any]:
    """``data`` when it is a JSON object that is not an error; otherwise a ModelError."""
    if not isinstance(data, dict):
        raise not_an_object(provider, what, data)
    if data.get("type") == "error" or (data.get("error") is not None and data.get("type") is None):
        raise _api_error(data, provider)
    return data


def _api_error(body: Mapping[str, Any], provider: str) -> ModelError:
    """The ModelError for an error object: an ``error`` event, a failed response, an error body
    (its code gives the status, for an error inside a 200 answer or stream)."""
    error = as_dict(body.get("error")) or {k: v for k, v in body.items() if k != "type"}
    return model_error(provider, error=error)


# -- response --------------------------------------------------------------------------------------


def parse_response(data: Mapping[str, Any], provider: str = "openai") -> ChatResponse:
    """A ChatResponse from a Responses API response object; an incomplete or failed one is a
    ModelError."""
    _check_status(data, provider)
    items = [as_dict(item) for item in as_list(data.get("output"))]
    message = assistant_message(items)
    finish = finish_reason_or_default(None, message.has_tool_calls())
    return ChatResponse(
        (Generation(message, finish),),
        ChatResponseMetadata(
            id=as_str(data.get("id")) or None,
            model=as_str(data.get("model")) or None,
            usage=parse_usage(data.get("usage")),
            finish_reason=finish,
        ),
    )


def _check_status(data: Mapping[str, Any], provider: str) -> None:
    status = as_str(data.get("status"))
    if status in (None, "completed"):
        return
    if status == "failed" or data.get("error"):
        raise _api_error(data, provider)
    reason = as_str(as_dict(data.get("incomplete_details")).get("reason")) or "no reason given"
    raise IncompleteAnswerError(
        f"{provider} did not complete the response (status {status!r}, reason {reason!r}); the partial "
        "answer was discarded" + (": raise max_tokens" if reason == "max_output_tokens" else ""),
        error_type="incomplete_answer",
        provider=provider,
        body=dict(data),
    )


def assistant_message(items: list[dict[str, Any]]) -> AssistantMessage:
    """The AssistantMessage for a response's output items."""
    calls = tuple(_tool_call(item) for item in items if item.get("type") == "function_call")
    metadata: dict[str, Any] = {}
    summaries = [
        as_str(as_dict(part).get("text")) or ""
        for item in items
        if item.get("type") == "reasoning"
        for part in as_list(item.get("summary"))
    ]
    if any(summaries):
        metadata["reasoning"] = "\n\n".join(s for s in summaries if s)
    refusals = [as_str(part.get("refusal")) or "" for part in _message_parts(items, "refusal")]
    if any(refusals):
        metadata["refusal"] = "".join(refusals)
    if any(item.get("type") not in _PLAIN_TYPES for item in items):
        metadata[STORED_OUTPUT_KEY] = items
    return AssistantMessage(_output_text(items), calls, metadata)


def _output_text(items: list[dict[str, Any]]) -> str | None:
    return "".join(as_str(part.get("text")) or "" for part in _message_parts(items, "output_text")) or None


def _message_parts(items: list[dict[str, Any]], part_type: str) -> Iterator[dict[str, Any]]:
    """The content parts of type ``part_type`` (``output_text``, ``refusal``) of the message items."""
    for item in items:
        if item.get("type") == "message":
            for part in map(as_dict, as_list(item.get("content"))):
                if part.get("type") == part_type:
                    yield part


def _tool_call(item: Mapping[str, Any]) -> ToolCall:
    call_id = as_str(item.get("call_id")) or as_str(item.get("id")) or new_tool_call_id()
    return ToolCall(call_id, as_str(item.get("name")) or "", as_str(item.get("arguments")) or "")


def parse_usage(usage: object) -> Usage | None:
    """Usage from a Responses ``usage`` object (``input_tokens``/``output_tokens``, the cached
    input tokens from ``input_tokens_details.cached_tokens``), or None."""
    return openai_usage(usage, "input_tokens", "output_tokens")


# -- stream ----------------------------------------------------------------------------------------


@dataclass
class ResponsesStreamAssembler:
    """Assembles Responses stream events (parsed JSON): text deltas go out at once; output items
    are collected as they finish (function-call arguments joined from their deltas when an item
    never finished) and ``response.completed`` ends the answer. Any other end is a ModelError."""

    provider: str = "openai"
    url: str | None = None
    """Where the stream comes from (named in its errors)."""
    id: str | None = None
    model: str | None = None
    usage: Usage | None = None
    done: bool = False
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    arguments: dict[int, list[str]] = field(default_factory=dict)

    def feed_events(self, events: Iterable[tuple[str, object]]) -> list[str]:
        """Take in decoded events in order, up to ``response.completed`` (or ``[DONE]``); their
        text deltas. An error event raises its ModelError."""
        texts: list[str] = []
        for _, data in events:
            if data is DONE:
                break
            text = self.feed(_checked(data, "a stream event", self.provider))
            if text:
                texts.append(text)
            if self.done:
                break
        return texts

    def feed(self, event: Mapping[str, Any]) -> str | None:
        """Take in one event; returns its text delta (or None)."""
        kind = as_str(event.get("type")) or ""
        handler = self._handlers().get(kind)
        return handler(event) if handler is not None else None

    def _handlers(self) -> dict[str, Callable[[Mapping[str, Any]], str | None]]:
        return {
            "response.created": self._on_response,
            "response.in_progress": self._on_response,
            "response.output_item.added": self._on_item,
            "response.output_item.done": self._on_item,
            "response.output_text.delta": self._on_text,
            "response.function_call_arguments.delta": self._on_arguments,
            "response.completed": self._on_completed,
            "response.incomplete": self._on_unfinished,
            "response.failed": self._on_unfinished,
        }

    def _on_response(self, event: Mapping[str, Any]) -> None:
        response = as_dict(event.get("response"))
        self.id = as_str(response.get("id")) or self.id
        self.model = as_str(response.get("model")) or self.model

    def _on_item(self, event: Mapping[str, Any]) -> None:
        self.items[as_int(event.get("output_index"))] = as_dict(event.get("item"))

    def _on_text(self, event: Mapping[str, Any]) -> str | None:
        return as_str(event.get("delta")) or None

    def _on_arguments(self, event: Mapping[str, Any]) -> None:
        self.arguments.setdefault(as_int(event.get("output_index")), []).append(
            as_str(event.get("delta")) or ""
        )

    def _on_completed(self, event: Mapping[str, Any]) -> None:
        self._on_response(event)
        response = as_dict(event.get("response"))
        self.usage = parse_usage(response.get("usage")) or self.usage
        output = [as_dict(item) for item in as_list(response.get("output"))]
        if output:
            self.items = dict(enumerate(output))
        self.done = True

    def _on_unfinished(self, event: Mapping[str, Any]) -> None:
        _check_status(as_dict(event.get("response")), self.provider)
        raise incomplete_answer(self.provider, self.url, f"the response ended with {event.get('type')!r}")

    def _metadata(self, finish: str | None, usage: Usage | None) -> ChatResponseMetadata:
        return ChatResponseMetadata(id=self.id, model=self.model, usage=usage, finish_reason=finish)

    def text_chunk(self, text: str) -> ChatResponse:
        """A chunk carrying one text delta."""
        return text_delta(text, self._metadata(None, None))

    def complete(self) -> ChatResponse:
        """The last chunk (``final``): an IncompleteAnswerError unless ``response.completed`` came."""
        return self.final()

    def final(self) -> ChatResponse:
        """The last chunk: whole function calls, finish reason, usage, the items to send back."""
        if not self.done:
            raise incomplete_answer(self.provider, self.url, "the stream ended before response.completed")
        items = [self._whole(index, self.items[index]) for index in sorted(self.items)]
        message = assistant_message(items)
        # Streamed text is the concatenation of the deltas, so this chunk carries none itself.
        last = AssistantMessage(None, message.tool_calls, message.metadata)
        finish = finish_reason_or_default(None, message.has_tool_calls())
        return ChatResponse((Generation(last, finish),), self._metadata(finish, self.usage))

    def _whole(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") == "function_call" and not item.get("arguments") and index in self.arguments:
            return {**item, "arguments": "".join(self.arguments[index])}
        return item
