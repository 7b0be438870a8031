"""Sleuth: durable deep-research agents. Everything public is importable from here.

Names load lazily, so `import sleuth` stays light and never imports temporalio.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # core
    "Agent": "sleuth.agent",
    "AgentResult": "sleuth.agent",
    "GroundingSettings": "sleuth.agent",
    "charge_usage": "sleuth.agent",
    "tool": "sleuth.tools",
    "Tool": "sleuth.tools",
    "ToolResult": "sleuth.tools",
    "App": "sleuth.app",
    "UnknownNameError": "sleuth.app",
    "load_app": "sleuth.app",
    "LoopState": "sleuth.state",
    "EvidenceItem": "sleuth.state",
    "Condition": "sleuth.termination",
    "MaxIterations": "sleuth.termination",
    "TokenLimit": "sleuth.termination",
    "TimeLimit": "sleuth.termination",
    "ToolCalled": "sleuth.termination",
    "ConfidenceMet": "sleuth.termination",
    "NoToolCalls": "sleuth.termination",
    "TextMention": "sleuth.termination",
    "CustomCondition": "sleuth.termination",
    "run_context": "sleuth.events",
    "get_event_bus": "sleuth.events",
    "emit": "sleuth.events",
    "Event": "sleuth.events",
    "ScriptedModel": "sleuth.models",
    "LocalModel": "sleuth.models.local",
    "resolve": "sleuth.models",
    "Model": "sleuth.models",
    "RetryableModelError": "sleuth.models",
    "NonRetryableModelError": "sleuth.models",
    "OpenAIModel": "sleuth.models.openai",
    "AnthropicModel": "sleuth.models.anthropic",
    "GroundingReport": "sleuth.grounding",
    "ClaimVerdict": "sleuth.grounding",
    "Citation": "sleuth.grounding",
    "ground_claims": "sleuth.grounding",
    "judge_claims": "sleuth.grounding",
    "LocalArtifactStore": "sleuth.artifacts",
    "configure_logging": "sleuth.log",
    # deep agents
    "create_deepagent": "sleuth.deepagent",
    "SubAgentDef": "sleuth.deepagent",
    "TodoState": "sleuth.deepagent",
    "StateBackend": "sleuth.deepagent",
    "FilesystemBackend": "sleuth.deepagent",
    # research graph
    "create_research_workflow": "sleuth.research",
    "ResearchSpec": "sleuth.research",
    "next_node": "sleuth.research",
    "ResearchResult": "sleuth.research",
    # knowledge scans
    "KnowledgeProvider": "sleuth.knowledge",
    "ItemRef": "sleuth.knowledge",
    "KnowledgeRow": "sleuth.knowledge",
    "research_item": "sleuth.knowledge",
    "RowRecord": "sleuth.sinks",
    "RowSink": "sleuth.sinks",
    "SQLiteRowSink": "sleuth.sinks",
    "JSONLRowSink": "sleuth.sinks",
    "OpenSearchRowSink": "sleuth.sinks",
    "open_sink": "sleuth.sinks",
    "PythonPackagesProvider": "sleuth.providers",
    "register_package_scan": "sleuth.providers",
    # retrieval
    "RAGRetriever": "sleuth.rag",
    "BaseVectorStore": "sleuth.rag",
    "InMemoryVectorStore": "sleuth.rag",
    "SQLiteStore": "sleuth.rag",
    "OpenSearchVectorStore": "sleuth.rag",
    "OpenAIEmbeddings": "sleuth.rag",
    "LocalEmbeddings": "sleuth.rag",
    "ensure_demo_store": "sleuth.rag",
    "create_rag_tool": "sleuth.rag",
    # composition and decomposition
    "SequentialPipeline": "sleuth.composition",
    "ParallelPipeline": "sleuth.composition",
    "LoopAgent": "sleuth.composition",
    "PipelineResult": "sleuth.composition",
    "DeepDecomposer": "sleuth.decompose",
    "Budget": "sleuth.decompose",
    "DecomposeResult": "sleuth.decompose",
    "budgeted_agent": "sleuth.budget",
    "load_agents_into": "sleuth.yamlconfig",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'sleuth' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
