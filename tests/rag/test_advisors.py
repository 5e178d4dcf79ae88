"""The retrieval advisors on scripted models: one retrieval per turn whatever the tool rounds, the
context appended by the model link (never stored), documents and citations in the context, the
stream path, the modular pipeline, ``retrieval_tool``, and every failure before any model call with
nothing stored."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ScriptedChatModel,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain.chain.vocabulary import TOOL_CALLING_ORDER
from advisorchain.errors import ModelError, VectorStoreError
from advisorchain.rag import (
    Citation,
    CompressionQueryTransformer,
    ContextualQueryAugmenter,
    Document,
    InMemoryVectorStore,
    MultiQueryExpander,
    Query,
    QuestionAnswerAdvisor,
    ReciprocalRankFusionJoiner,
    RetrievalAugmentationAdvisor,
    SearchRequest,
    VectorStoreDocumentRetriever,
    retrieval_tool,
)

from .conftest import WordsEmbeddingModel

DOCS = [
    Document("Error E1054 means the replication slot is missing.", {"kind": "error"}, id="e1054"),
    Document("max_wal_size sets how much WAL grows between checkpoints.", {"kind": "setting"}, id="wal"),
    Document("Vacuum reclaims storage held by dead tuples.", {"kind": "maintenance"}, id="vacuum"),
]


class CountingStore(InMemoryVectorStore):
    """An in-memory store that counts its searches."""

    def __init__(self, documents: list[Document] = DOCS) -> None:
        super().__init__(WordsEmbeddingModel())
        self.searches: list[SearchRequest] = []
        if documents:
            self.add(documents)

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        self.searches.append(request)  # type: ignore[arg-type]
        return await super().asimilarity_search(request)


@tool
def lookup(name: str) -> str:
    """Look a thing up."""
    return f"looked up {name}"


def tool_call(n: int, name: str = "lookup", arguments: str = '{"name": "x"}') -> AssistantMessage:
    return AssistantMessage(None, [ToolCall(f"call-{n}", name, arguments)])


def last_user_text(prompt: Any) -> str:
    return prompt.last_user_message.text  # type: ignore[no-any-return]


def test_the_context_joins_the_last_user_message_at_the_model_call_only() -> None:
    store = CountingStore()
    model = ScriptedChatModel(["E1054 means the slot is missing [1]."])
    response = (
        ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
        .prompt("What does E1054 mean?")
        .call()
        .chat_client_response()
    )
    sent = last_user_text(model.prompts[0])
    assert sent.startswith("What does E1054 mean?\n")
    assert "[1] Error E1054 means the replication slot is missing." in sent
    documents = response.context[AdvisorParams.RETRIEVED_DOCUMENTS]
    assert isinstance(documents, tuple) and documents[0].id == "e1054"
    assert response.context[AdvisorParams.EVALUATION_CONTEXT] == tuple(d.text for d in documents)
    assert response.context[AdvisorParams.CITATIONS] == (Citation(1, documents[0]),)
    assert store.searches[0].query == "What does E1054 mean?"  # type: ignore[union-attr]


def test_memory_stores_the_users_own_text() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["first [1]", "second"])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), QuestionAnswerAdvisor(CountingStore())])
    client.prompt("What does E1054 mean?").call().content()
    client.prompt("And vacuum?").call().content()
    stored = memory.get(ChatMemory.DEFAULT_CONVERSATION_ID)
    assert [m.text for m in stored if isinstance(m, UserMessage)] == ["What does E1054 mean?", "And vacuum?"]
    # the second turn's model call sees the first question as the user asked it
    assert next(m.text for m in model.prompts[1].instructions if isinstance(m, UserMessage)) == "What does E1054 mean?"


def test_one_retrieval_serves_every_tool_round_with_the_same_documents() -> None:
    store = CountingStore()
    model = ScriptedChatModel([tool_call(1), tool_call(2), "done [2]"])
    response = (
        ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
        .prompt("How big may WAL grow?")
        .tools(lookup)
        .call()
        .chat_client_response()
    )
    assert len(store.searches) == 1
    assert len(model.prompts) == 3
    contexts = {last_user_text(p) for p in model.prompts}
    assert len(contexts) == 1 and "max_wal_size" in contexts.pop()
    assert isinstance(model.prompts[2].instructions[-1], ToolResponseMessage)
    assert [c.number for c in response.context[AdvisorParams.CITATIONS]] == [2]


def test_inside_the_tool_loop_the_advisor_retrieves_on_every_round() -> None:
    store = CountingStore()
    model = ScriptedChatModel([tool_call(1), tool_call(2), "done"])
    ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store, order=TOOL_CALLING_ORDER + 10)]).prompt(
        "How big may WAL grow?"
    ).tools(lookup).call().content()
    assert len(store.searches) == 3


def test_format_instructions_come_after_the_context() -> None:
    class Answer(BaseModel):
        text: str

    model = ScriptedChatModel(['{"text": "slot missing"}'])
    answer = (
        ChatClient(model, default_advisors=[QuestionAnswerAdvisor(CountingStore())])
        .prompt("What does E1054 mean?")
        .call()
        .entity(Answer)
    )
    assert answer.text == "slot missing"
    sent = last_user_text(model.prompts[0])
    assert sent.index("[1] Error E1054") < sent.index("JSON")


async def test_on_the_stream_path_chunks_pass_live_and_the_last_carries_the_citations() -> None:
    store = CountingStore()
    model = ScriptedChatModel(["The slot is missing [1][3], see [9]."])
    client = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
    chunks = [c async for c in client.prompt("What does E1054 mean?").astream().chat_client_responses()]
    assert len(chunks) > 3
    assert "".join(c.chat_response.text or "" for c in chunks if c.chat_response) == "The slot is missing [1][3], see [9]."
    citations = chunks[-1].context[AdvisorParams.CITATIONS]
    documents = chunks[-1].context[AdvisorParams.RETRIEVED_DOCUMENTS]
    assert [c.number for c in citations] == [1, 3]
    assert citations[1].document == documents[2]
    assert len(store.searches) == 1


def test_citations_read_both_forms_and_leave_out_numbers_that_name_nothing() -> None:
    model = ScriptedChatModel(["See [3, 1] and [1] and [7] and [ 2 ]."])
    response = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(CountingStore())]).prompt(
        "E1054 vacuum wal"
    ).call().chat_client_response()
    assert [c.number for c in response.context[AdvisorParams.CITATIONS]] == [3, 1, 2]
    assert response.chat_response.text == "See [3, 1] and [1] and [7] and [ 2 ]."  # type: ignore[union-attr]


def test_an_empty_store_gives_the_empty_context_answer() -> None:
    model = ScriptedChatModel(["I can't answer that from the knowledge base."])
    response = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(CountingStore([]))]).prompt(
        "What does E1054 mean?"
    ).call().chat_client_response()
    assert response.context[AdvisorParams.RETRIEVED_DOCUMENTS] == ()
    assert response.context[AdvisorParams.CITATIONS] == ()
    assert "knowledge base has nothing" in last_user_text(model.prompts[0])


def test_the_filter_param_replaces_the_filter_for_one_request() -> None:
    store = CountingStore()
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store, SearchRequest("", filter="kind == 'error'"))])
    client.prompt("anything").call().content()
    client.prompt("anything").param(QuestionAnswerAdvisor.FILTER_EXPRESSION, "kind == 'maintenance'").call().content()
    assert "[1] Error E1054" in last_user_text(model.prompts[0]) and "[2]" not in last_user_text(model.prompts[0])
    assert "[1] Vacuum" in last_user_text(model.prompts[1])


def test_a_filter_that_does_not_parse_fails_before_the_model_and_memory_keeps_nothing() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["never"])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), QuestionAnswerAdvisor(CountingStore())])
    with pytest.raises(ValueError, match="position 6"):
        client.prompt("q").param(QuestionAnswerAdvisor.FILTER_EXPRESSION, "kind = 'x'").call().content()
    assert model.prompts == [] and memory.get(ChatMemory.DEFAULT_CONVERSATION_ID) == []
    with pytest.raises(ValueError, match="position 6"):
        QuestionAnswerAdvisor(CountingStore(), SearchRequest("", filter="kind = 'x'"))


class BrokenStore:
    """A user's own store whose server refuses connections."""

    async def asimilarity_search(self, request: SearchRequest) -> list[Document]:
        raise ConnectionRefusedError("connection refused by the vector database")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failing_store_is_a_vector_store_error_before_any_model_call(stream: bool) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["never"])
    store = BrokenStore()
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), QuestionAnswerAdvisor(store)])
    with pytest.raises(VectorStoreError) as caught:
        if stream:
            [c async for c in client.prompt("q").astream().chat_client_responses()]
        else:
            await client.prompt("q").acall().content()
    assert caught.value.store is store
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)
    assert model.prompts == [] and memory.get(ChatMemory.DEFAULT_CONVERSATION_ID) == []


def test_a_failing_embedding_model_is_a_model_error_before_any_model_call() -> None:
    class Broken(WordsEmbeddingModel):
        def embed_query(self, text: str) -> list[float]:
            raise RuntimeError("embedding server down")

    store = CountingStore()
    store.embedding_model = Broken()
    model = ScriptedChatModel(["never"])
    with pytest.raises(ModelError, match="embedding server down"):
        ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)]).prompt("q").call().content()
    assert model.prompts == []


def test_templates_need_documents_and_may_use_the_query_with_literal_braces() -> None:
    with pytest.raises(ValueError, match="documents"):
        QuestionAnswerAdvisor(CountingStore(), template="no placeholder")
    model = ScriptedChatModel(["ok"])
    template = 'Question {query} -- JSON {"a": 1} --\n{documents}'
    ChatClient(model, default_advisors=[QuestionAnswerAdvisor(CountingStore(), SearchRequest("", top_k=1), template=template)]).prompt(
        "E1054?"
    ).call().content()
    assert last_user_text(model.prompts[0]).endswith(
        'Question E1054? -- JSON {"a": 1} --\n[1] Error E1054 means the replication slot is missing.'
    )


def test_the_advisors_names_and_orders() -> None:
    qa = QuestionAnswerAdvisor(CountingStore())
    rag = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(CountingStore()))
    assert (qa.name, rag.name) == ("Question Answer Advisor", "Retrieval Augmentation Advisor")
    assert qa.order == rag.order == QuestionAnswerAdvisor.DEFAULT_ORDER == -(2**31) + 240
    assert RetrievalAugmentationAdvisor.DOCUMENT_CONTEXT == "rag_document_context"
    assert QuestionAnswerAdvisor.FILTER_EXPRESSION == "qa_filter_expression"
    assert VectorStoreDocumentRetriever.FILTER_EXPRESSION == "vector_store_filter_expression"


# -- the modular pipeline ------------------------------------------------------------------------------


def test_the_pipeline_compresses_expands_retrieves_joins_and_augments() -> None:
    store = CountingStore()
    helper = ScriptedChatModel(["what does error E1054 mean", "1. E1054 meaning\n\n- replication slot missing\n- E1054 fix"])
    model = ScriptedChatModel(["It means [1]."])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(store, top_k=2),
        query_transformers=[CompressionQueryTransformer(helper)],
        query_expander=MultiQueryExpander(helper, number_of_queries=3),
        document_joiner=ReciprocalRankFusionJoiner(),
    )
    response = ChatClient(model, default_advisors=[advisor]).prompt().messages(
        [UserMessage("Tell me about error codes"), AssistantMessage("Which one?")]
    ).user("E1054?").call().chat_client_response()
    assert "Follow-up query:\nE1054?" in last_user_text(helper.prompts[0])
    assert "user: Tell me about error codes" in last_user_text(helper.prompts[0])
    assert [r.query for r in store.searches] == [  # type: ignore[union-attr]
        "what does error E1054 mean",
        "E1054 meaning",
        "replication slot missing",
        "E1054 fix",
    ]
    documents = response.context[RetrievalAugmentationAdvisor.DOCUMENT_CONTEXT]
    assert documents == response.context[AdvisorParams.RETRIEVED_DOCUMENTS] and documents[0].id == "e1054"
    sent = last_user_text(model.prompts[0])
    assert sent.startswith("E1054?\n") and "[1] Error E1054" in sent
    assert response.context[AdvisorParams.CITATIONS][0].document.id == "e1054"


def test_an_expansion_with_another_count_keeps_the_first_and_says_so(span_exporter: Any, caplog: Any) -> None:
    helper = ScriptedChatModel(["a\nb\nc\nd\ne"])
    expander = MultiQueryExpander(helper, number_of_queries=2, include_original=False)
    advisor = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(CountingStore()), query_expander=expander)
    with caplog.at_level(logging.WARNING, logger="advisorchain.rag"):
        ChatClient(ScriptedChatModel(["ok"]), default_advisors=[advisor]).prompt("q").call().content()
    assert "asked for 2 query variants and got 5" in caplog.text
    events = [e for s in span_exporter.get_finished_spans() for e in s.events if e.name == "query_expansion_count"]
    assert [e.attributes["count"] for e in events] == [5]


def test_the_empty_context_template_or_nothing_when_allowed() -> None:
    for allow, expected in [(False, "can't answer it from the knowledge base"), (True, None)]:
        model = ScriptedChatModel(["ok"])
        advisor = RetrievalAugmentationAdvisor(
            VectorStoreDocumentRetriever(CountingStore([])),
            query_augmenter=ContextualQueryAugmenter(allow_empty_context=allow),
        )
        ChatClient(model, default_advisors=[advisor]).prompt("q").call().content()
        sent = last_user_text(model.prompts[0])
        assert (expected in sent) if expected else sent == "q"


def test_the_retrievers_filter_may_depend_on_the_request_context() -> None:
    store = CountingStore()
    retriever = VectorStoreDocumentRetriever(store, filter=lambda context: f"kind == '{context['tenant_kind']}'")
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model, default_advisors=[RetrievalAugmentationAdvisor(retriever)])
    client.prompt("anything").param("tenant_kind", "setting").call().content()
    client.prompt("anything").param("tenant_kind", "setting").param(
        VectorStoreDocumentRetriever.FILTER_EXPRESSION, "kind == 'error'"
    ).call().content()
    assert "max_wal_size" in last_user_text(model.prompts[0]) and "E1054" not in last_user_text(model.prompts[0])
    assert "E1054" in last_user_text(model.prompts[1]) and "max_wal_size" not in last_user_text(model.prompts[1])


def test_inside_the_loop_the_transformers_see_the_rounds_tool_results() -> None:
    helper = ScriptedChatModel(["first question", "question after the tool"])
    model = ScriptedChatModel([tool_call(1), "done"])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(CountingStore()),
        query_transformers=[CompressionQueryTransformer(helper)],
        order=TOOL_CALLING_ORDER + 10,
    )
    ChatClient(model, default_advisors=[advisor]).prompt().messages([UserMessage("earlier"), AssistantMessage("yes")]).user(
        "now"
    ).tools(lookup).call().content()
    assert len(helper.prompts) == 2
    assert "tool lookup: looked up x" in last_user_text(helper.prompts[1])


# -- the retrieval tool -----------------------------------------------------------------------------


def test_the_retrieval_tool_numbers_on_and_its_documents_join_the_citations() -> None:
    store = CountingStore()
    qa = QuestionAnswerAdvisor(store, SearchRequest("", top_k=1))
    search_tool = retrieval_tool(VectorStoreDocumentRetriever(store, top_k=2))
    model = ScriptedChatModel([tool_call(1, "search_documents", '{"query": "vacuum dead tuples"}'), "Vacuum [2], E1054 [1]."])
    response = ChatClient(model, default_advisors=[qa]).prompt("What does E1054 mean?").tools(search_tool).call().chat_client_response()
    tool_result = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[union-attr]
    assert tool_result.startswith("[2] Vacuum reclaims storage")
    documents = response.context[AdvisorParams.RETRIEVED_DOCUMENTS]
    assert [d.id for d in documents] == ["e1054", "vacuum", *([d.id for d in documents][2:])]
    assert [(c.number, c.document.id) for c in response.context[AdvisorParams.CITATIONS]] == [(2, "vacuum"), (1, "e1054")]


async def test_the_retrieval_tool_alone_and_its_bad_arguments() -> None:
    search_tool = retrieval_tool(CountingStore())
    assert search_tool.definition.name == "search_documents"
    assert search_tool.definition.input_schema["required"] == ["query"]
    assert (await search_tool.call('{"query": "E1054"}', None)).startswith("[1] Error E1054")
    assert await retrieval_tool(CountingStore([])).call('{"query": "x"}', None) == "No documents found for this query."
    from advisorchain.tools import InvalidToolArgumentsError

    for bad in ["{", '{"query": ""}', '{"q": "x"}']:
        with pytest.raises(InvalidToolArgumentsError):
            await search_tool.call(bad, None)


def test_retrieve_spans_name_the_store(span_exporter: Any) -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model, default_advisors=[QuestionAnswerAdvisor(CountingStore(), SearchRequest("", top_k=2, filter="kind != 'x'"))]).prompt(
        "E1054"
    ).call().content()
    [span] = [s for s in span_exporter.get_finished_spans() if s.name == "retrieve CountingStore"]
    assert span.attributes["advisorchain.rag.top_k"] == 2
    assert span.attributes["advisorchain.rag.documents"] == 2
    assert span.attributes["advisorchain.rag.filter"] == 'kind != "x"'
    assert "advisorchain.rag.document_texts" not in span.attributes  # no document text unless opted in


def test_a_query_is_equal_and_hashed_by_text_and_history() -> None:
    a = Query("q", (UserMessage("h"),), {"x": 1})
    b = Query("q", [UserMessage("h")], {"y": 2})
    assert a == b and hash(a) == hash(b) and a != Query("q")
