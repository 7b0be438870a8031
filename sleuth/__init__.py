"""Sleuth: durable deep-research agents. Everything public is importable from here.

Names load lazily, so `import sleuth` stays light and never imports temporalio; the
`TYPE_CHECKING` block gives type checkers the real types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sleuth._util.moved  # noqa: F401  (old module paths keep working, with a warning)
from sleuth._util.lazy import lazy_exports

__version__ = "0.1.0"
"""The one place the version is written: `pyproject.toml` reads it (`dynamic = ["version"]`)."""


# What type checkers read: every exported name with its real type (`import X as X` marks a
# re-export, so checkers with --no-implicit-reexport see it too).
# At run time this block never runs: `lazy_exports` (below) reads it from the source, and each
# name loads from its module on first use.
if TYPE_CHECKING:
    from sleuth._util.jsontext import json_from_text as json_from_text
    from sleuth.agent import Agent as Agent
    from sleuth.agent import AgentResult as AgentResult
    from sleuth.agent import GroundingSettings as GroundingSettings
    from sleuth.agent.state import EvidenceItem as EvidenceItem
    from sleuth.agent.state import LoopState as LoopState
    from sleuth.agent.termination import Condition as Condition
    from sleuth.agent.termination import ConfidenceMet as ConfidenceMet
    from sleuth.agent.termination import CustomCondition as CustomCondition
    from sleuth.agent.termination import MaxIterations as MaxIterations
    from sleuth.agent.termination import NoToolCalls as NoToolCalls
    from sleuth.agent.termination import TextMention as TextMention
    from sleuth.agent.termination import TimeLimit as TimeLimit
    from sleuth.agent.termination import TokenLimit as TokenLimit
    from sleuth.agent.termination import ToolCalled as ToolCalled
    from sleuth.apps.app import App as App
    from sleuth.apps.app import UnknownNameError as UnknownNameError
    from sleuth.apps.app import load_app as load_app
    from sleuth.apps.yaml_agents import load_agents_into as load_agents_into
    from sleuth.deepagent import FilesystemBackend as FilesystemBackend
    from sleuth.deepagent import StateBackend as StateBackend
    from sleuth.deepagent import SubAgentDef as SubAgentDef
    from sleuth.deepagent import TodoState as TodoState
    from sleuth.deepagent import create_deepagent as create_deepagent
    from sleuth.flows.composition import LoopAgent as LoopAgent
    from sleuth.flows.composition import ParallelPipeline as ParallelPipeline
    from sleuth.flows.composition import PipelineResult as PipelineResult
    from sleuth.flows.composition import SequentialPipeline as SequentialPipeline
    from sleuth.flows.decompose import Budget as Budget
    from sleuth.flows.decompose import DecomposeResult as DecomposeResult
    from sleuth.flows.decompose import DeepDecomposer as DeepDecomposer
    from sleuth.flows.review import ApprovalPolicy as ApprovalPolicy
    from sleuth.flows.review import PendingReview as PendingReview
    from sleuth.flows.review import ReviewDecision as ReviewDecision
    from sleuth.flows.review import ReviewPolicy as ReviewPolicy
    from sleuth.flows.review import ReviewSettings as ReviewSettings
    from sleuth.grounding import Citation as Citation
    from sleuth.grounding import ClaimVerdict as ClaimVerdict
    from sleuth.grounding import GroundingReport as GroundingReport
    from sleuth.grounding import ground_claims as ground_claims
    from sleuth.grounding import judge_claims as judge_claims
    from sleuth.models import Model as Model
    from sleuth.models import NonRetryableModelError as NonRetryableModelError
    from sleuth.models import RetryableModelError as RetryableModelError
    from sleuth.models import ScriptedModel as ScriptedModel
    from sleuth.models import resolve as resolve
    from sleuth.models.anthropic import AnthropicModel as AnthropicModel
    from sleuth.models.local import LocalModel as LocalModel
    from sleuth.models.openai import OpenAIModel as OpenAIModel
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
    from sleuth.runtime.artifacts import LocalArtifactStore as LocalArtifactStore
    from sleuth.runtime.errors import InvalidSettingError as InvalidSettingError
    from sleuth.runtime.errors import MissingExtraError as MissingExtraError
    from sleuth.runtime.errors import MissingFileError as MissingFileError
    from sleuth.runtime.errors import NotAvailableError as NotAvailableError
    from sleuth.runtime.errors import NotFoundError as NotFoundError
    from sleuth.runtime.errors import SleuthError as SleuthError
    from sleuth.runtime.errors import UnsupportedArgumentError as UnsupportedArgumentError
    from sleuth.runtime.events import Event as Event
    from sleuth.runtime.events import emit as emit
    from sleuth.runtime.events import get_event_bus as get_event_bus
    from sleuth.runtime.events import run_context as run_context
    from sleuth.runtime.log import configure_logging as configure_logging
    from sleuth.runtime.settings import SleuthSettings as SleuthSettings
    from sleuth.runtime.settings import load_settings as load_settings
    from sleuth.scans.knowledge import ItemRef as ItemRef
    from sleuth.scans.knowledge import KnowledgeProvider as KnowledgeProvider
    from sleuth.scans.knowledge import KnowledgeRow as KnowledgeRow
    from sleuth.scans.knowledge import research_item as research_item
    from sleuth.scans.providers import PythonPackagesProvider as PythonPackagesProvider
    from sleuth.scans.providers import register_package_scan as register_package_scan
    from sleuth.scans.sinks import JSONLRowSink as JSONLRowSink
    from sleuth.scans.sinks import OpenSearchRowSink as OpenSearchRowSink
    from sleuth.scans.sinks import RowRecord as RowRecord
    from sleuth.scans.sinks import RowSink as RowSink
    from sleuth.scans.sinks import SQLiteRowSink as SQLiteRowSink
    from sleuth.scans.sinks import open_sink_url as open_sink_url
    from sleuth.scans.sinks import sink_for_name as sink_for_name
    from sleuth.tools import Tool as Tool
    from sleuth.tools import ToolResult as ToolResult
    from sleuth.tools import tool as tool
    from sleuth.tools.builtin import web_fetch_tool as web_fetch_tool
    from sleuth.tools.builtin import web_search_tool as web_search_tool
    from sleuth.tools.pages import WebFetchOptions as WebFetchOptions
    from sleuth.tools.search import SearchResult as SearchResult
    from sleuth.tools.search import WebSearchOptions as WebSearchOptions
    from sleuth.usage.budget import budgeted_agent as budgeted_agent
    from sleuth.usage.limits import UsageAccount as UsageAccount
    from sleuth.usage.limits import UsageLimitExceeded as UsageLimitExceeded
    from sleuth.usage.limits import UsageLimits as UsageLimits
    from sleuth.usage.pricing import ModelPrice as ModelPrice
    from sleuth.usage.pricing import set_prices as set_prices

_EXPORTS, __getattr__, __dir__ = lazy_exports(globals())
__all__ = sorted(_EXPORTS)
