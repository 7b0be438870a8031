"""Stores behind one `BaseVectorStore` interface."""

from sleuth.rag.stores.base import BaseVectorStore, Document
from sleuth.rag.stores.memory import InMemoryVectorStore
from sleuth.rag.stores.opensearch import OpenSearchVectorStore
from sleuth.rag.stores.sqlite import SQLiteStore

__all__ = [
    "BaseVectorStore",
    "Document",
    "InMemoryVectorStore",
    "OpenSearchVectorStore",
    "SQLiteStore",
]
