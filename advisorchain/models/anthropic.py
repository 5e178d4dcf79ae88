"""Anthropic Messages API over the official ``anthropic`` SDK.

>>> model = AnthropicChatModel("claude-sonnet-4-5")             # key from ANTHROPIC_API_KEY

System messages become the top-level ``system`` field; the tool results of one round travel as
``tool_result`` blocks of ONE user message; parallel ``tool_use`` blocks become parallel tool calls.
Thinking (``thinking`` / ``redacted_thinking``) and server-tool blocks (``server_tool_use``,
``*_tool_result``) are never turned into text or client tool calls: they are kept, in order, in
``AssistantMessage.metadata["anthropic_content"]`` and sent back with that message on the next
request, as the API requires for thinking in a tool loop. The joined thinking text is also in
``metadata["reasoning"]``.

Stop reasons map to the common finish reasons — ``end_turn``/``stop_sequence`` → ``"stop"``,
``tool_use`` → ``"tool_calls"``, ``max_tokens``/``model_context_window_exceeded`` → ``"length"``,
``refusal`` → ``"content_filter"``; any other one passes through as is — and the raw one is kept
in ``metadata["stop_reason"]``. A stream that ends with neither a stop reason nor ``message_stop``
is a ``ModelError`` (the answer was cut short), never a short answer.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._built import text_delta
from .._cache_points import CACHE_POINT, cache_point, check_cache_points
from .._checks import check_int
from ..errors import UnsupportedRequestError
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..model import ChatResponse, ChatResponseMetadata, Generation, Prompt, Usage
from ._base import HttpChatModel, StreamAssembly
from ._common import (
    as_dict,
    as_int,
    as_list,
    as_str,
    finish_reason_or_default,
    option_params,
    read_dict,
    request_params,
    split_sdk_options,
    tool_definitions,
)
from ._http.failures import incomplete_answer, model_error
from ._http.json import dumps
from ._media import anthropic_blocks, tool_media
from .clients import ANTHROPIC, client_for, require_sdk

if TYPE_CHECKING:
    import anthropic

require_sdk(__name__, ANTHROPIC)  # found here; imported on first use (see _clients)

__all__ = ["AnthropicChatModel", "parse_message", "to_anthropic_messages"]

DEFAULT_MAX_TOKENS = 4096

STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic stop reason → the finish reason reported in ChatResponse (others pass through)."""

# The fields a response block may carry back in a request, per block type.
_REQUEST_FIELDS = {
    "text": ("type", "text", "citations"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    "tool_use": ("type", "id", "name", "input"),
    "server_tool_use": ("type", "id", "name", "input"),
}
_THINKING_TYPES = ("thinking", "redacted_thinking")

MAX_CACHE_POINTS = 4
"""The most ``cache_control`` marks the Messages API takes in one request."""
_CACHE_CONTROL_5M: Mapping[str, str] = {"type": "ephemeral"}
_CACHE_CONTROL_1H: Mapping[str, str] = {"type": "ephemeral", "ttl": "1h"}


class AnthropicChatModel(HttpChatModel):
    """A ChatModel for Anthropic's Messages API.

    ``client`` is an ``anthropic.AsyncAnthropic`` you built yourself; otherwise one is built from
    ``base_url`` and ``api_key`` (the SDK falls back to ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``)
    with ``max_retries`` for the SDK's retry with backoff. ``max_tokens`` is required by the API
    (``ChatOptions.max_tokens`` overrides it per request). ``**defaults`` are request parameters sent
    with every call (``thinking={"type": "enabled", "budget_tokens": 2048}``, ``extra_headers``...);
    ``ChatOptions`` override them and ``ChatOptions.extra`` overrides both; ``None`` removes one.
    """

    _ENDPOINT = "/v1/messages"
    _SDK_MODULE = "anthropic"

    def __init__(
        self,
        model: str,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        *,
        max_retries: int | None = None,
        **defaults: Any,
    ) -> None:
        check_int(max_tokens, "max_tokens (the Messages API requires it)", minimum=1)
        built = client_for(ANTHROPIC, "AnthropicChatModel", model, client, base_url, api_key, max_retries)
        self._connect(model, "anthropic", defaults, built)
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"AnthropicChatModel({self.model_name!r})"

    def _parse(self, data: dict[str, Any], url: str) -> ChatResponse:
        if data.get("type") == "error" or data.get("error") is not None:
            raise model_error(self.provider, error=data)
        return parse_message(data)

    def _assembly(self, url: str) -> StreamAssembly:
        return StreamAssembler(url=url)

    def request_body(self, prompt: Prompt, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``prompt`` (SDK options such as headers left out)."""
        body, _ = split_sdk_options(self._params(prompt))
        return {**body, "stream": stream}

    def _params(self, prompt: Prompt) -> dict[str, Any]:
        system, messages = to_anthropic_messages(prompt.instructions)
        base: dict[str, Any] = {"model": self.model_name, "max_tokens": self.max_tokens, "messages": messages}
        if system is not None:
            base["system"] = system
        request = option_params(prompt, max_tokens_key="max_tokens", stop_key="stop_sequences")
        tools = [
            {"name": d.name, "description": d.description, "input_schema": dict(d.input_schema)}
            for d in tool_definitions(prompt.options)
        ]
        if tools:
            request["tools"] = tools
        options = prompt.options
        if options is not None and options.output_schema is not None:
            request["output_config"] = {
                "format": {"type": "json_schema", "schema": dict(options.output_schema)}
            }
        return request_params(base, self.defaults, request, prompt)

    def _body(self, prompt: Prompt, *, stream: bool) -> tuple[bytes, dict[str, Any]]:
        """(the JSON body, the SDK request options): every field verbatim, so new API fields work
        with any SDK version. A request that is not streamed gets the SDK's own timeout for it."""
        body, sdk_options = split_sdk_options(self._params(prompt))
        if not stream and "timeout" not in sdk_options:
            timeout = _nonstreaming_timeout(self.client, body)
            if timeout is not None:
                sdk_options["timeout"] = timeout
        first = {key: body.pop(key) for key in ("max_tokens", "messages", "model")}
        return dumps({**first, "stream": stream, **body}), sdk_options


def _nonstreaming_timeout(client: Any, body: Mapping[str, Any]) -> Any:
    """What the SDK's ``messages.create`` gives a request that is not streamed, on a client with
    the default timeout: a longer read timeout, or — when the answer may take over ten minutes —
    an UnsupportedRequestError saying to stream (the SDK's ValueError)."""
    constants = importlib.import_module("anthropic._constants")
    default = getattr(constants, "DEFAULT_TIMEOUT", None)
    calculate = getattr(client, "_calculate_nonstreaming_timeout", None)
    if calculate is None or default is None or client.timeout != default:
        return None
    limits: Mapping[str, int] = getattr(constants, "MODEL_NONSTREAMING_TOKENS", {})
    try:
        return calculate(body["max_tokens"], limits.get(body["model"]))
    except ValueError as exc:
        raise UnsupportedRequestError(
            f"anthropic: {exc} (max_tokens={body['max_tokens']!r} for model {body['model']!r}); "
            "use stream() for this request, or lower max_tokens",
            error_type="unsupported_option",
            provider="anthropic",
        ) from exc


# -- request ---------------------------------------------------------------------------------------


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The top-level ``system`` value and the Messages-API turns for ``messages``.

    Consecutive messages of one role are joined into one turn, so the tool results of a round —
    and a user message right after them — travel in ONE user message. Cache points
    (``metadata["cache_point"]``, API.md §21) become ``cache_control`` on the last content block of
    each marked message (``_sent_marks`` says which, at most 4); a marked system message makes
    ``system`` a list of text blocks. A bad cache point raises ValueError."""
    check_cache_points(messages)
    marks = _sent_marks(messages) if _has_marks(messages) else {}
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    # The last block sent so far that can carry a mark: (its list, its position).
    previous: tuple[list[dict[str, Any]], int] | None = None
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            system.append({"type": "text", "text": message.text})
            previous = (system, len(system) - 1)
            if index in marks:
                _mark(system, len(system) - 1, marks[index])
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            continue
        role, blocks = _turn(message)
        if blocks:
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
            content = turns[-1]["content"]
            start = len(content) - len(blocks)
            for position in range(len(content) - 1, start - 1, -1):
                if content[position].get("type") not in _THINKING_TYPES:
                    previous = (content, position)
                    break
        ttl = marks.get(index)
        if ttl is not None and previous is not None:
            # A message that sends no markable block of its own (an empty assistant message, one of
            # thinking only) marks the block sent last before it: the same prefix.
            _mark(*previous, ttl)
    if not system:
        return None, turns
    if len(system) == 1 and "cache_control" not in system[0]:
        return system[0]["text"], turns
    return system, turns


def _has_marks(messages: Sequence[Message]) -> bool:
    return any(m.metadata and m.metadata.get(CACHE_POINT) is not None for m in messages)


def _sent_marks(messages: Sequence[Message]) -> dict[int, str]:
    """The marks sent, by message index: one per marked message, counted in the order they are
    sent (system messages first, as they are the oldest part of the request); of more than
    ``MAX_CACHE_POINTS`` only the newest are kept, and a ``"1h"`` after a ``"5m"`` is sent as
    ``"5m"`` (the API takes the longer times to live first only)."""
    system = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
    rest = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    marked = [(i, cache_point(messages[i])) for i in (*system, *rest)]
    kept = [(i, ttl) for i, ttl in marked if ttl is not None][-MAX_CACHE_POINTS:]
    sent: dict[int, str] = {}
    short = False
    for index, ttl in kept:
        short = short or ttl == "5m"
        sent[index] = "5m" if short else ttl
    return sent


def _mark(blocks: list[dict[str, Any]], position: int, ttl: str) -> None:
    control = _CACHE_CONTROL_1H if ttl == "1h" else _CACHE_CONTROL_5M
    blocks[position] = {**blocks[position], "cache_control": dict(control)}


def _turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        text = [{"type": "text", "text": message.text}] if message.text or not message.media else []
        return "user", [*anthropic_blocks(message.media), *text]
    if isinstance(message, AssistantMessage):
        return "assistant", _assistant_blocks(message)
    if isinstance(message, ToolResponseMessage):
        return "user", [_tool_result(r) for r in message.responses]
    raise TypeError(f"cannot send {message!r} to a chat model: it is not a Message")


def _tool_result(response: ToolResponse) -> dict[str, Any]:
    """A ``tool_result`` block; the media the tool returned go inside it, after its text."""
    if not response.media:
        return {"type": "tool_result", "tool_use_id": response.id, "content": response.response_data}
    text, blocks = tool_media(response, anthropic_blocks, "in a tool result")
    content = [{"type": "text", "text": text}] if text else []
    return {"type": "tool_result", "tool_use_id": response.id, "content": [*content, *blocks]}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    stored = [as_dict(b) for b in as_list(message.metadata.get("anthropic_content"))]
    if stored and _blocks_match(stored, message):
        return [_request_block(b) for b in stored]
    # The message was changed after it was parsed (or never had stored blocks): thinking first,
    # as the API wants it, then the message's own text and tool calls.
    blocks = [_request_block(b) for b in stored if b.get("type") in _THINKING_TYPES]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input_object(c.arguments)}
        for c in message.tool_calls
    )
    return blocks


def _blocks_match(blocks: list[dict[str, Any]], message: AssistantMessage) -> bool:
    text = "".join(as_str(b.get("text")) or "" for b in blocks if b.get("type") == "text") or None
    uses = [(b.get("id"), b.get("name"), b.get("input")) for b in blocks if b.get("type") == "tool_use"]
    calls = [(c.id, c.name, _input_object(c.arguments)) for c in message.tool_calls]
    return text == (message.text or None) and uses == calls


def _request_block(block: Mapping[str, Any]) -> dict[str, Any]:
    keep = _REQUEST_FIELDS.get(as_str(block.get("type")) or "")
    if keep is None:
        return {k: v for k, v in block.items() if v is not None}
    return {k: block[k] for k in keep if block.get(k) is not None}


def _input_object(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the JSON object Anthropic wants; malformed ones become ``{}``
    (the tool loop already answered them with an error text)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- response --------------------------------------------------------------------------------------


def parse_message(data: Mapping[str, Any]) -> ChatResponse:
    """A ChatResponse from a Messages API response body."""
    blocks = [as_dict(b) for b in as_list(data.get("content"))]
    stop_reason = as_str(data.get("stop_reason"))
    message = assistant_message(blocks, stop_reason, {})
    finish = _finish_reason(stop_reason, message.has_tool_calls())
    usage = data.get("usage")
    return ChatResponse(
        (Generation(message, finish),),
        ChatResponseMetadata(
            id=as_str(data.get("id")) or None,
            model=as_str(data.get("model")) or None,
            usage=_usage(as_dict(usage)) if usage is not None else None,
            finish_reason=finish,
        ),
    )


def assistant_message(
    blocks: list[dict[str, Any]], stop_reason: str | None, raw_arguments: Mapping[str, str]
) -> AssistantMessage:
    """The AssistantMessage for a response's content blocks. ``raw_arguments`` holds the streamed
    argument text per tool-use id (else the parsed input is written back as JSON)."""
    text = "".join(as_str(b.get("text")) or "" for b in blocks if b.get("type") == "text") or None
    calls = tuple(
        ToolCall(
            as_str(b.get("id")) or "",
            as_str(b.get("name")) or "",
            raw_arguments.get(as_str(b.get("id")) or "")
            or json.dumps(b.get("input") or {}, ensure_ascii=False),
        )
        for b in blocks
        if b.get("type") == "tool_use"
    )
    metadata: dict[str, Any] = {}
    if stop_reason is not None:
        metadata["stop_reason"] = stop_reason
    thinking = [as_str(b.get("thinking")) or "" for b in blocks if b.get("type") == "thinking"]
    if any(thinking):
        metadata["reasoning"] = "\n\n".join(t for t in thinking if t)
    if any(b.get("type") not in ("text", "tool_use") for b in blocks):
        metadata["anthropic_content"] = blocks
    return AssistantMessage(text, calls, metadata)


def _finish_reason(stop_reason: str | None, has_tool_calls: bool) -> str:
    mapped = STOP_REASONS.get(stop_reason, stop_reason) if stop_reason else None
    return finish_reason_or_default(mapped, has_tool_calls)


def _usage(usage: Mapping[str, Any]) -> Usage:
    # input_tokens leaves out cached tokens; the prompt's size is all three together.
    written = as_int(usage.get("cache_creation_input_tokens"))
    read = as_int(usage.get("cache_read_input_tokens"))
    prompt = as_int(usage.get("input_tokens")) + written + read
    return Usage(prompt, as_int(usage.get("output_tokens")), read, written)


# -- stream ----------------------------------------------------------------------------------------


@dataclass
class StreamAssembler:
    """Assembles Messages-API stream events (parsed JSON): text deltas go out at once; blocks are
    rebuilt by index (``input_json_delta`` pieces joined) for the final chunk."""

    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    stopped: bool = False
    """True once ``message_stop`` came."""
    url: str | None = None
    """Where the stream comes from (named in its errors)."""

    @property
    def done(self) -> bool:
        """True once ``message_stop`` came: nothing more is read."""
        return self.stopped

    def feed_events(self, events: Iterable[tuple[str, object]]) -> list[str]:
        """Take in decoded events in order, up to ``message_stop``; their text deltas. An error
        event raises its ModelError (with the status its error type stands for)."""
        texts: list[str] = []
        for _, data in events:
            event = read_dict(data)
            if event.get("type") == "error":
                raise model_error("anthropic", error=event)
            text = self.feed(event)
            if text:
                texts.append(text)
            if self.stopped:
                break
        return texts

    def complete(self) -> ChatResponse:
        """The last chunk, once the stream is checked complete (``check_complete``)."""
        self.check_complete(self.url)
        return self.final()

    def feed(self, event: Mapping[str, Any]) -> str | None:
        """Take in one event; returns its text delta (or None)."""
        kind = event.get("type")
        if kind == "message_start":
            message = as_dict(event.get("message"))
            self.id = as_str(message.get("id")) or None
            self.model = as_str(message.get("model")) or None
            self._add_usage(message.get("usage"))
        elif kind == "content_block_start":
            self.blocks[as_int(event.get("index"))] = as_dict(event.get("content_block"))
        elif kind == "content_block_delta":
            return self._apply_delta(as_int(event.get("index")), as_dict(event.get("delta")))
        elif kind == "message_delta":
            self.stop_reason = as_str(as_dict(event.get("delta")).get("stop_reason")) or self.stop_reason
            self._add_usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return None

    def check_complete(self, url: str | None = None) -> None:
        """Raise a ModelError unless the stream said the answer was complete: a ``stop_reason`` or
        ``message_stop``."""
        if self.stop_reason is None and not self.stopped:
            what = "tool input cut off" if self.partial_json else "the answer cut off"
            raise incomplete_answer(
                "anthropic", url, f"the stream ended with no stop_reason and no message_stop: {what}"
            )

    def _add_usage(self, usage: object) -> None:
        self.usage.update({k: v for k, v in as_dict(usage).items() if v is not None})

    def _apply_delta(self, index: int, delta: Mapping[str, Any]) -> str | None:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            text = as_str(delta.get("text")) or ""
            block["text"] = (as_str(block.get("text")) or "") + text
            return text
        if kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(as_str(delta.get("partial_json")) or "")
        elif kind == "thinking_delta":
            block["thinking"] = (as_str(block.get("thinking")) or "") + (as_str(delta.get("thinking")) or "")
        elif kind == "signature_delta":
            block["signature"] = (as_str(block.get("signature")) or "") + (
                as_str(delta.get("signature")) or ""
            )
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return None

    def _metadata(self, finish: str | None, usage: Usage | None) -> ChatResponseMetadata:
        return ChatResponseMetadata(id=self.id, model=self.model, usage=usage, finish_reason=finish)

    def text_chunk(self, text: str) -> ChatResponse:
        """A chunk carrying one text delta."""
        return text_delta(text, self._metadata(None, None))

    def final(self) -> ChatResponse:
        """The last chunk: whole tool calls, finish reason, usage, and the blocks to replay."""
        raw_arguments: dict[str, str] = {}
        blocks: list[dict[str, Any]] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            raw = "".join(self.partial_json.get(index, ()))
            if raw.strip():
                block["input"] = _input_object(raw)
                raw_arguments[as_str(block.get("id")) or ""] = raw
            blocks.append(block)
        message = assistant_message(blocks, self.stop_reason, raw_arguments)
        # Streamed text is the concatenation of the deltas, so this chunk carries none itself.
        last = AssistantMessage(None, message.tool_calls, message.metadata)
        finish = _finish_reason(self.stop_reason, message.has_tool_calls())
        usage = _usage(self.usage) if self.usage else None
        return ChatResponse((Generation(last, finish),), self._metadata(finish, usage))
