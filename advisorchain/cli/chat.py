"""``advisorchain chat``: one question (``-p``, or piped on stdin) or the interactive prompt
(``_repl``), on the agent the shared flags describe (``_options``, built by ``_agent``)."""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console

from ..memory import ChatMemory, ChatMemoryRepository
from ._agent import ask, describe_failure, open_agent
from ._display import Display, stdin_is_terminal, watch_provider_retries
from ._options import AgentOptions, agent_options, debug_option
from ._repl import Conversation, Interrupts, Repl, install_collector, offer_repair
from ._sessions import Store, damaged_error, open_store, read_session
from ._setup import CliError, parse_model

__all__ = ["Interrupted", "chat"]


class Interrupted(Exception):
    """Ctrl-C during a one-shot chat, carried past click to the exit code 130."""


@dataclass
class _Run:
    """What one ``chat`` run works with."""

    agent_options: AgentOptions
    display: Display
    question: str | None
    stream: bool
    trace: bool
    debug: bool
    store: Store | None
    repository: ChatMemoryRepository
    conversation: Conversation


@click.command()
@click.option(
    "-p", "--prompt", "prompt", help="Ask one question and exit (else: interactive, or piped stdin)."
)
@agent_options()
@click.option("--no-stream", is_flag=True, help="Wait for whole answers instead of streaming.")
@click.option("--trace", is_flag=True, help="After each answer, show the tree of spans of the run.")
@debug_option
def chat(prompt: str | None, agent: AgentOptions, no_stream: bool, trace: bool, debug: bool) -> int:
    """Chat with a model: interactive (type /help), one-shot with -p, or the question piped on stdin."""
    if agent.model.model is not None:
        parse_model(agent.model.model)
    question = _question(prompt)
    if agent.session is not None and not agent.session.strip():
        raise click.BadParameter("a session needs a name", param_hint="'--session'")
    # on a terminal rich fits its width; in a file or pipe the trace tree is not cropped at 80 columns
    width = None if sys.stderr.isatty() else 200
    display = Display(sys.stdout, Console(stderr=True, highlight=False, soft_wrap=True, width=width))
    store, repository, conversation = _memory(agent)
    run = _Run(agent, display, question, not no_stream, trace, debug, store, repository, conversation)
    try:
        if question is None:
            return _interactive(run)
        with watch_provider_retries(display):
            return asyncio.run(_one_shot(run))
    except KeyboardInterrupt:
        raise Interrupted from None  # past click, which would echo a blank line first
    finally:
        display.stop_spinner()
        if store is not None:
            store.close()


def _question(prompt: str | None) -> str | None:
    """The one question to ask, or None for the interactive prompt."""
    if prompt is not None:
        if not prompt.strip():
            raise click.BadParameter("the question is empty", param_hint="'-p'")
        return prompt
    if stdin_is_terminal():
        return None
    piped = sys.stdin.read().strip()
    if not piped:
        raise click.UsageError('nothing to ask: pass -p "question", or pipe the question in')
    return piped


def _memory(options: AgentOptions) -> tuple[Store | None, ChatMemoryRepository, Conversation]:
    """The store (with --session or --memory) and the conversation the chat starts in."""
    if options.session is None and options.memory is None:
        from ..memory import InMemoryChatMemoryRepository

        return None, InMemoryChatMemoryRepository(), Conversation("chat", None)
    store = open_store(options.memory)
    name = options.session or ChatMemory.DEFAULT_CONVERSATION_ID
    return store, store.repository, Conversation(name, name)


def _check_session(run: _Run, interrupts: Interrupts | None) -> None:
    """A damaged session is repaired (when the user says so on a terminal) or refused in one line."""
    if run.store is None or run.conversation.session is None:
        return
    state = read_session(run.store, run.conversation.session, must_exist=False)
    if not state.unreadable:
        return
    if interrupts is None or not offer_repair(run.store, state, interrupts, run.display):
        raise damaged_error(run.store, state)


def _collector(run: _Run) -> Any:
    return install_collector() if run.trace else None


async def _one_shot(run: _Run) -> int:
    _check_session(run, None)
    collector = _collector(run)
    async with AsyncExitStack() as stack:
        agent = await open_agent(run.agent_options, run.repository, stack, run.display, capture=run.trace)
        assert run.question is not None
        try:
            await ask(
                agent, run.conversation.id, run.question, run.display, stream=run.stream, collector=collector
            )
        except Exception as exc:
            label = run.store.label if run.store is not None else None
            explained = describe_failure(exc, session=run.conversation.session, store_label=label)
            if explained is None:
                raise
            raise CliError(explained) from exc
    return 0


def _interactive(run: _Run) -> int:
    interrupts = Interrupts()
    with interrupts.installed(), watch_provider_retries(run.display):
        return asyncio.run(_repl(run, interrupts))


async def _repl(run: _Run, interrupts: Interrupts) -> int:
    _check_session(run, interrupts)
    collector = _collector(run)
    async with AsyncExitStack() as stack:
        agent = await open_agent(
            run.agent_options, run.repository, stack, run.display, capture=True, read=interrupts.read_in_turn
        )
        repl = Repl(
            agent,
            run.display,
            interrupts,
            run.conversation,
            store=run.store,
            memory_url=run.agent_options.memory,
            stream=run.stream,
            collector=collector,
            debug=run.debug,
        )
        try:
            return await repl.run()
        finally:
            if repl.store is not None and repl.store is not run.store:
                repl.store.close()
