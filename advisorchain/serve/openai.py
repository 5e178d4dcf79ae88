"""``openai_app``: any ChatClient behind OpenAI's Chat Completions API (``GET /v1/models``,
``POST /v1/chat/completions``), so every OpenAI client — the SDKs, chat UIs, IDE plug-ins — talks
to the agent with its memory, approvals, budgets and guardrails intact (API.md §20).

Answers are the ``openai`` package's own models (``ChatCompletion``, ``ChatCompletionChunk``,
``Model``); the streamed text chunk is that model's JSON with the text spliced in (the hot path).
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from openai.types import CompletionUsage, Model
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageToolCallUnion,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
from openai.types.chat.chat_completion_chunk import (
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._streams import closing
from ..advisors import AdvisorParams
from ..client import ChatClient
from ..errors import UsageLimitExceeded
from ..memory import ChatMemory
from ..messages import (
    AssistantMessage,
    Media,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..model import ChatClientResponse, ChatOptions, Usage
from ..tools import ToolDefinition
from ..usage import RunUsage
from ._http import EventStream, Guard, Refusal, error_line, until_disconnect
from ._turns import Paused, Plan, ServeCore, TurnInput

__all__ = ["APPROVAL_FLAG", "openai_app"]

APPROVAL_FLAG = "x-advisorchain-approval"
"""Set (``true``) on a returned tool call that is the agent's own and waits for approval: answer it
with a ``tool`` message whose content is ``{"approved": true}`` or ``{"approved": false,
"reason": "..."}``."""

CONVERSATION_HEADER = "x-conversation-id"
_ROLES = ("system", "developer", "user", "assistant", "tool")
_FINISH = {"stop": "stop", "length": "length", "max_tokens": "length", "tool_calls": "tool_calls"}
_NO_RETRY = {"x-should-retry": "false"}


def openai_app(
    client: ChatClient,
    *,
    token: str | None = None,
    memory: ChatMemory | None = None,
    model_name: str = "advisorchain",
) -> Starlette:
    """``client`` served as OpenAI's Chat Completions API (an ASGI app; serve it with uvicorn).

    ``token``: every request must carry ``Authorization: Bearer <token>`` (the OpenAI SDKs send
    their ``api_key`` so). ``memory``: where conversations live (else the client's memory advisor's,
    else none: the client's resent messages are the conversation); a request names its
    conversation with the ``X-Conversation-Id`` header or the ``user`` field. ``model_name``: the
    one model ``/v1/models`` lists (a request's ``model`` is not checked).

    >>> app = openai_app(ChatClient(model), token="s3cret")
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)
    >>> OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="s3cret").chat.completions.create(...)
    """
    if not isinstance(model_name, str) or not model_name:
        raise ValueError(f"model_name must be a non-empty string, got {model_name!r}")
    core = ServeCore(client, memory)
    served = _OpenAI(core, model_name)
    app = Starlette(
        routes=[
            Route("/v1/models", served.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", served.model, methods=["GET"]),
            Route("/v1/chat/completions", served.completions, methods=["POST"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
    )
    app.add_middleware(Guard, token=token, errors=error_response)
    return app


def error_response(refusal: Refusal) -> Response:
    """OpenAI's error body for a refusal: ``{"error": {"message", "type", "code", "param"}}``."""
    kind = {429: "usage_limit_exceeded", 500: "server_error"}.get(refusal.status, "invalid_request_error")
    body = {"error": {"message": refusal.message, "type": kind, "code": refusal.code, "param": refusal.param}}
    headers = {**_NO_RETRY, "www-authenticate": "Bearer"} if refusal.status == 401 else dict(_NO_RETRY)
    return JSONResponse(body, status_code=refusal.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return error_response(Refusal(404, f"no such path: {request.url.path}", "not_found"))
    if status == 405:
        return error_response(Refusal(405, f"{request.method} is not allowed here", "method_not_allowed"))
    return error_response(Refusal(status, "the request failed", "server_error"))


class _OpenAI:
    def __init__(self, core: ServeCore, model_name: str) -> None:
        self.core = core
        self.model_name = model_name
        self.created = int(time.time())

    def _model(self) -> Model:
        return Model(id=self.model_name, created=self.created, object="model", owned_by="advisorchain")

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model().model_dump(mode="json")]})

    async def model(self, request: Request) -> Response:
        if request.path_params["model_id"] != self.model_name:
            return error_response(
                Refusal(
                    404,
                    f"no model {request.path_params['model_id']!r}; this server serves {self.model_name!r}",
                    "not_found",
                    "model",
                )
            )
        return JSONResponse(self._model().model_dump(mode="json"))

    async def completions(self, request: Request) -> Response:
        try:
            body = _json_object(await request.body())
            conversation = _conversation(request, body)
            turn = _turn(body, conversation)
            stream = _flag(body, "stream")
            usage_chunk = _include_usage(body, stream)
        except Refusal as refusal:
            return error_response(refusal)
        if stream:
            return EventStream(self._stream(turn, usage_chunk))
        try:
            answer = await until_disconnect(request.receive, self._call(turn))
        except Refusal as refusal:
            return error_response(refusal)
        if answer is None:  # the client went away: the run was cancelled, nothing stored
            return Response(status_code=499)
        return JSONResponse(answer)

    async def _call(self, turn: TurnInput) -> dict[str, Any]:
        async with self.core.turn(turn.conversation_id) as held:
            plan = self.core.plan(turn, held)
            try:
                response = await plan.spec.acall().chat_client_response()
            except BaseException as exc:
                self.core.abandon(plan)
                raise _refusal(exc) from None
        return self._completion(plan, response)

    def _completion(self, plan: Plan, response: ChatClientResponse) -> dict[str, Any]:
        chat = response.chat_response
        message = chat.result.output if chat is not None and chat.result is not None else None
        reason = chat.finish_reason if chat is not None else None
        paused = self.core.paused(plan, response.context, message)
        text = message.text if message is not None else None
        calls = _returned_calls(paused)
        completion = ChatCompletion(
            id=_id(),
            object="chat.completion",
            created=int(time.time()),
            model=self.model_name,
            choices=[
                Choice(
                    index=0,
                    message=ChatCompletionMessage(
                        role="assistant", content=text, tool_calls=list(calls) or None
                    ),
                    finish_reason="tool_calls" if calls else _finish(reason),  # type: ignore[arg-type]
                )
            ],
            usage=_usage(_run_usage(response.context), chat.metadata.usage if chat is not None else None),
        )
        return completion.model_dump(mode="json", exclude_none=True)

    async def _stream(self, turn: TurnInput, usage_chunk: bool) -> AsyncIterator[bytes]:
        frames = _Frames(self.model_name)
        try:
            async with self.core.turn(turn.conversation_id) as held:
                plan = self.core.plan(turn, held)
                yield frames.first()
                try:
                    async for frame in self._chunks(plan, frames, usage_chunk):
                        yield frame
                except BaseException:
                    self.core.abandon(plan)
                    raise
        except Exception as exc:  # after the first chunk: the error, then the stream's end
            yield frames.error(_refusal(exc))
        yield b"data: [DONE]\n\n"

    async def _chunks(self, plan: Plan, frames: _Frames, usage_chunk: bool) -> AsyncIterator[bytes]:
        last: ChatClientResponse | None = None
        reason: str | None = None
        usage: Usage | None = None
        message: AssistantMessage | None = None
        async with closing(plan.spec.astream().chat_client_responses()) as source:
            async for chunk in source:
                last = chunk
                chat = chunk.chat_response
                if chat is None:
                    continue
                text = chat.text
                if text:
                    yield frames.text(text)
                if chat.finish_reason is not None:
                    reason = chat.finish_reason
                    message = chat.result.output if chat.result is not None else None
                if chat.metadata.usage is not None:
                    usage = chat.metadata.usage
        context = last.context if last is not None else {}
        paused = self.core.paused(plan, context, message)
        calls = _returned_calls(paused)
        if calls:
            yield frames.tool_calls(paused)
        yield frames.finish("tool_calls" if calls else _finish(reason))
        if usage_chunk:
            yield frames.usage(_usage(_run_usage(context), usage))


class _Frames:
    """The SSE frames of one streamed completion, as ``ChatCompletionChunk`` JSON."""

    def __init__(self, model_name: str) -> None:
        self.id = _id()
        self.created = int(time.time())
        self.model = model_name
        marker = "\x00text\x00"
        template = self._chunk(ChoiceDelta(content=marker)).model_dump_json(exclude_none=True)
        before, after = template.split(json.dumps(marker)[1:-1], 1)
        self._before = ("data: " + before[:-1]).encode()  # up to the opening quote, which dumps adds
        self._after = (after[1:] + "\n\n").encode()

    def _chunk(self, delta: ChoiceDelta | None, finish: str | None = None) -> ChatCompletionChunk:
        choices = [] if delta is None else [ChunkChoice(index=0, delta=delta, finish_reason=finish)]  # type: ignore[arg-type]
        return ChatCompletionChunk(
            id=self.id,
            object="chat.completion.chunk",
            created=self.created,
            model=self.model,
            choices=choices,
        )

    def _frame(self, chunk: ChatCompletionChunk) -> bytes:
        return b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"

    def first(self) -> bytes:
        return self._frame(self._chunk(ChoiceDelta(role="assistant", content="")))

    def text(self, text: str) -> bytes:
        return self._before + json.dumps(text, ensure_ascii=False).encode() + self._after

    def tool_calls(self, paused: Paused | None) -> bytes:
        deltas = []
        for index, (call, caller) in enumerate(paused.calls if paused is not None else ()):
            delta = ChoiceDeltaToolCall(
                index=index,
                id=call.id,
                type="function",
                function=ChoiceDeltaToolCallFunction(name=call.name, arguments=call.arguments),
            )
            if not caller:
                setattr(delta, APPROVAL_FLAG, True)
            deltas.append(delta)
        return self._frame(self._chunk(ChoiceDelta(tool_calls=deltas)))

    def finish(self, reason: str) -> bytes:
        return self._frame(self._chunk(ChoiceDelta(), reason))

    def usage(self, usage: CompletionUsage | None) -> bytes:
        chunk = self._chunk(None)
        chunk.usage = usage or CompletionUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        return self._frame(chunk)

    def error(self, refusal: Refusal) -> bytes:
        kind = {429: "usage_limit_exceeded"}.get(
            refusal.status, "server_error" if refusal.status >= 500 else "invalid_request_error"
        )
        error = {"message": refusal.message, "type": kind, "code": refusal.code, "param": refusal.param}
        return b"data: " + json.dumps({"error": error}, ensure_ascii=False).encode() + b"\n\n"


def _returned_calls(paused: Paused | None) -> list[ChatCompletionMessageToolCallUnion]:
    """The calls the caller must answer: its own tools' calls, and the agent's calls that wait
    for approval (flagged)."""
    if paused is None:
        return []
    calls: list[ChatCompletionMessageToolCallUnion] = []
    for call, caller in paused.calls:
        returned = ChatCompletionMessageFunctionToolCall(
            id=call.id, type="function", function=Function(name=call.name, arguments=call.arguments)
        )
        if not caller:
            setattr(returned, APPROVAL_FLAG, True)
        calls.append(returned)
    return calls


def _refusal(exc: BaseException) -> Refusal:
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, UsageLimitExceeded):
        return Refusal(429, error_line(exc), "usage_limit_exceeded", exc.limit_name)
    if isinstance(exc, Exception):
        return Refusal(500, error_line(exc), "server_error")
    raise exc


def _finish(reason: str | None) -> str:
    return _FINISH.get(reason or "stop", "stop")


def _run_usage(context: Mapping[str, Any]) -> RunUsage | None:
    found = context.get(AdvisorParams.RUN_USAGE)
    return found if isinstance(found, RunUsage) else None


def _usage(run: RunUsage | None, usage: Usage | None) -> CompletionUsage | None:
    totals = run.usage if run is not None else usage
    if totals is None:
        return None
    return CompletionUsage(
        prompt_tokens=totals.prompt_tokens,
        completion_tokens=totals.completion_tokens,
        total_tokens=totals.prompt_tokens + totals.completion_tokens,
    )


def _id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"


# -- the request -------------------------------------------------------------------------------


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Refusal(400, "the body is not JSON: send a JSON object", param=None) from None
    if not isinstance(body, dict):
        raise Refusal(400, "the body must be a JSON object", param=None)
    return body


def _conversation(request: Request, body: Mapping[str, Any]) -> str | None:
    header = request.headers.get(CONVERSATION_HEADER)
    named = header if header is not None else body.get("user")
    if named is None:
        return None
    if not isinstance(named, str) or not named.strip() or len(named) > 200 or not named.isprintable():
        param = "X-Conversation-Id" if header is not None else "user"
        raise Refusal(
            400, f"{param} must be 1 to 200 printable characters naming a conversation", param=param
        )
    return named


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise Refusal(400, f"{name!r} must be true or false", param=name)
    return value


def _include_usage(body: Mapping[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise Refusal(400, "'stream_options' must be an object", param="stream_options")
    if not stream:
        raise Refusal(400, "'stream_options' is only allowed with 'stream': true", param="stream_options")
    value = options.get("include_usage", False)
    if not isinstance(value, bool):
        raise Refusal(
            400, "'stream_options.include_usage' must be true or false", param="stream_options.include_usage"
        )
    return value


def _turn(body: Mapping[str, Any], conversation: str | None) -> TurnInput:
    n = body.get("n")
    if n is not None and n != 1:
        raise Refusal(400, "'n' must be 1: the agent gives one answer", param="n")
    return TurnInput(
        conversation_id=conversation,
        messages=_messages(body.get("messages")),
        resends=True,
        caller_tools=_tools(body.get("tools")),
        decisions_in_results=True,
        options=_options(body),
    )


def _options(body: Mapping[str, Any]) -> ChatOptions | None:
    fields: dict[str, Any] = {}
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Refusal(400, f"{name!r} must be a positive integer", param=name)
        fields.setdefault("max_tokens", value)
    for name, high in (("temperature", 2.0), ("top_p", 1.0)):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
            raise Refusal(400, f"{name!r} must be a number from 0 to {high:g}", param=name)
        fields[name] = float(value)
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > 4:
            raise Refusal(400, "'stop' must be a string or a list of up to 4 strings", param="stop")
        fields["stop"] = tuple(stops)
    return ChatOptions(**fields) if fields else None


def _tools(tools: object) -> list[ToolDefinition]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise Refusal(400, "'tools' must be a list of function tools", param="tools")
    definitions = []
    for index, item in enumerate(tools):
        where = f"tools[{index}]"
        function = item.get("function") if isinstance(item, dict) and item.get("type") == "function" else None
        if not isinstance(function, dict):
            raise Refusal(400, f"{where} must be {{'type': 'function', 'function': {{...}}}}", param=where)
        name = function.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise Refusal(
                400,
                f"{where}.function.name must be a name of 1 to 64 characters",
                param=f"{where}.function.name",
            )
        description = function.get("description") or ""
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(description, str) or not isinstance(parameters, dict):
            raise Refusal(
                400, f"{where}.function needs a string description and an object 'parameters'", param=where
            )
        definitions.append(ToolDefinition(name, description, parameters))
    return definitions


def _messages(messages: object) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise Refusal(400, "'messages' must be a non-empty list of messages", param="messages")
    converted: list[Message] = []
    names: dict[str, str] = {}
    for index, item in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(item, dict) or item.get("role") not in _ROLES:
            raise Refusal(
                400, f"{where} must be an object whose 'role' is one of {', '.join(_ROLES)}", param=where
            )
        role = item["role"]
        if role in ("system", "developer"):
            converted.append(SystemMessage(_text(item.get("content"), f"{where}.content")))
        elif role == "user":
            text, media = _user_content(item.get("content"), f"{where}.content")
            converted.append(UserMessage(text, media=media))
        elif role == "assistant":
            message = _assistant(item, where)
            names.update((c.id, c.name) for c in message.tool_calls)
            converted.append(message)
        else:
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise Refusal(
                    400, f"{where}.tool_call_id must name the call it answers", param=f"{where}.tool_call_id"
                )
            response = ToolResponse(
                call_id, names.get(call_id, ""), _text(item.get("content"), f"{where}.content")
            )
            previous = converted[-1] if converted else None
            if isinstance(previous, ToolResponseMessage):
                converted[-1] = ToolResponseMessage((*previous.responses, response))
            else:
                converted.append(ToolResponseMessage((response,)))
    return converted


def _assistant(item: Mapping[str, Any], where: str) -> AssistantMessage:
    content = item.get("content")
    text = None if content is None else _text(content, f"{where}.content")
    calls: list[ToolCall] = []
    raw_calls = item.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise Refusal(400, f"{where}.tool_calls must be a list", param=f"{where}.tool_calls")
    for index, call in enumerate(raw_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise Refusal(
                400,
                f"{where}.tool_calls[{index}] must be "
                "{'id', 'type': 'function', 'function': {'name', 'arguments'}}",
                param=f"{where}.tool_calls[{index}]",
            )
        calls.append(ToolCall(call["id"], function["name"], function.get("arguments") or "{}"))
    return AssistantMessage(text, tuple(calls))


def _text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise Refusal(400, f"{where} may hold only text parts here", param=where)
            texts.append(part["text"])
        return "".join(texts)
    raise Refusal(400, f"{where} must be a string or a list of content parts", param=where)


def _user_content(content: object, where: str) -> tuple[str, list[Media]]:
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise Refusal(400, f"{where} must be a string or a list of content parts", param=where)
    texts: list[str] = []
    media: list[Media] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            media.append(_image(part["image_url"].get("url"), f"{where}[{index}].image_url.url"))
        else:
            raise Refusal(
                400, f"{where}[{index}] must be a text or image_url part", param=f"{where}[{index}]"
            )
    return "".join(texts), media


def _image(url: object, where: str) -> Media:
    if not isinstance(url, str) or not url:
        raise Refusal(400, f"{where} must be an image URL or a data: URL", param=where)
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        mime, _, encoding = header.partition(";")
        if encoding != "base64" or not mime.startswith("image/"):
            raise Refusal(400, f"{where} must be a base64 data: URL of an image", param=where)
        try:
            return Media(mime, data=base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            raise Refusal(400, f"{where} holds data that is not base64", param=where) from None
    if not url.startswith(("http://", "https://")):
        raise Refusal(400, f"{where} must be an http(s) URL or a data: URL", param=where)
    return Media(mimetypes.guess_type(url)[0] or "image/png", url=url)
