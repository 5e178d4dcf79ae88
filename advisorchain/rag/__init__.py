"""Retrieval-augmented generation: answers grounded in the user's documents (``pip install
'advisorchain[rag]'``), offline by default.

One module per stage, as Spring AI's ``spring-ai-rag``: ``documents``, ``embeddings``, ``filters``,
``search``, ``stores``, ``splitter``; the pipeline's ``query``, ``transformers``, ``expanders``,
``retrievers``, ``joiners``, ``postprocessing``, ``augmenters``; and ``advisors``, ``citations``,
``tool``. The advisors only compose the stages.

>>> store = SQLiteVectorStore("kb.db")
>>> store.add(TextSplitter().split([Document(text, {"path": "guide.md"})]))
>>> client = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
"""

from ..errors import VectorStoreError
from .advisors import QuestionAnswerAdvisor, RetrievalAugmentationAdvisor
from .augmenters import ContextualQueryAugmenter, QueryAugmenter
from .citations import Citation
from .documents import Document
from .embeddings import EmbeddingModel, LocalEmbeddingModel, OpenAIEmbeddingModel
from .expanders import MultiQueryExpander, QueryExpander
from .filters import Filter, FilterSyntaxError
from .joiners import ConcatenationDocumentJoiner, DocumentJoiner, ReciprocalRankFusionJoiner
from .postprocessing import DocumentPostProcessor
from .query import Query
from .retrievers import DocumentRetriever, VectorStoreDocumentRetriever
from .search import SearchRequest
from .splitter import TextSplitter
from .stores import InMemoryVectorStore, PostgresVectorStore, SQLiteVectorStore, VectorStore
from .tool import retrieval_tool
from .transformers import (
    CompressionQueryTransformer,
    QueryTransformer,
    RewriteQueryTransformer,
    TranslationQueryTransformer,
)

__all__ = [
    "Citation",
    "CompressionQueryTransformer",
    "ConcatenationDocumentJoiner",
    "ContextualQueryAugmenter",
    "Document",
    "DocumentJoiner",
    "DocumentPostProcessor",
    "DocumentRetriever",
    "EmbeddingModel",
    "Filter",
    "FilterSyntaxError",
    "InMemoryVectorStore",
    "LocalEmbeddingModel",
    "MultiQueryExpander",
    "OpenAIEmbeddingModel",
    "PostgresVectorStore",
    "Query",
    "QueryAugmenter",
    "QueryExpander",
    "QueryTransformer",
    "QuestionAnswerAdvisor",
    "ReciprocalRankFusionJoiner",
    "RetrievalAugmentationAdvisor",
    "RewriteQueryTransformer",
    "SQLiteVectorStore",
    "SearchRequest",
    "TextSplitter",
    "TranslationQueryTransformer",
    "VectorStore",
    "VectorStoreDocumentRetriever",
    "VectorStoreError",
    "retrieval_tool",
]
