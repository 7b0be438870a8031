"""Retrieval: embedders, stores, the retriever, ingestion, and the `search_<name>` datastore tools."""

from sleuth.rag.demo import DEMO_QUESTION, ensure_demo_store
from sleuth.rag.embeddings import Embedder, LocalEmbeddings, OpenAIEmbeddings
from sleuth.rag.ingest import IngestReport, ingest_paths
from sleuth.rag.retriever import RAGRetriever
from sleuth.rag.stores import (
    BaseVectorStore,
    ChromaVectorStore,
    Document,
    InMemoryVectorStore,
    OpenSearchVectorStore,
    PgVectorStore,
    QdrantVectorStore,
    SQLiteStore,
    StoreError,
)
from sleuth.rag.tools import create_rag_tool, routing_block, wire_datastores
from sleuth.rag.types import RetrievedChunk, Retriever

__all__ = [
    "DEMO_QUESTION",
    "BaseVectorStore",
    "ChromaVectorStore",
    "Document",
    "Embedder",
    "InMemoryVectorStore",
    "IngestReport",
    "LocalEmbeddings",
    "OpenAIEmbeddings",
    "OpenSearchVectorStore",
    "PgVectorStore",
    "QdrantVectorStore",
    "RAGRetriever",
    "RetrievedChunk",
    "Retriever",
    "SQLiteStore",
    "StoreError",
    "create_rag_tool",
    "ensure_demo_store",
    "ingest_paths",
    "routing_block",
    "wire_datastores",
]
