"""The agent the flags describe (``AgentOptions``), built in one place for every command that runs
one: its model, its tools (MCP servers entered, each call shown), the approver, memory, and one turn
of conversation with what the screen shows meanwhile."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from .._streams import closing
from ..chain.vocabulary import AdvisorParams
from ..client import ChatClient
from ..errors import AdvisorChainError, ModelError, UsageLimitExceeded
from ..memory import ChatMemory, ChatMemoryDecodeError, ChatMemoryRepository
from ..model import ChatModel
from ..usage import RunUsage, UsageLimits
from ._display import (
    AgentMarks,
    Display,
    LineReader,
    ShownTool,
    approver,
    read_line,
    stdin_is_terminal,
    usage_line,
)
from ._options import AgentOptions, BudgetOptions, ModelOptions
from ._setup import CliError, build_model, load_tools, mcp_servers, parse_model, server_of

__all__ = [
    "MAX_MESSAGES",
    "Agent",
    "ModelChoice",
    "GuardKit",
    "agent_client",
    "guard_kit",
    "ask",
    "cli_error_text",
    "close_model",
    "describe_failure",
    "flag_message",
    "open_agent",
    "open_knowledge_advisor",
    "refuse_unpriced_cost_limit",
    "show_citations",
]

MAX_MESSAGES = 200
"""How many messages of a conversation the CLI's memory keeps (and sends)."""


@dataclass(frozen=True)
class ModelChoice:
    """A built model and how it was asked for (``provider:name``), with the options it came from."""

    label: str
    model: ChatModel
    options: ModelOptions

    @property
    def provider(self) -> str:
        """The provider part of the label."""
        return self.label.partition(":")[0]

    @classmethod
    def build(cls, options: ModelOptions) -> ModelChoice:
        """The model ``options`` name (``--model provider:name``, ``--base-url``, ``--timeout``)."""
        if options.model is None:
            raise CliError("no model given: pass --model provider:name")
        provider, name = parse_model(options.model)
        return cls(options.model, build_model(provider, name, options.base_url, options.timeout), options)

    def switched(self, label: str) -> ModelChoice:
        """Another model with the same timeout; the same ``--base-url`` only for the same provider."""
        provider, _ = parse_model(label)
        base_url = self.options.base_url if provider == self.provider else None
        return ModelChoice.build(ModelOptions(label, base_url, self.options.timeout))


@dataclass
class Agent:
    """What one command runs: a model (switchable), a system message, the tools and memory."""

    model: ModelChoice
    system: str | None
    tools: list[ShownTool]
    manager: Any
    repository: ChatMemoryRepository
    knowledge: Any = None
    limits: UsageLimits | None = None
    start: Any = None  # --agents: the agent that starts (an advisorchain.agents.Agent)
    cache: bool = False
    guards: GuardKit | None = None
    memory: ChatMemory = field(init=False)

    def __post_init__(self) -> None:
        from ..memory import MessageWindowChatMemory

        self.memory = MessageWindowChatMemory(self.repository, max_messages=MAX_MESSAGES)

    def use_repository(self, repository: ChatMemoryRepository) -> None:
        """Keep conversations in ``repository`` from now on."""
        self.repository = repository
        self.__post_init__()

    async def switch_model(self, label: str) -> None:
        """Use the model ``label`` from now on; the previous model's client is closed."""
        previous, self.model = self.model, self.model.switched(label)
        await close_model(previous.model)

    async def aclose(self) -> None:
        """Close the model's client."""
        await close_model(self.model.model)

    def client(self) -> ChatClient:
        """A client for the agent as it is now."""
        return agent_client(
            self.model.model,
            self.system,
            list(self.tools),
            self.memory,
            self.manager,
            self.knowledge,
            self.limits,
            self.start,
            cache=self.cache,
            guards=self.guards,
        )


@dataclass(frozen=True)
class GuardKit:
    """The guardrails ``--guard`` and ``--guard-words`` ask for: guards on what is sent, on the
    answer (released sentence by sentence) and on tool results. A trip ends the answer with the
    guard's message (``on_trip="finish"``)."""

    input: tuple[Any, ...] = ()
    output: tuple[Any, ...] = ()
    tool_results: tuple[Any, ...] = ()

    def advisors(self) -> list[Any]:
        """The guardrail advisors of the agent (none without guards)."""
        from ..guardrails import InputGuardrailAdvisor, OutputGuardrailAdvisor

        made: list[Any] = []
        if self.input:
            made.append(InputGuardrailAdvisor(*self.input, on_trip="finish"))
        if self.output:
            made.append(OutputGuardrailAdvisor(*self.output, on_trip="finish", release="sentence"))
        return made


def guard_kit(options: AgentOptions) -> GuardKit | None:
    """The guardrails of ``options`` (None without any); an unreadable or empty words file is a
    usage error naming it."""
    if not options.guard and options.guard_words is None:
        return None
    from ..guardrails import keyword_guard, pii_guard

    inputs: list[Any] = []
    outputs: list[Any] = []
    results: list[Any] = []
    if "pii" in options.guard:
        redact = pii_guard()
        inputs.append(redact)
        outputs.append(redact)
        results.append(redact)
    if "pii-block" in options.guard:
        block = pii_guard(action="block")
        inputs.append(block)
        outputs.append(block)
        results.append(block)
    if options.guard_words is not None:
        words = _guard_words(options.guard_words)
        refuse = keyword_guard(words, message="I can't discuss that.")
        inputs.append(refuse)
        outputs.append(refuse)
    return GuardKit(tuple(inputs), tuple(outputs), tuple(results))


def _guard_words(path: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path!r}: {exc}", param_hint="'--guard-words'") from exc
    words = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if not words:
        raise click.BadParameter(f"{path!r} holds no words (one a line)", param_hint="'--guard-words'")
    return words


def agent_client(
    model: ChatModel,
    system: str | None,
    tools: Sequence[object],
    memory: ChatMemory,
    manager: Any,
    knowledge: Any = None,
    limits: UsageLimits | None = None,
    start: Any = None,
    *,
    cache: bool = False,
    guards: GuardKit | None = None,
) -> ChatClient:
    """The agent every command runs (chat, demo, eval, web): memory outside the tool loop (a
    cancelled or failed turn stores nothing), the tool loop with ``manager``, the tools, the system
    text, ``knowledge`` (``--knowledge``: a QuestionAnswerAdvisor, inside memory, outside the loop) and
    what each answer may spend (``--max-cost``, ``--max-requests``); ``start`` is the agent that
    starts (``--agents``); ``cache`` (``--cache``): a PromptCacheAdvisor with its defaults;
    ``guards`` (``--guard``, ``--guard-words``): the guardrails."""
    from ..advisors import MessageChatMemoryAdvisor, PromptCacheAdvisor, ToolCallingAdvisor

    results = guards.tool_results if guards is not None else ()
    advisors: list[Any] = [
        MessageChatMemoryAdvisor(memory),
        ToolCallingAdvisor(manager, tool_result_guards=results),
        *(guards.advisors() if guards is not None else []),
    ]
    if cache:
        advisors.append(PromptCacheAdvisor())
    return ChatClient(
        model,
        default_system=system,
        default_advisors=[*advisors, *([knowledge] if knowledge is not None else [])],
        default_tools=list(tools),
        usage_limits=limits,
        default_agent=start,
    )


async def open_agent(
    options: AgentOptions,
    repository: ChatMemoryRepository,
    stack: AsyncExitStack,
    display: Display,
    *,
    capture: bool,
    read: LineReader = read_line,
) -> Agent:
    """The agent of ``options``: the model built, the MCP servers entered on ``stack`` (which also
    closes the model's client at the end), every tool shown on ``display`` as it runs."""
    from ..tools import ToolCallingManager, tool_callbacks

    agent_tools = load_tools(options.tools)  # usage errors (exit 2) before a missing key (exit 1)
    start = None
    if options.agents is not None:
        from ._agents_file import load_agents

        timeout = options.model.timeout
        start = load_agents(
            options.agents,
            wrap_tool=lambda cb: ShownTool(cb, display, capture=capture),
            build_model=lambda label: ModelChoice.build(ModelOptions(label, None, timeout)).model,
        )
    servers = mcp_servers(options.mcp, options.mcp_url)
    model = ModelChoice.build(options.model)
    refuse_unpriced_cost_limit(options.budget, model.model)
    knowledge = open_knowledge_advisor(options.knowledge, stack)
    manager = ToolCallingManager(approver=approver(display, options.approve_all, stdin_is_terminal(), read))
    agent = Agent(
        model,
        options.system,
        [],
        manager,
        repository,
        knowledge,
        options.budget.limits(),
        cache=options.cache,
        guards=guard_kit(options),
    )
    stack.push_async_callback(agent.aclose)
    entered = [await stack.enter_async_context(server) for server in servers]
    agent.tools = [ShownTool(cb, display, capture=capture) for cb in tool_callbacks(*agent_tools, *entered)]
    agent.start = start
    return agent


def open_knowledge_advisor(url: str | None, stack: AsyncExitStack) -> Any:
    """``--knowledge URL``: the QuestionAnswerAdvisor over that knowledge base (closed with
    ``stack``), or None without the flag."""
    from .knowledge import knowledge_advisor

    opened = knowledge_advisor(url)
    if opened is None:
        return None
    advisor, base = opened
    stack.callback(base.close)
    return advisor


async def close_model(model: ChatModel) -> None:
    """Close the provider SDK's HTTP client inside the loop that used it."""
    close = getattr(getattr(model, "client", None), "close", None)
    if callable(close):
        result = close()
        if inspect.isawaitable(result):
            await result


async def ask(
    agent: Agent,
    conversation_id: str,
    question: str,
    display: Display,
    *,
    stream: bool,
    collector: Any = None,
) -> None:
    """One turn: the question asked, the answer shown as it comes, then what it used (its tokens
    and cost) on a line of its own — or, with ``--trace``, on the request line of the trace tree
    drawn after it."""
    if collector is not None:
        collector.start()
    display.watch_silence(server_of(agent.model.model), agent.model.options.timeout)
    display.waiting()
    spec = agent.client().prompt(question).param(ChatMemory.CONVERSATION_ID, conversation_id)
    context: Mapping[str, Any] | None = None
    marks = AgentMarks(display)  # with --agents: [<agent>] before each answer, a line per handoff
    try:
        if stream:
            async with closing(spec.astream().chat_client_responses()) as chunks:
                async for chunk in chunks:
                    chat = chunk.chat_response
                    if chat is not None and chat.text:
                        display.text(chat.text, marks.opening(chunk.context))
                    context = chunk.context  # the last chunk's holds the citations and the run's usage
        else:
            answer = await spec.acall().chat_client_response()
            text = answer.chat_response.text or "" if answer.chat_response is not None else ""
            display.text(text, marks.opening(answer.context))
            context = answer.context
    finally:
        display.end_answer()
        if context is not None:
            show_citations(display, context)
        if collector is not None:
            from ._trace import render_tree

            display.show(render_tree(collector.take()))
    run = context.get(AdvisorParams.RUN_USAGE) if context is not None else None
    if isinstance(run, RunUsage) and collector is None:  # with --trace the tree's request line says it
        display.note(usage_line(run))


def show_citations(display: Display, context: Mapping[str, Any]) -> None:
    """The sources an answer cites (``--knowledge``), under it: ``[n] file ("title", chunk k)``."""
    from ..advisors import AdvisorParams
    from .knowledge import citation_lines

    lines = citation_lines(context.get(AdvisorParams.CITATIONS) or ())
    if lines:
        display.footer(["Sources:", *(f"  {line}" for line in lines)])


def describe_failure(exc: BaseException, *, session: str | None, store_label: str | None) -> str | None:
    """What to tell the user about a failed turn, with what to do; None when the error's own text
    says it (or it is not one the CLI knows)."""
    flagged = flag_message(exc)
    if flagged is not None:
        return flagged
    if isinstance(exc, ChatMemoryDecodeError) and session is not None:
        where = f" in {store_label}" if store_label else ""
        return (
            f"session {session!r}{where}: {exc.reason} (stored message {exc.position}); "
            f"'advisorchain sessions repair {session}' drops the unreadable messages"
        )
    module = type(exc).__module__.partition(".")[0]
    if module in _STORE_DRIVERS and store_label is not None:
        return f"memory store {store_label}: {type(exc).__name__}: {exc}"
    return None


_STORE_DRIVERS: Sequence[str] = ("sqlite3", "psycopg", "psycopg_pool", "redis")

_LIMIT_FLAGS = {"request_limit": ("--max-requests", "N"), "cost_limit": ("--max-cost", "USD")}
_LIBRARY_TIMEOUT_ADVICE = "; raise the client's timeout or retry"


def flag_message(exc: BaseException) -> str | None:
    """The text of a library error that gives Python advice (``UsageLimits.request_limit``,
    ``RetryChatModel``), told in the command's flags instead; None for any other error. The library's
    own messages stay as they are for library users: this is the CLI's edge."""
    if isinstance(exc, ModelError) and exc.error_type == "timeout":
        what = str(exc).split(_LIBRARY_TIMEOUT_ADVICE, 1)[0]
        return f"{what} (--timeout SECONDS waits longer)"
    if not isinstance(exc, UsageLimitExceeded) or exc.limit_name not in _LIMIT_FLAGS:
        return None
    flag, metavar = _LIMIT_FLAGS[exc.limit_name]
    why = str(getattr(exc, "_advisorchain_why", "was reached")).split(" (give ", 1)[0].split(" (or ", 1)[0]
    so_far = f"the answer so far: {exc.run_usage.describe()}"
    if why.startswith("cannot be"):
        return f"{flag} {exc.limit} {why}; {so_far}. Drop {flag} to go on without it"
    return f"{flag} {exc.limit} {why}; {so_far}. Raise {flag} {metavar} to allow more"


def refuse_unpriced_cost_limit(budget: BudgetOptions, model: ChatModel) -> None:
    """``--max-cost`` on a model with no known price is refused before any request is sent (else
    the first answer would stream, then fail)."""
    if budget.max_cost is None:
        return
    from ..usage import bundled_rates

    provider, name = getattr(model, "provider", None), getattr(model, "model_name", None)
    if isinstance(provider, str) and isinstance(name, str) and bundled_rates(provider, name) is not None:
        return
    raise CliError(
        f"--max-cost cannot be enforced: model {name!r} has no known price; drop --max-cost "
        "(--max-requests N limits an answer without a price)"
    )


def cli_error_text(exc: AdvisorChainError) -> str:
    """What the command line says about ``exc``: in its flags where the library's text names Python."""
    return flag_message(exc) or str(exc)
