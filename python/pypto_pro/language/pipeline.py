"""pl.pipeline: the automatic cube/vector pipeline transform (pl.jit(pipeline=...)), not implemented yet.

Accepted so kernels that declare it import cleanly; @pl.jit(pipeline=...) raises
NotImplementedError until the transform exists."""

from __future__ import annotations


class PipelineConfig:
    def __init__(self, preload: int = 2, sync_only: bool = False):
        if not isinstance(preload, int) or isinstance(preload, bool) or preload < 0:
            raise ValueError(f"PipelineConfig preload must be a non-negative int, got {preload!r}")
        if not isinstance(sync_only, bool):
            raise TypeError(f"PipelineConfig sync_only must be a bool, got {sync_only!r}")
        self.preload = preload
        self.sync_only = sync_only

    def __repr__(self):
        return f"pl.pipeline.PipelineConfig(preload={self.preload}, sync_only={self.sync_only})"


def stage(fn):
    """@pl.pipeline.stage: marks a helper as one stage of a pipeline loop. Kernels inline it into a
    stage of their IR: plain code unless pl.jit(pipeline=...) schedules the stages. A stage returns
    nothing and calls no other stage."""
    if not callable(fn):
        raise TypeError(f"pl.pipeline.stage decorates a function, got {fn!r}")
    fn.__pypto_pipeline_stage__ = True
    return fn
