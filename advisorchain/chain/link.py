"""The chain's last link: the model call (Spring's ``ChatModelCallAdvisor``), on both paths.

It is always innermost, whatever orders the advisors have. For each call it builds the prompt the
model is sent (``model_prompt``: the retrieval context, then ``entity``'s format instructions,
joined to the last user message), checks it against the run's budget and counts it (the run's
meter), calls the model inside a model span (``chat <model>``, with ``gen_ai.agent.name`` while an
agent is active), prices the answer by the client's prices and gives every tool call of the answer
an id of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from .. import observability as obs
from .._run_meter import StreamTally
from .._streams import closing
from ..errors import ChainConfigurationError, ModelError
from ..model import ChatClientRequest, ChatClientResponse, ChatModel, ChatResponse, Prompt
from .vocabulary import AdvisorParams

if TYPE_CHECKING:
    from .run import Run

__all__ = ["call_model", "model_name", "model_prompt", "raised_in", "stream_model"]


def model_prompt(request: ChatClientRequest) -> Prompt:
    """The prompt the model receives for ``request``: the retrieval context (retrieval advisors),
    then the format instructions (``entity``), join the last user message; the request's own
    prompt is unchanged."""
    context = request.context
    retrieved = context.get(AdvisorParams.RETRIEVAL_CONTEXT)
    fmt = context.get(AdvisorParams.OUTPUT_FORMAT)
    if not retrieved and not fmt:
        return request.prompt
    text = "\n".join(str(part) for part in (retrieved, fmt) if part)
    return request.prompt.with_text_appended_to_last_user(text)


def model_name(model: ChatModel, prompt: Prompt) -> str:
    """The model a call asks for: the prompt's options' model, else the model object's name."""
    if prompt.options is not None and prompt.options.model:
        return prompt.options.model
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)


def _span_attributes(model: ChatModel, prompt: Prompt, request: ChatClientRequest) -> dict[str, object]:
    attributes = obs.model_span_attributes(
        model_name(model, prompt), getattr(model, "provider", None), prompt.options, obs.server_url_of(model)
    )
    agent = request.context.get(AdvisorParams.ACTIVE_AGENT)
    if isinstance(agent, str):
        attributes[obs.AGENT_NAME] = agent
    return attributes


async def call_model(
    run: Run, model: ChatModel, request: ChatClientRequest, traced: bool
) -> ChatClientResponse:
    """One model call for ``request`` in ``run``: checked and counted by the run's meter."""
    meter = run.meter
    prompt, lowered = meter.before_request(model_prompt(request), model)
    try:
        if traced:
            with obs.model_call(
                f"chat {model_name(model, prompt)}", _span_attributes(model, prompt, request)
            ) as record:
                response = await model.call(prompt)
                if meter.prices is not None and type(response) is ChatResponse:
                    response = meter.priced(response, prompt, model)
                record(response)
        else:
            response = await model.call(prompt)
            if meter.prices is not None and type(response) is ChatResponse:
                response = meter.priced(response, prompt, model)
    except BaseException as exc:
        meter.unanswered(exc)
        if isinstance(exc, Exception):
            raised_in(exc, f"model {type(model).__name__}")
        raise
    if not isinstance(response, ChatResponse):
        meter.unanswered()
        raise ModelError(f"{type(model).__name__}.call() returned {response!r}, not a ChatResponse")
    if response.has_tool_calls():
        response = _with_unique_call_ids(response, set())
    meter.after_response(response, prompt, model, lowered)
    return ChatClientResponse(response, request.context)


def stream_model(
    run: Run, model: ChatModel, request: ChatClientRequest, traced: bool
) -> AsyncIterator[ChatClientResponse]:
    """One streamed model call for ``request`` in ``run`` (checked when the stream is made: a
    refused call opens no span)."""
    meter = run.meter
    prompt, lowered = meter.before_request(model_prompt(request), model)
    source = _stream(model, request, prompt, meter.stream(prompt, model, lowered))
    if traced:
        name = model_name(model, request.prompt)
        attributes = _span_attributes(model, prompt, request)
        return obs.model_stream(f"chat {name}", source, attributes, _responses)
    return source


async def _stream(
    model: ChatModel, request: ChatClientRequest, prompt: Prompt, tally: StreamTally
) -> AsyncIterator[ChatClientResponse]:
    context = request.context
    call_ids: set[str] = set()  # tool calls come whole, possibly over several chunks
    failure: BaseException | None = None
    ended = False
    try:
        async with closing(model.stream(prompt)) as stream:
            while True:
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raised_in(exc, f"model {type(model).__name__}")
                    raise
                if not isinstance(chunk, ChatResponse):
                    raise ModelError(f"{type(model).__name__}.stream() yielded {chunk!r}, not a ChatResponse")
                if chunk.has_tool_calls():
                    chunk = _with_unique_call_ids(chunk, call_ids)
                meta = chunk.metadata  # the run's meter: a new usage report or the answer's end
                if meta.usage is not tally.seen or meta.finish_reason is not None:
                    chunk = tally.chunk(chunk)
                elif tally.kept is not None:
                    tally.kept.append(chunk)
                yield ChatClientResponse(chunk, context)
        ended = True
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if not ended:
            tally.abandoned(failure)
    # The answer's text has reached the caller by now: a limit it passed raises after it.
    tally.end()


def _with_unique_call_ids(response: ChatResponse, seen: set[str]) -> ChatResponse:
    """``response`` with each tool call's id unique within the answer (``seen`` holds the ids met
    so far): a repeated id gets a ``_2``, ``_3``... suffix. Providers have been seen repeating ids
    (or sending none); two calls under one id would be answered under one id, and the provider
    could not tell their results apart."""
    ids = [call.id for generation in response.generations for call in generation.output.tool_calls]
    if len(set(ids)) == len(ids) and seen.isdisjoint(ids):  # the usual answer: nothing to rename
        seen.update(ids)
        return response
    generations = []
    changed = False
    for generation in response.generations:
        calls = []
        for call in generation.output.tool_calls:
            new_id, n = call.id, 1
            while new_id in seen:
                n += 1
                new_id = f"{call.id}_{n}"
            seen.add(new_id)
            changed = changed or new_id != call.id
            calls.append(call if new_id == call.id else dataclasses.replace(call, id=new_id))
        output = (
            dataclasses.replace(generation.output, tool_calls=tuple(calls)) if changed else generation.output
        )
        generations.append(dataclasses.replace(generation, output=output) if changed else generation)
    return dataclasses.replace(response, generations=tuple(generations)) if changed else response


def raised_in(exc: BaseException, where: str) -> None:
    """Note on ``exc``, once, the first link it came out of: the advisor or model that raised it
    (outer links see it pass through and leave the note alone). Errors that name their advisor
    already (ChainConfigurationError) get no note."""
    if isinstance(exc, ChainConfigurationError) or getattr(exc, "__advisorchain_raised_in__", None):
        return
    try:
        setattr(exc, "__advisorchain_raised_in__", where)  # noqa: B010
    except (AttributeError, TypeError):  # an exception type that takes no attributes
        return
    exc.add_note(f"(raised in {where})")


def _responses(chunks: list[ChatClientResponse]) -> list[ChatResponse]:
    return [c.chat_response for c in chunks if c.chat_response is not None]
