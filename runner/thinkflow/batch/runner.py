"""Running a batch: inputs -> runs on a pool (local threads or Ray tasks) -> result lines, as each run ends.

:func:`run_batch` keeps at most ``concurrency`` runs in flight, appends each result the moment its run ends, skips
ids the results file already holds as completed, and stops taking new inputs when the batch's budget
(``max_tokens``, ``max_cost`` in US dollars, over every run) is spent or on Ctrl-C. A first Ctrl-C lets the runs in
flight finish and write their results (``on_interrupt`` hears of it at once, so the command can say so); a second
one leaves at once (finished results are on disk either way).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from thinkflow.batch.inputs import BatchInput
from thinkflow.batch.results import ResultLog, error_record
from thinkflow.batch.worker import RunSettings, run_input
from thinkflow.model.messages import Usage
from thinkflow.run.limits import Budget


@dataclass
class SharedBudget(Budget):
    """A :class:`~thinkflow.run.limits.Budget` that runs in several threads charge at once."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def charge(self, usage: Usage) -> None:
        with self._lock:
            super().charge(usage)

    def charge_tool_call(self) -> None:
        with self._lock:
            super().charge_tool_call()

    def charge_record(self, record: dict[str, Any]) -> None:
        """Charge a finished run's usage from its result line (runs whose budget was not this object: Ray)."""
        usage = record.get("usage") or {}
        self.charge(Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                          completion_tokens=usage.get("completion_tokens", 0),
                          total_tokens=usage.get("total_tokens", 0), cost_usd=usage.get("cost_usd"),
                          calls=usage.get("calls", 0)))


@dataclass
class BatchSummary:
    """How a batch went.

    Attributes:
        total: inputs in the file.
        skipped: inputs not run because the results file already holds them as completed.
        counts: result lines written in this batch, by status.
        not_started: inputs left out because the batch stopped early (budget, Ctrl-C).
        stopped: why the batch stopped taking inputs ("" when it ran them all).
        usage: tokens and cost (USD) of this batch's runs.
        duration_s: wall time in seconds.
        final: every input's last status in the results file, by id (earlier batches included).
    """

    total: int = 0
    skipped: int = 0
    counts: Counter = field(default_factory=Counter)
    not_started: int = 0
    stopped: str = ""
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    final: dict[str, str] = field(default_factory=dict)

    @property
    def all_completed(self) -> bool:
        """True when every input of the file has a ``completed`` result."""
        return len(self.final) == self.total and all(s == "completed" for s in self.final.values())


class Pool(Protocol):
    """Where runs execute: :class:`LocalPool` (threads) or :class:`thinkflow.batch.ray_pool.RayPool`."""

    shares_budget: bool  #: True when runs charge the batch's budget object directly (same process)

    def submit(self, item: BatchInput, budget: Budget | None) -> Any:
        """Start ``item``'s run; returns a handle."""

    def wait(self, handles: set[Any], timeout: float) -> list[tuple[Any, dict[str, Any]]]:
        """Wait up to ``timeout`` seconds for runs to end: ``[(handle, result line)]`` (possibly empty)."""

    def cancel(self, handles: set[Any]) -> None:
        """Drop runs that have not started (best effort)."""

    def close(self) -> None:
        """Release the pool's workers."""


class LocalPool:
    """Runs in ``concurrency`` threads of this process (the loop waits on the model, so threads suffice)."""

    shares_budget = True

    def __init__(self, settings: RunSettings, concurrency: int):
        self.settings = settings
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="thinkflow-batch")
        self._items: dict[Future, BatchInput] = {}

    def submit(self, item: BatchInput, budget: Budget | None) -> Future:
        future = self._executor.submit(run_input, self.settings, item, budget)
        self._items[future] = item
        return future

    def wait(self, handles: set[Any], timeout: float) -> list[tuple[Any, dict[str, Any]]]:
        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            item = self._items.pop(future)
            try:
                record = future.result()
            except Exception as error:  # a defect in a run: recorded for this input, the batch goes on
                record = error_record(item.id, f"{type(error).__name__}: {error}")
            out.append((future, record))
        return out

    def cancel(self, handles: set[Any]) -> None:
        for future in handles:
            future.cancel()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def default_concurrency(model: str) -> int:
    """Runs in flight when ``--concurrency`` is not given: 1 for the embedded model on a machine of 4 cores or
    fewer (one run already uses every core), 2 above that; 2 for Ollama (it serves one or a few requests at once);
    4 for a hosted provider or a server of the user's, whose rate limits the retries absorb."""
    cores = os.cpu_count() or 1
    if model.startswith("local/"):
        return 1 if cores <= 4 else 2
    if model.startswith(("ollama/", "ollama_chat/")):
        return 2
    return 4


def _needs_run(item: BatchInput, log: ResultLog, rerun_failed: bool) -> bool:
    record = log.records.get(item.id)
    return record is None or (rerun_failed and record.get("status") != "completed")


def any_pending(inputs: Sequence[BatchInput], log: ResultLog, *, rerun_failed: bool) -> bool:
    """True when :func:`pending_inputs` would return an input (without changing the results file)."""
    return any(_needs_run(item, log, rerun_failed) for item in inputs)


def pending_inputs(inputs: Sequence[BatchInput], log: ResultLog, *, rerun_failed: bool) -> list[BatchInput]:
    """The inputs still to run: every one without a result, plus, with ``rerun_failed``, those whose last result
    did not complete (their old lines are dropped from the file first). Inputs whose last result did not complete
    are otherwise kept as they are."""
    todo = [item for item in inputs if _needs_run(item, log, rerun_failed)]
    failed = {item.id for item in todo if item.id in log.records}
    if failed:
        log.drop(failed)
    return todo


def run_batch(
    pool: Pool,
    inputs: Sequence[BatchInput],
    log: ResultLog,
    *,
    concurrency: int,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    rerun_failed: bool = False,
    on_result: Callable[[dict[str, Any], BatchSummary], None] | None = None,
    on_interrupt: Callable[[int], None] | None = None,
    poll_s: float = 0.5,
) -> BatchSummary:
    """Run ``inputs`` on ``pool`` and append each result to ``log``.

    Args:
        pool: where runs execute.
        inputs: the batch's inputs (ids unique).
        log: the results file.
        concurrency: runs in flight at most (>= 1).
        max_tokens, max_cost: the batch's budget over all its runs (tokens; US dollars), or None.
        rerun_failed: run again the inputs whose last result did not complete.
        on_result: called in this thread with each result line as it is written, and the summary so far.
        on_interrupt: called in this thread on the first Ctrl-C, before waiting, with the number of runs in
            flight the batch now waits for (no new input starts).
        poll_s: seconds between checks for Ctrl-C while waiting.
    Returns:
        the summary. Raises KeyboardInterrupt on a second Ctrl-C (every finished result is written).
    """
    started = time.monotonic()
    todo = pending_inputs(inputs, log, rerun_failed=rerun_failed)
    summary = BatchSummary(total=len(inputs), skipped=len(inputs) - len(todo))
    budget = SharedBudget(max_tokens=max_tokens, max_cost=max_cost)
    queue = list(reversed(todo))
    in_flight: set[Any] = set()
    try:
        while queue or in_flight:
            while queue and len(in_flight) < concurrency and not summary.stopped:
                why = budget.exceeded()
                if why:
                    summary.stopped = f"batch {why}"
                    break
                in_flight.add(pool.submit(queue.pop(), budget if pool.shares_budget else None))
            if not in_flight:
                break
            try:
                finished = pool.wait(in_flight, poll_s)
            except KeyboardInterrupt:
                if summary.stopped == "interrupted":
                    raise
                summary.stopped = "interrupted"
                if on_interrupt is not None:
                    on_interrupt(len(in_flight))
                continue
            for handle, record in finished:
                in_flight.discard(handle)
                if not pool.shares_budget:
                    budget.charge_record(record)
                log.append(record)
                summary.counts[record["status"]] += 1
                if on_result is not None:
                    on_result(record, summary)
    finally:
        pool.cancel(in_flight)
        pool.close()
        summary.not_started = len(queue)
        summary.usage = budget.usage
        summary.duration_s = time.monotonic() - started
        ids = {item.id for item in inputs}
        summary.final = {i: r.get("status", "") for i, r in log.records.items() if i in ids}
    return summary
