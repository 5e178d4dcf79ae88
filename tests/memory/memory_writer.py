"""A writer process for the memory tests: appends numbered user messages to one conversation.

    python memory_writer.py '<backend spec JSON>' <conversation id> <tag> <count>

``count`` < 0 writes forever. After each committed append it prints the message text, so a test
knows what was acknowledged before it kills the process. Each message carries a large payload so
that a kill is likely to land mid-write.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

from advisorchain.memory.window import MessageWindowChatMemory
from advisorchain.messages import UserMessage


def open_repository(spec: dict[str, Any]) -> Any:
    kind = spec["kind"]
    if kind == "sqlite":
        from advisorchain.memory.sqlite import SQLiteChatMemoryRepository

        return SQLiteChatMemoryRepository(spec["path"])
    if kind == "postgres":
        from advisorchain.memory.postgres import PostgresChatMemoryRepository

        return PostgresChatMemoryRepository(spec["dsn"], table_name=spec["table_name"], max_size=2)
    if kind == "redis":
        from advisorchain.memory.redis import RedisChatMemoryRepository

        return RedisChatMemoryRepository(spec["url"], key_prefix=spec["key_prefix"])
    raise ValueError(f"unknown backend kind {kind!r}")


def main() -> None:
    spec, conversation_id, tag, count = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    repository = open_repository(spec)
    memory = MessageWindowChatMemory(repository, max_messages=int(spec.get("max_messages", 1_000_000)))
    payload = "x" * int(spec.get("payload", 0))
    print("ready", flush=True)
    sys.stdin.readline()  # start together with the other writers
    for i in itertools.count() if count < 0 else range(count):
        text = f"{tag}:{i}"
        memory.add(conversation_id, [UserMessage(text, {"payload": payload} if payload else {})])
        print(text, flush=True)
    repository.close()


if __name__ == "__main__":
    main()
