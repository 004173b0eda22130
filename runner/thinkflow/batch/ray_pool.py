"""The Ray backend of ``thinkflow batch --ray``: each input is one Ray task on a cluster.

The only importer of ``ray`` (imported when a :class:`RayPool` is made, so a batch without ``--ray`` never loads
it). The batch's :class:`~thinkflow.batch.worker.RunSettings` (the loaded agent spec travels inside it) is put in
Ray's object store once and handed to every task; results stream back to the driver, which appends them to the
results file as each task ends. A task whose worker dies, or that raises, is retried up to ``retries`` times by
Ray itself (``max_retries`` and ``retry_exceptions``); past that its input gets an ``"error"`` result line.

Ray's API: ``ray.init``, ``ray.remote(...).options(num_cpus=, resources=, max_retries=, retry_exceptions=)``,
``ray.wait``, ``ray.get``, ``ray.cancel`` (https://docs.ray.io/en/latest/ray-core/api/core.html).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkflow.batch.inputs import BatchInput
from thinkflow.batch.results import error_record
from thinkflow.batch.worker import RunSettings
from thinkflow.errors import BatchError
from thinkflow.run.limits import Budget


def _ray_task(settings: RunSettings, item: BatchInput) -> dict[str, Any]:
    """The body of one Ray task (runs on a worker): the input's run, as in the local pool."""
    from thinkflow.batch.worker import run_input

    return run_input(settings, item)


class RayPool:
    """Runs batch inputs as Ray tasks.

    Args:
        settings: the batch's run settings (travel with each task).
        address: a Ray cluster address (``ray://host:10001``, ``host:6379``, ``auto``), or None for the local Ray
            instance (connected to when one runs, else started for this batch and stopped at its end).
        retries: times Ray retries a failed task (worker crash or exception) before the input is an error.
        num_cpus: CPUs each task reserves (Ray's ``num_cpus``, may be fractional).
        resources: other Ray resources each task reserves (``{"GPU": 1}``, custom resources), or None.
        working_dir: a directory Ray ships to every worker (``runtime_env`` ``working_dir``): the agent's files
            for a cluster whose nodes do not share this file system; None for none.
    Raises:
        BatchError: Ray is not installed, or the cluster cannot be reached.
    """

    shares_budget = False

    def __init__(self, settings: RunSettings, *, address: str | None = None, retries: int = 2,
                 num_cpus: float = 1.0, resources: dict[str, float] | None = None,
                 working_dir: Path | None = None):
        try:
            import ray
        except ImportError:
            raise BatchError("--ray needs Ray: pip install 'thinkflow[ray]'") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            runtime_env = {"working_dir": str(working_dir)} if working_dir else None
            try:
                ray.init(address=address, runtime_env=runtime_env, log_to_driver=False,
                         include_dashboard=False if address is None else None)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise BatchError(f"cannot reach the Ray cluster at {address or 'the local instance'}: {error}") from None
            self._started = address is None
        self.capacity = max(1, int(ray.cluster_resources().get("CPU", 1) // max(num_cpus, 1e-9)))
        options: dict[str, Any] = {"max_retries": retries, "retry_exceptions": retries > 0, "num_cpus": num_cpus}
        if resources:
            options["resources"] = dict(resources)
        self._task = ray.remote(_ray_task).options(**options)
        self._settings = ray.put(settings)
        self._items: dict[Any, BatchInput] = {}

    def submit(self, item: BatchInput, budget: Budget | None) -> Any:
        ref = self._task.remote(self._settings, item)
        self._items[ref] = item
        return ref

    def wait(self, handles: set[Any], timeout: float) -> list[tuple[Any, dict[str, Any]]]:
        ready, _ = self._ray.wait(list(handles), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            item = self._items.pop(ref)
            try:
                record = self._ray.get(ref)
            except self._ray.exceptions.RayError as error:
                first = str(error).strip().splitlines()[-1][:500] if str(error).strip() else type(error).__name__
                record = error_record(item.id, f"Ray task failed after its retries: {first}")
            out.append((ref, record))
        return out

    def cancel(self, handles: set[Any]) -> None:
        for ref in handles:
            try:
                self._ray.cancel(ref)
            except Exception:  # already finished or gone: nothing to cancel
                pass

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
