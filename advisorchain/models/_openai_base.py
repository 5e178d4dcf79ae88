"""What both OpenAI adapters (Chat Completions and Responses) share on top of the skeleton of
``_base``: the SDK and how its endpoints authenticate, and a request whose messages and tool
definitions are serialized once and spliced into the body (``_http.wire``). What differs — the
fields, the messages' and tools' wire form — is each adapter's own."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from .._tool_types import ToolDefinition
from ..model import Prompt
from ._base import HttpChatModel
from ._clients import BEARER_AUTH
from ._common import split_sdk_options, tool_definitions
from ._http.wire import HISTORY, DefinitionsWire, Spliced, WireCache, history_body

__all__ = ["OpenAIHttpModel"]


class OpenAIHttpModel(HttpChatModel):
    """An adapter of an OpenAI endpoint. A subclass names the body field that carries the
    conversation (``_HISTORY_KEY``), builds its fields (``_params``, the conversation left as
    ``HISTORY``), and gives the wire form of the messages (``_wire_cache``, ``_history``) and of
    the tool definitions (``_tools_wire``)."""

    _SDK_MODULE = "openai"
    _SECURITY = BEARER_AUTH
    _HISTORY_KEY: ClassVar[str]
    """The body field that carries the prompt's messages (``messages``, ``input``)."""

    _tools_wire: DefinitionsWire

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, provider={self.provider!r})"

    @abstractmethod
    def _params(self, prompt: Prompt, stream: bool, *, spliced: bool = True) -> dict[str, Any]:
        """The request's fields, layered (``request_params``); the conversation is ``HISTORY``
        unless a layer set it, and with ``spliced`` the tools are ``_tools`` (serialized once)."""

    @abstractmethod
    def _wire_cache(self) -> WireCache:
        """The serialized messages sent before."""

    @abstractmethod
    def _history(self, prompt: Prompt) -> list[dict[str, Any]]:
        """The prompt's messages in their wire form (what ``_wire_cache`` serializes)."""

    def request_body(self, prompt: Prompt, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``prompt`` (SDK options such as headers left out)."""
        body, _ = split_sdk_options(self._params(prompt, stream, spliced=False))
        if body.get(self._HISTORY_KEY) is HISTORY:
            body[self._HISTORY_KEY] = self._history(prompt)
        return {**body, "stream": stream}

    def _body(self, prompt: Prompt, *, stream: bool) -> tuple[bytes, dict[str, Any]]:
        """(the JSON body, the SDK request options) for ``prompt``, serialized once, here, and sent
        as they are: ``create()``'s TypedDict transform costs a millisecond a request and its typed
        answers would only be dumped back to dicts. Every parameter reaches the server verbatim,
        known to this SDK version or not (vLLM's ``top_k``, Ollama's ``options``...); messages sent
        before are not serialized again (``WireCache``), and the answer is read raw."""
        params, sdk_options = split_sdk_options(self._params(prompt, stream))
        return history_body(params, self._HISTORY_KEY, stream, prompt, self._wire_cache()), sdk_options

    def _tools(self, prompt: Prompt, *, spliced: bool) -> list[dict[str, Any]] | Spliced | None:
        """The request's ``tools`` field: None without tools; with ``spliced``, their JSON
        serialized once (``_tools_wire``) — unless a layer adds tools of its own, which are joined
        to the list (``layer_params``)."""
        definitions: Sequence[ToolDefinition] = tool_definitions(prompt.options)
        if not definitions:
            return None
        options = prompt.options
        joined = "tools" in self.defaults or (options is not None and "tools" in options.extra)
        if spliced and not joined:
            return self._tools_wire.spliced(definitions)
        return self._tools_wire.build(definitions)
