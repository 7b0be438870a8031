"""Seed 004's import path for the composition pipelines: `from sleuth.agent.composition import
SequentialPipeline, ParallelPipeline, LoopAgent`. The same objects as `sleuth.composition`."""

from sleuth.composition import LoopAgent, ParallelPipeline, PipelineResult, SequentialPipeline

__all__ = ["LoopAgent", "ParallelPipeline", "PipelineResult", "SequentialPipeline"]
