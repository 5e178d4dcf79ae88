"""``a2a_app`` and ``A2AAgentTool``: any ChatClient as an A2A agent, and a remote A2A agent as a
tool of ours (API.md §20), on the official ``a2a-sdk`` (its request handler, task store, JSON-RPC
routes and client; protocol 1.0, the v0.3 method names accepted too).

A task runs one turn of the conversation its ``contextId`` names: ``message/send`` answers the
completed task with the answer as one text artifact, ``message/stream`` the task, a ``working``
status, one artifact update per text delta, then the final status. A call that needs approval makes
the task ``input-required``; a message on that task whose data part is ``{"approvals": {"<call
id>": true | false | "<denial reason>"}}`` resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_data_parts, get_message_text, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as StarletteMessage

from .. import __version__
from .._streams import closing
from ..client import ChatClient
from ..errors import ToolError
from ..memory import ChatMemory
from ..messages import ToolCall, UserMessage
from ..tools import Approved, Denied, ToolContext, ToolDefinition
from ..tools.approvals import Decision
from ..tools.callbacks import FixedTool
from ..tools.schema import string_argument
from ._http import Guard, Refusal, error_line
from ._turns import ServeCore, TurnInput

__all__ = ["A2AAgentTool", "a2a_app"]

_TEXT = "text/plain"
_ANSWER_ARTIFACT = "answer"
_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}


def a2a_app(
    client: ChatClient,
    *,
    card: AgentCard | None = None,
    token: str | None = None,
    memory: ChatMemory | None = None,
) -> Starlette:
    """``client`` served as an A2A agent (JSON-RPC at ``/``, the card at
    ``/.well-known/agent-card.json``; an ASGI app to serve with uvicorn).

    ``card``: served as given (else one made from the client: its default agent's name and
    description, one skill per tool, streaming, text in and out, and with ``token`` the bearer
    scheme). ``token``: every request but the card's carries ``Authorization: Bearer <token>``.
    ``memory``: where each ``contextId``'s conversation lives (else the client's memory advisor's,
    else an in-memory store of this app's).

    >>> app = a2a_app(ChatClient(model), token="s3cret")
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    core = ServeCore(client, memory, own_memory=True)
    given = card is not None
    base_card = card if card is not None else _default_card(core, token is not None)
    handler = DefaultRequestHandler(
        agent_executor=_Executor(core), task_store=InMemoryTaskStore(), agent_card=base_card
    )

    async def agent_card(request: Request) -> Response:
        served = base_card
        if not given:
            served = AgentCard()
            served.CopyFrom(base_card)
            del served.supported_interfaces[:]
            served.supported_interfaces.append(
                AgentInterface(url=str(request.base_url), protocol_binding="JSONRPC", protocol_version="1.0")
            )
        return JSONResponse(agent_card_to_dict(served))

    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
        *create_jsonrpc_routes(handler, "/", context_builder=_CallContexts(), enable_v0_3_compat=True),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_Disconnects)
    app.add_middleware(
        Guard, token=token, errors=error_response, open_paths=frozenset({AGENT_CARD_WELL_KNOWN_PATH})
    )
    return app


_CLIENT_GONE = "advisorchain.client_gone"
"""The ASGI scope key (and the a2a-sdk call context's state key) of an ``asyncio.Event`` set when
the client of the request that started a run has gone away (its run is then cancelled)."""


class _CallContexts(DefaultServerCallContextBuilder):
    """The a2a-sdk's call context, with the request's client-gone event in its state."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_CLIENT_GONE] = request.scope.get(_CLIENT_GONE)
        return context


class _Disconnects:
    """Lets the run a request starts see that request's client go away: the request's body is
    handed on, then its client's disconnect sets the event under ``_CLIENT_GONE`` in the request's
    scope (which the call context hands the executor)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        gone = asyncio.Event()
        first = await receive()  # the body, which Guard has read whole
        watcher = asyncio.ensure_future(_watch(receive, gone))
        handed = False

        async def app_receive() -> StarletteMessage:
            nonlocal handed
            if not handed:
                handed = True
                return first
            await gone.wait()
            return {"type": "http.disconnect"}

        scope[_CLIENT_GONE] = gone
        try:
            await self._app(scope, app_receive, send)
        finally:
            watcher.cancel()


async def _watch(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


def error_response(refusal: Refusal) -> Response:
    """A refusal at the HTTP edge as a JSON-RPC error (id null) with the refusal's status."""
    code = {401: -32001, 403: -32003, 413: -32600}.get(refusal.status, -32600)
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": refusal.message}}
    headers = {"www-authenticate": "Bearer"} if refusal.status == 401 else None
    return JSONResponse(body, status_code=refusal.status, headers=headers)


def _default_card(core: ServeCore, bearer: bool) -> AgentCard:
    agent = getattr(core.client, "default_agent", None)
    name = getattr(agent, "name", None) or "advisorchain"
    description = getattr(agent, "description", None) or "An advisorchain agent."
    card = AgentCard(
        name=name,
        description=description,
        version=__version__,
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=[_TEXT],
        default_output_modes=[_TEXT],
        skills=[
            AgentSkill(
                id=t.definition.name,
                name=t.definition.name,
                description=t.definition.description,
                tags=["tool"],
            )
            for t in core.client.default_tool_callbacks()
        ],
        supported_interfaces=[AgentInterface(url="/", protocol_binding="JSONRPC", protocol_version="1.0")],
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class _Executor(AgentExecutor):
    """One task: one turn of the conversation its context names (or the resume of a task that
    waits for approvals)."""

    def __init__(self, core: ServeCore) -> None:
        self.core = core

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the turn, publishing the task's status and its answer as it streams."""
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        updater = TaskUpdater(event_queue, task_id, context_id)
        current = context.current_task
        if current is None:
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        try:
            turn = self._turn(context, context_id, current)
        except Refusal as refusal:
            await updater.reject(updater.new_agent_message([new_text_part(refusal.message)]))
            return
        await updater.start_work()
        gone = context.call_context.state.get(_CLIENT_GONE) if context.call_context is not None else None
        run = asyncio.ensure_future(self._run(turn, updater))
        watch = asyncio.ensure_future(gone.wait() if gone is not None else asyncio.Event().wait())
        try:
            await asyncio.wait({run, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (run, watch):
                task.cancel()
            await asyncio.wait({run, watch})
        if run.cancelled():  # its client went away: the run stopped, nothing of the turn stored
            with contextlib.suppress(RuntimeError):
                await updater.cancel()
            return
        failure = run.exception()
        if failure is not None:
            await updater.failed(updater.new_agent_message([new_text_part(error_line(failure))]))

    def _turn(self, context: RequestContext, context_id: str, current: Any) -> TurnInput:
        message = context.message
        if message is None:
            raise Refusal(400, "the request holds no message")
        waiting = current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        decisions = _approvals(message.parts)
        if waiting and decisions is None:
            raise Refusal(
                400,
                'this task waits for approvals: send a data part {"approvals": {"<call id>": true | false | '
                '"<denial reason>"}}',
            )
        if decisions is not None:
            if not waiting:
                raise Refusal(400, "approvals go on a task that waits for them (input-required)")
            return TurnInput(conversation_id=context_id, resends=False, decisions=decisions)
        text = get_message_text(message)
        if not text.strip():
            raise Refusal(400, "the message holds no text")
        return TurnInput(conversation_id=context_id, messages=[UserMessage(text)], resends=False)

    async def _run(self, turn: TurnInput, updater: TaskUpdater) -> None:
        async with self.core.turn(turn.conversation_id) as held:
            plan = self.core.plan(turn, held)
            appended = False
            last = None
            message = None
            async with closing(plan.spec.astream().chat_client_responses()) as source:
                async for chunk in source:
                    last = chunk
                    chat = chunk.chat_response
                    if chat is None:
                        continue
                    text = chat.text
                    if text:
                        await updater.add_artifact(
                            [new_text_part(text)],
                            artifact_id=_ANSWER_ARTIFACT,
                            name="answer",
                            append=appended,
                        )
                        appended = True
                    if chat.finish_reason is not None and chat.result is not None:
                        message = chat.result.output
            paused = self.core.paused(plan, last.context if last is not None else {}, message)
        if paused is not None and paused.calls:
            await updater.requires_input(
                updater.new_agent_message([new_text_part(_waiting_text(paused.calls))])
            )
            return
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The run was cancelled (its task stopped; memory stores nothing of the turn)."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        with contextlib.suppress(RuntimeError):  # already in a final state
            await updater.cancel()


def _waiting_text(calls: Sequence[tuple[ToolCall, bool]]) -> str:
    listed = "; ".join(f"{c.name}({c.arguments}) [call id {c.id}]" for c, _ in calls)
    return (
        f"waiting for approval of {listed}. Answer on this task with a data part "
        '{"approvals": {"<call id>": true | false | "<denial reason>"}}'
    )


def _approvals(parts: Sequence[Part]) -> dict[str, Decision] | None:
    for data in get_data_parts(parts):
        if isinstance(data, dict) and "approvals" in data:
            given = data["approvals"]
            if not isinstance(given, dict) or not given:
                raise Refusal(400, '"approvals" must map each waiting call id to true, false or a reason')
            decisions: dict[str, Decision] = {}
            for call_id, value in given.items():
                if value is True:
                    decisions[call_id] = Approved()
                elif value is False:
                    decisions[call_id] = Denied()
                elif isinstance(value, str):
                    decisions[call_id] = Denied(value or None)
                else:
                    raise Refusal(400, f"the approval for {call_id!r} must be true, false or a reason")
            return decisions
    return None


# -- the client side -----------------------------------------------------------------------------


class A2AAgentTool(FixedTool):
    """A remote A2A agent as one tool taking ``{"input": "<text>"}``: its name and description come
    from the agent's card (fetched when the tool is first used), each call is one ``message/send``
    on a context kept per conversation id; a failed or rejected task answers ``Error: `` and its
    message.

    >>> ChatClient(model, default_tools=[A2AAgentTool("http://127.0.0.1:8001/", token="s3cret")])
    """

    def __init__(
        self, url: str, *, name: str | None = None, token: str | None = None, timeout: float = 60.0
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be the agent's http(s) URL, got {url!r}")
        if name is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError(f"name must match [A-Za-z0-9_-]{{1,64}}, got {name!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        super().__init__(ToolDefinition(name or "a2a_agent", "A remote A2A agent.", _INPUT_SCHEMA))
        self._url = url
        self._name = name
        self._token = token
        self._timeout = float(timeout)
        self._card: AgentCard | None = None
        self._tried = False
        self._contexts: dict[str, str] = {}

    @property
    def definition(self) -> ToolDefinition:
        """The tool's name and description, from the agent's card: fetched (blocking, once) the
        first time the definition is needed, unless ``await fetch_card()`` fetched it before — do
        that when the agent is served from this same event loop. A card that cannot be fetched
        leaves the given name (else ``a2a_agent``) and a placeholder until the first call."""
        if self._card is None and not self._tried:
            self._tried = True
            with contextlib.suppress(Exception):
                response = httpx.get(
                    self._url.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH,
                    headers=self._headers(),
                    timeout=min(self._timeout, 10.0),
                )
                response.raise_for_status()
                self._adopt(parse_agent_card(response.json()))
        return self._definition

    def _adopt(self, card: AgentCard) -> AgentCard:
        self._card = card
        name = self._name or (re.sub(r"[^A-Za-z0-9_-]", "_", card.name)[:64] or "a2a_agent")
        self._definition = ToolDefinition(name, card.description or "A remote A2A agent.", _INPUT_SCHEMA)
        return card

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    async def _ensure_card(self, http: httpx.AsyncClient) -> AgentCard:
        if self._card is None:
            return self._adopt(await A2ACardResolver(http, self._url).get_agent_card())
        return self._card

    async def fetch_card(self) -> AgentCard:
        """Fetch the agent's card now (its name and description become the tool's)."""
        async with httpx.AsyncClient(headers=self._headers(), timeout=self._timeout) as http:
            return await self._ensure_card(http)

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Send the input to the remote agent and answer its reply."""
        text = string_argument(arguments, self.definition.name, "input")
        conversation = str(context.get("conversation_id") or "default") if context is not None else "default"
        async with httpx.AsyncClient(headers=self._headers(), timeout=self._timeout) as http:
            card = await self._ensure_card(http)
            remote = await create_client(card, ClientConfig(streaming=False, httpx_client=http))
            message = Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                parts=[Part(text=text)],
                context_id=self._contexts.get(conversation, ""),
            )
            try:
                return await self._send(remote, message, conversation)
            finally:
                await remote.close()

    async def _send(self, remote: Any, message: Message, conversation: str) -> str:
        answer: list[str] = []
        state = None
        status_text = ""
        try:
            async for response in remote.send_message(SendMessageRequest(message=message)):
                task = response.task if response.HasField("task") else None
                if task is not None:
                    if task.context_id:
                        self._contexts[conversation] = task.context_id
                    state = task.status.state
                    status_text = (
                        get_message_text(task.status.message) if task.status.HasField("message") else ""
                    )
                    answer = ["".join(p.text for p in a.parts) for a in task.artifacts]
                elif response.HasField("message"):
                    answer.append(get_message_text(response.message))
                    state = TaskState.TASK_STATE_COMPLETED
        except Exception as exc:
            raise ToolError(f"the agent {self.definition.name!r} failed: {error_line(exc)}") from exc
        if state in (
            TaskState.TASK_STATE_FAILED,
            TaskState.TASK_STATE_REJECTED,
            TaskState.TASK_STATE_CANCELED,
        ):
            raise ToolError(status_text or f"the agent's task ended {TaskState.Name(state)}")
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            raise ToolError(status_text or "the agent waits for input")
        return "".join(answer)
