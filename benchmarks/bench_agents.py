"""What a handoff costs: a three-agent conversation on a scripted loopback server, client CPU per run.

Run: ``.venv/bin/python benchmarks/bench_agents.py`` — starts a scripted OpenAI-compatible server on
127.0.0.1 in its own process (its CPU never counts), then measures, per run of one conversation:

* ``handoffs``: triage hands to billing, billing looks the invoice up (one tool call) and hands to
  answer, answer answers — four model calls, three tool calls (two of them handoffs), through
  ``spec.agent(triage)``;
* ``same rounds, no handoff``: no agent and the same four model calls and three tool calls (the
  handoff calls replaced by plain tools that answer at once): what the handoffs add is the
  difference, shown per handoff; and the same rounds by one agent (the HandoffAdvisor in the
  chain, no handoff), which tells the advisor's fixed cost from the handoffs';
* ``OpenAI Agents SDK``: the same three agents with ``handoffs=[...]`` (``openai-agents`` from PyPI,
  installed into ``benchmarks/.venvs/openai-agents`` on first use, measured in a worker process).

Figures are process CPU seconds of the client (best of several repeats, ``_timing.py``), over the
same HTTP server and the official ``openai`` SDK for both libraries. Goals (issue 38): a handoff adds
at most 30 µs; the whole flow is at least 10x cheaper than on the Agents SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "harness"))

QUESTION = "Was invoice 1042 paid?"
ANSWER = "Invoice 1042: 49.00 EUR, paid on 3 March."
INVOICE = "49.00 EUR, paid on 3 March"
SCRIPTS = {
    # model name -> the tool called in each round (by the number of tool results so far), then text
    "handoffs": ("transfer_to_billing", "lookup_invoice", "transfer_to_answer"),
    "plain": ("to_billing", "lookup_invoice", "to_answer"),
}
HANDOFFS_PER_RUN = 2
ROUNDS = 3  # each flow measured this many times, interleaved; the best counts


# -- the server (its own process) --------------------------------------------------------------------


def _reply(request: dict[str, Any]) -> dict[str, Any]:
    script = SCRIPTS[request["model"]]
    done = sum(1 for m in request["messages"] if m.get("role") == "tool")
    usage = {"prompt_tokens": 50 + 10 * done, "completion_tokens": 10, "total_tokens": 60 + 10 * done}
    if done < len(script):
        name = script[done]
        arguments = '{"invoice": "1042"}' if name == "lookup_invoice" else "{}"
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{done}", "type": "function", "function": {"name": name, "arguments": arguments}}
            ],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": ANSWER}, "stop"
    return {
        "id": f"chatcmpl-{done}",
        "object": "chat.completion",
        "created": 0,
        "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


async def _serve() -> None:
    from harness.server import _parse_head, _read_body, _response

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                _, _, headers = _parse_head(head)
                body = json.loads(await _read_body(reader, headers))
                writer.write(_response(200, json.dumps(_reply(body)).encode()))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


# -- advisorchain ------------------------------------------------------------------------------------


async def _advisorchain(base_url: str) -> dict[str, float]:
    from _timing import best_seconds_per_run

    from advisorchain import ChatClient, tool
    from advisorchain.agents import Agent
    from advisorchain.models.openai import OpenAIChatModel

    @tool
    async def lookup_invoice(invoice: str) -> str:
        """The amount and state of an invoice."""
        return INVOICE

    @tool
    async def to_billing() -> str:
        """Stands in for the handoff to billing."""
        return "ok"

    @tool
    async def to_answer() -> str:
        """Stands in for the handoff to answer."""
        return "ok"

    answer = Agent("answer", instructions="Write the final answer.")
    billing = Agent("billing", instructions="You are billing.", tools=[lookup_invoice], handoffs=[answer])
    triage = Agent("triage", instructions="Route the customer.", handoffs=[billing])

    with_handoffs = ChatClient(OpenAIChatModel("handoffs", base_url=base_url, api_key="bench"))
    plain = ChatClient(
        OpenAIChatModel("plain", base_url=base_url, api_key="bench"),
        default_system="You are support.",
        default_tools=[to_billing, lookup_invoice, to_answer],
    )

    async def run_handoffs() -> None:
        response = await with_handoffs.prompt(QUESTION).agent(triage).acall().chat_client_response()
        assert response.chat_response is not None and response.chat_response.text == ANSWER
        assert len(response.context["advisorchain.handoffs"]) == HANDOFFS_PER_RUN

    async def run_plain() -> None:
        assert await plain.prompt(QUESTION).acall().content() == ANSWER

    support = Agent("support", instructions="You are support.", tools=[to_billing, lookup_invoice, to_answer])
    one_agent = ChatClient(OpenAIChatModel("plain", base_url=base_url, api_key="bench"))

    async def run_one_agent() -> None:
        response = await one_agent.prompt(QUESTION).agent(support).acall().chat_client_response()
        assert response.chat_response is not None and response.chat_response.text == ANSWER

    best: dict[str, float] = {}
    for _ in range(ROUNDS):  # interleaved: a slow stretch of the machine hits every flow alike
        for name, run in (("plain", run_plain), ("one_agent", run_one_agent), ("handoffs", run_handoffs)):
            best[name] = min(best.get(name, float("inf")), await best_seconds_per_run(run))
    return best


# -- the OpenAI Agents SDK (a worker in its own venv) -------------------------------------------------


async def _agents_sdk(base_url: str) -> dict[str, float]:
    from _timing import best_seconds_per_run
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    async def lookup_invoice(invoice: str) -> str:
        """The amount and state of an invoice."""
        return INVOICE

    client = AsyncOpenAI(base_url=base_url, api_key="bench")
    model = OpenAIChatCompletionsModel("handoffs", openai_client=client)
    answer = Agent(name="answer", instructions="Write the final answer.", model=model)
    billing = Agent(
        name="billing",
        instructions="You are billing.",
        model=model,
        tools=[lookup_invoice],
        handoffs=[answer],
    )
    triage = Agent(name="triage", instructions="Route the customer.", model=model, handoffs=[billing])

    async def run() -> None:
        result = await Runner.run(triage, QUESTION)
        assert result.final_output == ANSWER, result.final_output
        assert result.last_agent.name == "answer"

    return {"agents_sdk": await best_seconds_per_run(run)}


def _sdk_in_worker(base_url: str) -> tuple[dict[str, float], str]:
    from harness.venvs import ensure_peer

    env = ensure_peer("openai-agents", True, HERE / ".out" / "openai-agents-install.log")
    if env.python is None:
        return {}, f"OpenAI Agents SDK skipped: {env.error}"
    done = subprocess.run(
        [str(env.python), __file__, "--sdk-worker", base_url], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {}, f"OpenAI Agents SDK failed: {done.stderr.strip()[-500:]}"
    version = subprocess.run(
        [str(env.python), "-c", "import importlib.metadata as m; print(m.version('openai-agents'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return json.loads(done.stdout.strip().splitlines()[-1]), version


# -- the run -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sdk-worker", metavar="BASE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    if args.sdk_worker:
        print(json.dumps(asyncio.run(_agents_sdk(args.sdk_worker))))
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        base_url = f"http://127.0.0.1:{port}/v1"
        ours = asyncio.run(_advisorchain(base_url))
        sdk, note = _sdk_in_worker(base_url)
    finally:
        server.terminate()
        server.wait(timeout=10)
    per_handoff = (ours["handoffs"] - ours["plain"]) / HANDOFFS_PER_RUN
    print(f"## Handoffs: client CPU per conversation ({time.strftime('%Y-%m-%d')})\n")
    print("| flow | µs per run | ratio |")
    print("|---|---:|---:|")
    print(f"| advisorchain, same rounds without a handoff | {ours['plain'] * 1e6:,.0f} | 1.00x |")
    print(
        f"| advisorchain, one agent (HandoffAdvisor), same rounds | {ours['one_agent'] * 1e6:,.0f} | "
        f"{ours['one_agent'] / ours['plain']:.2f}x |"
    )
    print(
        f"| advisorchain, three agents, two handoffs | {ours['handoffs'] * 1e6:,.0f} | "
        f"{ours['handoffs'] / ours['plain']:.2f}x |"
    )
    if "agents_sdk" in sdk:
        print(
            f"| OpenAI Agents SDK {note}, the same three agents | {sdk['agents_sdk'] * 1e6:,.0f} | "
            f"{sdk['agents_sdk'] / ours['plain']:.2f}x |"
        )
    over_agent = (ours["handoffs"] - ours["one_agent"]) / HANDOFFS_PER_RUN
    print(
        f"\nOne handoff adds {per_handoff * 1e6:,.1f} µs of client CPU over the same rounds without "
        f"agents, {over_agent * 1e6:,.1f} µs over one agent (goal: at most 30 µs)."
    )
    if "agents_sdk" in sdk:
        print(
            f"The Agents SDK spends {sdk['agents_sdk'] / ours['handoffs']:.1f}x advisorchain's CPU on the "
            "same conversation (goal: at least 10x)."
        )
    else:
        print(note)


if __name__ == "__main__":
    main()
