"""Ending ``thinkflow-run``'s process without tearing the interpreter down.

By the time the command exits, the run has printed its answer, closed its trace, written its session
and long-term memory, and shut the telemetry exporter down; what is left for a normal exit is the interpreter's
teardown -- garbage-collecting every module LiteLLM and its dependencies loaded, about 1 s of CPU per run on this
project's machines (bench/RESULTS.md). :func:`exit_now` waits for the traces' background fsyncs
(:func:`thinkflow.run.trace.wait_for_syncs`), flushes standard output and error and the logging handlers, then ends
the process with ``os._exit``.
"""

from __future__ import annotations

import logging
import os
import sys

from thinkflow.run.trace import wait_for_syncs


def exit_code_of(code: object) -> int:
    """The process status ``SystemExit(code)`` stands for, as ``sys.exit`` reads it: None -> 0, an int as is,
    anything else is printed to standard error and gives 1."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - a closed stderr must not change the status
        pass
    return 1


def exit_now(code: object) -> None:
    """Wait for the traces' fsyncs, flush stdout, stderr and the logging handlers, then ``os._exit`` with ``code``'s
    status (see :func:`exit_code_of`). A stream that cannot be flushed (a closed pipe) is skipped. Never returns.

    Set ``THINKFLOW_FULL_EXIT=1`` to exit the ordinary way (``SystemExit``, interpreter teardown, atexit hooks).
    """
    status = exit_code_of(code)
    if os.environ.get("THINKFLOW_FULL_EXIT") == "1":
        raise SystemExit(status)
    try:  # milliseconds as a rule; a disk that hangs does not hold the exit long, nor does a second Ctrl-C
        wait_for_syncs(timeout=2.0)
    except KeyboardInterrupt:
        pass
    try:
        logging.shutdown()
    except Exception:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - e.g. BrokenPipeError when the reader went away
            pass
    os._exit(status)
