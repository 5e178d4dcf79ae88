"""The ``advisorchain`` command: ``chat``, ``sessions``, ``demo``, ``eval``, on click with rich output.

Each command lives in its own module and is added here with one line; the flags that describe an
agent are shared (``_options``), and so is building it (``_agent``)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Console
from rich.markup import escape

from ..errors import AdvisorChainError
from ._agent import cli_error_text, refuse_unpriced_cost_limit
from ._options import BudgetOptions, ModelOptions, budget_options, debug_option, model_options
from ._sessions import sessions
from ._setup import build_model, parse_model
from .chat import Interrupted, chat
from .evals import eval_command
from .index import index
from .serve import serve_command
from .web import web_command

__all__ = ["app", "main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
        except _ClosedPipe:
            _silence_stdout()
            return EXIT_OK
        except click.ClickException as exc:
            _one_line(err, exc.format_message())
            return exc.exit_code
        except Exception as exc:
            if debug:
                err.print(traceback.format_exc(), markup=False, highlight=False, end="")
            elif isinstance(exc, AdvisorChainError):
                _one_line(err, cli_error_text(exc))
            else:
                _one_line(err, f"{type(exc).__name__}: {exc} (run again with --debug for the traceback)")
            return EXIT_FAILURE

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        """Parse the arguments (printing --help or --version, here), closed pipe as in ``invoke``."""
        with _closed_pipe_leaves_quietly():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a closed stdout pipe leaves as ``_ClosedPipe``, before click's own EPIPE
        handling (exit 1) can see it."""
        with _closed_pipe_leaves_quietly():
            return super().invoke(ctx)


@contextlib.contextmanager
def _closed_pipe_leaves_quietly() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError as exc:
        raise _ClosedPipe from exc
    except SystemExit as exc:
        # rich turns a print to a closed pipe (also one on the sync bridge's loop thread) into
        # SystemExit(1), raised while it handles the BrokenPipeError.
        if isinstance(exc.__context__, BrokenPipeError):
            raise _ClosedPipe from exc
        raise


class _ClosedPipe(Exception):
    """The reader of stdout stopped early (``| head``): no failure, the command ends quietly."""


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


@click.group(name="advisorchain", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="advisorchain", prog_name="advisorchain")
@debug_option
def app(debug: bool) -> None:
    """Spring AI's advisor chain for Python: chat with tools and memory, and see every hop."""


# -- commands ------------------------------------------------------------------------------------

app.add_command(chat)
app.add_command(sessions)
app.add_command(eval_command)
app.add_command(web_command)
app.add_command(serve_command)
app.add_command(index)


# -- demo ------------------------------------------------------------------------------------------


@app.command()
@model_options(
    default=None, help="Run live: provider:name (e.g. openai:gpt-4o-mini), or a name for --provider."
)
@click.option(
    "--provider",
    type=click.Choice(["scripted", "openai", "openai-responses", "anthropic"]),
    help="The provider of --model (default: scripted without --model, openai with it).",
)
@click.option("--stream", is_flag=True, help="Stream the first answer.")
@click.option(
    "--db", type=click.Path(dir_okay=False, path_type=Path), help="SQLite file (default: a temp dir)."
)
@budget_options()
@debug_option
def demo(
    model: ModelOptions,
    provider: str | None,
    stream: bool,
    db: Path | None,
    budget: BudgetOptions,
    debug: bool,
) -> None:
    """Run an agent through the whole advisor chain (offline on a scripted model by default)."""
    from .demo import DEFAULT_MODELS, DEMO_PRICES, run_demo, scripted_model

    out: TextIO = sys.stdout
    chosen = _demo_model(model.model, provider, model.base_url, DEFAULT_MODELS)
    if chosen is None:
        click.echo(
            "A scripted model plays the LLM here (offline, no key needed; its tokens are estimated and "
            "priced as gpt-4o-mini's). To run it live: advisorchain demo --model openai:gpt-4o-mini "
            "(key from OPENAI_API_KEY).",
            file=out,
        )
        llm = scripted_model()
    else:
        click.echo(f"Running live on {chosen[0]}:{chosen[1]}.", file=out)
        llm = build_model(chosen[0], chosen[1], model.base_url, model.timeout)
        refuse_unpriced_cost_limit(budget, llm)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prices = DEMO_PRICES if chosen is None else None
            run_demo(out, llm, db or Path(tmp) / "demo.sqlite3", stream, budget.limits(), prices)
    finally:
        if chosen is not None:  # the sync calls ran on the bridge loop: close the client there
            from .._sync import run
            from ._agent import close_model

            run(close_model(llm), "demo", "demo")


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
