"""Conversation memory in SQLite: the second question is answered with the first in the prompt.

Run: python examples/memory_sqlite.py
"""

import tempfile
from pathlib import Path

from advisorchain import (
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SQLiteChatMemoryRepository,
)
from advisorchain.testing import ScriptedChatModel

with tempfile.TemporaryDirectory() as tmp:
    memory = MessageWindowChatMemory(SQLiteChatMemoryRepository(Path(tmp) / "chat.db"), max_messages=20)
    model = ScriptedChatModel(["Nice to meet you, Ann.", "Your name is Ann."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    for question in ("I am Ann.", "What is my name?"):
        print(client.prompt(question).param(ChatMemory.CONVERSATION_ID, "ann").call().content())
    print([m.type.value for m in model.prompts[1].instructions])  # ['user', 'assistant', 'user']
