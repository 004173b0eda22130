"""The reusable worker threads (thinkflow.workers) behind model calls and tool calls: reuse, abandonment, errors."""

from __future__ import annotations

import threading

from hypothesis import given, settings, strategies as st

from thinkflow.workers import WorkerPool


def test_sequential_calls_reuse_one_thread():
    pool = WorkerPool("t-seq")
    names = []
    for _ in range(20):
        job = pool.submit(lambda: threading.current_thread().name)
        assert job.wait(30)
        names.append(job.result)
    assert set(names) == {"t-seq-1"}
    assert pool.threads_started == 1
    assert names[0] != threading.current_thread().name


def test_result_and_error_come_back_to_the_waiter():
    pool = WorkerPool("t-err")
    ok = pool.submit(lambda: 41 + 1)
    assert ok.wait(30) and ok.result == 42 and ok.error is None

    def boom():
        raise ValueError("bad")
    failed = pool.submit(boom)
    assert failed.wait(30) and failed.done
    assert isinstance(failed.error, ValueError) and str(failed.error) == "bad"
    exiting = pool.submit(lambda: (_ for _ in ()).throw(SystemExit(3)))
    assert exiting.wait(30) and isinstance(exiting.error, SystemExit)
    assert pool.threads_started == 1  # a failing call does not cost its worker


def test_an_abandoned_call_does_not_block_the_next_one():
    pool = WorkerPool("t-abandon")
    release = threading.Event()
    stuck = pool.submit(lambda: release.wait(60))
    assert not stuck.wait(0.05)  # the caller gives up (a deadline, Ctrl-C); the call goes on in its worker
    nxt = pool.submit(lambda: "next")
    assert nxt.wait(30) and nxt.result == "next"
    assert pool.threads_started == 2  # the busy worker was not handed the new call
    release.set()
    assert stuck.wait(30) and stuck.result is True
    # both workers are idle again and are reused
    again = [pool.submit(lambda: threading.current_thread().name) for _ in range(2)]
    assert all(j.wait(30) for j in again)
    assert pool.threads_started == 2


def test_parallel_calls_get_their_own_workers():
    pool = WorkerPool("t-par")
    barrier = threading.Barrier(3, timeout=30)
    jobs = [pool.submit(barrier.wait) for _ in range(3)]  # would deadlock if two shared a thread
    assert all(j.wait(30) for j in jobs)
    assert sorted(j.result for j in jobs) == [0, 1, 2]
    assert pool.threads_started == 3


def test_idle_workers_beyond_the_cap_exit():
    pool = WorkerPool("t-cap", max_idle=1)
    barrier = threading.Barrier(3, timeout=30)
    jobs = [pool.submit(barrier.wait) for _ in range(3)]
    assert all(j.wait(30) for j in jobs)
    for _ in range(100):
        if pool.idle == 1:
            break
        threading.Event().wait(0.01)
    assert pool.idle == 1
    alive = [t for t in threading.enumerate() if t.name.startswith("t-cap-")]
    for t in alive:
        t.join(0.5)
    assert len([t for t in alive if t.is_alive()]) == 1


def test_workers_are_daemon_threads():
    pool = WorkerPool("t-daemon")
    job = pool.submit(lambda: threading.current_thread().daemon)
    assert job.wait(30) and job.result is True


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(min_value=-10**6, max_value=10**6), min_size=1, max_size=20))
def test_results_match_their_calls_in_any_order_of_waiting(values):
    pool = WorkerPool("t-prop")
    jobs = [pool.submit(lambda v=v: v * 2) for v in values]
    for job, v in reversed(list(zip(jobs, values))):
        assert job.wait(30)
        assert job.result == v * 2


def test_a_wait_longer_than_a_lock_can_hold_waits_for_the_call():
    # threading's waits refuse a timeout over threading.TIMEOUT_MAX (about 9.2e9 s: OverflowError); a model call
    # under a model.timeout or a tool call under a timeout built in Python without the schema's cap waits that long
    import time

    pool = WorkerPool("t-long")
    for timeout in (1e10, 1e300, float("inf")):
        job = pool.submit(lambda: time.sleep(0.1) or "late")
        assert job.wait(timeout) and job.result == "late"


def test_a_wait_of_nan_seconds_has_no_time_left():
    release = threading.Event()
    pool = WorkerPool("t-nan")
    stuck = pool.submit(release.wait)
    try:
        assert stuck.wait(float("nan")) is False
    finally:
        release.set()
    assert stuck.wait(30)


def test_a_long_wait_is_cut_into_waits_a_lock_can_hold(monkeypatch):
    import time

    from thinkflow import workers

    monkeypatch.setattr(workers, "MAX_WAIT_S", 0.05)
    pool = WorkerPool("t-cut")
    job = pool.submit(lambda: time.sleep(0.3) or "done")
    assert job.wait(1e10) and job.result == "done"
    release = threading.Event()
    stuck = pool.submit(release.wait)
    started = time.monotonic()
    try:
        assert stuck.wait(0.3) is False and 0.25 < time.monotonic() - started < 5
    finally:
        release.set()
