"""Every repository backend: exact round trips, replace semantics, atomic concurrent appends, and
clear errors for stored data that cannot be read back."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisorchain.memory.api import AtomicChatMemoryRepository, ChatMemoryDecodeError, ChatMemoryRepository
from advisorchain.memory.window import MessageWindowChatMemory
from advisorchain.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def test_every_repository_satisfies_the_atomic_repository_protocol(repository: Any) -> None:
    assert isinstance(repository, ChatMemoryRepository)
    assert isinstance(repository, AtomicChatMemoryRepository)


def test_every_message_kind_round_trips_exactly(repository: Any, every_kind: list[Message]) -> None:
    repository.save_all("c1", every_kind)

    assert repository.find_by_conversation_id("c1") == every_kind


def test_an_unknown_conversation_is_empty(repository: Any) -> None:
    assert repository.find_by_conversation_id("nobody") == []


def test_save_all_replaces_the_conversation(repository: Any) -> None:
    repository.save_all("c1", [UserMessage("one"), AssistantMessage("two")])
    repository.save_all("c1", [UserMessage("three")])

    assert repository.find_by_conversation_id("c1") == [UserMessage("three")]


def test_saving_an_empty_list_removes_the_conversation(repository: Any) -> None:
    repository.save_all("c1", [UserMessage("one")])
    repository.save_all("c1", [])

    assert repository.find_by_conversation_id("c1") == []
    assert "c1" not in repository.find_conversation_ids()


def test_find_conversation_ids_lists_every_stored_conversation(repository: Any) -> None:
    for cid in ("b", "a", "ü-1", "with space"):
        repository.save_all(cid, [UserMessage(cid)])

    assert sorted(repository.find_conversation_ids()) == sorted(["a", "b", "ü-1", "with space"])


def test_delete_forgets_only_that_conversation(repository: Any) -> None:
    repository.save_all("keep", [UserMessage("k")])
    repository.save_all("drop", [UserMessage("d")])

    repository.delete_by_conversation_id("drop")

    assert repository.find_by_conversation_id("drop") == []
    assert repository.find_by_conversation_id("keep") == [UserMessage("k")]


def test_update_applies_the_change_to_the_stored_messages(repository: Any) -> None:
    repository.save_all("c1", [UserMessage("a"), AssistantMessage("b")])

    result = repository.update("c1", lambda stored: [*stored[1:], UserMessage("c")])

    assert result == [AssistantMessage("b"), UserMessage("c")]
    assert repository.find_by_conversation_id("c1") == [AssistantMessage("b"), UserMessage("c")]


def test_update_can_reorder_and_insert_before_kept_messages(repository: Any) -> None:
    repository.save_all("c1", [UserMessage("a"), AssistantMessage("b"), UserMessage("c")])

    repository.update("c1", lambda stored: [SystemMessage("s"), stored[2], stored[0]])

    assert repository.find_by_conversation_id("c1") == [
        SystemMessage("s"),
        UserMessage("c"),
        UserMessage("a"),
    ]


async def test_async_methods_match_the_blocking_ones(repository: Any) -> None:
    await repository.asave_all("c1", [UserMessage("a")])
    await repository.aupdate("c1", lambda stored: [*stored, AssistantMessage("b")])

    assert await repository.afind_by_conversation_id("c1") == [UserMessage("a"), AssistantMessage("b")]
    assert await repository.afind_conversation_ids() == ["c1"]
    await repository.adelete_by_conversation_id("c1")
    assert await repository.afind_by_conversation_id("c1") == []


@pytest.mark.parametrize("bad", ["", None, 42, "nul\x00id"])
def test_a_bad_conversation_id_is_refused_by_name(repository: Any, bad: object) -> None:
    with pytest.raises(ValueError, match="conversation id"):
        repository.find_by_conversation_id(bad)


def test_storing_a_non_message_is_refused_and_keeps_the_stored_messages(repository: Any) -> None:
    repository.save_all("c1", [UserMessage("kept")])

    with pytest.raises(TypeError, match="'oops'"):
        repository.save_all("c1", [UserMessage("new"), "oops"])

    assert repository.find_by_conversation_id("c1") == [UserMessage("kept")]


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres", "redis"])
def test_metadata_that_would_not_read_back_equal_is_refused_before_writing(
    make_backend: Any, backend_name: str
) -> None:
    repository = make_backend(backend_name).repository()
    repository.save_all("c1", [UserMessage("kept")])

    with pytest.raises(ValueError, match="metadata"):
        repository.update("c1", lambda stored: [*stored, UserMessage("t", {"pair": (1, 2)})])
    with pytest.raises(ValueError, match="metadata"):
        repository.save_all("c1", [UserMessage("t", {"when": object()})])

    assert repository.find_by_conversation_id("c1") == [UserMessage("kept")]


def test_six_threads_appending_to_one_conversation_keep_every_message_in_order(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=10_000)
    per_thread = 25
    barrier = threading.Barrier(6)

    def append(worker: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            memory.add("shared", [UserMessage(f"{worker}:{i}")])

    threads = [threading.Thread(target=append, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    texts = [m.text for m in memory.get("shared")]  # type: ignore[union-attr]
    assert len(texts) == 6 * per_thread
    for worker in range(6):
        assert [t for t in texts if t.startswith(f"{worker}:")] == [
            f"{worker}:{i}" for i in range(per_thread)
        ]


async def test_concurrent_asyncio_tasks_appending_keep_every_message(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=10_000)

    await asyncio.gather(*(memory.aadd("shared", [UserMessage(f"task {i}")]) for i in range(40)))

    assert sorted(m.text for m in await memory.aget("shared")) == sorted(f"task {i}" for i in range(40))  # type: ignore[union-attr]


def test_a_corrupted_entry_raises_an_error_naming_the_conversation(persistent_backend: Any) -> None:
    repository = persistent_backend.repository()
    repository.save_all("broken-chat", [UserMessage("fine")])
    persistent_backend.inject("broken-chat", "{not json")

    with pytest.raises(ChatMemoryDecodeError, match="'broken-chat'") as info:
        repository.find_by_conversation_id("broken-chat")
    assert info.value.conversation_id == "broken-chat"
    assert info.value.position == 1


def test_an_unknown_message_type_raises_an_error_naming_the_conversation(persistent_backend: Any) -> None:
    repository = persistent_backend.repository()
    repository.save_all("odd", [UserMessage("fine")])
    persistent_backend.inject("odd", '{"type": "function", "text": "?", "metadata": {}}')

    with pytest.raises(ChatMemoryDecodeError, match=r"'odd'.*unknown message type 'function'"):
        repository.find_by_conversation_id("odd")


def test_appending_to_a_corrupted_conversation_fails_and_changes_nothing(persistent_backend: Any) -> None:
    repository = persistent_backend.repository()
    repository.save_all("broken", [UserMessage("fine")])
    persistent_backend.inject("broken", "[]")
    memory = MessageWindowChatMemory(repository)

    with pytest.raises(ChatMemoryDecodeError, match="'broken'"):
        memory.add("broken", [UserMessage("more")])

    repository.delete_by_conversation_id("broken")  # the documented way out
    assert repository.find_by_conversation_id("broken") == []


def test_a_reopened_repository_reads_what_another_one_wrote(
    persistent_backend: Any, every_kind: list[Message]
) -> None:
    persistent_backend.repository().save_all("c1", every_kind)

    assert persistent_backend.repository().find_by_conversation_id("c1") == every_kind


_text = st.text(max_size=30)
_metadata = st.dictionaries(
    st.text(max_size=5), st.none() | st.booleans() | st.integers() | st.text(max_size=5), max_size=3
)
_messages = st.lists(
    st.one_of(
        st.builds(SystemMessage, _text, _metadata),
        st.builds(UserMessage, _text, _metadata),
        st.builds(
            AssistantMessage,
            st.none() | _text,
            st.lists(st.builds(ToolCall, _text, _text, _text), max_size=3),
            _metadata,
        ),
        st.builds(
            ToolResponseMessage, st.lists(st.builds(ToolResponse, _text, _text, _text), max_size=3), _metadata
        ),
    ),
    max_size=6,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=_messages)
def test_any_messages_round_trip_exactly(repository: Any, messages: list[Message]) -> None:
    cid = uuid.uuid4().hex
    repository.save_all(cid, messages)

    assert repository.find_by_conversation_id(cid) == messages


def test_the_package_imports_without_the_server_drivers_and_says_what_to_install() -> None:
    script = (
        "import sys\n"
        "for name in ('psycopg', 'psycopg_pool', 'redis'):\n"
        "    sys.modules[name] = None\n"
        "import advisorchain, advisorchain.memory as m\n"
        "for make in (lambda: m.PostgresChatMemoryRepository('postgresql://x'), m.RedisChatMemoryRepository):\n"
        "    try:\n"
        "        make()\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)

    assert result.stdout.splitlines() == [
        "PostgresChatMemoryRepository needs psycopg 3 and psycopg_pool: pip install 'advisorchain[postgres]'",
        "RedisChatMemoryRepository needs redis-py: pip install 'advisorchain[redis]'",
    ]


def test_an_in_memory_sqlite_database_is_shared_by_the_threads_of_one_repository() -> None:
    from advisorchain.memory.sqlite import SQLiteChatMemoryRepository

    with SQLiteChatMemoryRepository(":memory:") as repository:
        memory = MessageWindowChatMemory(repository, max_messages=1_000)
        threads = [threading.Thread(target=memory.add, args=("c1", [UserMessage(f"m{i}")])) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert sorted(m.text for m in memory.get("c1")) == [f"m{i}" for i in range(8)]  # type: ignore[union-attr]


def test_a_closed_sqlite_repository_says_so() -> None:
    from advisorchain.memory.sqlite import SQLiteChatMemoryRepository

    repository = SQLiteChatMemoryRepository(":memory:")
    repository.close()

    with pytest.raises(RuntimeError, match="closed"):
        repository.find_by_conversation_id("c1")


@pytest.mark.parametrize("bad", ["users; DROP TABLE x", "", "1abc"])
def test_a_table_name_that_is_not_an_identifier_is_refused(bad: str) -> None:
    from advisorchain.memory.sqlite import SQLiteChatMemoryRepository

    with pytest.raises(ValueError, match="table_name"):
        SQLiteChatMemoryRepository(":memory:", table_name=bad)


def test_a_redis_ttl_expires_the_conversation_after_its_last_write(make_backend: Any) -> None:
    import redis

    from advisorchain.memory.redis import RedisChatMemoryRepository

    url = make_backend("redis").spec["url"]
    prefix = f"ttl:{uuid.uuid4().hex}:"
    with RedisChatMemoryRepository(url, key_prefix=prefix, ttl=timedelta(minutes=5)) as repository:
        MessageWindowChatMemory(repository).add("c1", [UserMessage("hi")])
        with redis.Redis.from_url(url) as client:
            remaining_ms = client.pttl(prefix + "c1")
            client.delete(prefix + "c1")

    assert 0 < remaining_ms <= 5 * 60 * 1000


@pytest.mark.parametrize("bad", [0, -1, timedelta(0), "60"])
def test_a_redis_ttl_must_be_positive(make_backend: Any, bad: Any) -> None:
    from advisorchain.memory.redis import RedisChatMemoryRepository

    url = make_backend("redis").spec["url"]
    with pytest.raises(ValueError, match="ttl"):
        RedisChatMemoryRepository(url, ttl=bad)


def test_a_redis_client_that_decodes_responses_works_too(make_backend: Any) -> None:
    import redis

    from advisorchain.memory.redis import RedisChatMemoryRepository

    url = make_backend("redis").spec["url"]
    prefix = f"decoded:{uuid.uuid4().hex}:"
    client = redis.Redis.from_url(url, decode_responses=True)
    with RedisChatMemoryRepository(url, key_prefix=prefix, client=client) as repository:
        MessageWindowChatMemory(repository).add("c1", [UserMessage("héllo")])
        assert repository.find_conversation_ids() == ["c1"]
        assert repository.find_by_conversation_id("c1") == [UserMessage("héllo")]
        repository.delete_by_conversation_id("c1")
