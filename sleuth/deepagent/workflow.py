"""The seed pages' import path for the research graph: `from sleuth.deepagent.workflow import
create_research_workflow`. The same objects as `sleuth.research`."""

from sleuth.research import ResearchReport, ResearchResult, ResearchSpec, create_research_workflow

__all__ = ["ResearchReport", "ResearchResult", "ResearchSpec", "create_research_workflow"]
