"""A process for the cross-process turn tests: runs scripted agent turns on one conversation.

    python -m tests.reliability.turn_runner '<backend spec JSON>' <place> <conversation id> <tag> <turns> <rounds>

Prints "ready", waits for a line on stdin (so that several runners start together), runs its
turns one after another and exits 0.
"""

from __future__ import annotations

import json
import sys

from advisorchain import ChatMemory
from tests.memory.memory_writer import open_repository
from tests.reliability.memory_support import agent_client, question, window


def main() -> None:
    spec, place, conversation_id, tag = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    turns, rounds = int(sys.argv[5]), int(sys.argv[6])
    repository = open_repository(spec)
    client = agent_client(window(repository), place)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(turns):
        spec_ = client.prompt(question(f"{tag}.{i}", rounds)).param(
            ChatMemory.CONVERSATION_ID, conversation_id
        )
        assert spec_.call().content() == f"a{tag}.{i}"
    repository.close()


if __name__ == "__main__":
    main()
