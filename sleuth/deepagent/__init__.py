"""Deep agents: `create_deepagent` and its capability layers (files, todos, subagents, memory,
summarisation, datastores), and the scan types the seed pages import from here
(`KnowledgeProvider`, `KnowledgeRow`, `ItemRef`, the same objects as `sleuth.scans.knowledge`)."""

from __future__ import annotations

from sleuth.deepagent.factory import create_deepagent, exit_condition
from sleuth.deepagent.fs import (
    Backend,
    FilesystemBackend,
    SandboxError,
    StateBackend,
    WorkspaceQuota,
    WorkspaceQuotaError,
    filesystem_tools,
)
from sleuth.deepagent.memory import load_memory
from sleuth.deepagent.subagents import TASK_TOOL_NAME, SubAgentDef, SubagentTool
from sleuth.deepagent.summarize import SummarizingManager
from sleuth.deepagent.todos import Todo, TodoState, todo_tools
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider, KnowledgeRow

__all__ = [
    "TASK_TOOL_NAME",
    "Backend",
    "FilesystemBackend",
    "ItemRef",
    "KnowledgeProvider",
    "KnowledgeRow",
    "SandboxError",
    "StateBackend",
    "SubAgentDef",
    "SubagentTool",
    "SummarizingManager",
    "Todo",
    "TodoState",
    "WorkspaceQuota",
    "WorkspaceQuotaError",
    "create_deepagent",
    "exit_condition",
    "filesystem_tools",
    "load_memory",
    "todo_tools",
]
