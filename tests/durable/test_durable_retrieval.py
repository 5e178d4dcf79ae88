"""Retrieval in durable runs (§12, §16): a vector store search is an activity (Temporal) or a step
(DBOS), recorded once — a replay or a worker killed after it never searches again — and a store's
failure fails the run naming it, before any model call."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from advisorchain import ChatClient, ModelError
from advisorchain.testing import FunctionChatModel
from tests.durable.engines import Crash
from tests.durable.rag_app import knowledge_store, searches
from tests.durable.worker import APPS
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL, round_counts, wait_for_round

pytest.importorskip("apsw")  # the rag extra
pytestmark = pytest.mark.asyncio(loop_scope="session")

from advisorchain.rag import (  # noqa: E402
    Document,
    QuestionAnswerAdvisor,
    RetrievalAugmentationAdvisor,
    SQLiteVectorStore,
    VectorStoreDocumentRetriever,
)

QUESTION = APPS["rag"].question

_THREADS = ThreadPoolExecutor(thread_name_prefix="durable-retrieval")


@pytest_asyncio.fixture(autouse=True, loop_scope="session")
async def usable_worker_threads() -> AsyncIterator[None]:
    """DBOS makes its executor the session loop's default and shuts it down when destroyed (by
    this module's DBOS tests or an earlier module's); the stores' worker threads need a live one."""
    asyncio.get_running_loop().set_default_executor(_THREADS)
    yield


def _answering(seen: list[str]) -> FunctionChatModel:
    """A model that keeps the last user message it was sent (the context appended) and cites [1]."""

    def answer(prompt: Any) -> str:
        seen.append(prompt.instructions[-1].text)
        return "The slot E1054 [1]."

    return FunctionChatModel(answer)


class BrokenStore:
    """A user's own store whose server is down."""

    async def asimilarity_search(self, request: Any) -> list[Document]:
        raise ConnectionRefusedError("vector server refused the connection")


# -- Temporal, in process ---------------------------------------------------------------------------


async def test_temporal_a_search_is_one_activity_and_a_replay_never_searches_again(
    temporal_env: Any, tmp_path: Path
) -> None:
    from temporalio.worker import Replayer, Worker

    from advisorchain.durable.temporal import TemporalAgent

    queries = tmp_path / "queries.txt"
    seen: list[str] = []
    client = ChatClient(
        _answering(seen), default_advisors=[QuestionAnswerAdvisor(knowledge_store(tmp_path / "kb.db", queries))]
    )
    agent = TemporalAgent(client, name="ragtemporal")
    queue, run_id = f"q-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    async with Worker(temporal_env.client, task_queue=queue, workflows=[agent.workflow], activities=agent.activities):
        result = await agent.run(temporal_env.client, "Which slot holds back WAL?", id=run_id, task_queue=queue)
    handle = temporal_env.client.get_workflow_handle(run_id)
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]

    assert result.output == "The slot E1054 [1]."
    assert scheduled == ["ragtemporal.store.search", "ragtemporal.model"]
    assert "[1] The replication slot E1054 holds back old WAL files." in seen[0]
    assert searches(queries) == ["Which slot holds back WAL?"]
    await Replayer(workflows=[agent.workflow]).replay_workflow(history)  # raises on nondeterminism
    assert searches(queries) == ["Which slot holds back WAL?"]  # the replay read the recorded search


async def test_temporal_store_seams_are_named_per_store_and_retrievers_stores_count(tmp_path: Path) -> None:
    from advisorchain.durable.temporal import TemporalAgent

    first = SQLiteVectorStore(tmp_path / "a.db", knowledge_store(tmp_path / "x.db", tmp_path / "q").embedding_model)
    second = SQLiteVectorStore(tmp_path / "b.db", first.embedding_model)
    client = ChatClient(
        _answering([]),
        default_advisors=[
            QuestionAnswerAdvisor(first),
            RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(second)),
            QuestionAnswerAdvisor(first, order=QuestionAnswerAdvisor.DEFAULT_ORDER + 1),  # the same store once
        ],
    )
    agent = TemporalAgent(client, name="stores")
    names = sorted(fn.__temporal_activity_definition.name for fn in agent.activities)  # type: ignore[attr-defined]
    assert names == ["stores.model", "stores.store0.search", "stores.store1.search"]
    # The agent's own advisors keep their real stores; only the workflow's copies hold proxies.
    assert client.default_advisors[0].store is first  # type: ignore[attr-defined]


async def test_temporal_a_failing_store_fails_the_run_naming_it_before_any_model_call(temporal_env: Any) -> None:
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    seen: list[str] = []
    agent = TemporalAgent(
        ChatClient(_answering(seen), default_advisors=[QuestionAnswerAdvisor(BrokenStore())]), name="ragbroken"
    )
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(temporal_env.client, task_queue=queue, workflows=[agent.workflow], activities=agent.activities):
        with pytest.raises(WorkflowFailureError) as caught:
            await agent.run(temporal_env.client, "anything", id=f"run-{uuid.uuid4().hex}", task_queue=queue)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "VectorStoreError"
    assert "refused the connection" in cause.message
    assert seen == []


# -- DBOS, in process ---------------------------------------------------------------------------------


async def test_dbos_a_search_is_one_recorded_step(launch: Callable[..., None], tmp_path: Path) -> None:
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSAgent

    queries = tmp_path / "queries.txt"
    seen: list[str] = []
    client = ChatClient(
        _answering(seen), default_advisors=[QuestionAnswerAdvisor(knowledge_store(tmp_path / "kb.db", queries))]
    )
    agent = DBOSAgent(client, name="ragdbos")
    launch()
    result = await agent.run("Which slot holds back WAL?", workflow_id="r1")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("r1")]

    assert result.output == "The slot E1054 [1]."
    assert steps == ["ragdbos.store.search", "ragdbos.model"]
    assert "[1] The replication slot E1054 holds back old WAL files." in seen[0]
    assert searches(queries) == ["Which slot holds back WAL?"]


async def test_dbos_an_embedding_models_failure_is_a_model_error_before_any_model_call(
    launch: Callable[..., None], tmp_path: Path
) -> None:
    from advisorchain.durable.dbos import DBOSAgent

    class Refusing:
        name, dimensions = "refusing", 32

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] + [0.0] * 31 for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            raise ConnectionError("embedding server refused the connection")

    store = SQLiteVectorStore(tmp_path / "kb.db", Refusing())
    store.add([Document("something")])
    seen: list[str] = []
    agent = DBOSAgent(ChatClient(_answering(seen), default_advisors=[QuestionAnswerAdvisor(store)]), name="ragrefused")
    launch()
    with pytest.raises(ModelError, match="refused the connection"):
        await agent.run("anything", workflow_id="r2")
    assert seen == []


# -- a worker killed after the search --------------------------------------------------------------


def _assert_searched_once_and_every_round_saw_the_documents(server: ScriptedServer, model: str, queries: Path) -> None:
    assert searches(queries) == [QUESTION]  # recorded before the kill, never repeated
    assert (round_counts(server)[(model, 1)], round_counts(server)[(model, 2)], round_counts(server)[(model, 3)]) == (1, 2, 1)
    users = [b["messages"][0]["content"] for b in server.bodies if b["model"] == model]
    assert len(users) == 4 and all("E1054 holds back old WAL files" in u for u in users)


async def test_a_killed_worker_resumes_without_searching_again(
    crash: Crash, server: ScriptedServer, tmp_path: Path
) -> None:
    model = f"hang2-{uuid.uuid4().hex}"
    tool_file, knowledge, queries = tmp_path / "tools.txt", tmp_path / "kb.db", tmp_path / "queries.txt"
    await crash.start("rag", server.base_url, model, str(tool_file), str(knowledge), str(queries))
    await asyncio.to_thread(wait_for_round, server, model, 2)
    output = await crash.finish()

    assert output == AGENT_FINAL
    _assert_searched_once_and_every_round_saw_the_documents(server, model, queries)
    assert tool_file.read_text().split() == ["1", "2"]
