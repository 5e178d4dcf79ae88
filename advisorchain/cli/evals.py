"""``advisorchain eval CASES_FILE``: run a JSON or YAML file of cases against the agent ``chat``
would build, judge the answers, print the table, and exit 1 when any case failed.

Offline by default: with no ``--model`` a scripted demo model answers (and the command says so).
Cases that give ``expected`` are checked with ``ExpectedAnswerEvaluator``; ``--judge MODEL`` adds an
``LLMJudgeEvaluator`` on that model; ``--json OUT`` writes the report as JSON too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

import click
from rich.console import Console

from ..client import ChatClient
from ..errors import ChainConfigurationError
from ..evaluation import Case, ExpectedAnswerEvaluator, LLMJudgeEvaluator, aevaluate_cases
from ..evaluation.api import EvaluatorLike
from ..evaluation.cases import EvaluationReport
from ..messages import AssistantMessage
from ..model import ChatModel, Prompt
from ..usage import UsageLimits
from ._agent import (
    MAX_MESSAGES,
    GuardKit,
    agent_client,
    close_model,
    guard_kit,
    open_knowledge_advisor,
    refuse_unpriced_cost_limit,
)
from ._options import AgentOptions, agent_options, debug_option
from ._setup import build_model, load_tools, mcp_servers, parse_model

__all__ = ["DEMO_NOTICE", "demo_eval_model", "eval_command", "load_cases"]

DEMO_NOTICE = (
    "A scripted demo model answers here (offline, no key needed; it knows a few capitals and facts). "
    "To evaluate a real agent: advisorchain eval CASES_FILE --model openai:gpt-4o-mini"
)

_DEMO_FACTS = (
    ("capital of france", "The capital of France is Paris."),
    ("capital of japan", "The capital of Japan is Tokyo."),
    ("capital of italy", "The capital of Italy is Rome."),
    ("boil", "At sea level, water boils at 100 °C (212 °F)."),
    ("largest planet", "Jupiter is the largest planet in the Solar System."),
)
_DEMO_UNKNOWN = "I don't know: I am a scripted demo model and know only a few capitals and facts."
_CASE_FIELDS = ("name", "question", "expected", "context", "metadata")


def demo_eval_model() -> ChatModel:
    """The scripted demo model of ``eval``: it answers the few questions it knows (capitals, boiling
    water, the largest planet) and says it does not know the rest."""
    from ..testing import FunctionChatModel

    def answer(prompt: Prompt) -> AssistantMessage:
        user = prompt.last_user_message
        question = user.text.lower() if user is not None else ""
        for key, text in _DEMO_FACTS:
            if key in question:
                return AssistantMessage(text)
        return AssistantMessage(_DEMO_UNKNOWN)

    return FunctionChatModel(answer)


# -- the cases file ------------------------------------------------------------------------------------


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise _bad(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _bad(path, f"not valid YAML or JSON ({' '.join(str(exc).split())})") from None


def _bad(path: Path, why: str) -> click.BadParameter:
    return click.BadParameter(f"{path}: {why}", param_hint="CASES_FILE")


def _text(value: object, path: Path, where: str) -> Any:
    """A number written unquoted in YAML (``expected: 100``) is read as its text; other values are
    left for ``Case`` to check."""
    if isinstance(value, bool):
        raise _bad(path, f"{where} is {value!r}; quote it if you mean the text ({str(value).lower()!r})")
    if isinstance(value, int | float):
        return str(value)
    return value


def _case(item: object, index: int, path: Path) -> Case:
    where = f"case {index}"
    if not isinstance(item, Mapping):
        raise _bad(
            path, f"{where} is {item!r}; each case is a mapping with a question (and name, expected...)"
        )
    unknown = sorted(str(k) for k in item if k not in _CASE_FIELDS)
    if unknown:
        fields = ", ".join(_CASE_FIELDS)
        raise _bad(path, f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; a case has {fields}")
    context = item.get("context", ())
    if isinstance(context, list):
        context = [_text(p, path, f"{where}'s context") for p in context]
    try:
        return Case(
            name=_text(item.get("name", f"case-{index}"), path, f"{where}'s name"),
            question=_text(item.get("question"), path, f"{where}'s question"),
            expected=_text(item.get("expected"), path, f"{where}'s expected"),
            context=context,
            metadata=item.get("metadata") or {},
        )
    except ChainConfigurationError as exc:
        raise _bad(path, f"{where}: {exc}") from None


def load_cases(path: Path) -> list[Case]:
    """The ``Case`` list of a JSON or YAML file: a list of mappings with ``Case`` fields (a case
    without a name is called ``case-<n>``)."""
    data = _read(path)
    if not isinstance(data, list):
        raise _bad(path, f"holds {type(data).__name__}; write a list of cases (each with a question)")
    if not data:
        raise _bad(path, "holds no cases")
    return [_case(item, i, path) for i, item in enumerate(data, 1)]


# -- the agent (built as chat builds it) --------------------------------------------------------------


def _deny_without_yes(call: Any, context: Any) -> Any:
    """No one to ask during an eval: a tool that needs approval is denied unless ``--yes``."""
    from ..tools import Denied

    return Denied("no one can approve tool calls during an eval; run it again with --yes")


def _agent(
    model: ChatModel,
    system: str | None,
    tools: list[object],
    approve_all: bool,
    knowledge: Any = None,
    limits: UsageLimits | None = None,
    cache: bool = False,
    guards: GuardKit | None = None,
) -> ChatClient:
    """The agent ``chat`` builds, each case a conversation of its own; approvals granted with
    ``--yes``, else denied; ``knowledge``: the ``--knowledge`` advisor; each answer within ``limits``
    (a case over them fails with the reason)."""
    from ..memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
    from ..tools import ToolCallingManager

    manager = ToolCallingManager(approver=(lambda call, context: True) if approve_all else _deny_without_yes)
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=MAX_MESSAGES)
    return agent_client(model, system, tools, memory, manager, knowledge, limits, cache=cache, guards=guards)


# -- the command -------------------------------------------------------------------------------------


@click.command("eval")
@click.argument("cases_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@agent_options(
    model_default=None,
    model_help="provider:name of the agent's model (default: the scripted demo model, offline).",
    memory=False,
)
@click.option("--judge", metavar="MODEL", help="provider:name of an LLM judge that rates every answer.")
@click.option("--judge-base-url", metavar="URL", help="The server of --judge, when not the provider's own.")
@click.option(
    "--match",
    type=click.Choice(["contains", "exact"]),
    default="contains",
    show_default=True,
    help="How an answer is checked against a case's expected text.",
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Cases at once."
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report as JSON here.",
)
@debug_option
def eval_command(
    cases_file: Path,
    agent: AgentOptions,
    judge: str | None,
    judge_base_url: str | None,
    match: Literal["contains", "exact"],
    concurrency: int,
    json_out: Path | None,
    debug: bool,
) -> int:
    """Run the cases of CASES_FILE (JSON or YAML: a list of name, question, expected, context) against
    the agent, judge the answers, print the table; exit 1 when any case failed."""
    cases = load_cases(cases_file)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    model = agent.model
    if model.model is None:
        if model.base_url is not None:
            raise click.UsageError("--base-url needs --model, e.g. --model openai:llama3.2")
        err.print(DEMO_NOTICE, style="dim", markup=False)
        llm = demo_eval_model()
    else:
        llm = build_model(*parse_model(model.model), model.base_url, model.timeout)
        refuse_unpriced_cost_limit(agent.budget, llm)
    judge_model = None
    if judge is not None:
        provider, name = parse_model(judge)
        judge_model = build_model(provider, name, judge_base_url, model.timeout)
    elif judge_base_url is not None:
        raise click.UsageError("--judge-base-url needs --judge, e.g. --judge openai:gpt-4o-mini")
    evaluators: list[EvaluatorLike] = [ExpectedAnswerEvaluator(match)]
    if judge_model is not None:
        evaluators.append(LLMJudgeEvaluator(judge_model))
    servers = mcp_servers(agent.mcp, agent.mcp_url)
    tools = load_tools(agent.tools)
    run = _Run(llm, agent.system, tools, servers, agent.approve_all, judge_model, agent.knowledge)
    run.limits = agent.budget.limits()
    run.cache = agent.cache
    run.guards = guard_kit(agent)
    report = asyncio.run(run.evaluate(cases, evaluators, concurrency))
    report.print()
    if json_out is not None:
        json_out.write_text(
            json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        err.print(f"report written to {json_out}", style="dim", markup=False)
    return 1 if report.failed else 0


class _Run:
    """One eval run: the agent's parts, entered and closed inside the run's event loop."""

    def __init__(
        self,
        model: ChatModel,
        system: str | None,
        tools: list[object],
        servers: list[Any],
        approve_all: bool,
        judge: ChatModel | None,
        knowledge: str | None = None,
    ) -> None:
        self.model, self.system, self.tools, self.servers = model, system, tools, servers
        self.approve_all, self.judge, self.knowledge = approve_all, judge, knowledge
        self.limits: UsageLimits | None = None
        self.cache = False
        self.guards: GuardKit | None = None

    async def evaluate(
        self, cases: list[Case], evaluators: list[EvaluatorLike], concurrency: int
    ) -> EvaluationReport:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(close_model, self.model)
            if self.judge is not None:
                stack.push_async_callback(close_model, self.judge)
            entered = [await stack.enter_async_context(server) for server in self.servers]
            knowledge = open_knowledge_advisor(self.knowledge, stack)
            tools = [*self.tools, *entered]
            agent = _agent(
                self.model,
                self.system,
                tools,
                self.approve_all,
                knowledge,
                self.limits,
                self.cache,
                self.guards,
            )
            return await aevaluate_cases(agent, cases, evaluators, concurrency=concurrency, progress=True)
