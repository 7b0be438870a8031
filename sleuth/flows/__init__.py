"""Flows: composition pipelines, hierarchical decomposition, human review."""
