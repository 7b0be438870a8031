"""Sleuth: durable deep-research agents. Everything public is importable from here.

Names load lazily, so `import sleuth` stays light and never imports temporalio; the
`TYPE_CHECKING` block gives type checkers the real types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # core
    "Agent": "sleuth.agent",
    "AgentResult": "sleuth.agent",
    "GroundingSettings": "sleuth.agent",
    "UsageLimits": "sleuth.limits",
    "UsageLimitExceeded": "sleuth.limits",
    "UsageAccount": "sleuth.limits",
    "ModelPrice": "sleuth.pricing",
    "set_prices": "sleuth.pricing",
    "ReviewPolicy": "sleuth.review",
    "ReviewSettings": "sleuth.review",
    "ApprovalPolicy": "sleuth.review",
    "ReviewDecision": "sleuth.review",
    "PendingReview": "sleuth.review",
    "SleuthError": "sleuth.errors",
    "InvalidSettingError": "sleuth.errors",
    "UnsupportedArgumentError": "sleuth.errors",
    "NotFoundError": "sleuth.errors",
    "MissingFileError": "sleuth.errors",
    "MissingExtraError": "sleuth.errors",
    "NotAvailableError": "sleuth.errors",
    "SleuthSettings": "sleuth.settings",
    "load_settings": "sleuth.settings",
    "json_from_text": "sleuth.jsontext",
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
    "ResearchReport": "sleuth.research",
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
    "open_sink_url": "sleuth.sinks",
    "sink_for_name": "sleuth.sinks",
    "PythonPackagesProvider": "sleuth.providers",
    "register_package_scan": "sleuth.providers",
    # retrieval
    "RAGRetriever": "sleuth.rag",
    "BaseVectorStore": "sleuth.rag",
    "InMemoryVectorStore": "sleuth.rag",
    "SQLiteStore": "sleuth.rag",
    "OpenSearchVectorStore": "sleuth.rag",
    "QdrantVectorStore": "sleuth.rag",
    "ChromaVectorStore": "sleuth.rag",
    "PgVectorStore": "sleuth.rag",
    "StoreError": "sleuth.rag",
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

# What type checkers read: every exported name with its real type (`import X as X` marks a
# re-export, so checkers with --no-implicit-reexport see it too).
# At run time the names load lazily through `__getattr__` below, so this block never runs.
if TYPE_CHECKING:
    from sleuth.agent import Agent as Agent
    from sleuth.agent import AgentResult as AgentResult
    from sleuth.agent import GroundingSettings as GroundingSettings
    from sleuth.app import App as App
    from sleuth.app import UnknownNameError as UnknownNameError
    from sleuth.app import load_app as load_app
    from sleuth.artifacts import LocalArtifactStore as LocalArtifactStore
    from sleuth.budget import budgeted_agent as budgeted_agent
    from sleuth.composition import LoopAgent as LoopAgent
    from sleuth.composition import ParallelPipeline as ParallelPipeline
    from sleuth.composition import PipelineResult as PipelineResult
    from sleuth.composition import SequentialPipeline as SequentialPipeline
    from sleuth.decompose import Budget as Budget
    from sleuth.decompose import DecomposeResult as DecomposeResult
    from sleuth.decompose import DeepDecomposer as DeepDecomposer
    from sleuth.deepagent import FilesystemBackend as FilesystemBackend
    from sleuth.deepagent import StateBackend as StateBackend
    from sleuth.deepagent import SubAgentDef as SubAgentDef
    from sleuth.deepagent import TodoState as TodoState
    from sleuth.deepagent import create_deepagent as create_deepagent
    from sleuth.errors import InvalidSettingError as InvalidSettingError
    from sleuth.errors import MissingExtraError as MissingExtraError
    from sleuth.errors import MissingFileError as MissingFileError
    from sleuth.errors import NotAvailableError as NotAvailableError
    from sleuth.errors import NotFoundError as NotFoundError
    from sleuth.errors import SleuthError as SleuthError
    from sleuth.errors import UnsupportedArgumentError as UnsupportedArgumentError
    from sleuth.events import Event as Event
    from sleuth.events import emit as emit
    from sleuth.events import get_event_bus as get_event_bus
    from sleuth.events import run_context as run_context
    from sleuth.grounding import Citation as Citation
    from sleuth.grounding import ClaimVerdict as ClaimVerdict
    from sleuth.grounding import GroundingReport as GroundingReport
    from sleuth.grounding import ground_claims as ground_claims
    from sleuth.grounding import judge_claims as judge_claims
    from sleuth.jsontext import json_from_text as json_from_text
    from sleuth.knowledge import ItemRef as ItemRef
    from sleuth.knowledge import KnowledgeProvider as KnowledgeProvider
    from sleuth.knowledge import KnowledgeRow as KnowledgeRow
    from sleuth.knowledge import research_item as research_item
    from sleuth.limits import UsageAccount as UsageAccount
    from sleuth.limits import UsageLimitExceeded as UsageLimitExceeded
    from sleuth.limits import UsageLimits as UsageLimits
    from sleuth.log import configure_logging as configure_logging
    from sleuth.models import Model as Model
    from sleuth.models import NonRetryableModelError as NonRetryableModelError
    from sleuth.models import RetryableModelError as RetryableModelError
    from sleuth.models import ScriptedModel as ScriptedModel
    from sleuth.models import resolve as resolve
    from sleuth.models.anthropic import AnthropicModel as AnthropicModel
    from sleuth.models.local import LocalModel as LocalModel
    from sleuth.models.openai import OpenAIModel as OpenAIModel
    from sleuth.pricing import ModelPrice as ModelPrice
    from sleuth.pricing import set_prices as set_prices
    from sleuth.providers import PythonPackagesProvider as PythonPackagesProvider
    from sleuth.providers import register_package_scan as register_package_scan
    from sleuth.rag import BaseVectorStore as BaseVectorStore
    from sleuth.rag import ChromaVectorStore as ChromaVectorStore
    from sleuth.rag import InMemoryVectorStore as InMemoryVectorStore
    from sleuth.rag import LocalEmbeddings as LocalEmbeddings
    from sleuth.rag import OpenAIEmbeddings as OpenAIEmbeddings
    from sleuth.rag import OpenSearchVectorStore as OpenSearchVectorStore
    from sleuth.rag import PgVectorStore as PgVectorStore
    from sleuth.rag import QdrantVectorStore as QdrantVectorStore
    from sleuth.rag import RAGRetriever as RAGRetriever
    from sleuth.rag import SQLiteStore as SQLiteStore
    from sleuth.rag import StoreError as StoreError
    from sleuth.rag import create_rag_tool as create_rag_tool
    from sleuth.rag import ensure_demo_store as ensure_demo_store
    from sleuth.research import ResearchReport as ResearchReport
    from sleuth.research import ResearchResult as ResearchResult
    from sleuth.research import ResearchSpec as ResearchSpec
    from sleuth.research import create_research_workflow as create_research_workflow
    from sleuth.research import next_node as next_node
    from sleuth.review import ApprovalPolicy as ApprovalPolicy
    from sleuth.review import PendingReview as PendingReview
    from sleuth.review import ReviewDecision as ReviewDecision
    from sleuth.review import ReviewPolicy as ReviewPolicy
    from sleuth.review import ReviewSettings as ReviewSettings
    from sleuth.settings import SleuthSettings as SleuthSettings
    from sleuth.settings import load_settings as load_settings
    from sleuth.sinks import JSONLRowSink as JSONLRowSink
    from sleuth.sinks import OpenSearchRowSink as OpenSearchRowSink
    from sleuth.sinks import RowRecord as RowRecord
    from sleuth.sinks import RowSink as RowSink
    from sleuth.sinks import SQLiteRowSink as SQLiteRowSink
    from sleuth.sinks import open_sink_url as open_sink_url
    from sleuth.sinks import sink_for_name as sink_for_name
    from sleuth.state import EvidenceItem as EvidenceItem
    from sleuth.state import LoopState as LoopState
    from sleuth.termination import Condition as Condition
    from sleuth.termination import ConfidenceMet as ConfidenceMet
    from sleuth.termination import CustomCondition as CustomCondition
    from sleuth.termination import MaxIterations as MaxIterations
    from sleuth.termination import NoToolCalls as NoToolCalls
    from sleuth.termination import TextMention as TextMention
    from sleuth.termination import TimeLimit as TimeLimit
    from sleuth.termination import TokenLimit as TokenLimit
    from sleuth.termination import ToolCalled as ToolCalled
    from sleuth.tools import Tool as Tool
    from sleuth.tools import ToolResult as ToolResult
    from sleuth.tools import tool as tool
    from sleuth.yamlconfig import load_agents_into as load_agents_into

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
