"""Stores behind one `BaseVectorStore` interface.

The engines' client libraries load only when a store is made: each store's extra installs them.
"""

from sleuth.rag.stores.base import BaseVectorStore, Document, StoreError
from sleuth.rag.stores.chroma import ChromaVectorStore
from sleuth.rag.stores.memory import InMemoryVectorStore
from sleuth.rag.stores.opensearch import OpenSearchVectorStore
from sleuth.rag.stores.pgvector import PgVectorStore
from sleuth.rag.stores.qdrant import QdrantVectorStore
from sleuth.rag.stores.sqlite import SQLiteStore

__all__ = [
    "BaseVectorStore",
    "ChromaVectorStore",
    "Document",
    "InMemoryVectorStore",
    "OpenSearchVectorStore",
    "PgVectorStore",
    "QdrantVectorStore",
    "SQLiteStore",
    "StoreError",
]
