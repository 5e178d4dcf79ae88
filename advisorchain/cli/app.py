"""The ``advisorchain`` command: ``chat``, ``sessions``, ``demo``, ``eval``, on click with rich output."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import AdvisorChainError
from ..memory import ChatMemory, ChatMemoryRepository
from ..messages import AssistantMessage, Message, ToolResponseMessage
from ..model import ChatModel
from ._display import Display, ShownTool, approver, ask_line, stdin_is_terminal, watch_provider_retries
from ._setup import (
    DATA_DIR_ENV,
    CliError,
    build_model,
    load_tools,
    mcp_servers,
    open_repository,
    parse_model,
)
from .evals import eval_command
from .web import web_command

__all__ = ["app", "main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Interrupted(Exception):
    """Ctrl-C, carried past click to the exit code 130."""


class _Group(click.Group):
    """A click group whose errors end in one line and an exit code (0, 1, 2, 130)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; map failures to one line on stderr and an exit code."""
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv or os.environ.get("ADVISORCHAIN_DEBUG") == "1"
        code = self._run(argv, prog_name or "advisorchain", debug, **extra)
        try:
            sys.stdout.flush()  # a reader that stopped early (`| head`) shows here at the latest
        except BrokenPipeError:
            _silence_stdout()
        if standalone_mode:
            sys.exit(code)
        return code

    def _run(self, argv: list[str], prog_name: str, debug: bool, **extra: Any) -> int:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        try:
            result = super().main(argv, prog_name, standalone_mode=False, **extra)
            return result if isinstance(result, int) else EXIT_OK
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else prog_name
            _one_line(err, f"{exc.format_message()} (see '{where} --help')")
            return EXIT_USAGE
        except click.Abort:
            _one_line(err, "interrupted")
            return EXIT_INTERRUPTED
        except (KeyboardInterrupt, Interrupted):
            _one_line(err, "interrupted")
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_OK
        except click.ClickException as exc:
            _one_line(err, exc.format_message())
            return exc.exit_code
        except Exception as exc:
            if debug:
                err.print(traceback.format_exc(), markup=False, highlight=False, end="")
            elif isinstance(exc, AdvisorChainError):
                _one_line(err, str(exc))
            else:
                _one_line(err, f"{type(exc).__name__}: {exc} (run again with --debug for the traceback)")
            return EXIT_FAILURE


def _one_line(err: Console, message: str) -> None:
    text = " ".join(message.split())
    err.print(f"[bold red]error:[/] {escape(text)}", highlight=False)


def _silence_stdout() -> None:
    """After a closed pipe, send what is left of stdout nowhere, so exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _debug_option(f: Any) -> Any:
    return click.option("--debug", is_flag=True, help="Show the traceback of a failure.")(f)


@click.group(name="advisorchain", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="advisorchain", prog_name="advisorchain")
@_debug_option
def app(debug: bool) -> None:
    """Spring AI's advisor chain for Python: chat with tools and memory, and see every hop."""


app.add_command(eval_command)
app.add_command(web_command)


# -- chat ----------------------------------------------------------------------------------------


@dataclass
class ChatSettings:
    """What ``advisorchain chat`` was asked to do."""

    model: ChatModel
    model_label: str
    system: str | None
    tools: list[object]
    mcp: list[Any]
    repository: ChatMemoryRepository
    conversation_id: str
    session: str | None
    stream: bool
    trace: bool
    approve_all: bool


@app.command()
@click.option(
    "-p", "--prompt", "prompt", help="Ask one question and exit (else: interactive, or piped stdin)."
)
@click.option(
    "-m",
    "--model",
    default="openai:gpt-4o-mini",
    show_default=True,
    envvar="ADVISORCHAIN_MODEL",
    help="provider:name, provider one of openai, openai-responses, anthropic.",
)
@click.option("--base-url", help="Any OpenAI-compatible (or Anthropic-compatible) server.")
@click.option("--system", help="A system message.")
@click.option("--tools", "tools", multiple=True, metavar="MODULE:OBJECT", help="Tools to offer (repeatable).")
@click.option("--mcp", "mcp", multiple=True, metavar='"COMMAND ARGS"', help="An MCP server over stdio.")
@click.option("--mcp-url", "mcp_url", multiple=True, metavar="URL", help="An MCP server over HTTP.")
@click.option("--session", help="Keep the conversation under this name (see 'advisorchain sessions').")
@click.option(
    "--memory",
    metavar="URL",
    help="Where sessions live: sqlite:///file, postgresql://…, redis://… (default: SQLite in the data dir).",
)
@click.option("--no-stream", is_flag=True, help="Wait for whole answers instead of streaming.")
@click.option("--trace", is_flag=True, help="After each answer, show the tree of spans of the run.")
@click.option("-y", "--yes", "approve_all", is_flag=True, help="Approve every tool call that needs approval.")
@_debug_option
def chat(
    prompt: str | None,
    model: str,
    base_url: str | None,
    system: str | None,
    tools: tuple[str, ...],
    mcp: tuple[str, ...],
    mcp_url: tuple[str, ...],
    session: str | None,
    memory: str | None,
    no_stream: bool,
    trace: bool,
    approve_all: bool,
    debug: bool,
) -> int:
    """Chat with a model: interactive, one-shot with -p, or the question piped on stdin."""
    provider, name = parse_model(model)
    question = prompt
    interactive = False
    if question is None:
        if stdin_is_terminal():
            interactive = True
        else:
            question = sys.stdin.read().strip()
            if not question:
                raise click.UsageError('nothing to ask: pass -p "question", or pipe the question in')
    elif not question.strip():
        raise click.BadParameter("the question is empty", param_hint="'-p'")
    loaded_tools = load_tools(tools)
    servers = mcp_servers(mcp, mcp_url)
    if session is not None and not session.strip():
        raise click.BadParameter("a session needs a name", param_hint="'--session'")
    if session is not None or memory is not None:
        repository = open_repository(memory)
        conversation_id = session or ChatMemory.DEFAULT_CONVERSATION_ID
    else:
        from ..memory import InMemoryChatMemoryRepository

        repository, conversation_id = InMemoryChatMemoryRepository(), "chat"
    settings = ChatSettings(
        model=build_model(provider, name, base_url),
        model_label=model,
        system=system,
        tools=loaded_tools,
        mcp=servers,
        repository=repository,
        conversation_id=conversation_id,
        session=session or (conversation_id if memory is not None else None),
        stream=not no_stream,
        trace=trace,
        approve_all=approve_all,
    )
    # on a terminal rich fits its width; in a file or pipe the trace tree is not cropped at 80 columns
    width = None if sys.stderr.isatty() else 200
    display = Display(sys.stdout, Console(stderr=True, highlight=False, soft_wrap=True, width=width))
    try:
        with watch_provider_retries(display):
            return asyncio.run(_chat(settings, display, question, interactive))
    except KeyboardInterrupt:
        raise Interrupted from None  # past click, which would echo a blank line first
    finally:
        display.stop_spinner()
        close = getattr(repository, "close", None)
        if callable(close):
            close()


async def _chat(settings: ChatSettings, display: Display, question: str | None, interactive: bool) -> int:
    from ..advisors import MessageChatMemoryAdvisor, ToolCallingAdvisor
    from ..client import ChatClient
    from ..memory import MessageWindowChatMemory
    from ..tools import ToolCallingManager, tool_callbacks

    collector = None
    if settings.trace:
        try:
            from ._trace import SpanCollector
        except ImportError as exc:
            raise CliError(
                f"--trace needs the OpenTelemetry SDK ({exc}): pip install 'advisorchain[cli]'"
            ) from exc
        collector = SpanCollector.install()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(_close_model, settings.model)
        entered = [await stack.enter_async_context(server) for server in settings.mcp]
        callbacks = [
            ShownTool(cb, display, capture=settings.trace) for cb in tool_callbacks(*settings.tools, *entered)
        ]
        manager = ToolCallingManager(approver=approver(display, settings.approve_all, stdin_is_terminal()))
        client = ChatClient(
            settings.model,
            default_system=settings.system,
            default_advisors=[
                MessageChatMemoryAdvisor(MessageWindowChatMemory(settings.repository, max_messages=200)),
                ToolCallingAdvisor(manager),
            ],
            default_tools=callbacks,
        )
        if question is not None:
            await _turn(client, settings, display, question, collector)
            return EXIT_OK
        where = f", session {settings.session!r}" if settings.session else ""
        display.err.print(
            f"advisorchain chat with {settings.model_label}{where}; {len(callbacks)} tool(s). "
            "Ctrl-D or /exit to quit.",
            style="dim",
            markup=False,
        )
        _load_history()
        try:
            while True:
                line = await ask_line("you> ", display)
                if line is None:  # end of input (Ctrl-D): leave the prompt's line
                    display.err.print()
                    return EXIT_OK
                if line.strip() in {"/exit", "/quit"}:
                    return EXIT_OK
                if not line.strip():
                    continue
                try:
                    await _turn(client, settings, display, line, collector)
                except AdvisorChainError as exc:
                    display.end_answer()
                    _one_line(display.err, str(exc))
        finally:
            _save_history()


async def _close_model(model: ChatModel) -> None:
    """Close the provider SDK's HTTP client inside the loop that used it."""
    close = getattr(getattr(model, "client", None), "close", None)
    if callable(close):
        result = close()
        if inspect.isawaitable(result):
            await result


async def _turn(client: Any, settings: ChatSettings, display: Display, question: str, collector: Any) -> None:
    if collector is not None:
        collector.start()
    display.waiting()
    spec = client.prompt(question).param(ChatMemory.CONVERSATION_ID, settings.conversation_id)
    try:
        if settings.stream:
            async for delta in spec.astream().content():
                display.text(delta)
        else:
            display.text(await spec.acall().content() or "")
    finally:
        display.end_answer()
        if collector is not None:
            from ._trace import render_tree

            display.err.print(render_tree(collector.take()))


def _history_file() -> Path | None:
    base = os.environ.get(DATA_DIR_ENV)
    if base:
        return Path(base) / "chat_history"
    try:
        import platformdirs

        return Path(platformdirs.user_data_dir("advisorchain", appauthor=False)) / "chat_history"
    except OSError:
        return None


def _load_history() -> None:
    try:
        import readline
    except ImportError:  # no line editing on this platform
        return
    path = _history_file()
    if path is not None and path.exists():
        readline.read_history_file(path)


def _save_history() -> None:
    try:
        import readline
    except ImportError:
        return
    path = _history_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(path)


# -- sessions --------------------------------------------------------------------------------------

_memory_option = click.option(
    "--memory",
    metavar="URL",
    help="sqlite:///file, postgresql://…, redis://… (default: SQLite in the data dir).",
)


@app.group()
def sessions() -> None:
    """List, show and delete saved chat sessions."""


@sessions.command("list")
@_memory_option
@_debug_option
def sessions_list(memory: str | None, debug: bool) -> None:
    """The saved sessions, with their message counts."""
    repository = open_repository(memory)
    try:
        names = sorted(repository.find_conversation_ids())
        if not names:
            click.echo("No sessions yet: start one with advisorchain chat --session NAME.")
            return
        table = Table("session", "messages")
        for name in names:
            table.add_row(name, str(len(repository.find_by_conversation_id(name))))
        Console(highlight=False).print(table)
    finally:
        _close(repository)


@sessions.command("show")
@click.argument("name")
@_memory_option
@_debug_option
def sessions_show(name: str, memory: str | None, debug: bool) -> None:
    """Every message of session NAME."""
    repository = open_repository(memory)
    try:
        messages = _existing(repository, name)
        for message in messages:
            click.echo(_render_message(message))
    finally:
        _close(repository)


@sessions.command("delete")
@click.argument("name")
@_memory_option
@_debug_option
def sessions_delete(name: str, memory: str | None, debug: bool) -> None:
    """Delete session NAME."""
    repository = open_repository(memory)
    try:
        count = len(_existing(repository, name))
        repository.delete_by_conversation_id(name)
        click.echo(f"Deleted session {name!r} ({count} messages).")
    finally:
        _close(repository)


def _existing(repository: ChatMemoryRepository, name: str) -> list[Message]:
    messages = repository.find_by_conversation_id(name)
    if not messages and name not in repository.find_conversation_ids():
        raise CliError(f"no session {name!r}; 'advisorchain sessions list' shows the saved ones")
    return messages


def _render_message(message: Message) -> str:
    role = message.type.value
    if isinstance(message, ToolResponseMessage):
        return "\n".join(f"tool {r.name} [{r.id}]: {r.response_data}" for r in message.responses)
    text = message.text or ""
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments}) [{c.id}]" for c in message.tool_calls)
        return f"{role}: {text}{' ' if text else ''}asks for {calls}"
    return f"{role}: {text}"


def _close(repository: ChatMemoryRepository) -> None:
    close = getattr(repository, "close", None)
    if callable(close):
        close()


# -- demo ------------------------------------------------------------------------------------------


@app.command()
@click.option(
    "-m", "--model", help="Run live: provider:name (e.g. openai:gpt-4o-mini), or a name for --provider."
)
@click.option(
    "--provider",
    type=click.Choice(["scripted", "openai", "openai-responses", "anthropic"]),
    help="The provider of --model (default: scripted without --model, openai with it).",
)
@click.option("--base-url", help="Any OpenAI-compatible server, for a live run.")
@click.option("--stream", is_flag=True, help="Stream the first answer.")
@click.option(
    "--db", type=click.Path(dir_okay=False, path_type=Path), help="SQLite file (default: a temp dir)."
)
@_debug_option
def demo(
    model: str | None, provider: str | None, base_url: str | None, stream: bool, db: Path | None, debug: bool
) -> None:
    """Run an agent through the whole advisor chain (offline on a scripted model by default)."""
    from .demo import DEFAULT_MODELS, run_demo, scripted_model

    out: TextIO = sys.stdout
    chosen = _demo_model(model, provider, base_url, DEFAULT_MODELS)
    if chosen is None:
        click.echo(
            "A scripted model plays the LLM here (offline, no key needed). To run it live: "
            "advisorchain demo --model openai:gpt-4o-mini (key from OPENAI_API_KEY).",
            file=out,
        )
        llm = scripted_model()
    else:
        click.echo(f"Running live on {chosen[0]}:{chosen[1]}.", file=out)
        llm = build_model(chosen[0], chosen[1], base_url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run_demo(out, llm, db or Path(tmp) / "demo.sqlite3", stream)
    finally:
        if chosen is not None:  # the sync calls ran on the bridge loop: close the client there
            from .._sync import run

            run(_close_model(llm), "demo", "demo")


def _demo_model(
    model: str | None, provider: str | None, base_url: str | None, defaults: dict[str, str]
) -> tuple[str, str] | None:
    if model is not None and ":" in model:
        if provider not in (None, "scripted"):
            raise click.UsageError(
                f"--model {model!r} names its provider already; drop --provider {provider}"
            )
        return parse_model(model)
    if provider == "scripted":
        if model is not None or base_url is not None:
            raise click.UsageError("the scripted model takes no --model/--base-url; drop --provider scripted")
        return None
    if provider is None and model is None:
        if base_url is not None:
            raise click.UsageError("--base-url needs --model, e.g. --model openai:llama3.2")
        return None
    chosen = provider or "openai"
    return chosen, model or defaults[chosen]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``advisorchain`` command; returns the exit code."""
    code: int = app.main(argv, prog_name="advisorchain", standalone_mode=False)
    return code
