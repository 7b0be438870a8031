"""Retrieval: embedders, stores, the retriever, and the `search_<name>` datastore tools."""

from sleuth.rag.tools import create_rag_tool, routing_block, wire_datastores
from sleuth.rag.types import RetrievedChunk, Retriever

__all__ = ["RetrievedChunk", "Retriever", "create_rag_tool", "routing_block", "wire_datastores"]
