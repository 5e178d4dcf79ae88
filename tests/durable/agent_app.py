"""The agent the durable tests run, built the same way in the test process and in worker processes:
an OpenAIChatModel on the scripted server, the tools ``record`` and ``guarded`` (which needs a
person's approval; both append to a file, so their calls can be counted) and memory outside the
tool loop in a SQLite file."""

from __future__ import annotations

from pathlib import Path

from advisorchain import ChatClient, MessageChatMemoryAdvisor, tool
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

    memory = MessageWindowChatMemory(SQLiteChatMemoryRepository(str(memory_db)))
    return ChatClient(
        OpenAIChatModel(model, base_url=base_url, api_key="test-key"),
        default_tools=[record, guarded],
        default_advisors=[MessageChatMemoryAdvisor(memory)],
    )


def stored(memory_db: Path, conversation_id: str) -> list[object]:
    """The conversation as stored in the SQLite memory file."""
    return list(SQLiteChatMemoryRepository(str(memory_db)).find_by_conversation_id(conversation_id))
