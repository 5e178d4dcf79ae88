"""What both OpenAI adapters (Chat Completions and Responses) share on top of the skeleton of
``_base``: the constructor (the SDK client, built or given, and the settings), how the endpoints
authenticate, a request whose messages and tool definitions are serialized once and spliced into
the body (``_http.wire``), and how a conversation's messages become items (``MessageWire``: the
same rule on both APIs, with their few differences given). The request's fields and the wire
form of assistant messages and tools are each adapter's own."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from .._cache_points import check_cache_points
from .._tool_types import ToolDefinition
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from ..model import Prompt
from ._base import HttpChatModel
from ._common import split_sdk_options, tool_definitions
from ._http.wire import HISTORY, DefinitionsWire, Spliced, WireCache, history_body
from ._media import Convert, tool_media, tool_media_heading
from .clients import BEARER_AUTH, OPENAI, client_for

if TYPE_CHECKING:
    import openai

__all__ = ["MessageWire", "OpenAIHttpModel"]

Items = tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class MessageWire:
    """How an OpenAI API writes a conversation's messages (``items``): a user message as a ``user``
    message of text and media parts, a system message as a ``system`` message, each tool response
    as an output item — and the media the tools returned, which an output cannot carry, in one user
    message after them, each call's media after a text part naming the call. What differs between
    the APIs is given here."""

    text_type: str
    """The type of a text part (``text``, ``input_text``)."""
    media_parts: Convert
    """The parts of media (``_media.openai_chat_parts``, ``_media.responses_parts``)."""
    tool_output: Callable[[str, str], dict[str, Any]]
    """The output item of one tool response: (call id, text) to item."""
    assistant: Callable[[AssistantMessage, bool], Items]
    """The items of an assistant message (with ``replay_reasoning``)."""

    def items(self, message: Message, replay_reasoning: bool) -> Items:
        """The items of one message (a round's tool responses become several)."""
        if isinstance(message, UserMessage):
            return ({"role": "user", "content": self.user_content(message)},)
        if isinstance(message, AssistantMessage):
            return self.assistant(message, replay_reasoning)
        if isinstance(message, ToolResponseMessage):
            return self.tool_outputs(message)
        if isinstance(message, SystemMessage):
            return ({"role": "system", "content": message.text},)
        raise TypeError(f"cannot send {message!r} to a chat model: it is not a Message")

    def user_content(self, message: UserMessage) -> str | list[dict[str, Any]]:
        """A user message's ``content``: its text alone, or its text part and its media's parts."""
        if not message.media:
            return message.text
        text = [{"type": self.text_type, "text": message.text}] if message.text else []
        return [*text, *self.media_parts(message.media)]

    def tool_outputs(self, message: ToolResponseMessage) -> Items:
        """The output items of a round's tool responses, then the user message with their media."""
        if not any(r.media for r in message.responses):
            return tuple(self.tool_output(r.id, r.response_data) for r in message.responses)
        items: list[dict[str, Any]] = []
        attached: list[dict[str, Any]] = []
        for response in message.responses:
            text, parts = tool_media(response, self.media_parts, "in a message")
            items.append(self.tool_output(response.id, text))
            if parts:
                attached += [{"type": self.text_type, "text": tool_media_heading(response)}, *parts]
        if attached:
            items.append({"role": "user", "content": attached})
        return tuple(items)


class OpenAIHttpModel(HttpChatModel):
    """An adapter of an OpenAI endpoint. A subclass names the body field that carries the
    conversation (``_HISTORY_KEY``) and how its messages are written (``_MESSAGES``), builds its
    fields (``_params``, the conversation left as ``HISTORY``) and gives the wire form of the tool
    definitions (``_tool_params``)."""

    _SDK_MODULE = "openai"
    _SECURITY = BEARER_AUTH
    _HISTORY_KEY: ClassVar[str]
    """The body field that carries the prompt's messages (``messages``, ``input``)."""
    _MESSAGES: ClassVar[MessageWire]
    """How the API writes the messages."""

    _wire: WireCache

    def __init__(
        self,
        model: str,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int | None = None,
        provider_name: str = "openai",
        replay_reasoning: bool = True,
        **defaults: Any,
    ) -> None:
        built = client_for(OPENAI, type(self).__name__, model, client, base_url, api_key, max_retries)
        self._connect(model, provider_name, defaults, built)
        self.replay_reasoning = replay_reasoning
        self._wire_replays: bool | None = None  # what the wire cache was made for (made on first use)
        self._tools_wire = DefinitionsWire(self._tool_params)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, provider={self.provider!r})"

    # -- what an OpenAI adapter maps -------------------------------------------------------------

    @abstractmethod
    def _params(self, prompt: Prompt, stream: bool, *, spliced: bool = True) -> dict[str, Any]:
        """The request's fields, layered (``request_params``); the conversation is ``HISTORY``
        unless a layer set it, and the tools are ``_tools(prompt, spliced=spliced)``."""

    @staticmethod
    @abstractmethod
    def _tool_params(definitions: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        """The wire form of the request's tool definitions."""

    # -- shared ----------------------------------------------------------------------------------

    def request_body(self, prompt: Prompt, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``prompt`` (SDK options such as headers left out)."""
        check_cache_points(prompt.instructions)
        body, _ = split_sdk_options(self._params(prompt, stream, spliced=False))
        if body.get(self._HISTORY_KEY) is HISTORY:
            replay, items = self.replay_reasoning, self._MESSAGES.items
            body[self._HISTORY_KEY] = [item for m in prompt.instructions for item in items(m, replay)]
        return {**body, "stream": stream}

    def _body(self, prompt: Prompt, *, stream: bool) -> tuple[bytes, dict[str, Any]]:
        """(the JSON body, the SDK request options) for ``prompt``, serialized once, here, and sent
        as they are: ``create()``'s TypedDict transform costs a millisecond a request and its typed
        answers would only be dumped back to dicts. Every parameter reaches the server verbatim,
        known to this SDK version or not (vLLM's ``top_k``, Ollama's ``options``...); messages sent
        before are not serialized again (``WireCache``), and the answer is read raw."""
        params, sdk_options = split_sdk_options(self._params(prompt, stream))
        return history_body(params, self._HISTORY_KEY, stream, prompt, self._wire_cache()), sdk_options

    def _wire_cache(self) -> WireCache:
        """The serialized messages sent before (a new cache if ``replay_reasoning`` was changed)."""
        if self._wire_replays != self.replay_reasoning:
            self._wire = WireCache(partial(self._MESSAGES.items, replay_reasoning=self.replay_reasoning))
            self._wire_replays = self.replay_reasoning
        return self._wire

    def _cache_key_params(self, prompt: Prompt) -> dict[str, Any]:
        """``{"prompt_cache_key": ...}`` for a prompt with ``ChatOptions.cache_key`` on OpenAI's own
        host; nothing on any other server (an OpenAI-compatible server may reject the unknown
        field with a 400 — give it in ``ChatOptions.extra`` to send it there anyway)."""
        options = prompt.options
        if options is None or options.cache_key is None or self._own_host != "openai":
            return {}
        return {"prompt_cache_key": options.cache_key}

    def _tools(self, prompt: Prompt, *, spliced: bool) -> list[dict[str, Any]] | Spliced | None:
        """The request's ``tools`` field: None without tools; with ``spliced``, their JSON
        serialized once (``DefinitionsWire``) — unless a layer adds tools of its own, which are
        joined to the list (``layer_params``)."""
        definitions = tool_definitions(prompt.options)
        if not definitions:
            return None
        options = prompt.options
        joined = "tools" in self.defaults or (options is not None and "tools" in options.extra)
        if spliced and not joined:
            return self._tools_wire.spliced(definitions)
        return self._tools_wire.build(definitions)
