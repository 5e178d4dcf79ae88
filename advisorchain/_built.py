"""The contract's objects as the hot paths make them, per stream chunk and per model call, without
paying for the checks of their constructors: the values are known good where these are called
(a str text, a tuple of Generations, a read-only context), so the frozen dataclasses' ``__init__``
and ``__post_init__`` — three to five attribute sets through ``object.__setattr__`` each, a copied
metadata dict — would only repeat what the caller knows. The objects are exactly those the
constructors make: same classes, same field values, equal to them.

Only for values that pass the constructors' own checks; everything else goes through them.
"""

from __future__ import annotations

from typing import Any

from .messages import AssistantMessage, ToolCall
from .model import ChatClientResponse, ChatResponse, ChatResponseMetadata, Generation, _Context

__all__ = ["answer", "client_response", "text_delta", "tool_call"]

_new = object.__new__


def _setter(cls: type, name: str) -> Any:
    return cls.__dict__[name].__set__  # the slot's own descriptor: no frozen __setattr__ on the way


_TEXT, _CALLS, _METADATA = (_setter(AssistantMessage, n) for n in ("text", "tool_calls", "metadata"))
_OUTPUT, _FINISH = (_setter(Generation, n) for n in ("output", "finish_reason"))
_GENERATIONS, _RESPONSE_METADATA = (_setter(ChatResponse, n) for n in ("generations", "metadata"))
_CHAT, _CONTEXT = (_setter(ChatClientResponse, n) for n in ("chat_response", "context"))
_CALL_ID, _CALL_NAME, _CALL_ARGUMENTS = (_setter(ToolCall, n) for n in ("id", "name", "arguments"))


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """``ToolCall(call_id, name, arguments)``, three str."""
    call = _new(ToolCall)
    _CALL_ID(call, call_id)
    _CALL_NAME(call, name)
    _CALL_ARGUMENTS(call, arguments)
    return call


def answer(
    text: str | None, calls: tuple[ToolCall, ...], metadata: dict[str, Any], finish_reason: str | None
) -> Generation:
    """``Generation(AssistantMessage(text, calls, metadata), finish_reason)`` for a tuple of calls
    and a metadata dict of the caller's own making (the message keeps it, as the constructor
    would keep its copy)."""
    message = _new(AssistantMessage)
    _TEXT(message, text)
    _CALLS(message, calls)
    _METADATA(message, metadata)
    generation = _new(Generation)
    _OUTPUT(generation, message)
    _FINISH(generation, finish_reason)
    return generation


def text_delta(text: str, metadata: ChatResponseMetadata) -> ChatResponse:
    """``ChatResponse((Generation(AssistantMessage(text)),), metadata)``: one streamed text delta."""
    message = _new(AssistantMessage)
    _TEXT(message, text)
    _CALLS(message, ())
    _METADATA(message, {})
    generation = _new(Generation)
    _OUTPUT(generation, message)
    _FINISH(generation, None)
    response = _new(ChatResponse)
    _GENERATIONS(response, (generation,))
    _RESPONSE_METADATA(response, metadata)
    return response


def client_response(chat: ChatResponse | None, context: _Context) -> ChatClientResponse:
    """``ChatClientResponse(chat, context)`` for a context that is a request's or response's
    already (read-only, so shared as the constructor would share it)."""
    response = _new(ChatClientResponse)
    _CHAT(response, chat)
    _CONTEXT(response, context)
    return response
