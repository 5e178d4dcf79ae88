"""The agent the durable tests run, built the same way in the test process and in worker processes:
an OpenAIChatModel on the scripted server, the tools ``record`` and ``guarded`` (which needs a
person's approval; both append to a file, so their calls can be counted), ``pay`` (a side effect
deduplicated on the run's ``(run_id, tool_call_id)``) and memory outside the tool loop in a SQLite
file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from advisorchain import ChatClient, MessageChatMemoryAdvisor, ToolContext, tool
from advisorchain.memory import MessageWindowChatMemory, SQLiteChatMemoryRepository
from advisorchain.models.openai import OpenAIChatModel


def build_client(base_url: str, model: str, tool_file: Path, memory_db: Path) -> ChatClient:
    @tool
    def record(n: int) -> str:
        """Record a number."""
        with open(tool_file, "a", encoding="utf-8") as f:
            f.write(f"{n}\n")
        return f"recorded {n}"

    @tool(requires_approval=True)
    def guarded(n: int) -> str:
        """Record a number, once a person approved."""
        with open(tool_file, "a", encoding="utf-8") as f:
            f.write(f"g{n}\n")
        return f"guarded {n}"

    @tool
    def pay(n: int, context: ToolContext) -> str:
        """Pay n euros (once per call, however often a crash makes the call run)."""
        key = f"{context.run_id}/{context['tool_call_id']}"
        with open(attempts_file(tool_file), "a", encoding="utf-8") as f:
            f.write(f"{key}\n")
        ledger = ledger_file(tool_file)
        done = json.loads(ledger.read_text(encoding="utf-8")) if ledger.exists() else {}
        if key in done:  # this call already paid: a crash made it run again
            return str(done[key])
        with open(tool_file, "a", encoding="utf-8") as f:
            f.write(f"paid {n} {key}\n")
        ledger.write_text(json.dumps({**done, key: f"paid {n}"}), encoding="utf-8")
        hang = hang_file(tool_file)
        if not hang.exists():  # the first time: stay mid-call until the worker is killed
            hang.write_text(key, encoding="utf-8")
            while True:
                time.sleep(1)
        return f"paid {n}"

    memory = MessageWindowChatMemory(SQLiteChatMemoryRepository(str(memory_db)))
    return ChatClient(
        OpenAIChatModel(model, base_url=base_url, api_key="test-key"),
        default_tools=[record, guarded, pay],
        default_advisors=[MessageChatMemoryAdvisor(memory)],
    )


def build_agents_client(base_url: str, model: str, tool_file: Path, memory_db: Path) -> ChatClient:
    """Two agents: ``triage`` hands the conversation to ``billing``, whose tool ``record`` appends
    to ``tool_file``; memory outside the tool loop in a SQLite file."""
    from advisorchain.agents import Agent

    @tool
    def record(n: int) -> str:
        """Record a number."""
        with open(tool_file, "a", encoding="utf-8") as f:
            f.write(f"{n}\n")
        return f"recorded {n}"

    billing = Agent("billing", instructions="You are billing.", tools=[record])
    triage = Agent("triage", instructions="You are triage.", handoffs=[billing])
    memory = MessageWindowChatMemory(SQLiteChatMemoryRepository(str(memory_db)))
    return ChatClient(
        OpenAIChatModel(model, base_url=base_url, api_key="test-key"),
        default_advisors=[MessageChatMemoryAdvisor(memory)],
        default_agent=triage,
    )


def stored(memory_db: Path, conversation_id: str) -> list[object]:
    """The conversation as stored in the SQLite memory file."""
    return list(SQLiteChatMemoryRepository(str(memory_db)).find_by_conversation_id(conversation_id))


def attempts_file(tool_file: Path) -> Path:
    """Where ``pay`` notes each attempt's key."""
    return tool_file.with_name(tool_file.name + ".attempts")


def ledger_file(tool_file: Path) -> Path:
    """``pay``'s ledger of the keys it paid for."""
    return tool_file.with_name(tool_file.name + ".ledger.json")


def hang_file(tool_file: Path) -> Path:
    """Written when ``pay`` starts hanging mid-call (its first attempt)."""
    return tool_file.with_name(tool_file.name + ".hanging")
