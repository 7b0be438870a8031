"""Seed 004's import path for the composition pipelines: `from sleuth.agent.composition import
SequentialPipeline, ParallelPipeline, LoopAgent`. The same objects as `sleuth.flows.composition`."""

from sleuth.flows.composition import LoopAgent, ParallelPipeline, PipelineResult, SequentialPipeline

__all__ = ["LoopAgent", "ParallelPipeline", "PipelineResult", "SequentialPipeline"]
