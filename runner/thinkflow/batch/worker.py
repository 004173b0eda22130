"""One input of a batch -> one normal run -> its result line. Shared by the local pool and the Ray tasks.

The agent is built for each input (its ``vars`` go into the system prompt; its tools and memory start clean), with
the batch's ``--model`` override and no approver: a ``confirm`` tool is denied in a batch, as nobody is there to
approve it. The run gets its own trace and, when the input names one, continues its session under the session's
lock, exactly as ``thinkflow-run --session`` does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkflow.agent import build
from thinkflow.batch.inputs import BatchInput
from thinkflow.batch.results import error_record, result_record
from thinkflow.config.spec import AgentSpec
from thinkflow.errors import ThinkFlowError
from thinkflow.prompting.templates import prompt_variables
from thinkflow.redaction import Redactor
from thinkflow.run.limits import Budget
from thinkflow.run.telemetry import TelemetrySettings, shared


@dataclass(frozen=True)
class RunSettings:
    """What every run of a batch shares (picklable: it travels with each Ray task).

    Attributes:
        spec: the loaded agent.
        model: a ``--model`` override, or None.
        trace_dir: where the runs' traces go, or None for the default (``.thinkflow/runs``).
        max_steps: a ``--max-steps`` override, or None.
        telemetry: where the runs' OpenTelemetry spans go, or None for none.
    """

    spec: AgentSpec
    model: str | None = None
    trace_dir: Path | None = None
    max_steps: int | None = None
    telemetry: TelemetrySettings | None = None


def run_input(settings: RunSettings, item: BatchInput, budget: Budget | None = None) -> dict[str, Any]:
    """Run ``item`` and return its result line (see :mod:`thinkflow.batch.results`).

    Args:
        settings: the batch's shared settings.
        item: the input.
        budget: the batch's budget (the run's own budget is charged to it), or None.
    Returns:
        the record, answer and error redacted of the agent's secrets; status ``"error"`` when the agent could
        not be built or the run raised (a broken prompt template, an unwritable trace directory).
    """
    started = time.monotonic()
    variables = item.vars
    try:
        if item.only_used_vars and variables:
            used = prompt_variables(settings.spec.prompt)
            variables = {k: v for k, v in variables.items() if k in used}
        agent = build(settings.spec, model=settings.model, prompt_vars=variables or None)
    except ThinkFlowError as error:
        return error_record(item.id, f"{type(error).__name__}: {error}", time.monotonic() - started)
    session = None
    if item.session:
        from thinkflow.run.session import Session

        session = Session(settings.spec.name, item.session)
    if settings.spec.planner.enabled:
        from thinkflow.run.planner import run as run_loop
    else:
        from thinkflow.run.loop import run as run_loop
    on_event = shared(settings.telemetry).recorder(secrets=agent.secrets) if settings.telemetry else None
    try:
        result = run_loop(agent, item.task, on_event=on_event, session=session, trace_dir=settings.trace_dir,
                          max_steps=settings.max_steps, stream=False, budget=budget)
    except ThinkFlowError as error:
        record = error_record(item.id, f"{type(error).__name__}: {error}", time.monotonic() - started)
    else:
        record = result_record(item.id, result)
    return Redactor(agent.secrets)(record)
