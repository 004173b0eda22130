"""The process's model-call workers: the loop waits for a model call it can abandon, without a new thread a step.

A model call runs outside the loop's thread so that the loop's wait -- not LiteLLM -- is where Ctrl-C and the run's
deadline land, and an abandoned request (a server that trickles bytes) dies with the process. The calls run in a
:class:`thinkflow.workers.WorkerPool` of persistent daemon threads, shared by every run of the process (sub-agents
and planners included): sequential steps reuse one thread.
"""

from __future__ import annotations

from thinkflow.workers import WorkerPool

_MODEL_CALLS = WorkerPool("thinkflow-model")


def model_calls() -> WorkerPool:
    """The process's pool of model-call workers."""
    return _MODEL_CALLS
